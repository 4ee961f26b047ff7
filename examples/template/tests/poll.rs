//! The poll's rules on the simulated room (virtual time, an in-memory disk): members only,
//! one vote per member counted by the room, a tally nobody else can write, and a timer that
//! closes the poll, after an eviction too.

use homeroom::room::rules::Request;
use homeroom::room::sim::Sim;
use homeroom::room::{RoomConfig, Time};
use my_rooms::poll::{Poll, Question};
use serde_json::{json, Value};

fn room() -> Sim {
    Sim::with_rules(RoomConfig::default(), || Box::new(Poll))
}

fn member(s: &mut Sim, user: &str) -> String {
    let info = json!({"name": user, "member": true}).to_string();
    s.connect_with_info(&format!("sess-{user}-tab1"), user, "EU", &info)
}

fn open(s: &mut Sim, seconds: u64) -> Value {
    let req = Request {
        method: "POST".into(),
        path: "open".into(),
        query: String::new(),
        body: json!({"question": "Tea or coffee?", "options": ["tea", "coffee"], "seconds": seconds})
            .to_string(),
        admin: true,
        user: None,
        info: None,
        region: String::new(),
    };
    let r = s.room.request(s.now, &req).expect("the poll answers");
    s.pump();
    assert_eq!(r.status, 200, "{}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

fn state(s: &Sim, key: &str) -> Value {
    serde_json::from_str(s.disk.state[key].0.get()).unwrap()
}

/// Sends `frame` and returns the answer to its id (`ack` or `error`).
fn answer(s: &mut Sim, conn: &str, frame: Value) -> Value {
    let id = frame["id"].clone();
    s.send(conn, &frame.to_string());
    s.take(conn).into_iter().find(|f| f["id"] == id && f["type"] != "message").expect("an answer")
}

fn vote(s: &mut Sim, conn: &str, id: &str, option: &str) -> Value {
    answer(s, conn, json!({"type": "publish", "id": id, "topic": "vote", "data": {"option": option}}))
}

#[test]
fn strangers_are_refused_and_members_join() {
    let mut s = room();
    let stranger = s.connect_as("sess-stranger1", "stranger", "EU", None);
    assert_eq!(s.sockets[&stranger].closed, Some(4403));
    let ann = member(&mut s, "ann");
    assert_eq!(s.take(&ann)[0]["type"], "welcome");
}

#[test]
fn one_vote_per_member_counted_by_the_room() {
    let mut s = room();
    open(&mut s, 60);
    let ann = member(&mut s, "ann");
    let bob = member(&mut s, "bob");
    assert_eq!(vote(&mut s, &ann, "v1", "tea")["type"], "ack");
    assert_eq!(vote(&mut s, &ann, "v2", "coffee")["code"], "already_voted");
    assert_eq!(vote(&mut s, &bob, "v1", "cocoa")["code"], "no_such_option");
    assert_eq!(vote(&mut s, &bob, "v2", "coffee")["type"], "ack");
    assert_eq!(state(&s, "tally"), json!({"tea": 1, "coffee": 1}));
    // The tally is the room's: a member cannot write it.
    let r = answer(&mut s, &ann, json!({"type": "set", "id": "t1", "key": "tally", "value": {"tea": 99}}));
    assert_eq!(r["code"], "read_only");
    assert_eq!(state(&s, "tally"), json!({"tea": 1, "coffee": 1}));
    // What is stored of a vote is what was checked.
    let e = s.disk.log.values().find(|e| e.topic == "vote").unwrap();
    assert_eq!(e.data.get(), r#"{"option":"tea"}"#);
}

#[test]
fn the_timer_closes_the_poll_after_an_eviction_too() {
    let mut s = room();
    let opened = open(&mut s, 30);
    let closes_at = Time::from_ms(opened["poll"]["closes_at"].as_u64().unwrap());
    let ann = member(&mut s, "ann");
    vote(&mut s, &ann, "v1", "tea");
    s.drop_conn(&ann);
    s.evict(); // nobody there: the object goes, the timer stays in storage
    s.run_until(closes_at.minus_ms(1));
    assert!(state(&s, "poll")["open"].as_bool().unwrap());
    s.run_until(closes_at);
    let q: Question = serde_json::from_value(state(&s, "poll")).unwrap();
    assert!(!q.open, "closed at its time");
    let last = s.disk.log.values().last().unwrap();
    assert_eq!(last.topic, "poll");
    let closed: Value = serde_json::from_str(last.data.get()).unwrap();
    assert_eq!(closed, json!({"event": "closed", "tally": {"tea": 1, "coffee": 0}}));
    // A vote after the close is refused.
    let bob = member(&mut s, "bob");
    assert_eq!(vote(&mut s, &bob, "v1", "coffee")["code"], "poll_closed");
}
