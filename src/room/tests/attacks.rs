//! A member holding a valid token of their own tries to hurt the others:
//! take over a session, make the room buffer without bound, outlive their
//! token, open more sockets or write faster than one member may, send
//! values no reader can parse. Each test plays the attacker's sequence on
//! the simulated adapter and asserts what the victim experiences.

use serde_json::{json, Value};

use crate::room::sim::{seqs, Sim};
use crate::room::{Block, RoomConfig};

fn sim() -> Sim {
    Sim::new(RoomConfig::default())
}

fn closed(s: &Sim, conn: &str) -> Option<u16> {
    s.sockets[conn].closed
}

fn of_type(frames: &[Value], kind: &str) -> Vec<Value> {
    frames.iter().filter(|f| f["type"] == kind).cloned().collect()
}

// ---- 1. sessions belong to the user who opened them ----------------------

#[test]
fn another_user_cannot_take_over_a_present_session() {
    let mut s = sim();
    let victim = s.connect_as("sess-victim", "vic", "EU", None);
    let obs = s.connect_as("sess-observer", "obs", "EU", None);
    s.send(&victim, r#"{"type":"presence","state":{"name":"Victoria"}}"#);
    s.publish(&victim, "m1", r#""hello""#);
    s.take(&victim);
    s.take(&obs);

    let attacker = s.connect_as("sess-victim", "mallory", "NA", None);
    assert_eq!(closed(&s, &attacker), Some(4409), "refused: session of another user");
    assert!(s.sockets[&attacker].inbox.is_empty(), "no welcome, nothing of the room");
    assert_eq!(closed(&s, &victim), None, "the victim's socket stays");
    assert!(s.take(&obs).is_empty(), "nobody saw a join, a leave or a region change");
    assert_eq!((s.room.members(), s.room.connections()), (2, 2));

    // The victim's next write is theirs, acked as a new write.
    s.publish(&victim, "m2", r#""still me""#);
    let f = s.take(&victim);
    assert_eq!(of_type(&f, "ack")[0]["seq"], 2);
    assert_eq!(s.disk.log[&2].user, "vic");
    // Presence still shows the victim's own state under their name.
    let w: Value = serde_json::from_str(&s.room.presence_json()).expect("presence is JSON");
    assert_eq!(w["members"]["sess-victim"]["user"], "vic");
    assert_eq!(w["members"]["sess-victim"]["state"], json!({"name":"Victoria"}));
}

#[test]
fn a_session_stays_its_users_after_the_member_leaves() {
    let mut s = sim();
    let victim = s.connect_as("sess-victim", "vic", "EU", None);
    s.publish(&victim, "m1", "1");
    s.take(&victim);
    s.drop_conn(&victim); // the tab drops off for a moment

    // A departed member's session, still in memory.
    let attacker = s.connect_as("sess-victim", "mallory", "EU", None);
    assert_eq!(closed(&s, &attacker), Some(4409));
    // After an eviction the room forgets departures, but the session's
    // writes are in the retained log: still the victim's.
    s.evict();
    let attacker = s.connect_as("sess-victim", "mallory", "EU", None);
    assert_eq!(closed(&s, &attacker), Some(4409));

    // The victim comes back, resends its unacked write with an id it used
    // before: it is deduplicated against its own write, not an attacker's.
    let back = s.connect_as("sess-victim", "vic", "EU", Some((1, "e-1")));
    assert_eq!(closed(&s, &back), None);
    s.publish(&back, "m1", "1");
    let f = s.take(&back);
    assert_eq!(of_type(&f, "ack")[0]["seq"], 1, "its original ack");
    assert_eq!(s.disk.log.len(), 1);
}

#[test]
fn one_member_cannot_kick_a_room_by_walking_the_presence_list() {
    let mut s = sim();
    let members: Vec<String> = (0..20)
        .map(|i| s.connect_as(&format!("sess-m{i:03}"), &format!("u{i}"), "EU", None))
        .collect();
    let sessions: Vec<String> = (0..20).map(|i| format!("sess-m{i:03}")).collect();
    for (i, session) in sessions.iter().enumerate() {
        let a = s.connect_as(session, "mallory", "NA", None);
        assert_eq!(closed(&s, &a), Some(4409), "member {i}");
    }
    assert!(members.iter().all(|m| closed(&s, m).is_none()), "nobody was closed");
    assert_eq!(s.room.members(), 20);
}

#[test]
fn the_same_user_still_supersedes_their_own_session() {
    let mut s = sim();
    let a = s.connect_as("sess-mine", "ann", "EU", None);
    let b = s.connect_as("sess-mine", "ann", "OC", None);
    assert_eq!(closed(&s, &a), Some(4001));
    assert_eq!(closed(&s, &b), None);
}

// ---- 2. a reader that never confirms is bounded ---------------------------

/// A room where one member publishes big messages quickly.
fn busy_room(s: &mut Sim) -> String {
    s.config.rate_per_sec = 1_000;
    s.config.burst = 1_000;
    s.config.user_rate_per_sec = 1_000;
    s.config.user_burst = 1_000;
    s.config.user_bytes_per_sec = 1 << 30;
    s.config.user_bytes_burst = 1 << 30;
    s.evict();
    s.connect_as("sess-publisher", "pub", "EU", None)
}

fn big(i: usize) -> String {
    format!(r#"{{"i":{i},"pad":"{}"}}"#, "x".repeat(60_000))
}

#[test]
fn a_member_that_never_confirms_stops_receiving_and_is_closed_at_the_backlog_bound() {
    let mut s = sim();
    let p = busy_room(&mut s);
    let reader = s.connect_as("sess-reader", "ann", "EU", None);
    let hog = s.connect_as("sess-hog", "mallory", "EU", None);
    s.sockets.get_mut(&hog).unwrap().silent = true;
    let window = s.config.send_window;
    let backlog = s.config.max_backlog;
    let mut hog_closed_at = None;
    for i in 0..200 {
        s.publish(&p, &format!("m{i}"), &big(i));
        s.take(&p);
        s.take(&reader); // a reader that reads (and echoes) keeps up
        s.take(&hog); // the hog reads nothing back: it echoes no mark
        assert!(
            s.sockets[&hog].bytes <= window + 70_000,
            "the runtime was handed {} bytes for the hog (window {window})",
            s.sockets[&hog].bytes
        );
        if closed(&s, &hog).is_some() && hog_closed_at.is_none() {
            hog_closed_at = Some(i);
        }
    }
    assert_eq!(closed(&s, &hog), Some(4013), "closed for its backlog");
    let at = hog_closed_at.unwrap();
    // It was closed once window + backlog had been asked for, not before.
    let asked = (at as u64 + 1) * 60_100;
    assert!(asked > window + backlog, "closed after {asked} bytes: too early");
    assert!(asked < window + backlog + 200_000, "closed after {asked} bytes: too late");
    // The reader got every message, in order.
    assert_eq!(closed(&s, &reader), None);
    assert_eq!(s.room.seq(), 200);
    // The hog comes back and resumes without a gap (a resync: far behind).
    let again = s.connect_as("sess-hog", "mallory", "EU", Some((1, "e-1")));
    let f = s.take(&again);
    assert_eq!(f[0]["type"], "welcome");
    assert!(f.iter().any(|f| f["type"] == "resync"), "far behind: a resync");
}

#[test]
fn a_slow_reader_waits_then_catches_up_without_loss() {
    let mut s = sim();
    let p = busy_room(&mut s);
    let slow = s.connect_as("sess-slow", "ann", "EU", None);
    s.take(&slow);
    s.sockets.get_mut(&slow).unwrap().silent = true;
    for i in 0..40 {
        s.publish(&p, &format!("m{i}"), &big(i));
    }
    let seen = seqs(&s.sockets[&slow].inbox.clone());
    assert!(seen.len() < 40, "the window held some back: {} delivered", seen.len());
    assert_eq!(closed(&s, &slow), None, "under the backlog bound: still open");
    // It starts confirming again: everything arrives, in order, once.
    s.sockets.get_mut(&slow).unwrap().silent = false;
    let mut all = Vec::new();
    for _ in 0..20 {
        all.extend(seqs(&s.take(&slow)));
    }
    assert_eq!(all, (1..=40).collect::<Vec<u64>>());
}

#[test]
fn a_member_that_pings_but_never_reads_is_closed_after_the_echo_deadline() {
    // Without a deadline such a member keeps a quiet room's object awake
    // (the keep-alive) for as long as its token lasts; a slow reader that
    // confirms something now and then must not be caught by it.
    let mut config = RoomConfig { send_window: 4096, ..RoomConfig::default() };
    config.finish(); // a mark every 1,024 bytes
    let deadline = config.echo_deadline_ms;
    let mut s = Sim::new(config);
    let p = s.connect_as("sess-publisher", "pub", "EU", None);
    let hog = s.connect_as("sess-hog", "mallory", "EU", None);
    let slow = s.connect_as("sess-slow", "ann", "EU", None);
    for c in [&p, &hog, &slow] {
        s.take(c);
    }
    s.sockets.get_mut(&hog).unwrap().silent = true;
    s.sockets.get_mut(&slow).unwrap().silent = true;
    let pad = "p".repeat(3_000);
    let mut n = 0;
    let mut publish = |s: &mut Sim| {
        for _ in 0..3 {
            s.publish(&p, &format!("m{n}"), &format!(r#""{pad}""#));
            n += 1;
        }
        s.take(&p);
    };
    publish(&mut s);
    s.settle();
    assert!(s.waiting_for_echo(), "frames wait for both readers");
    let start = s.now;
    let mut hog_closed_at = None;
    let mut slow_seqs = Vec::new();
    for step in 1..=24 {
        // Every 5 s everyone pings (the runtime answers), so no heartbeat
        // silence closes anyone; every 30 s the slow reader reads and
        // confirms, and the publisher sends more for it to fall behind on.
        for c in [&p, &hog, &slow] {
            s.ping_runtime(c);
        }
        let t = s.now.plus_ms(5_000);
        s.run_until(t);
        if step % 6 == 0 {
            s.sockets.get_mut(&slow).unwrap().silent = false;
            slow_seqs.extend(seqs(&s.take(&slow)));
            s.sockets.get_mut(&slow).unwrap().silent = true;
            publish(&mut s);
        }
        if hog_closed_at.is_none() && closed(&s, &hog).is_some() {
            hog_closed_at = Some(s.now.since(start));
        }
    }
    assert_eq!(closed(&s, &hog), Some(4013), "the stuck reader is let go");
    let after = hog_closed_at.unwrap();
    assert!(
        after >= deadline && after <= deadline + 10_000,
        "closed {after} ms after it stalled (deadline {deadline} ms)"
    );
    assert_eq!(closed(&s, &slow), None, "the slow reader stays");
    assert_eq!(closed(&s, &p), None);
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert_eq!(stats["stalled_closes"], 1);
    // The slow reader got everything sent so far, in order, without a gap.
    s.sockets.get_mut(&slow).unwrap().silent = false;
    for _ in 0..10 {
        slow_seqs.extend(seqs(&s.take(&slow)));
    }
    assert_eq!(slow_seqs, (1..=s.room.seq()).collect::<Vec<u64>>());
    // The hog resumes from where it was and misses nothing either.
    let back = s.connect_as("sess-hog", "mallory", "EU", Some((1, "e-1")));
    let mut got = Vec::new();
    for _ in 0..10 {
        got.extend(seqs(&s.take(&back)));
    }
    assert_eq!(got, (2..=s.room.seq()).collect::<Vec<u64>>());
}

#[test]
fn a_forged_mark_confirms_nothing() {
    let mut s = sim();
    let p = busy_room(&mut s);
    let hog = s.connect_as("sess-hog", "mallory", "EU", None);
    s.sockets.get_mut(&hog).unwrap().silent = true;
    for i in 0..20 {
        s.publish(&p, &format!("m{i}"), &big(i));
    }
    let before = s.sockets[&hog].bytes;
    let stats = |s: &mut Sim| -> Value { serde_json::from_str(&s.room.stats_json()).unwrap() };
    let waiting = stats(&mut s)["waiting_bytes"].as_u64().unwrap();
    assert!(waiting > 0, "frames wait for the hog's window");
    for _ in 0..5 {
        s.send(&hog, r#"{"type":"mark","mark":"0000000000000000"}"#);
    }
    s.publish(&p, "m-after", &big(99));
    assert_eq!(s.sockets[&hog].bytes, before, "nothing more was handed to the runtime");
    // Its refusals (`invalid`) wait in its queue too, behind what it did not read.
    assert!(stats(&mut s)["waiting_bytes"].as_u64().unwrap() > waiting);
    assert_eq!(stats(&mut s)["rate_limited"], 0, "charged like any frame, not yet over");
}

#[test]
fn get_state_costs_its_bytes_from_the_users_reply_budget() {
    let mut s = sim();
    let owner = busy_room(&mut s);
    // ~900 KB of state.
    for k in 0..15 {
        s.send(
            &owner,
            &format!(
                r#"{{"type":"set","id":"k{k}","key":"k{k}","value":"{}"}}"#,
                "v".repeat(60_000)
            ),
        );
    }
    s.take(&owner);
    let hog = s.connect_as("sess-hog", "mallory", "EU", None);
    s.take(&hog);
    let start = s.sockets[&hog].bytes;
    let (mut states, mut refused) = (0, 0);
    for _ in 0..100 {
        s.advance(50); // 20 a second, for 5 s
        s.send(&hog, r#"{"type":"get_state"}"#);
        for f in s.take(&hog) {
            match f["type"].as_str() {
                Some("state") => states += 1,
                Some("error") if f["code"] == "rate_limited" => refused += 1,
                Some("summary" | "presence") => {} // the others' comings and goings
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    let sent = s.sockets[&hog].bytes - start;
    let budget = s.config.reply_burst_bytes + 5 * s.config.reply_bytes_per_sec;
    assert!(sent <= budget + 20_000, "{sent} bytes sent, budget {budget}");
    assert!(states >= 2 && refused > 90, "states {states}, refused {refused}");
    assert_eq!(closed(&s, &hog), None, "refused, not closed: it reads");
}

#[test]
fn reconnecting_does_not_refill_a_users_reply_budget() {
    let mut s = sim();
    let owner = busy_room(&mut s);
    for k in 0..15 {
        let v = "v".repeat(60_000);
        s.send(&owner, &format!(r#"{{"type":"set","id":"k{k}","key":"k{k}","value":"{v}"}}"#));
    }
    s.drop_conn(&owner);
    // Each connect with a bogus epoch costs a 900 KB resync; closing and
    // connecting again must not make the next one free.
    let mut at_once = 0;
    for i in 0..10 {
        let c = s.connect_as(&format!("sess-hog{i:03}"), "mallory", "EU", Some((0, "bogus")));
        let frames = s.sockets[&c].inbox.clone();
        if frames.iter().any(|f| f["type"] == "resync") {
            at_once += 1;
        }
        s.drop_conn(&c);
    }
    assert!(at_once <= 3, "{at_once} of 10 resyncs went out at once: the budget refilled");
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert!(stats["held_replies"].as_u64().unwrap() >= 7, "{stats}");
}

// ---- 3. a token's exp ends its connection -----------------------------

#[test]
fn a_connection_is_closed_when_its_token_expires() {
    let mut s = sim();
    let obs = s.connect_as("sess-observer", "obs", "EU", None);
    let exp = s.now.plus_ms(30_000);
    let a = s.connect_until("sess-aaaa", "ann", "EU", None, Some(exp));
    let w = &s.take(&a)[0];
    assert_eq!(w["expires"], exp.ms(), "the welcome says when");
    s.run_until(exp.minus_ms(1));
    s.take(&obs); // a's join (a presence window after the observer's)
    assert_eq!(closed(&s, &a), None);
    s.run_until(exp);
    assert_eq!(closed(&s, &a), Some(4401));
    let seen = of_type(&s.take(&obs), "presence");
    assert_eq!(seen[0]["leaves"], json!(["sess-aaaa"]), "the others see it leave");
}

#[test]
fn a_write_after_expiry_is_refused_even_before_the_alarm() {
    let mut s = sim();
    let exp = s.now.plus_ms(1_000);
    let a = s.connect_until("sess-aaaa", "ann", "EU", None, Some(exp));
    s.take(&a);
    s.advance(3_000); // the alarm is late
    s.publish(&a, "late", "1");
    assert_eq!(closed(&s, &a), Some(4401));
    assert!(s.disk.log.is_empty(), "not stored");
    // An already-expired token does not even get a welcome.
    let b = s.connect_until("sess-bbbb", "bob", "EU", None, Some(s.now));
    assert_eq!(closed(&s, &b), Some(4401));
    assert!(s.sockets[&b].inbox.is_empty());
}

#[test]
fn token_expiry_survives_an_eviction() {
    let mut s = sim();
    let exp = s.now.plus_ms(60_000);
    let a = s.connect_until("sess-aaaa", "ann", "EU", None, Some(exp));
    s.take(&a);
    s.evict();
    s.run_until(exp);
    assert_eq!(closed(&s, &a), Some(4401));
}

#[test]
fn the_operator_kicks_a_user_and_blocks_them_for_a_while() {
    let mut s = sim();
    let obs = s.connect_as("sess-observer", "obs", "EU", None);
    let m1 = s.connect_as("sess-mal1", "mallory", "EU", None);
    let m2 = s.connect_as("sess-mal2", "mallory", "NA", None);
    s.take(&obs);
    let until = s.now.plus_ms(60_000);
    assert_eq!(s.room.kick(s.now, "mallory", Block::Until(until)), 2);
    s.pump();
    assert_eq!((closed(&s, &m1), closed(&s, &m2)), (Some(4403), Some(4403)));
    assert_eq!(closed(&s, &obs), None);
    assert_eq!(s.room.members(), 1);
    // Blocked, also after an eviction.
    s.evict();
    let again = s.connect_as("sess-mal3", "mallory", "EU", None);
    assert_eq!(closed(&s, &again), Some(4403));
    s.advance(60_000);
    let later = s.connect_as("sess-mal4", "mallory", "EU", None);
    assert_eq!(closed(&s, &later), None, "the block ended");
    // Lifting a block early, and a kick without one.
    assert_eq!(s.room.kick(s.now, "mallory", Block::Until(s.now.plus_ms(99_000))), 1);
    s.pump();
    assert_eq!(s.room.kick(s.now, "mallory", Block::Lift), 0);
    s.pump();
    let back = s.connect_as("sess-mal5", "mallory", "EU", None);
    assert_eq!(closed(&s, &back), None);
    assert!(s.disk.blocks.is_empty());
}

// ---- 5. limits per user ----------------------------------------------------

#[test]
fn one_user_holds_at_most_the_allowed_connections() {
    let mut s = sim();
    let limit = s.config.user_connections;
    let conns: Vec<String> =
        (0..limit).map(|i| s.connect_as(&format!("sess-tab{i:03}"), "ann", "EU", None)).collect();
    assert!(conns.iter().all(|c| closed(&s, c).is_none()));
    let extra = s.connect_as("sess-tab-extra", "ann", "EU", None);
    assert_eq!(closed(&s, &extra), Some(4429));
    // A reconnect of a session already held replaces it: allowed.
    let again = s.connect_as("sess-tab000", "ann", "EU", None);
    assert_eq!(closed(&s, &again), None);
    // Another user is not affected.
    let bob = s.connect_as("sess-bob", "bob", "EU", None);
    assert_eq!(closed(&s, &bob), None);
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert_eq!(stats["most_connections_of_a_user"], limit);
    assert_eq!(stats["limits"]["user_connections"], limit);
}

#[test]
fn more_sockets_do_not_give_a_user_more_writes() {
    let mut s = sim();
    let conns: Vec<String> =
        (0..10).map(|i| s.connect_as(&format!("sess-w{i:03}"), "mallory", "EU", None)).collect();
    let mut acked = 0;
    for round in 0..20 {
        for (c, conn) in conns.iter().enumerate() {
            s.publish(conn, &format!("m{round}-{c}"), "1");
            acked += of_type(&s.take(conn), "ack").len();
        }
    }
    // 200 writes at once: one connection's burst would allow 50 each.
    assert_eq!(acked as u64, s.config.user_burst, "the user's burst, over all sockets");
    assert_eq!(s.disk.log.len() as u64, s.config.user_burst);
}

// ---- 7. values nobody can read are refused --------------------------------

#[test]
fn values_nested_too_deep_are_refused_and_not_stored() {
    let mut s = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    let b = s.connect_as("sess-bbbb", "bob", "EU", None);
    s.take(&a);
    s.take(&b);
    let deep = "[".repeat(30_000) + &"]".repeat(30_000);
    s.publish(&a, "deep", &deep);
    s.send(&a, &format!(r#"{{"type":"set","id":"d2","key":"k","value":{deep}}}"#));
    s.send(&a, &format!(r#"{{"type":"presence","state":{{"x":{deep}}}}}"#));
    s.send(&a, &format!(r#"{{"type":"signal","topic":"t","data":{deep}}}"#));
    let f = s.take(&a);
    let codes: Vec<(&str, &str)> =
        f.iter().map(|e| (e["code"].as_str().unwrap(), e["id"].as_str().unwrap_or(""))).collect();
    assert_eq!(codes, [("invalid", "deep"), ("invalid", "d2"), ("invalid", ""), ("invalid", "")]);
    assert!(s.take(&b).is_empty(), "the other member received nothing");
    assert!(s.disk.log.is_empty() && s.disk.state.is_empty());
}

// ---- 6. rooms do not keep storage forever ---------------------------------

#[test]
fn an_empty_room_deletes_its_storage_after_the_retention() {
    let mut s = sim();
    s.config.retention_ms = 3_600_000;
    s.evict();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    s.publish(&a, "m1", "1");
    s.drop_conn(&a);
    let left = s.now;
    s.evict(); // an idle room is evicted long before its retention ends
    s.run_until(left.plus_ms(3_600_000 - 1));
    assert_eq!(s.disk.deleted, 0);
    s.run_until(left.plus_ms(3_600_000));
    assert_eq!(s.disk.deleted, 1, "deleted when the retention ended");
    assert!(s.disk.log.is_empty());
}

#[test]
fn a_visit_within_the_retention_keeps_the_room() {
    let mut s = sim();
    s.config.retention_ms = 3_600_000;
    s.config.presence_ttl_ms = 10_000_000; // the visitor stays without pinging
    s.evict();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    s.publish(&a, "m1", "1");
    s.drop_conn(&a);
    s.run_until(s.now.plus_ms(3_000_000));
    let b = s.connect_as("sess-bbbb", "bob", "EU", None);
    s.run_until(s.now.plus_ms(3_000_000));
    s.drop_conn(&b);
    s.run_until(s.now.plus_ms(3_000_000));
    assert_eq!(s.disk.deleted, 0, "the clock restarted when the room emptied again");
    assert_eq!(s.disk.log.len(), 1);
}

#[test]
fn the_operator_deletes_a_room() {
    let mut s = sim();
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    s.publish(&a, "m1", "1");
    assert_eq!(s.room.delete(s.now), 1);
    s.pump();
    assert_eq!(closed(&s, &a), Some(4404));
    assert_eq!((s.disk.deleted, s.disk.log.len()), (1, 0));
    // The next visit finds a new, empty room with a new epoch.
    s.evict();
    let b = s.connect_as("sess-bbbb", "bob", "EU", Some((1, "e-1")));
    let f = s.take(&b);
    assert_eq!((f[0]["seq"].clone(), f[0]["resumed"].clone()), (json!(0), json!(false)));
    assert_ne!(f[0]["epoch"], "e-1");
}
