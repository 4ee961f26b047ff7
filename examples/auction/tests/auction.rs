//! The auction's rules on the simulated adapter: bids only go up, by the
//! step, in the bidder's own name, while the lot is open; the room closes
//! the lot at its end time (after an eviction too) and writes the winner.

use homeroom::room::rules::Request;
use homeroom::room::sim::Sim;
use homeroom::room::{RoomConfig, Time};
use homeroom_auction::{Auction, Lot};
use serde_json::{json, Value};

fn settings() -> Auction {
    Auction { seconds: 60, pause_seconds: 30, start: 100, step: 10, ..Auction::default() }
}

fn room() -> Sim {
    Sim::with_rules(RoomConfig::default(), || Box::new(settings()))
}

fn state(s: &Sim, key: &str) -> Value {
    serde_json::from_str(s.disk.state[key].0.get()).unwrap()
}

/// Sends a bid and returns the answer to it (`ack` or `error`).
fn bid(s: &mut Sim, conn: &str, id: &str, value: Value) -> Value {
    let frame = json!({"type": "set", "id": id, "key": "bid", "value": value});
    s.send(conn, &frame.to_string());
    s.take(conn).into_iter().find(|f| f["id"] == id && f["type"] != "message").expect("an answer")
}

#[test]
fn a_lot_opens_with_the_room_and_bids_only_go_up_in_the_bidders_own_name() {
    let mut s = room();
    let lot: Lot = serde_json::from_value(state(&s, "lot")).unwrap();
    assert!(lot.open);
    assert_eq!(lot.ends_at, s.now.plus_ms(60_000));
    let ann = s.connect_as("sess-ann1", "ann", "EU", None);
    let mal = s.connect_as("sess-mal1", "mallory", "NA", None);
    let r = bid(&mut s, &ann, "b0", json!({"amount": 90}));
    assert_eq!(
        (r["code"].as_str(), r["message"].as_str()),
        (Some("bid_too_low"), Some("bid at least 100"))
    );
    assert_eq!(bid(&mut s, &ann, "b1", json!({"amount": 100, "name": "Ann"}))["type"], "ack");
    // Mallory: too little, then in Ann's name and under it: refused; then a real bid
    // claiming to be Ann's is stored as Mallory's.
    assert_eq!(bid(&mut s, &mal, "m1", json!({"amount": 105}))["code"], "bid_too_low");
    let seq = s.room.seq();
    assert_eq!(
        bid(&mut s, &mal, "m2", json!({"amount": 110, "bidder": "ann", "name": "Ann"}))["type"],
        "ack"
    );
    let top = state(&s, "bid");
    assert_eq!((top["amount"].clone(), top["bidder"].clone()), (json!(110), json!("mallory")));
    assert_eq!(top["history"][0]["bidder"], "ann");
    assert_eq!(top["history"][0]["version"], seq, "the bid it beat, with its version");
    // Members may not write anything else.
    s.send(&mal, r#"{"type":"set","id":"m3","key":"lot","value":{"open":true}}"#);
    let r = s.take(&mal).into_iter().find(|f| f["id"] == "m3").unwrap();
    assert_eq!(r["code"], "read_only");
    assert!(state(&s, "lot")["open"].as_bool().unwrap());
}

#[test]
fn the_room_closes_the_lot_at_its_end_even_after_an_eviction_and_names_the_winner() {
    let mut s = room();
    let ends_at = Time::from_ms(state(&s, "lot")["ends_at"].as_u64().unwrap());
    let ann = s.connect_as("sess-ann1", "ann", "EU", None);
    bid(&mut s, &ann, "b1", json!({"amount": 100}));
    bid(&mut s, &ann, "b2", json!({"amount": 150}));
    s.drop_conn(&ann);
    s.evict(); // nobody there: the object goes, the alarm stays
    s.run_until(ends_at.minus_ms(1));
    assert!(state(&s, "lot")["open"].as_bool().unwrap());
    s.run_until(ends_at);
    let lot = state(&s, "lot");
    assert_eq!(lot["open"], false);
    assert_eq!(
        (lot["winner"]["amount"].clone(), lot["winner"]["bidder"].clone()),
        (json!(150), json!("ann"))
    );
    let last = s.disk.log.values().last().unwrap();
    assert_eq!((last.topic.as_str(), last.session.as_str()), ("auction", "$rules"));
    // A bid after the end is refused, and stores nothing.
    let bob = s.connect_as("sess-bob1", "bob", "EU", None);
    let seq = s.room.seq();
    assert_eq!(bid(&mut s, &bob, "late", json!({"amount": 500}))["code"], "auction_closed");
    assert_eq!(s.room.seq(), seq);
    // After the pause, the next lot opens with no bid.
    s.run_until(ends_at.plus_ms(30_000));
    assert_eq!(state(&s, "lot")["open"], true);
    assert_eq!(state(&s, "bid"), Value::Null);
    assert_eq!(bid(&mut s, &bob, "b9", json!({"amount": 100}))["type"], "ack");
}

#[test]
fn the_backend_opens_closes_and_reads_lots_with_the_admin_key() {
    let mut s = room();
    let req = |method: &str, path: &str, body: &str, admin: bool| Request {
        method: method.into(),
        path: path.into(),
        query: String::new(),
        body: body.into(),
        admin,
        user: Some("ann".into()),
        info: None,
        region: String::new(),
    };
    let r =
        s.room.request(s.now, &req("POST", "open", r#"{"seconds":5,"start":1}"#, false)).unwrap();
    assert_eq!(r.status, 403, "members cannot open lots");
    let r = s
        .room
        .request(s.now, &req("POST", "open", r#"{"seconds":5,"start":1,"title":"T"}"#, true))
        .unwrap();
    assert_eq!(r.status, 200);
    s.pump();
    assert_eq!(state(&s, "lot")["ends_at"], s.now.plus_ms(5_000).ms());
    let ann = s.connect_as("sess-ann1", "ann", "EU", None);
    bid(&mut s, &ann, "b1", json!({"amount": 1}));
    let r = s.room.request(s.now, &req("POST", "close", "", true)).unwrap();
    s.pump();
    let body: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        (body["lot"]["open"].clone(), body["lot"]["winner"]["bidder"].clone()),
        (json!(false), json!("ann"))
    );
    let r = s.room.request(s.now, &req("GET", "lot", "", false)).unwrap();
    let body: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["lot"]["title"], "T");
    // The close timer of the lot the backend closed does not fire again.
    let seq = s.room.seq();
    s.run_until(s.now.plus_ms(6_000));
    assert_eq!(s.room.seq(), seq);
}

/// The attack of issue 17: a bid of 2^64-1 made the next minimum wrap
/// around, so a bid of 110 displaced it. Amounts are bounded, and the
/// arithmetic is checked.
#[test]
fn a_bid_too_large_for_every_reader_is_refused_and_the_minimum_never_wraps() {
    let mut s = room();
    let ann = s.connect_as("sess-ann1", "ann", "EU", None);
    let mal = s.connect_as("sess-mal1", "mallory", "NA", None);
    assert_eq!(bid(&mut s, &ann, "a1", json!({"amount": 5_000}))["type"], "ack");
    for huge in [json!(u64::MAX), json!(homeroom_auction::MAX_AMOUNT + 1), json!(1e300)] {
        let r = bid(&mut s, &mal, "m1", json!({ "amount": huge }));
        assert_eq!(r["code"], "bad_bid", "{huge}: {r}");
    }
    assert_eq!(bid(&mut s, &mal, "m2", json!({"amount": 110}))["code"], "bid_too_low");
    assert_eq!(state(&s, "bid")["amount"], 5_000, "the standing bid stands");
    // The largest amount is a bid; nothing beats it, and nothing wraps.
    let max = homeroom_auction::MAX_AMOUNT;
    assert_eq!(bid(&mut s, &mal, "m3", json!({ "amount": max }))["type"], "ack");
    let r = bid(&mut s, &ann, "a2", json!({"amount": 120}));
    assert_eq!(r["code"], "bid_too_low");
    assert_eq!(state(&s, "bid")["amount"], max);
}

/// The bidder's name is the one their token vouches for (`info.name`),
/// never one the bid carries.
#[test]
fn the_winner_is_named_from_the_token_not_the_bid() {
    let mut s = room();
    let mal = s.connect_with_info("sess-mal1", "mallory", "NA", r#"{"name":"Mallory"}"#);
    let r = bid(&mut s, &mal, "m1", json!({"amount": 100, "name": "Victor", "bidder": "victor"}));
    assert_eq!(r["type"], "ack");
    let top = state(&s, "bid");
    assert_eq!((top["name"].clone(), top["bidder"].clone()), (json!("Mallory"), json!("mallory")));
    // Without a verified name, the user id.
    let bob = s.connect_as("sess-bob1", "bob", "EU", None);
    bid(&mut s, &bob, "b1", json!({"amount": 110, "name": "Victor"}));
    assert_eq!(state(&s, "bid")["name"], "bob");
}

/// `GET /auction/{room}/lot` is public (no token needed): it shows amounts,
/// display names and times, never a user id, a session or a region.
#[test]
fn the_public_lot_shows_display_names_only() {
    let mut s = room();
    let ann = s.connect_with_info("sess-ann1", "ann@example.com", "EU", r#"{"name":"Ann"}"#);
    bid(&mut s, &ann, "a1", json!({"amount": 100}));
    bid(&mut s, &ann, "a2", json!({"amount": 150}));
    let anyone = Request {
        method: "GET".into(),
        path: "lot".into(),
        query: String::new(),
        body: String::new(),
        admin: false,
        user: None,
        info: None,
        region: String::new(),
    };
    let r = s.room.request(s.now, &anyone).unwrap();
    assert_eq!(r.status, 200);
    for private in ["ann@example.com", "sess-ann1", "EU", "bidder", "session", "region"] {
        assert!(!r.body.contains(private), "{private} shown: {}", r.body);
    }
    let body: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["bid"]["name"], "Ann");
    assert_eq!(body["bid"]["amount"], 150);
    assert_eq!(body["bid"]["history"][0]["amount"], 100);
    // Closed, with its winner: the same.
    let ends_at = Time::from_ms(state(&s, "lot")["ends_at"].as_u64().unwrap());
    s.run_until(ends_at);
    let r = s.room.request(s.now, &anyone).unwrap();
    let body: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(body["lot"]["winner"]["name"], "Ann");
    assert!(!r.body.contains("ann@example.com"), "{}", r.body);
}

/// A room keeps timers only while it needs them: with nobody there, a lot
/// that closes opens no next one, so the room sleeps until its retention
/// deletes it; the next visitor starts the next lot.
#[test]
fn an_empty_room_schedules_no_next_lot() {
    let mut s = room();
    let ends_at = Time::from_ms(state(&s, "lot")["ends_at"].as_u64().unwrap());
    let ann = s.connect_as("sess-ann1", "ann", "EU", None);
    s.drop_conn(&ann);
    s.run_until(ends_at);
    assert_eq!(state(&s, "lot")["open"], false);
    assert!(s.disk.timers.is_empty(), "no timer left: {:?}", s.disk.timers);
    let alarms = s.alarms_set.len();
    s.run_until(ends_at.plus_secs(24 * 3600));
    assert_eq!(state(&s, "lot")["open"], false, "still closed a day later");
    // Only the retention alarm (and the sweep) may be asked for meanwhile:
    // nothing wakes the room every pause.
    assert!(s.alarms_set.len() - alarms <= 2, "{:?}", &s.alarms_set[alarms..]);
    // A visitor comes: the next lot opens after the pause.
    let bob = s.connect_as("sess-bob1", "bob", "EU", None);
    s.run_until(s.now.plus_ms(30_000));
    assert_eq!(state(&s, "lot")["open"], true);
    // With someone there, a close schedules the next lot; the last one
    // leaving cancels it.
    let ends_at = Time::from_ms(state(&s, "lot")["ends_at"].as_u64().unwrap());
    while s.now < ends_at {
        s.ping_runtime(&bob); // Bob's tab stays, answering heartbeats
        s.run_until(s.now.plus_ms(20_000).min(ends_at));
    }
    assert_eq!(state(&s, "lot")["open"], false);
    assert!(s.disk.timers.iter().any(|(n, _)| n == "reopen"), "{:?}", s.disk.timers);
    s.drop_conn(&bob);
    assert!(s.disk.timers.is_empty(), "{:?}", s.disk.timers);
}
