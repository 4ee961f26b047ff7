//! A resume through a relay catches up from the relay's own tail of the log: the home names the
//! entries (one small operation), the relay sends them, and no frame of the catch-up crosses
//! the link. Where the tail lacks them (a relay that reset, a member who missed more than it
//! holds) the home sends them as before, and nothing is lost or doubled either way.

use serde_json::Value;

use super::{room, seqs, RELAYS};
use crate::relay::sim::Topo;
use crate::room::RoomConfig;

/// A counter of the home's `/stats`.
fn home_stat(t: &mut Topo, key: &str) -> u64 {
    let stats: Value = serde_json::from_str(&t.home.room.stats_json()).expect("json");
    stats[key].as_u64().unwrap_or_else(|| panic!("no {key} in {stats}"))
}

/// Every member of `conns` reads what it was sent (and echoes its marks).
fn read_all(t: &mut Topo, conns: &[String]) {
    for conn in conns {
        t.take(conn);
    }
    t.settle();
}

/// `per` members at each relay, who all read a first message; then the reader at `oc-0` is
/// cut off by `away` (its socket drops, or its relay resets). Returns the topology, everyone,
/// the reader and the writer (at `eu-0`).
fn one_away(per: usize, away: impl Fn(&mut Topo, &str)) -> (Topo, Vec<String>, String, String) {
    let (mut t, all) = room(20, per);
    let everyone: Vec<String> = all.iter().flatten().cloned().collect();
    let (reader, writer) = (all[0][1].clone(), all[1][0].clone());
    t.publish(&writer, "m-0", r#"{"n":0}"#);
    t.settle();
    read_all(&mut t, &everyone);
    away(&mut t, &reader);
    (t, everyone, reader, writer)
}

#[test]
fn a_resume_through_its_relay_catches_up_from_the_relays_tail_not_over_the_link() {
    let (mut t, everyone, reader, writer) = one_away(3, |t, reader| t.drop_client(reader));
    for i in 1..=20 {
        t.publish(&writer, &format!("m-{i}"), r#"{"n":1}"#);
    }
    t.settle();
    read_all(&mut t, &everyone);
    let frames_before = home_stat(&mut t, "catch_up_frames");

    let back = t.resume(&reader, "oc-0");
    t.settle();
    let got = t.take(&back);
    assert_eq!(got[0]["type"], "welcome");
    assert_eq!((got[0]["resumed"].as_bool(), got[0]["missed"].as_u64()), (Some(true), Some(20)));
    assert_eq!(seqs(&got, "message"), (2..=21).collect::<Vec<u64>>(), "gapless, once each");
    assert_eq!(home_stat(&mut t, "tail_replays"), 1);
    assert_eq!(home_stat(&mut t, "tail_frames"), 20);
    assert_eq!(home_stat(&mut t, "catch_up_frames"), frames_before, "the home sent none of it");
    let relay = t.relay("oc-0").stats().clone();
    assert_eq!((relay.tail_replays, relay.tail_frames, relay.tail_lost), (1, 20, 0));
}

#[test]
fn a_storm_of_resumes_through_relays_is_caught_up_by_the_relays() {
    let (mut t, all) = room(10, 25);
    let everyone: Vec<String> = all.iter().flatten().cloned().collect();
    // The writer stays; everyone else drops at once, and the writer goes on.
    let writer = all[1][0].clone();
    let dropped: Vec<String> = everyone.iter().filter(|c| **c != writer).cloned().collect();
    t.publish(&writer, "before", r#"{"n":0}"#);
    t.settle();
    read_all(&mut t, &everyone);
    for conn in &dropped {
        t.drop_client(conn);
    }
    t.settle();
    for i in 0..10 {
        t.publish(&writer, &format!("m-{i}"), r#"{"n":1}"#);
    }
    t.settle();
    t.take(&writer);
    let frames_before = home_stat(&mut t, "catch_up_frames");
    // The writer's relay heard every entry; the three others none of the ten.
    let tails: Vec<usize> = RELAYS.iter().map(|r| t.relay(r).tail_len()).collect();
    assert_eq!(tails, [1, 11, 1, 1]);
    // They come back over 500 ms, as a client's reconnect window spreads them.
    let mut back = Vec::new();
    for conn in &dropped {
        let relay = conn.split('.').next().expect("{relay}.c{n}").to_owned();
        back.push(t.resume(conn, &relay));
        t.advance(5);
    }
    t.settle();
    for conn in &back {
        let got = t.take(conn);
        assert_eq!(seqs(&got, "message"), (2..=11).collect::<Vec<u64>>(), "{conn}: {got:?}");
    }
    // Every catch-up came from a relay's tail; the three that lacked the ten entries were
    // sent them once each, not once per member (direct, the home sends 990 frames).
    assert_eq!(home_stat(&mut t, "tail_replays"), 99);
    assert_eq!(home_stat(&mut t, "catch_up_frames") - frames_before, 0);
    assert_eq!(home_stat(&mut t, "tail_fills"), 3);
    let served: u64 = RELAYS.iter().map(|r| t.relay(r).stats().tail_frames).sum();
    assert_eq!(served, 990);
}

#[test]
fn a_relay_that_reset_has_no_tail_and_the_home_sends_the_catch_up() {
    let (mut t, _, reader, writer) = one_away(2, |t, _| t.reset_relay("oc-0"));
    for i in 1..=5 {
        t.publish(&writer, &format!("m-{i}"), r#"{"n":1}"#);
    }
    t.settle();
    let before = home_stat(&mut t, "catch_up_frames");
    let back = t.resume(&reader, "oc-0");
    t.settle();
    assert_eq!(seqs(&t.take(&back), "message"), (2..=6).collect::<Vec<u64>>());
    assert_eq!(home_stat(&mut t, "tail_replays"), 0, "a new instance holds nothing");
    assert_eq!(home_stat(&mut t, "catch_up_frames") - before, 5);
}

#[test]
fn a_gap_while_a_resume_waits_for_the_homes_word_does_not_cost_it_its_catch_up() {
    // The home is 50 ms from each relay.
    let mut t = Topo::new(RoomConfig::default(), 50);
    let reader = t.connect("oc-0", "sess-rea1", "rea", "OC", None);
    let keeper = t.connect("oc-0", "sess-kee1", "kee", "OC", None);
    let writer = t.connect("eu-0", "sess-wri1", "wri", "EU", None);
    t.settle();
    for conn in [&reader, &keeper, &writer] {
        t.take(conn);
    }
    // The reader drops; the keeper reads 1..=3 (the tail learns them), then drops too.
    t.drop_client(&reader);
    for i in 1..=3 {
        t.publish(&writer, &format!("a-{i}"), r#"{"n":1}"#);
    }
    t.settle();
    t.take(&keeper);
    t.drop_client(&keeper);
    t.settle();
    // With nobody at oc-0, 4..=9 never reach it; then a newcomer does, and 10 reaches it
    // while the reader's resume is on its way: the tail (1..=3) is no longer the newest, and
    // starts again at 10 before the home's word for the reader comes.
    for i in 4..=9 {
        t.publish(&writer, &format!("b-{i}"), r#"{"n":1}"#);
    }
    t.settle();
    let newcomer = t.connect("oc-0", "sess-new1", "new", "OC", None);
    t.settle();
    t.take(&newcomer);
    t.publish(&writer, "c-10", r#"{"n":1}"#);
    let sequenced = t.now.plus_ms(60);
    t.run_until(sequenced);
    assert_eq!(t.home.disk.seq, 10, "10 is stored and on its way to oc-0");
    assert_eq!(t.relay("oc-0").tail_len(), 3, "1..=3, and 10 not yet");
    let before = home_stat(&mut t, "catch_up_frames");
    let back = t.resume(&reader, "oc-0");
    t.settle();
    // 10 reached the relay before the home's word for the reader: the tail did not start again
    // at 10 (the reader's claim waited on it); the home's fill of 4..=10 joined it, and the
    // whole catch-up came from there. (Before, the tail restarted and the reader got a 1012.)
    assert_eq!(seqs(&t.take(&back), "message"), (1..=10).collect::<Vec<u64>>());
    assert!(t.clients[&back].open);
    assert_eq!((t.tail_lost, t.relay("oc-0").stats().tail_lost), (0, 0));
    assert_eq!(home_stat(&mut t, "tail_replays"), 1);
    assert_eq!(home_stat(&mut t, "catch_up_frames"), before, "the home sent none of it");
}

/// Ann and Bob away from `oc-0` (Bob since seq 3, Ann since 5) while 20 entries are written at
/// `eu-0`; with `reset` the relay resets meanwhile and a keeper reconnects to it (its tail is
/// empty then, and of the right log). Both come back at the same moment.
fn two_resumes(reset: bool) -> (Topo, String, String) {
    let mut t = Topo::new(RoomConfig::default(), 20);
    let ann = t.connect("oc-0", "sess-ann1", "ann", "OC", None);
    let bob = t.connect("oc-0", "sess-bob1", "bob", "OC", None);
    let writer = t.connect("eu-0", "sess-wri1", "wri", "EU", None);
    t.settle();
    let write = |t: &mut Topo, from: u64, to: u64| {
        for i in from..=to {
            t.publish(&writer, &format!("m-{i}"), r#"{"n":1}"#);
        }
        t.settle();
        t.take(&writer);
    };
    write(&mut t, 1, 3);
    read_all(&mut t, &[ann.clone(), bob.clone()]);
    t.drop_client(&bob);
    write(&mut t, 4, 5);
    read_all(&mut t, std::slice::from_ref(&ann));
    t.drop_client(&ann);
    t.settle();
    write(&mut t, 6, 20);
    if reset {
        t.reset_relay("oc-0");
        let keeper = t.connect("oc-0", "sess-kee1", "kee", "OC", None);
        t.settle();
        t.take(&keeper);
        assert_eq!(t.relay("oc-0").tail_len(), 0);
    }
    let ann = t.resume(&ann, "oc-0");
    let bob = t.resume(&bob, "oc-0");
    t.settle();
    (t, ann, bob)
}

#[test]
fn two_resumes_from_different_points_are_both_caught_up_from_one_fill() {
    let (mut t, ann, bob) = two_resumes(false);
    assert_eq!(seqs(&t.take(&ann), "message"), (6..=20).collect::<Vec<u64>>());
    assert_eq!(seqs(&t.take(&bob), "message"), (4..=20).collect::<Vec<u64>>());
    // The tail held 1..=5; the home filled 6..=20 once, for Ann, and Bob's needed no more.
    assert_eq!(home_stat(&mut t, "tail_replays"), 2);
    assert_eq!(home_stat(&mut t, "tail_fills"), 1);
    assert_eq!(home_stat(&mut t, "catch_up_frames"), 0);
    assert_eq!(t.tail_lost, 0);
}

#[test]
fn a_resume_from_before_what_was_filled_into_an_empty_tail_is_the_homes() {
    let (mut t, ann, bob) = two_resumes(true);
    assert_eq!(seqs(&t.take(&ann), "message"), (6..=20).collect::<Vec<u64>>());
    assert_eq!(seqs(&t.take(&bob), "message"), (4..=20).collect::<Vec<u64>>());
    // The empty tail was filled from 6 for Ann: it cannot take 4 and 5 after that, so Bob's
    // catch-up is the home's, not a replay the tail would have to refuse (1012).
    assert_eq!(home_stat(&mut t, "tail_replays"), 1);
    assert_eq!(home_stat(&mut t, "catch_up_frames"), 17);
    assert_eq!(t.tail_lost, 0);
}

/// A member who reconnects again and again from the start pays her reply budget for every
/// catch-up, whoever sends it: once the budget is spent, her catch-up is held at the home (and
/// sent from there when the budget allows), not left to her relay's tail for free.
#[test]
fn a_reconnect_loop_through_a_relay_pays_the_users_reply_budget() {
    let config = RoomConfig {
        state_max_bytes: 1_000,
        reply_burst_bytes: 60_000,
        reply_bytes_per_sec: 1_000,
        ..RoomConfig::default()
    };
    let mut t = Topo::new(config, 10);
    let keeper = t.connect("oc-0", "sess-kee1", "kee", "OC", None);
    let writer = t.connect("eu-0", "sess-wri1", "wri", "EU", None);
    t.settle();
    let data = format!(r#"{{"pad":"{}"}}"#, "p".repeat(1_000));
    for i in 0..20 {
        t.publish(&writer, &format!("m-{i}"), &data);
    }
    t.settle();
    read_all(&mut t, &[keeper.clone(), writer.clone()]);
    let epoch = t.clients[&keeper].epoch.clone().expect("welcomed");
    for round in 0..6 {
        let conn = t.connect("oc-0", "sess-mal1", "mal", "OC", Some((0, &epoch)));
        t.settle(); // as long as a held catch-up waits
        let got = seqs(&t.take(&conn), "message");
        assert_eq!(got, (1..=20).collect::<Vec<u64>>(), "round {round}: all of it, once");
        t.drop_client(&conn);
        t.settle();
    }
    // Each catch-up is about 24 KB: the 60 KB burst pays for two from the tail; the other four
    // waited for the budget at the home (held) and came from there.
    assert_eq!(home_stat(&mut t, "tail_replays"), 2, "from the tail while the budget lasted");
    assert_eq!(home_stat(&mut t, "catch_up_frames"), 4 * 20);
    assert!(home_stat(&mut t, "held_replies") >= 4);
}
