//! A member with a valid token who wants to hurt the others: what the room refuses, and
//! what the others see (nothing).

use super::*;

#[test]
fn a_read_only_members_update_is_refused_and_changes_nothing() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect_as(1, Member { read_only: true, ..member("reader") });
    sim.edit(0, "kept");
    let stored = sim.stored.bytes();
    sim.edit(1, "vandal");
    assert_eq!(sim.editors[0].text(), "kept");
    assert_eq!(sim.stored_text(), "kept");
    assert_eq!(sim.stored.bytes(), stored);
    assert_eq!(refusals(&sim), vec![DocError::ReadOnly]);
    assert!(sim.editors[1].conn.is_some(), "kept open: closing would loop a stock client");
}

#[test]
fn an_update_past_the_document_bound_is_refused_whole() {
    let config = DocConfig { max_doc_bytes: 64 * 1024, ..DocConfig::default() };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, &"a".repeat(40_000));
    let text = sim.editors[1].text();
    sim.edit(0, &"b".repeat(40_000));
    assert_eq!(refusals(&sim), vec![DocError::TooLarge]);
    assert_eq!(sim.editors[1].text(), text, "nothing of it reached the others");
    assert_eq!(sim.stored_text(), text, "nothing of it was stored");
    assert!(sim.stored.bytes() <= 64 * 1024);
}

#[test]
fn garbage_and_hostile_frames_are_refused_without_harm() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    sim.edit(0, "safe");
    // An update `yrs` refuses (a GC block of length 0): refused, the socket stays.
    sim.send(1, &wire::update(&[1, 1, 5, 0, 0, 0, 0]));
    assert!(sim.editors[1].conn.is_some());
    assert_eq!(refusals(&sim), vec![DocError::BadUpdate]);
    // Counts its bytes cannot hold: closed 4400 before `yrs` sees it.
    sim.send(1, &wire::update(&[1, 1, 200, 200, 200, 1, 0xff, 0xff, 0xff]));
    assert_eq!(sim.editors[1].closed, Some((4400, "malformed".into())));
    // Not a y-protocols message at all: closed 4400.
    sim.connect(1);
    sim.send(1, &[0, 7, 1, 2, 3]);
    assert_eq!(sim.editors[1].closed, Some((4400, "malformed".into())));
    assert_eq!(sim.editors[0].text(), "safe");
    assert_eq!(sim.stored_text(), "safe");
}

#[test]
fn a_flood_is_closed_4029_and_the_edits_it_carried_come_back_with_the_resync() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    for i in 0..600 {
        if sim.editors[1].conn.is_none() {
            break;
        }
        sim.edit(1, &format!("{i},"));
    }
    assert_eq!(sim.editors[1].closed, Some((4029, "rate_limited".into())));
    // The edits made after the close stayed with the editor; a reconnect's sync carries them.
    sim.edit(1, "after");
    sim.now += 10_000;
    sim.connect(1);
    assert_eq!(sim.editors[0].text(), sim.editors[1].text());
    assert!(sim.editors[0].text().ends_with("after"));
}

#[test]
fn repeated_whole_document_requests_are_paid_from_the_reply_budget() {
    let config = DocConfig { max_doc_bytes: 64 * 1024, ..DocConfig::default() };
    let mut sim = Sim::new(config, 2);
    sim.connect(0);
    sim.edit(0, &"x".repeat(50_000));
    sim.connect(1);
    let ask = wire::sync_step1(&empty_sv());
    let mut sent = 0;
    for _ in 0..100 {
        if sim.editors[1].conn.is_none() {
            break;
        }
        sim.send(1, &ask);
        sent += 1;
    }
    assert_eq!(sim.editors[1].closed, Some((4029, "rate_limited".into())));
    // The burst is twice the largest frame: a few whole documents at once, then closed.
    let most = config.reply_burst() as usize / 50_000 + 1;
    assert!(sent <= most, "{sent} whole documents sent at once (at most {most})");
}

#[test]
fn a_socket_is_closed_when_its_token_expires_and_its_awareness_goes() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    let at = sim.now + 60_000;
    let expires = Some(at);
    sim.connect_as(1, Member { expires, ..member("leaver") });
    sim.send(
        1,
        &wire::awareness([crate::doc::Entry { client: 101, clock: 1, json: "{}".into() }].iter()),
    );
    assert_eq!(sim.room.tick(sim.now), Some(sim.now + 30_000), "the awareness timeout comes first");
    sim.now += 40_000; // renewed (no tick came between): now the token goes first
    sim.send(
        1,
        &wire::awareness([crate::doc::Entry { client: 101, clock: 2, json: "{}".into() }].iter()),
    );
    assert_eq!(sim.room.tick(sim.now), expires, "then the token's expiry");
    sim.now = at;
    sim.room.tick(sim.now);
    sim.apply();
    assert_eq!(sim.editors[1].closed, Some((4401, "token_expired".into())));
    let last = sim.editors[0].inbox.last().map(|f| wire::decode(f).ok());
    assert!(
        matches!(last, Some(Some(Message::Awareness(ref e))) if e[0].is_removal()),
        "the others see the leaver's awareness go"
    );
}

#[test]
fn a_member_closed_4029_who_reconnects_at_once_finds_the_budget_they_left() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    let mut sent = 0;
    while sim.editors[1].conn.is_some() {
        sim.edit(1, "x");
        sent += 1;
    }
    assert_eq!(sim.editors[1].closed, Some((4029, "rate_limited".into())));
    // Back at once (100 ms later): a fresh budget would take another burst of 400 frames.
    sim.now += 100;
    sim.connect(1);
    let mut again = 0;
    while sim.editors[1].conn.is_some() && again < 400 {
        sim.edit(1, "y");
        again += 1;
    }
    assert_eq!(sim.editors[1].closed, Some((4029, "rate_limited".into())));
    assert!(again < 40, "{again} frames after the reconnect (the first burst took {sent})");
    // Once the budget is full again it is forgotten and the member starts afresh.
    sim.now += 60_000;
    sim.connect(1);
    sim.edit(1, "z");
    assert!(sim.editors[1].conn.is_some());
    assert!(sim.editors[0].text().ends_with('z'));
}
