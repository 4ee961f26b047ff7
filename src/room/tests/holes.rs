//! The second attack round (issue 17), where the hole was in the engine:
//! echoes of spent marks were free, connects were not paced, the rules'
//! sends and the member list were paid for by nobody. Each test plays the
//! attacker's sequence on the simulated adapter and asserts the victim's
//! experience and the attacker's take; `tests/e2e/attacks/holes.rs` plays
//! the same against the real runtime.

use serde_json::{json, Value};

use crate::room::rules::{Ctx, Join, Request, Rules, Who, Write};
use crate::room::sim::Sim;
use crate::room::{Block, ReadRefusal, RoomConfig};

/// `user` reading the room over HTTP with a token that says nothing more.
fn reader(user: &str) -> Who<'_> {
    Who { session: crate::room::READER_SESSION, user, region: "EU", info: None, server: false }
}

fn of_type(frames: &[Value], kind: &str) -> Vec<Value> {
    frames.iter().filter(|f| f["type"] == kind).cloned().collect()
}

/// A room whose window is small, so marks come quickly.
fn small_window() -> RoomConfig {
    let mut c = RoomConfig { send_window: 8 * 1024, ..RoomConfig::default() };
    c.finish();
    c
}

/// The marks in a socket's inbox, oldest first (left in the inbox).
fn marks(s: &Sim, conn: &str) -> Vec<String> {
    let inbox = &s.sockets[conn].inbox;
    inbox
        .iter()
        .filter(|f| f["type"] == "mark")
        .map(|f| f["mark"].as_str().unwrap().into())
        .collect()
}

fn echo(mark: &str) -> String {
    format!(r#"{{"type":"mark","mark":"{mark}"}}"#)
}

// ---- item 2: echoes of spent marks are not free ------------------------------

#[test]
fn echoing_a_spent_mark_costs_a_frame_and_a_flood_of_them_is_closed() {
    let mut s = Sim::new(small_window());
    let mallory = s.connect_as("sess-mallory", "mallory", "EU", None);
    let victim = s.connect_as("sess-victim", "vic", "EU", None);
    s.sockets.get_mut(&mallory).unwrap().silent = true;
    // Enough for a few marks to Mallory.
    for i in 0..6 {
        s.publish(&victim, &format!("v{i}"), &json!("x".repeat(3_000)).to_string());
        s.take(&victim);
    }
    let issued = marks(&s, &mallory);
    assert!(issued.len() >= 2, "marks were sent: {issued:?}");
    s.take(&mallory);
    // The newest echo confirms something: free, whatever else she sends.
    s.send(&mallory, &echo(&issued[issued.len() - 1]));
    // Then the same mark and an older one, again and again.
    let spent = [issued[0].clone(), issued[issued.len() - 1].clone()];
    for i in 0..400 {
        if !s.sockets[&mallory].open {
            break;
        }
        s.send(&mallory, &echo(&spent[i % 2]));
    }
    let got = s.take(&mallory);
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert!(stats["rate_limited"].as_u64().unwrap() > 0, "spent echoes cost against the buckets");
    assert_eq!(s.sockets[&mallory].closed, Some(4029), "a flood of them is closed like any flood");
    assert!(
        of_type(&got, "error").iter().all(|e| e["code"] == "rate_limited"),
        "an echo of her own mark is never refused as unknown: {got:?}"
    );
    // The victim notices nothing: its write is acked at once.
    s.publish(&victim, "after", r#""still here""#);
    assert_eq!(of_type(&s.take(&victim), "ack").len(), 1);
}

#[test]
fn an_echo_that_confirms_something_stays_free_in_a_flood() {
    let mut s = Sim::new(small_window());
    let reader = s.connect_as("sess-reader", "ann", "EU", None);
    let writer = s.connect_as("sess-writer", "bob", "EU", None);
    s.sockets.get_mut(&reader).unwrap().silent = true;
    // The reader spends its whole frame budget on pings.
    for _ in 0..60 {
        s.send(&reader, r#"{"type":"ping"}"#);
    }
    s.take(&reader);
    for i in 0..6 {
        s.publish(&writer, &format!("w{i}"), &json!("y".repeat(3_000)).to_string());
        s.take(&writer);
    }
    let issued = marks(&s, &reader);
    assert!(!issued.is_empty());
    s.take(&reader);
    let before = s.sockets[&reader].inbox.len();
    s.send(&reader, &echo(&issued[issued.len() - 1]));
    let after: Vec<Value> = s.sockets[&reader].inbox[before..].to_vec();
    assert!(
        after.iter().all(|f| f["type"] != "error"),
        "a real echo is not rate-limited even with the budget spent: {after:?}"
    );
}

// ---- item 3: a user's connects are paced --------------------------------------

#[test]
fn a_reconnect_loop_is_paced_and_ten_tabs_after_a_deploy_are_not() {
    let mut s = Sim::new(RoomConfig::default());
    let burst = s.config.user_connect_burst;
    let mut welcomed = 0;
    let mut paced = 0;
    for i in 0..(burst + 10) {
        let c = s.connect_as(&format!("sess-loop-{i:03}"), "mallory", "EU", None);
        match s.sockets[&c].closed {
            None => {
                welcomed += 1;
                s.drop_conn(&c);
            }
            Some(4429) => paced += 1,
            other => panic!("unexpected close {other:?}"),
        }
    }
    assert_eq!((welcomed, paced), (burst, 10), "a burst of connects, then refusals");
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert_eq!(stats["paced_connects"], 10);
    assert_eq!(stats["limits"]["user_connect_burst"], burst);
    // One connect per second after that.
    s.advance(1_000);
    let c = s.connect_as("sess-loop-next", "mallory", "EU", None);
    assert_eq!(s.sockets[&c].closed, None);
    let c = s.connect_as("sess-loop-more", "mallory", "EU", None);
    assert_eq!(s.sockets[&c].closed, Some(4429));
    // Another user is not paced by Mallory's budget.
    let v = s.connect_as("sess-victim", "vic", "EU", None);
    assert_eq!(s.sockets[&v].closed, None);

    // Ten tabs of one user, all dropped at once (a deploy) and all back.
    let mut s = Sim::new(RoomConfig::default());
    let tabs: Vec<String> =
        (0..10).map(|i| s.connect_as(&format!("sess-tab-{i:03}"), "ann", "EU", None)).collect();
    let mut since = Vec::new();
    for t in &tabs {
        since.push(of_type(&s.take(t), "welcome")[0]["seq"].as_u64().unwrap());
        s.drop_conn(t);
    }
    s.advance(1_500);
    for (i, seq) in since.iter().enumerate() {
        let c = s.connect_as(&format!("sess-tab-{i:03}"), "ann", "EU", Some((*seq, "e-1")));
        assert_eq!(s.sockets[&c].closed, None, "tab {i} is back");
    }
}

// ---- item 3: the rules' sends are paid for by who caused them -----------------

/// Rules that send every newcomer a large history, and, on a publish to
/// `poke`, send the session named in the data a large frame.
#[derive(Clone)]
struct Hoarder {
    history: String,
}

impl Rules for Hoarder {
    fn join(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) -> Join {
        room.send(who.session, "history", &self.history);
        Join::Accept
    }

    fn publish(
        &mut self,
        room: &mut Ctx<'_>,
        _who: &Who<'_>,
        topic: &str,
        data: &serde_json::value::RawValue,
    ) -> Write {
        if topic == "poke" {
            let to: String = serde_json::from_str(data.get()).unwrap_or_default();
            room.send(&to, "poke", &self.history);
        }
        Write::Accept
    }
}

fn hoarder(bytes: usize) -> Sim {
    let history = "h".repeat(bytes);
    Sim::with_rules(RoomConfig::default(), move || Box::new(Hoarder { history: history.clone() }))
}

#[test]
fn a_reconnect_loop_gets_no_more_history_than_the_reply_budget_pays_for() {
    let mut s = hoarder(600_000);
    let c = s.config.clone();
    let start = s.now;
    let mut socket_bytes = 0;
    let mut largest_welcome = 0;
    let mut histories = 0;
    // Ten loops, each reconnecting every 50 ms for 5 s.
    let mut open: Vec<Option<String>> = vec![None; 10];
    for step in 0..100u64 {
        for (i, slot) in open.iter_mut().enumerate() {
            if let Some(old) = slot.take() {
                s.drop_conn(&old);
            }
            let conn = s.connect_as(&format!("sess-loop{i}-{step:04}"), "mallory", "EU", None);
            *slot = Some(conn);
        }
        s.advance(50);
        s.end_turn();
        s.run_until(s.now);
    }
    let elapsed = s.now.since(start);
    s.settle();
    for (id, sock) in &s.sockets {
        socket_bytes += sock.bytes;
        for f in &sock.inbox {
            if f["type"] == "welcome" {
                largest_welcome = largest_welcome.max(f.to_string().len() as u64);
            }
            if f["type"] == "signal" && f["topic"] == "history" {
                histories += 1;
            }
        }
        let _ = id;
    }
    let bound = c.reply_burst_bytes + c.reply_bytes_per_sec * elapsed / 1000;
    // Presence diffs between her own sockets are not charged to her: at most
    // one per connect per socket, a few hundred bytes each.
    let connects = c.user_connect_burst + c.user_connects_per_sec * elapsed / 1000;
    let diffs = connects * 10 * 400;
    assert!(
        socket_bytes <= bound + largest_welcome + diffs,
        "the attacker was sent {socket_bytes} B in {elapsed} ms; budget {bound} B"
    );
    assert!(histories >= 3, "histories still arrive, paid for: {histories}");
    // A newcomer of another user gets its history at once.
    let v = s.connect_as("sess-victim", "vic", "EU", None);
    let got = s.take(&v);
    assert_eq!(got[0]["type"], "welcome");
    assert_eq!(of_type(&got, "signal").len(), 1, "the victim's own history, at once");
}

#[test]
fn a_history_over_the_budget_arrives_later_and_whole() {
    let mut s = hoarder(600_000);
    let c = s.config.clone();
    // Four connects spend the burst (2 MiB) on histories.
    let mut conns = Vec::new();
    for i in 0..4 {
        conns.push(s.connect_as(&format!("sess-tab-{i:03}"), "ann", "EU", None));
    }
    let got: Vec<usize> = conns.iter().map(|c| of_type(&s.take(c), "signal").len()).collect();
    assert_eq!(got[..3], [1, 1, 1], "three fit in the burst: {got:?}");
    assert_eq!(got[3], 0, "the fourth waits for its bytes");
    let wait = 600_000 * 1000 / c.reply_bytes_per_sec + 1;
    s.run_until(s.now.plus_ms(wait));
    let later = s.take(&conns[3]);
    assert_eq!(of_type(&later, "signal").len(), 1, "then it comes, whole: {}", later.len());
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert!(stats["held_replies"].as_u64().unwrap() >= 1);
}

#[test]
fn a_send_to_someone_else_that_the_sender_cannot_pay_for_is_dropped() {
    let mut s = hoarder(60_000);
    let victim = s.connect_as("sess-victim", "vic", "EU", None);
    let mallory = s.connect_as("sess-mallory", "mallory", "EU", None);
    s.take(&victim);
    s.take(&mallory);
    let pokes = 200;
    let mut got = Vec::new();
    for i in 0..pokes {
        s.advance(50);
        s.send(
            &mallory,
            &format!(r#"{{"type":"publish","id":"p{i}","topic":"poke","data":"sess-victim"}}"#),
        );
        s.take(&mallory);
        got.extend(s.take(&victim));
    }
    let poked = of_type(&got, "signal").len() as u64;
    let c = &s.config;
    let paid = (c.reply_burst_bytes + c.reply_bytes_per_sec * 50 * pokes / 1000) / 60_000;
    assert!(poked <= paid + 1, "the victim got {poked} pokes; Mallory could pay for {paid}");
    assert!(poked > 0, "she could pay for some");
    // The victim's own stream never waited for Mallory's budget.
    assert_eq!(of_type(&got, "message").len() as u64, pokes);
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert_eq!(stats["rule_sends_dropped"].as_u64().unwrap(), pokes - poked);
}

// ---- items 5 and 6: the member list costs its reader, and a block holds -------

#[test]
fn the_member_list_is_paid_for_by_its_reader_and_refused_to_the_blocked() {
    let mut s = Sim::new(RoomConfig::default());
    let c = s.config.clone();
    for i in 0..60 {
        let conn = s.connect_as(&format!("sess-member-{i:02}"), &format!("m{i}"), "EU", None);
        let state = json!({"type":"presence","state":{"bio": "b".repeat(900)}});
        s.send(&conn, &state.to_string());
    }
    let size = s.room.presence_json().len() as u64;
    assert!(size > 50_000, "a large list: {size} B");
    let start = s.now;
    let (mut served, mut refused) = (0u64, 0u64);
    for _ in 0..1_100 {
        s.advance(5);
        match s.room.presence_read(s.now, Some(&reader("mallory"))) {
            Ok(body) => served += body.len() as u64,
            Err(ReadRefusal::Budget { retry_ms, bytes }) => {
                assert!(retry_ms > 0);
                assert_eq!(bytes, 0, "refused before the list was made: a refused read is free");
                refused += 1;
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    let elapsed = s.now.since(start);
    // Let in while the budget holds anything and charged once made: one list into debt.
    let bound = c.reply_burst_bytes + c.reply_bytes_per_sec * elapsed / 1000 + size;
    assert!(served <= bound, "{served} B of lists in {elapsed} ms, budget {bound} B");
    assert!(refused > 1_000, "most reads refused: {refused}");
    // Another reader has a budget of its own.
    assert!(s.room.presence_read(s.now, Some(&reader("vic"))).is_ok());

    // A blocked user reads nothing, with or without a socket.
    s.room.kick(s.now, "mallory", Block::Until(s.now.plus_ms(60_000)));
    s.advance(10_000);
    assert_eq!(s.room.presence_read(s.now, Some(&reader("mallory"))), Err(ReadRefusal::Blocked));
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert_eq!(stats["refused_reads"].as_u64().unwrap(), refused + 1);
}

#[test]
fn a_rules_route_is_paid_for_by_the_member_who_calls_it() {
    #[derive(Clone)]
    struct Big;
    impl Rules for Big {
        fn request(
            &mut self,
            _room: &mut Ctx<'_>,
            _req: &Request,
        ) -> Option<crate::room::rules::Response> {
            Some(crate::room::rules::Response::json(200, &"z".repeat(100_000)))
        }
    }
    let mut s = Sim::with_rules(RoomConfig::default(), || Box::new(Big));
    let c = s.config.clone();
    let req = |user: Option<&str>, admin: bool| Request {
        method: "GET".into(),
        path: "big".into(),
        query: String::new(),
        body: String::new(),
        admin,
        user: user.map(str::to_owned),
        info: None,
        region: String::new(),
    };
    let start = s.now;
    let mut served = 0u64;
    let mut limited = 0;
    for _ in 0..500 {
        s.advance(10);
        let r = s.room.request(s.now, &req(Some("mallory"), false)).unwrap();
        match r.status {
            200 => served += r.body.len() as u64,
            429 => {
                let v: Value = serde_json::from_str(&r.body).unwrap();
                assert_eq!(v["error"], "rate_limited");
                assert!(v["retry_ms"].as_u64().unwrap() > 0);
                limited += 1;
            }
            other => panic!("status {other}"),
        }
    }
    let elapsed = s.now.since(start);
    let bound = c.reply_burst_bytes + c.reply_bytes_per_sec * elapsed / 1000 + 100_002;
    assert!(served <= bound, "{served} B in {elapsed} ms; budget {bound}");
    assert!(limited > 400, "{limited}");
    // The operator's backend is nobody's member: never charged.
    for _ in 0..50 {
        assert_eq!(s.room.request(s.now, &req(None, true)).unwrap().status, 200);
    }
}

#[test]
fn short_answers_and_missing_routes_cost_their_caller_a_floor_each() {
    // Each call is a turn of the room's one thread, however short its answer: without a floor
    // one token made thousands a second of 60-byte answers (or 404s).
    #[derive(Clone)]
    struct Tiny;
    impl Rules for Tiny {
        fn request(
            &mut self,
            _room: &mut Ctx<'_>,
            req: &Request,
        ) -> Option<crate::room::rules::Response> {
            (req.path == "tiny").then(|| crate::room::rules::Response::json(200, &1))
        }
    }
    let mut s = Sim::with_rules(RoomConfig::default(), || Box::new(Tiny));
    let c = s.config.clone();
    let call = |path: &str| Request {
        method: "GET".into(),
        path: path.into(),
        query: String::new(),
        body: String::new(),
        admin: false,
        user: Some("mallory".into()),
        info: None,
        region: String::new(),
    };
    let (start, mut answered) = (s.now, 0u64);
    for i in 0..10_000 {
        s.advance(1);
        let path = if i % 2 == 0 { "tiny" } else { "nothing-here" };
        match s.room.request(s.now, &call(path)) {
            Some(r) if r.status == 429 => {}
            _ => answered += 1,
        }
    }
    let elapsed = s.now.since(start);
    let floor = crate::room::READ_FLOOR_BYTES;
    let bound = (c.reply_burst_bytes + c.reply_bytes_per_sec * elapsed / 1000) / floor + 1;
    assert!(answered <= bound, "{answered} calls answered in {elapsed} ms; at most {bound}");
    assert!(answered > bound / 2, "and the budget's worth are: {answered} of {bound}");
}

#[test]
fn whom_the_rules_keep_out_reads_neither_the_member_list_nor_their_routes() {
    // A members-only room: `join` lets in those whose token's `info` says `member`, and the
    // join of a closed room schedules its reopening. The token of a stranger is valid for it.
    #[derive(Clone)]
    struct MembersOnly;
    impl Rules for MembersOnly {
        fn join(&mut self, room: &mut Ctx<'_>, who: &Who<'_>) -> Join {
            room.schedule("reopen", room.now().plus_ms(60_000));
            let info: Value =
                who.info.and_then(|i| serde_json::from_str(i.get()).ok()).unwrap_or_default();
            if info["member"] == true {
                Join::Accept
            } else {
                Join::Refuse(crate::room::rules::Refusal::new("members_only", "members only"))
            }
        }
        fn request(
            &mut self,
            _room: &mut Ctx<'_>,
            _req: &Request,
        ) -> Option<crate::room::rules::Response> {
            Some(crate::room::rules::Response::json(200, &"the members' secret"))
        }
    }
    let mut s = Sim::with_rules(RoomConfig::default(), || Box::new(MembersOnly));
    let member_info =
        serde_json::value::RawValue::from_string(r#"{"member":true}"#.into()).unwrap();
    let member = Who { info: Some(&member_info), ..reader("ann") };
    s.connect_with_info("sess-ann", "ann", "EU", r#"{"member":true}"#);
    s.pump();
    // Eve, with a valid token and no `member`, asks for the list and the route.
    assert_eq!(
        s.room.presence_read(s.now, Some(&reader("eve"))),
        Err(ReadRefusal::Rules(crate::room::rules::Refusal::new("members_only", "members only")))
    );
    let route = |user: &str, info: Option<Box<serde_json::value::RawValue>>| Request {
        method: "GET".into(),
        path: "secret".into(),
        query: String::new(),
        body: String::new(),
        admin: false,
        user: Some(user.into()),
        info,
        region: "EU".into(),
    };
    let r = s.room.request(s.now, &route("eve", None)).unwrap();
    assert_eq!((r.status, r.body.contains("members_only")), (403, true), "{}", r.body);
    assert!(!r.body.contains("secret"));
    // Asking the rules changed nothing in the room: no timer stored, no frame sent.
    let outputs: Vec<_> = std::iter::from_fn(|| s.room.poll_output()).collect();
    assert!(outputs.is_empty(), "{outputs:?}");
    // A member reads both; one connected now is not asked about (a `join` that says "not
    // now", a full room, must not shut out the members it holds).
    let list = s.room.presence_read(s.now, Some(&member)).expect("a member reads the list");
    assert!(s.room.presence_read(s.now, Some(&reader("ann"))).is_ok(), "connected: not asked");
    assert!(list.contains("ann"));
    let r = s.room.request(s.now, &route("ann", Some(member_info.clone()))).unwrap();
    assert_eq!(r.status, 200);
}

#[test]
fn a_write_whose_rules_make_a_write_the_room_cannot_store_is_refused_with_it() {
    // A poll that keeps its voters in one value: once that value is past what a state value
    // may hold, its `set` was dropped while the vote and the tally landed, so the next vote of
    // the same voter was counted again, and again.
    #[derive(Clone)]
    struct Poll;
    impl Rules for Poll {
        fn publish(
            &mut self,
            room: &mut Ctx<'_>,
            who: &Who<'_>,
            _topic: &str,
            _data: &serde_json::value::RawValue,
        ) -> Write {
            let mut voted: Vec<String> = room.get_as("voted").unwrap_or_default();
            if voted.iter().any(|v| v == who.user) {
                return Write::Refuse(crate::room::rules::Refusal::new("already_voted", "once"));
            }
            let tally: u64 = room.get_as("tally").unwrap_or_default();
            room.set("tally", &(tally + 1));
            voted.push(who.user.to_owned());
            voted.push("x".repeat(70_000)); // past the 64 KiB a value may hold
            room.set("voted", &voted);
            Write::Accept
        }
    }
    let mut s = Sim::with_rules(RoomConfig::default(), || Box::new(Poll));
    let ann = s.connect_as("sess-ann", "ann", "EU", None);
    s.pump();
    s.take(&ann);
    for i in 0..3 {
        s.send(
            &ann,
            &json!({"type":"publish","id":format!("v{i}"),"topic":"vote","data":1}).to_string(),
        );
    }
    s.pump();
    let got = s.take(&ann);
    let errors = of_type(&got, "error");
    let codes: Vec<&str> = errors.iter().map(|e| e["code"].as_str().unwrap_or("")).collect();
    // Each vote's list is past a value's bound: each vote is refused with it, and nothing of
    // it is counted.
    assert_eq!(codes, vec!["rule_error"; 3], "{got:?}");
    assert!(of_type(&got, "ack").is_empty());
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert_eq!(stats["rule_problems"].as_u64().unwrap(), 3);
    let state: Value = serde_json::from_str(&s.room.state_json()).unwrap();
    assert!(state["state"].get("tally").is_none(), "{state}");
}

#[test]
fn a_hooks_sets_must_fit_together_with_the_write_that_asked_for_them() {
    // Each set fits the state alone; together they pass its bound of keys.
    #[derive(Clone)]
    struct Many;
    impl Rules for Many {
        fn publish(
            &mut self,
            room: &mut Ctx<'_>,
            _who: &Who<'_>,
            _topic: &str,
            _data: &serde_json::value::RawValue,
        ) -> Write {
            for key in ["a", "b", "c"] {
                room.set(key, &1);
            }
            Write::Accept
        }
    }
    let mut config = RoomConfig { state_max_keys: 2, ..RoomConfig::default() };
    config.finish();
    let mut s = Sim::with_rules(config, || Box::new(Many));
    let ann = s.connect_as("sess-ann", "ann", "EU", None);
    s.pump();
    s.take(&ann);
    s.send(&ann, &json!({"type":"publish","id":"p1","topic":"t","data":1}).to_string());
    s.pump();
    let got = s.take(&ann);
    let errors = of_type(&got, "error");
    assert_eq!(errors.len(), 1, "{got:?}");
    assert_eq!(errors[0]["code"], "rule_error");
    let state: Value = serde_json::from_str(&s.room.state_json()).unwrap();
    assert_eq!(state["state"], json!({}), "none of the three, and not the publish: {state}");
    assert_eq!(s.room.seq(), 0);
}
