//! A home rebuilt without its relays' sessions (an eviction, a hibernation at rest) asks each
//! link for them (`recall`): they come back on the same sockets, and what their relays say
//! before the answer waits for it, within [`crate::relay::PARKED_BYTES`].

use super::{of_type, room, seqs};
use crate::relay::sim::Topo;
use crate::room::{Block, RoomConfig, Time};

#[test]
fn the_home_hibernates_with_relays_attached_and_wakes_for_them() {
    let (mut t, all) = room(10, 2);
    assert!(t.evict_home(), "no timer of the home's is pending");
    // The home stores none of its relays' sessions: it knows them only when they answer.
    assert_eq!(t.home.room.members(), 0);
    t.settle();
    assert_eq!(t.recalled, 4, "each relay gave its sessions back once");
    assert_eq!(t.home.room.members(), 8, "the relays' sessions came back from the relays");
    for conn in all.iter().flatten() {
        assert!(t.clients[conn].open, "{conn} stayed connected");
        let frames = t.take(conn);
        assert!(of_type(&frames, "welcome").is_empty(), "{conn} was not welcomed again");
    }
    t.publish(&all[3][1], "m-1", r#"{"text":"after"}"#);
    t.settle();
    for conn in all.iter().flatten() {
        assert_eq!(seqs(&t.take(conn), "message"), [1], "{conn}");
    }
    // And they are the home's again: a write of a recalled member is acked.
    t.publish(&all[0][0], "m-2", r#"{"text":"mine"}"#);
    t.settle();
    assert_eq!(seqs(&t.take(&all[0][0]), "ack"), [2]);
}

#[test]
fn a_session_that_moved_while_the_home_recalled_keeps_its_newer_connection() {
    let (mut t, all) = room(10, 2);
    let mover = all[0][0].clone();
    assert!(t.evict_home());
    // She reconnects at another relay before her old relay's answer reaches the home.
    let moved = t.resume_in(&mover, "eu-0", "EU");
    t.settle();
    assert_eq!(t.home.room.members(), 8, "one member, not two");
    assert_eq!(t.clients[&mover].closed, Some(4001), "the recalled connection is superseded");
    assert!(t.clients[&moved].open);
    let presence = t.operator(|home| home.room.presence_json());
    assert_eq!(presence.matches("sess-OC-user0").count(), 1, "{presence}");
}

#[test]
fn a_home_evicted_again_before_its_relays_answered_loses_no_message_for_them() {
    let (mut t, all) = room(30, 2);
    let reader = all[1][0].clone();
    // A writer of the home's own (a direct socket): its writes go on while the relays'
    // sessions are unknown to the home.
    let direct = t.home.connect("sess-direct", "NA", None);
    t.settle();
    assert!(t.evict_home());
    t.operator(|home| home.publish(&direct, "d1", r#"{"n":1}"#));
    // Evicted again before the first recall's answer came (the link is 30 ms each way): the
    // second load counts from a later seq, but the reader has had nothing since the first.
    t.advance(10);
    assert!(t.evict_home(), "no timer of the home's is pending");
    t.operator(|home| home.publish(&direct, "d2", r#"{"n":2}"#));
    t.settle();
    assert_eq!(t.home.room.members(), 9);
    assert_eq!(t.recalled, 4, "only the second load's recall was answered to a home that took it");
    assert_eq!(seqs(&t.take(&reader), "message"), [1, 2], "caught up once each, in order");
    for conn in all.iter().flatten() {
        assert!(t.clients[conn].open, "{conn} stayed connected");
    }
}

#[test]
fn a_frame_of_a_session_the_home_has_not_recalled_yet_waits_for_its_relays_answer() {
    let (mut t, all) = room(10, 2);
    let writer = all[1][0].clone();
    let reader = all[2][0].clone();
    assert!(t.evict_home());
    // Her write crosses the home's recall on the wire (as when her write is what wakes a
    // hibernated home): the home does not know her yet, and keeps the frame for the answer.
    t.publish(&writer, "m-early", r#"{"text":"early"}"#);
    t.settle();
    assert_eq!(t.parked, 1);
    assert!(t.clients[&writer].open, "she is not closed to resume");
    assert_eq!(seqs(&t.take(&writer), "ack"), [1], "acked once the answer gave her back");
    assert_eq!(seqs(&t.take(&reader), "message"), [1]);
    assert_eq!(t.home.room.members(), 8);
    assert_eq!(t.home.disk.seq, 1);
}

#[test]
fn a_relay_that_says_more_than_the_bound_before_answering_has_its_writer_resume() {
    let (mut t, all) = room(10, 2);
    let writer = all[1][0].clone();
    assert!(t.evict_home());
    // More than the home keeps for one link's answer (`PARKED_BYTES`), before it: the writer
    // is closed to resume, and none of her frames is taken (her first ones either).
    let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(40_000));
    let n = crate::relay::PARKED_BYTES / 40_000 + 2;
    for i in 0..n {
        t.publish(&writer, &format!("m-{i}"), &big);
    }
    t.settle();
    assert_eq!(t.clients[&writer].closed, Some(1012));
    assert_eq!(t.home.disk.seq, 0, "nothing of hers stored");
    assert_eq!(t.home.room.members(), 7, "she is not brought back by her relay's answer");
    let again = t.resume(&writer, "eu-0");
    t.settle();
    t.publish(&again, "m-0", &big);
    t.settle();
    assert_eq!(seqs(&t.take(&again), "ack"), [1]);
    assert_eq!(t.home.room.members(), 8);
}

#[test]
fn a_home_holding_a_frame_for_its_relays_answer_is_not_evicted_before_it() {
    let (mut t, all) = room(10, 2);
    let writer = all[1][0].clone();
    assert!(t.evict_home());
    t.publish(&writer, "m-early", r#"{"text":"early"}"#);
    // Her frame is at the home (10 ms), her relay's answer not yet (20 ms): the home keeps a
    // timer, and the runtime does not evict it with a frame only its memory holds.
    t.advance(15);
    assert_eq!(t.parked, 1);
    assert!(!t.evict_home(), "evicted while holding her frame");
    t.settle();
    assert_eq!(seqs(&t.take(&writer), "ack"), [1]);
    assert!(t.evict_home(), "nothing held once the answer came");
}

/// Right after the home is evicted and rebuilt, before her relay has answered its recall,
/// Mallory fills her link's allowance for frames waiting on the recall (`PARKED_BYTES`); a victim
/// at the same relay then writes. The connection holding the most of the allowance makes way:
/// Mallory's frames are dropped and she is closed 1012 (she resumes and writes again), the
/// victim's write waits and is stored. Before (found by session 35's review), the victim was
/// the one closed: one member's frames cost her neighbours a resume, for free.
#[test]
fn a_member_who_fills_her_links_allowance_makes_way_for_a_neighbour() {
    let (mut t, all) = room(10, 2);
    let (attacker, victim, elsewhere) = (all[1][0].clone(), all[1][1].clone(), all[0][0].clone());
    assert!(t.evict_home());
    let big = |n: usize| format!(r#"{{"text":"{}"}}"#, "x".repeat(n));
    let n = crate::relay::PARKED_BYTES / 41_000;
    for i in 0..n {
        t.publish(&attacker, &format!("a-{i}"), &big(40_000));
    }
    t.publish(&victim, "v-1", &big(30_000));
    t.publish(&elsewhere, "e-1", r#"{"text":"hi"}"#);
    t.settle();
    assert_eq!(t.clients[&attacker].closed, Some(1012), "the biggest holder made way");
    assert!(t.clients[&victim].open, "the victim's write waited");
    assert_eq!(seqs(&t.take(&victim), "ack").len(), 1, "and was stored");
    assert!(t.clients[&elsewhere].open, "another relay's link has its own allowance");
    assert_eq!(seqs(&t.take(&elsewhere), "ack").len(), 1);
    let again = t.resume(&attacker, "eu-0");
    t.settle();
    for i in 0..n {
        t.publish(&again, &format!("a-{i}"), &big(40_000));
    }
    t.settle();
    assert_eq!(seqs(&t.take(&again), "ack").len(), n, "hers stored after her resume");
    assert_eq!(t.home.disk.seq, n as u64 + 2, "every write once");
}

#[test]
fn another_users_open_of_a_session_the_home_has_not_recalled_yet_waits_and_is_refused() {
    let (mut t, all) = room(10, 2);
    let victim = all[0][0].clone();
    assert!(t.evict_home());
    // Mallory opens the victim's session at another relay; her open wakes the home, which has
    // not heard the victim's relay yet (its answer is a round trip away).
    let mallory = t.connect("eu-0", "sess-OC-user0", "mallory", "EU", None);
    t.settle();
    assert_eq!(t.held, 1, "her open waited for every relay's answer");
    assert_eq!(t.clients[&mallory].closed, Some(4409), "the session is the victim's");
    assert!(t.take(&mallory).is_empty(), "she was never welcomed, nor told anything");
    assert!(t.clients[&victim].open, "the victim keeps her session and her socket");
    assert!(of_type(&t.take(&victim), "welcome").is_empty(), "and is not welcomed again");
    assert_eq!(t.home.room.members(), 8);
    let presence = t.operator(|home| home.room.presence_json());
    assert!(!presence.contains("mallory"), "{presence}");
    t.publish(&victim, "v-1", r#"{"text":"still mine"}"#);
    t.settle();
    assert_eq!(seqs(&t.take(&victim), "ack"), [1]);
}

#[test]
fn opens_while_the_home_recalls_count_against_the_users_cap_with_the_recalled_ones() {
    let config = RoomConfig { user_connections: 2, ..RoomConfig::default() };
    let mut t = Topo::new(config, 10);
    let held: Vec<String> =
        (0..2).map(|i| t.connect("oc-0", &format!("sess-m{i}"), "m", "OC", None)).collect();
    let other = t.connect("na-0", "sess-other", "other", "NA", None);
    t.settle();
    assert_eq!(t.home.room.members(), 3);
    assert!(t.evict_home());
    // Two more of hers at another relay while the home does not yet know the first two.
    let more: Vec<String> =
        (2..4).map(|i| t.connect("eu-0", &format!("sess-m{i}"), "m", "EU", None)).collect();
    t.settle();
    assert_eq!(t.held, 2);
    for conn in &more {
        assert_eq!(t.clients[conn].closed, Some(4429), "{conn}: past her cap of 2");
    }
    for conn in held.iter().chain([&other]) {
        assert!(t.clients[conn].open, "{conn} kept");
    }
    assert_eq!(t.home.room.members(), 3);
}

#[test]
fn a_session_of_a_user_blocked_before_its_relay_answered_is_closed_when_it_comes_back() {
    let (mut t, all) = room(10, 2);
    let blocked = all[2][0].clone();
    assert!(t.evict_home());
    // The operator blocks her in the turn that loads the home, before her relay's answer.
    let until = Time::from_ms(t.now.ms() + 60_000);
    assert_eq!(t.operator(|home| home.room.kick(home.now, "NA-user0", Block::Until(until))), 0);
    t.settle();
    assert_eq!(t.clients[&blocked].closed, Some(4403), "her recalled socket is closed");
    assert_eq!(t.home.room.members(), 7);
    for conn in all.iter().flatten().filter(|c| **c != blocked) {
        assert!(t.clients[conn].open, "{conn} kept");
    }
}

/// While the home recalls its relays' sessions (it was evicted), Mallory opens a new
/// connection and sends 26 writes of 40 KB behind it: her open and its frames wait for every
/// relay's answer, and fill the home's `HELD_BYTES` (1 MiB for all of them). A newcomer at
/// another relay opening then, with one 30 KB write, was the one closed to resume (first come):
/// now Mallory, holding the most, makes way; the newcomer is welcomed and her write stored,
/// and Mallory resumes and sends hers again.
#[test]
fn a_member_who_fills_the_homes_hold_during_a_recall_makes_way_for_a_newcomer() {
    let (mut t, _all) = room(10, 2);
    assert!(t.evict_home());
    let big = |n: usize| format!(r#"{{"text":"{}"}}"#, "x".repeat(n));
    let mallory = t.connect("eu-0", "sess-mallory", "mallory", "EU", None);
    let n = crate::relay::HELD_BYTES / 40_300;
    for i in 0..n {
        t.publish(&mallory, &format!("m-{i}"), &big(40_000));
    }
    let newcomer = t.connect("oc-0", "sess-newcomer", "newcomer", "OC", None);
    t.publish(&newcomer, "n-1", &big(30_000));
    t.settle();
    assert_eq!(t.clients[&mallory].closed, Some(1012), "the biggest holder made way");
    assert!(t.clients[&newcomer].open, "the newcomer stays");
    let got = t.take(&newcomer);
    assert_eq!(of_type(&got, "welcome").len(), 1, "welcomed: {got:?}");
    assert_eq!(seqs(&got, "ack").len(), 1, "and her write stored");
    let again = t.resume(&mallory, "eu-0");
    t.settle();
    for i in 0..n {
        t.publish(&again, &format!("m-{i}"), &big(40_000));
        t.advance(200); // her byte budget refills
    }
    t.settle();
    assert_eq!(seqs(&t.take(&again), "ack").len(), n, "hers stored after her resume");
    assert_eq!(t.home.disk.seq, n as u64 + 1, "every write once");
}
