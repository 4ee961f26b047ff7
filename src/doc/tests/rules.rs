//! A kind's rules in the write path: a schema rule that reads the document an update would
//! make, join decisions, and the room's own edits from a hook or a route.

use yrs::{Map, WriteTxn};

use super::*;
use crate::doc::rules::{
    Access, Change, DocCtx, DocRules, Editor as Who, Refusal, Request, Response, Verdict,
};

/// `text` holds at most 10 characters (decided on the document after the update); `guest`
/// reads only, and only with an editor there; `banned` is kept out; `POST append` (admin) appends its body as the room.
#[derive(Clone)]
struct Schema;

impl DocRules for Schema {
    fn join(&mut self, doc: &mut DocCtx<'_>, who: &Who<'_>) -> Access {
        match who.user {
            "banned" => Access::Refuse(Refusal::new("banned", "not in this document")),
            // Only with someone there to vouch for them.
            "guest" if doc.editors().is_empty() => {
                Access::Refuse(Refusal::new("alone", "a guest joins someone"))
            }
            "guest" => Access::ReadOnly,
            _ => Access::Write,
        }
    }

    fn update(&mut self, _doc: &mut DocCtx<'_>, _who: &Who<'_>, change: &Change<'_>) -> Verdict {
        let after = change.after();
        let len = after.get_text("text").map_or(0, |t| t.get_string(&after).chars().count());
        if len > 10 {
            return Verdict::Refuse(Refusal::new("too_long", "at most 10 characters"));
        }
        Verdict::Accept
    }

    fn request(&mut self, doc: &mut DocCtx<'_>, req: &Request) -> Option<Response> {
        if req.path != "append" || !req.admin {
            return None;
        }
        let body = req.body.clone();
        doc.edit(move |txn| {
            let text = txn.get_or_insert_text("text");
            let len = text.len(txn);
            text.insert(txn, len, &body);
        });
        Some(Response::json(200, &"appended"))
    }
}

fn schema() -> Box<dyn DocRules> {
    Box::new(Schema)
}

fn admin(path: &str, body: &str) -> Request {
    Request {
        method: "POST".into(),
        path: path.into(),
        query: String::new(),
        body: body.into(),
        admin: true,
        user: None,
        info: None,
        region: String::new(),
    }
}

/// An update frame inserting `s` at the start of the text, from a fresh Yjs client (so that it
/// depends on no update refused before).
fn from_fresh_client(client: u64, s: &str) -> Vec<u8> {
    let doc = yrs::Doc::with_client_id(client);
    let text = doc.get_or_insert_text("text");
    let mut txn = doc.transact_mut();
    text.insert(&mut txn, 0, s);
    wire::update(&txn.encode_update_v1())
}

/// The room writes `chars` characters into the text itself (a big document, quickly).
fn fill(sim: &mut Sim, chars: usize) {
    let big = "x".repeat(chars);
    sim.room
        .server_edit(move |txn| {
            let text = txn.get_or_insert_text("text");
            text.insert(txn, 0, &big);
        })
        .unwrap();
    sim.apply();
}

fn with_extensions(user: &str) -> Member {
    Member { extensions: true, ..member(user) }
}

#[test]
fn an_update_the_rules_refuse_is_neither_stored_nor_seen_and_the_socket_stays() {
    let mut sim = Sim::new(DocConfig::default(), 2).with_rules(schema);
    sim.connect_as(0, with_extensions("ann"));
    sim.connect(1);
    sim.edit(0, "hello");
    let stored = sim.stored.bytes();
    sim.edit(0, " world!");
    assert_eq!(refusals(&sim), vec![DocError::Rules("too_long".into())]);
    assert_eq!(sim.editors[1].text(), "hello", "nothing of it reached the others");
    assert_eq!(sim.stored_text(), "hello");
    assert_eq!(sim.stored.bytes(), stored, "nothing of it was stored");
    assert!(sim.editors[0].conn.is_some(), "kept open: closing would loop a stock client");
    let last = sim.editors[0].inbox.last().unwrap();
    // Its third update message (the first was its sync step 2): which one, and why.
    assert_eq!(last, &wire::refused(3, "too_long"), "the sender hears which update and why");
}

#[test]
fn the_rules_see_the_document_an_update_would_make_after_refusals_and_the_rooms_edits() {
    let mut sim = Sim::new(DocConfig::default(), 2).with_rules(schema);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, "hello"); // 5
    sim.edit(0, "-too-long"); // 14: refused, so the room's copy must drop it
    sim.room.request(sim.now, &admin("append", "abc")); // 8, by the room
    sim.apply();
    assert_eq!(sim.editors[1].text(), "helloabc");
    sim.edit(1, "12"); // 10: accepted only if the copy holds the room's edit, not the refusal
    sim.edit(1, "3"); // 11: refused
    let text = sim.editors[0].text(); // with its own refused edit, which only it holds
    assert!(text.contains("abc") && text.contains("12"), "{text}");
    assert_eq!(sim.stored_text(), "helloabc12");
    assert_eq!(
        refusals(&sim),
        vec![DocError::Rules("too_long".into()), DocError::Rules("too_long".into())]
    );
    sim.assert_stored_before_seen();
    // A reset loads the rules again, with no copy: the next decision is still right.
    sim.reset();
    sim.connect(1);
    sim.edit(1, "x");
    assert_eq!(sim.stored_text(), "helloabc12", "still 11 characters: refused");
}

#[test]
fn join_decides_who_reads_only_and_who_is_kept_out() {
    let mut sim = Sim::new(DocConfig::default(), 3).with_rules(schema);
    sim.connect_as(1, member("guest"));
    assert_eq!(sim.editors[1].closed, Some((4403, "alone".into())), "no editor there yet");
    sim.connect(0);
    sim.edit(0, "kept");
    sim.connect_as(1, member("guest"));
    sim.edit(1, "x");
    assert_eq!(sim.editors[0].text(), "kept");
    assert_eq!(refusals(&sim)[1..], [DocError::ReadOnly]);
    assert_eq!(sim.editors[1].text(), "keptx", "its own copy only");
    // The decision is the socket's record: it survives hibernation.
    let conn = sim.editors[1].conn.unwrap();
    assert!(sim.room.record(conn).unwrap().member.read_only);
    // Kept out: closed 4403 with the rule's code before anything of the document is sent.
    let conn = sim.next_conn;
    sim.room.open(sim.now, conn, member("banned"));
    let effects = sim.room.take_effects();
    assert!(
        matches!(&effects[..], [Effect::Close(c, 4403, why), Effect::Refused(..)] if *c == conn && why == "banned"),
        "{effects:?}"
    );
    assert_eq!(sim.room.sockets(), 2);
}

/// Stamps who edited last into the map `meta`, as the room, after each accepted update.
#[derive(Clone)]
struct Stamp;

impl DocRules for Stamp {
    fn update(&mut self, doc: &mut DocCtx<'_>, who: &Who<'_>, _change: &Change<'_>) -> Verdict {
        let user = who.user.to_owned();
        doc.edit(move |txn| {
            txn.get_or_insert_map("meta").insert(txn, "last", user);
        });
        Verdict::Accept
    }
}

#[test]
fn an_edit_from_the_update_hook_follows_the_update_stored_before_anyone_sees_it() {
    let mut sim = Sim::new(DocConfig::default(), 2).with_rules(|| Box::new(Stamp));
    sim.connect(0);
    sim.connect(1);
    sim.trace.clear();
    sim.edit(0, "hi");
    let kinds: Vec<&str> = sim
        .trace
        .iter()
        .filter_map(|e| match e {
            Effect::Store(_) => Some("store"),
            Effect::Broadcast { except: Some(_), .. } => Some("update"),
            Effect::Broadcast { except: None, .. } => Some("edit"),
            _ => None,
        })
        .collect();
    assert_eq!(kinds, ["store", "update", "store", "edit"]);
    sim.assert_stored_before_seen();
    for editor in &sim.editors {
        let txn = editor.doc.transact();
        let last = txn.get_map("meta").and_then(|m| m.get(&txn, "last"));
        assert_eq!(last.map(|v| v.to_string(&txn)), Some("user0".into()), "every editor has it");
    }
}

/// Reads the document an update would make, then refuses it.
#[derive(Clone)]
struct RefuseAll;

impl DocRules for RefuseAll {
    fn update(&mut self, _doc: &mut DocCtx<'_>, _who: &Who<'_>, change: &Change<'_>) -> Verdict {
        let _ = change.after();
        Verdict::Refuse(Refusal::new("no", "nothing changes"))
    }
}

#[test]
fn refusals_that_cost_the_room_a_copy_of_the_document_run_out_the_senders_budget() {
    let mut sim = Sim::new(DocConfig::default(), 1).with_rules(|| Box::new(RefuseAll));
    fill(&mut sim, 400_000);
    sim.connect(0);
    // Each refused update cost a copy of the ~400 KB document: the byte budget (twice the
    // largest frame, about 8.5 MB) runs out after about 21 of them, not never. Each comes
    // from a fresh Yjs client, so none depends on one refused before.
    let mut sent = 0;
    while sim.editors[0].conn.is_some() && sent < 100 {
        sim.send(0, &from_fresh_client(1_000 + sent, "a"));
        sent += 1;
    }
    assert_eq!(sim.editors[0].closed, Some((4029, "rate_limited".into())));
    assert!((15..=30).contains(&sent), "closed after {sent} refusals");
}

/// Refuses an update whose document would hold a `!` (decided on the document after it).
#[derive(Clone)]
struct NoBang;

impl DocRules for NoBang {
    fn update(&mut self, _doc: &mut DocCtx<'_>, _who: &Who<'_>, change: &Change<'_>) -> Verdict {
        let after = change.after();
        if after.get_text("text").is_some_and(|t| t.get_string(&after).contains('!')) {
            return Verdict::Refuse(Refusal::new("no_bang", "no exclamation marks"));
        }
        Verdict::Accept
    }
}

#[test]
fn a_member_whose_refused_updates_make_the_room_drop_its_copy_pays_not_the_next_editor() {
    let mut sim = Sim::new(DocConfig::default(), 2).with_rules(|| Box::new(NoBang));
    fill(&mut sim, 400_000);
    sim.connect(0); // the victim, typing
    sim.connect_as(1, member("mallory"));
    // Each refused update leaves the room without its copy; the victim's next keystroke needs
    // a new one. Mallory's updates come from fresh Yjs clients, so none waits on another.
    for round in 0..40 {
        sim.send(1, &from_fresh_client(5_000 + round, "!"));
        if sim.editors[1].conn.is_none() {
            break;
        }
        sim.edit(0, "a");
    }
    assert!(sim.editors[0].conn.is_some(), "the victim typed on: {:?}", sim.editors[0].closed);
    assert_eq!(sim.editors[1].closed, Some((4029, "rate_limited".into())), "mallory paid");
    assert!(!sim.stored_text().contains('!'));
}

#[test]
fn at_the_size_bound_an_editor_is_refused_without_paying_for_the_rules_copy() {
    let config = DocConfig { max_doc_bytes: 64 * 1024, ..DocConfig::default() };
    let mut sim = Sim::new(config, 1).with_rules(|| Box::new(NoBang));
    fill(&mut sim, 64 * 1024 - 200);
    sim.connect(0);
    sim.trace.clear();
    // Each keystroke is refused for size before the rules try it: no copy lost, no charge
    // (before, each one cost the typist the whole document and the fifth or so closed them).
    for n in 0..30 {
        sim.send(0, &from_fresh_client(7_000 + n, &"y".repeat(300)));
    }
    assert!(sim.editors[0].conn.is_some(), "closed: {:?}", sim.editors[0].closed);
    assert!(refusals(&sim).iter().all(|r| *r == DocError::TooLarge), "{:?}", refusals(&sim));
    // And the room folded its log at most once, not once a keystroke.
    let folds = sim.trace.iter().filter(|e| matches!(e, Effect::Compact(_))).count();
    assert!(folds <= 1, "{folds} compactions");
}

#[test]
fn a_members_calls_to_a_rules_route_are_paid_for_from_their_reply_budget() {
    // Each call is a turn of the document's one thread (a route may rebuild the whole text):
    // without a charge one token made them as fast as it could send.
    let mut sim = Sim::new(DocConfig::default(), 1).with_rules(schema);
    let call = Request { admin: false, user: Some("mallory".into()), ..admin("missing", "") };
    let (start, mut answered, mut limited) = (sim.now, 0u64, 0u64);
    for _ in 0..20_000 {
        sim.now += 1;
        match sim.room.request(sim.now, &call) {
            Some(r) if r.status == 429 => {
                let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
                assert_eq!(v["error"], "rate_limited");
                assert!(v["retry_ms"].as_u64().unwrap() > 0);
                limited += 1;
            }
            _ => answered += 1,
        }
    }
    let (c, elapsed) = (sim.config, sim.now - start);
    let budget = c.reply_burst() + c.reply_bytes_per_sec * elapsed / 1000;
    let bound = budget / crate::room::READ_FLOOR_BYTES + 1;
    assert!(answered <= bound, "{answered} calls answered in {elapsed} ms; at most {bound}");
    assert!(answered > bound / 2 && limited > 0, "{answered} of {bound}, {limited} refused");
    // The operator's backend is nobody's member: never charged.
    for _ in 0..100 {
        assert_eq!(sim.room.request(sim.now, &admin("append", "x")).map(|r| r.status), Some(200));
    }
}

#[test]
fn whom_the_kinds_join_keeps_out_calls_none_of_its_routes() {
    let mut sim = Sim::new(DocConfig::default(), 1).with_rules(schema);
    let call =
        |user: &str| Request { admin: false, user: Some(user.into()), ..admin("append", "x") };
    let r = sim.room.request(sim.now, &call("banned")).expect("refused");
    assert_eq!(r.status, 403);
    assert!(r.body.contains("\"banned\""), "{}", r.body);
    // Another member reaches the rules, which take `append` from the admin key only (404).
    assert_eq!(sim.room.request(sim.now, &call("ann")), None);
}
