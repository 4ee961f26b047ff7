//! One test per protocol behaviour, on the simulated adapter.

use serde_json::{json, Value};

use crate::room::sim::{seqs, Sim};
use crate::room::RoomConfig;

fn sim() -> Sim {
    Sim::new(RoomConfig::default())
}

fn one(frames: Vec<Value>) -> Value {
    assert_eq!(frames.len(), 1, "expected one frame, got {frames:?}");
    frames.into_iter().next().unwrap()
}

#[test]
fn welcome_reports_room_log_and_presence() {
    let mut s = sim();
    let a = s.connect_as("sess-aaaa", "u1", "OC", None);
    let w = one(s.take(&a));
    assert_eq!(w["type"], "welcome");
    assert_eq!(w["room"], "r1");
    assert_eq!(w["session"], "sess-aaaa");
    assert_eq!(w["user"], "u1");
    assert_eq!(w["conn"], a.as_str());
    assert_eq!(w["region"], "OC");
    assert_eq!(w["epoch"], "e-1");
    assert_eq!(w["seq"], 0);
    assert_eq!(w["resumed"], false);
    assert_eq!(w["presence"]["members"]["sess-aaaa"]["user"], "u1");
    assert_eq!(w["presence"]["summary"]["regions"]["OC"]["members"], 1);
}

#[test]
fn publish_is_acked_then_delivered_to_everyone_in_seq_order() {
    let mut s = sim();
    let a = s.connect("sess-aaaa", "EU", None);
    let b = s.connect("sess-bbbb", "NA", None);
    s.take(&a);
    s.take(&b);
    s.publish(&a, "m1", r#"{"text":"hi"}"#);
    s.publish(&b, "m1", "2");
    let fa = s.take(&a);
    assert_eq!(fa[0], json!({"type":"ack","id":"m1","seq":1}));
    assert_eq!(fa[1]["type"], "message");
    assert_eq!(fa[1]["data"], json!({"text":"hi"}));
    assert_eq!(fa[1]["session"], "sess-aaaa");
    assert_eq!(fa[1]["region"], "EU");
    assert_eq!(fa[1]["ts"], 1000);
    assert_eq!(seqs(&fa), [1, 2]);
    let fb = s.take(&b);
    assert_eq!(seqs(&fb), [1, 2]);
    assert!(
        fb.contains(&json!({"type":"ack","id":"m1","seq":2})),
        "same id, other session: a new write"
    );
    assert_eq!(s.disk.log.len(), 2);
}

#[test]
fn a_retried_publish_gets_the_original_ack_and_no_second_message() {
    let mut s = sim();
    let a = s.connect("sess-aaaa", "EU", None);
    let obs = s.connect("sess-obsv", "EU", None);
    s.publish(&a, "m1", "1");
    s.publish(&a, "m1", "1");
    s.drop_conn(&a);
    let a2 = s.connect("sess-aaaa", "EU", Some((1, "e-1")));
    s.publish(&a2, "m1", "1");
    s.evict();
    s.publish(&a2, "m1", "1");
    let acks = s
        .take(&a)
        .into_iter()
        .chain(s.take(&a2))
        .filter(|f| f["type"] == "ack")
        .collect::<Vec<_>>();
    assert_eq!(acks.len(), 4);
    assert!(acks.iter().all(|f| f["seq"] == 1));
    assert_eq!(seqs(&s.take(&obs)), [1]);
    assert_eq!(s.disk.log.len(), 1);
}

#[test]
fn set_is_compare_and_set_on_the_key_version() {
    let mut s = sim();
    let a = s.connect("sess-aaaa", "EU", None);
    let b = s.connect("sess-bbbb", "EU", None);
    s.take(&a);
    s.take(&b);
    s.send(&a, r#"{"type":"set","id":"x1","key":"bid","value":10,"if_version":0}"#);
    s.send(&b, r#"{"type":"set","id":"y1","key":"bid","value":11,"if_version":0}"#);
    let fa = s.take(&a);
    assert_eq!(fa[0], json!({"type":"ack","id":"x1","seq":1}));
    assert_eq!(fa[1]["topic"], "$state");
    assert_eq!(fa[1]["data"], json!({"key":"bid","value":10,"version":1}));
    let fb = s.take(&b);
    let err = fb.iter().find(|f| f["type"] == "error").expect("conflict");
    assert_eq!(err["code"], "conflict");
    assert_eq!(err["id"], "y1");
    assert_eq!(err["version"], 1);
    s.send(&b, r#"{"type":"set","id":"y2","key":"bid","value":11,"if_version":1}"#);
    s.send(&a, r#"{"type":"set","id":"x2","key":"note","value":"free"}"#);
    s.send(&a, r#"{"type":"get_state"}"#);
    let state = s.take_type(&a, "state").pop().unwrap();
    assert_eq!(
        state,
        json!({"type":"state","seq":3,"state":{
            "bid":{"value":11,"version":2},"note":{"value":"free","version":3}}})
    );
    assert_eq!(s.disk.state.len(), 2);
}

#[test]
fn ping_is_answered() {
    let mut s = sim();
    let a = s.connect("sess-aaaa", "EU", None);
    s.take(&a);
    s.send(&a, r#"{"type":"ping"}"#);
    assert_eq!(s.take(&a), [json!({"type":"pong"})]);
}

#[test]
fn resume_replays_exactly_the_missed_messages_before_live_ones() {
    let mut s = sim();
    let a = s.connect("sess-aaaa", "EU", None);
    let p = s.connect("sess-pubr", "EU", None);
    s.publish(&p, "m1", "1");
    s.drop_conn(&a);
    for i in 2..=4 {
        s.publish(&p, &format!("m{i}"), "1");
    }
    let a2 = s.connect("sess-aaaa", "EU", Some((1, "e-1")));
    s.publish(&p, "m5", "1");
    let f = s.take(&a2);
    assert_eq!(f[0]["type"], "welcome");
    assert_eq!(f[0]["resumed"], true);
    assert_eq!(f[0]["missed"], 3);
    assert_eq!(f[0]["seq"], 4);
    assert_eq!(seqs(&f), [2, 3, 4, 5]);
    assert!(f[1..4].iter().all(|m| m["type"] == "message"), "replay comes first");
}

#[test]
fn resume_with_nothing_missed_and_connect_without_since() {
    let mut s = sim();
    let p = s.connect("sess-pubr", "EU", None);
    s.publish(&p, "m1", "1");
    let a = s.connect("sess-aaaa", "EU", Some((1, "e-1")));
    let w = one(s.take(&a));
    assert_eq!((w["resumed"].clone(), w["missed"].clone()), (json!(true), json!(0)));
    let b = s.connect("sess-bbbb", "EU", None);
    let w = one(s.take(&b));
    assert_eq!((w["resumed"].clone(), w["seq"].clone()), (json!(false), json!(1)));
}

#[test]
fn a_gap_over_the_replay_limit_or_another_epoch_gets_resync() {
    let mut s = sim();
    s.config.rate_per_sec = 1000;
    s.config.user_rate_per_sec = 1000;
    s.evict(); // take the relaxed rate
    let p = s.connect("sess-pubr", "EU", None);
    s.send(&p, r#"{"type":"set","id":"k","key":"bid","value":5}"#);
    for i in 0..101 {
        s.advance(1000);
        s.publish(&p, &format!("m{i}"), "1");
    }
    assert_eq!(s.room.seq(), 102);
    let a = s.connect("sess-aaaa", "EU", Some((1, "e-1")));
    let f = s.take(&a);
    assert_eq!(f[0]["resumed"], false);
    assert_eq!(
        f[1],
        json!({"type":"resync","reason":"gap","seq":102,"state":{"bid":{"value":5,"version":1}}})
    );
    assert_eq!(f.len(), 2);
    // exactly the limit still replays
    let b = s.connect("sess-bbbb", "EU", Some((2, "e-1")));
    assert_eq!(seqs(&s.take(&b)), (3..=102).collect::<Vec<_>>());
    for (since, epoch) in [(100, "e-other"), (103, "e-1")] {
        let c = s.connect("sess-cccc", "EU", Some((since, epoch)));
        let f = s.take(&c);
        assert_eq!(f[1]["type"], "resync");
        assert_eq!(f[1]["reason"], "epoch");
    }
}

#[test]
fn eviction_keeps_epoch_seq_state_presence_and_replay() {
    let mut s = sim();
    let a = s.connect_as("sess-aaaa", "u1", "OC", None);
    let b = s.connect("sess-bbbb", "EU", None);
    s.send(&a, r#"{"type":"presence","state":{"typing":true}}"#);
    s.publish(&a, "m1", "1");
    s.send(&a, r#"{"type":"set","id":"m2","key":"bid","value":7}"#);
    s.drop_conn(&b);
    s.publish(&a, "m3", "1");
    s.evict();
    assert_eq!((s.room.epoch(), s.room.seq(), s.room.members()), ("e-1", 3, 1));
    s.take(&a);
    s.publish(&a, "m4", "1");
    assert_eq!(seqs(&s.take(&a)), [4], "a hibernated socket keeps receiving");
    let b2 = s.connect("sess-bbbb", "EU", Some((2, "e-1")));
    let f = s.take(&b2);
    assert_eq!(seqs(&f), [3, 4]);
    assert_eq!(f[0]["presence"]["members"]["sess-aaaa"]["state"], json!({"typing":true}));
    assert_eq!(f[0]["presence"]["summary"]["members"], 2);
}

#[test]
fn bad_input_gets_an_error_and_the_connection_stays_usable() {
    let mut s = sim();
    let a = s.connect("sess-aaaa", "EU", None);
    let b = s.connect("sess-bbbb", "EU", None);
    s.take(&a);
    s.take(&b);
    let cases = [
        ("{nope", "bad_frame"),
        ("[]", "bad_frame"),
        (r#"{"type":"launch"}"#, "bad_frame"),
        (r#"{"type":"publish","id":"m1","topic":"chat"}"#, "invalid"),
        (r#"{"type":"publish","id":"m1","topic":"$x","data":1}"#, "invalid"),
        (r#"{"type":"set","id":"m1","key":"","value":1}"#, "invalid"),
    ];
    for (text, code) in cases {
        s.send(&a, text);
        let e = one(s.take(&a));
        assert_eq!((e["type"].as_str(), e["code"].as_str()), (Some("error"), Some(code)), "{text}");
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    s.send_binary(&a, 10);
    assert_eq!(one(s.take(&a))["code"], "bad_frame");
    s.publish(&a, "m1", "1");
    assert_eq!(seqs(&s.take(&a)), [1]);
    assert_eq!(seqs(&s.take(&b)), [1], "others saw only the good frame");
    assert!(s.sockets[&a].open);
}

#[test]
fn an_oversized_frame_closes_with_1009_and_spares_the_others() {
    let mut s = sim();
    let a = s.connect("sess-aaaa", "EU", None);
    let b = s.connect("sess-bbbb", "EU", None);
    s.take(&b);
    let big =
        format!(r#"{{"type":"publish","id":"m1","topic":"t","data":"{}"}}"#, "x".repeat(64 * 1024));
    s.send(&a, &big);
    assert_eq!(s.sockets[&a].closed, Some(1009));
    s.presence_window_ends(); // the leave, a window after b's join
    assert_eq!(s.take(&b), [json!({"type":"presence","joins":{},"leaves":["sess-aaaa"]})]);
    assert_eq!(s.room.seq(), 0);
    s.publish(&b, "m1", "1");
    assert_eq!(seqs(&s.take(&b)), [1]);
}

#[test]
fn a_flood_is_rate_limited_then_closed_with_4029() {
    let mut s = sim();
    let a = s.connect("sess-aaaa", "EU", None);
    let b = s.connect("sess-bbbb", "EU", None);
    s.take(&a);
    for i in 0..60 {
        s.publish(&a, &format!("m{i}"), "1");
    }
    let f = s.take(&a);
    assert_eq!(f.iter().filter(|x| x["type"] == "ack").count(), 50);
    assert_eq!(f.iter().filter(|x| x["code"] == "rate_limited").count(), 10);
    assert_eq!(s.room.seq(), 50, "refused frames are not applied");
    s.advance(1000);
    s.publish(&a, "late", "1");
    assert!(s.take(&a).iter().any(|x| x["type"] == "ack"), "the bucket refills at 20/s");
    for i in 0..200 {
        if !s.sockets[&a].open {
            assert!(i > 80, "closed too early, after {i} frames");
            break;
        }
        s.publish(&a, &format!("f{i}"), "1");
    }
    assert_eq!(s.sockets[&a].closed, Some(4029));
    assert!(s.sockets[&b].open);
}

#[test]
fn a_second_connection_of_a_session_supersedes_the_first_without_a_leave() {
    let mut s = sim();
    let obs = s.connect("sess-obsv", "EU", None);
    let a1 = s.connect("sess-aaaa", "EU", None);
    s.presence_window_ends(); // its join, a window after the observer's
    s.take(&obs);
    let a2 = s.connect("sess-aaaa", "OC", None);
    assert_eq!(s.sockets[&a1].closed, Some(4001));
    s.presence_window_ends();
    let f = s.take(&obs);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["joins"]["sess-aaaa"]["region"], "OC");
    assert_eq!(f[0]["leaves"], json!([]));
    s.runtime_close(&a1);
    assert!(s.take(&obs).is_empty(), "the superseded socket's close is not a leave");
    assert_eq!(s.room.members(), 2);
    // same region again: nothing changed, nothing to say
    let _a3 = s.connect("sess-aaaa", "OC", None);
    s.presence_window_ends();
    assert!(s.take(&obs).is_empty());
    assert_eq!(s.sockets[&a2].closed, Some(4001));
}

#[test]
fn the_log_is_trimmed_and_ids_expire_with_it() {
    let mut s = sim();
    s.config.rate_per_sec = 100_000;
    s.config.burst = 100_000;
    s.config.user_rate_per_sec = 100_000;
    s.config.user_burst = 100_000;
    s.evict();
    let a = s.connect("sess-aaaa", "EU", None);
    for i in 1..=1100 {
        s.publish(&a, &format!("m{i}"), "1");
    }
    assert_eq!(s.disk.log.len(), 1000);
    assert_eq!(s.disk.log.keys().next(), Some(&101));
    s.take(&a);
    s.publish(&a, "m101", "1");
    assert_eq!(s.take_type(&a, "ack")[0]["seq"], 101, "retained id: original ack");
    s.publish(&a, "m100", "1");
    assert_eq!(s.take_type(&a, "ack")[0]["seq"], 1101, "expired id: a new write");
    s.evict();
    s.publish(&a, "m102", "1");
    assert_eq!(s.take_type(&a, "ack")[0]["seq"], 102, "ids survive eviction");
}

#[test]
fn size_limits_on_presence_and_room_state() {
    let mut s = sim();
    s.config.state_max_keys = 2;
    s.evict();
    let a = s.connect("sess-aaaa", "EU", None);
    s.take(&a);
    let big = format!(r#"{{"type":"presence","state":{{"x":"{}"}}}}"#, "y".repeat(1024));
    s.send(&a, &big);
    assert_eq!(one(s.take(&a))["code"], "too_large");
    for k in ["a", "b", "c"] {
        s.send(&a, &format!(r#"{{"type":"set","id":"{k}","key":"{k}","value":1}}"#));
    }
    let f = s.take(&a);
    assert_eq!(f.iter().filter(|x| x["type"] == "ack").count(), 2);
    let e = f.iter().find(|x| x["type"] == "error").unwrap();
    assert_eq!((e["code"].as_str(), e["id"].as_str()), (Some("too_large"), Some("c")));
    s.send(&a, r#"{"type":"set","id":"d","key":"a","value":2}"#);
    assert_eq!(s.take_type(&a, "ack").len(), 1, "overwriting a key is always allowed");
}

/// A Wasm reset while frames wait for a slow reader's echo (its flow window is full): they go
/// with the memory, and the reader's next message would come after a gap. The adapter keeps
/// the fact outside the Wasm; the next load closes the room's sockets 1012 `room_reset`, and
/// the reader resumes from what it applied, without a gap. The control (an adapter that
/// forgets it) shows the gap.
#[test]
fn a_reset_while_frames_wait_for_a_reader_closes_it_to_resume() {
    let run = |kept: bool| -> (Vec<u64>, Option<u16>) {
        let (mut s, p, r) = super::reader_behind_its_window(|s| s.keeps_owed = kept);
        assert!(s.room.frames_owed(), "the last message waits for the reader's echo");
        s.reload(); // a Wasm reset: the sockets stay, the memory goes
        let mut got = Vec::new();
        for _ in 0..5 {
            got.extend(seqs(&s.take(&r))); // reads, echoes every mark
        }
        let closed = s.sockets[&r].closed;
        if closed.is_some() {
            let (last, epoch) = (*got.last().unwrap_or(&0), s.room.epoch().to_owned());
            let back = s.connect_as("sess-reader", "ann", "EU", Some((last, &epoch)));
            for _ in 0..5 {
                got.extend(seqs(&s.take(&back)));
            }
        } else {
            s.publish(&p, "m3", "1");
            for _ in 0..5 {
                got.extend(seqs(&s.take(&r)));
            }
        }
        (got, closed)
    };
    let (got, closed) = run(true);
    assert_eq!(closed, Some(1012), "closed to resume");
    assert_eq!(got, [1, 2, 3], "every message once, in order, without a gap");
    let (got, closed) = run(false);
    assert_eq!((got, closed), (vec![1, 2, 4], None), "control: the third message is lost");
}

/// A batching room's frames wait for the turn's end: owed until then (a reset in between
/// would drop them), and nothing is owed once the turn has ended.
#[test]
fn a_batching_rooms_frames_are_owed_until_the_turn_ends() {
    let mut s = Sim::new(RoomConfig { batch_above: 0, ..RoomConfig::default() });
    let p = s.connect("sess-publisher", "EU", None);
    let r = s.connect("sess-reader", "EU", None);
    s.settle();
    s.take(&p);
    s.take(&r);
    assert!(!s.room.frames_owed());
    s.publish(&p, "m1", "1");
    assert!(s.room.frames_owed(), "the message waits for the end of the turn");
    s.end_turn();
    assert!(!s.room.frames_owed());
    assert_eq!(seqs(&s.take(&r)), [1]);
}
