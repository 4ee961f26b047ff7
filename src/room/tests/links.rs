//! Many sessions over one link (the seam the relays build on): a link's
//! sessions are members like any other, a frame for several of them crosses
//! the link once, and they live and die with the link.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::room::sim::{Link, Sim};
use crate::room::{Block, RoomConfig};

const LINK: &str = "relay-oc";

fn of_type(frames: &[Value], kind: &str) -> Vec<Value> {
    frames.iter().filter(|f| f["type"] == kind).cloned().collect()
}

fn seqs_of(frames: &[Value], kind: &str) -> Vec<u64> {
    of_type(frames, kind).iter().map(|f| f["seq"].as_u64().expect("a seq")).collect()
}

/// A member with a socket of its own, and ann and bob over one link, all welcomed and settled.
fn room() -> (Sim, String, String, String) {
    let mut s = Sim::new(RoomConfig::default());
    let direct = s.connect_as("sess-dora", "dora", "EU", None);
    let ann = s.connect_via(LINK, "sess-anne", "ann", "OC");
    let bob = s.connect_via(LINK, "sess-bobb", "bob", "OC");
    s.settle();
    for conn in [&direct, &ann, &bob] {
        let frames = s.take(conn);
        assert_eq!(frames[0]["type"], "welcome", "{frames:?}");
    }
    assert_eq!((s.room.members(), s.room.connections()), (3, 3));
    (s, direct, ann, bob)
}

#[test]
fn two_sessions_over_one_link_are_two_members_and_a_broadcast_crosses_it_once() {
    let (mut s, direct, ann, bob) = room();
    let members: Value = serde_json::from_str(&s.room.presence_json()).unwrap();
    assert_eq!(members["summary"]["regions"]["OC"]["members"], 2, "{members}");

    // A write from outside the link: one send carries it to both of its sessions.
    let before = s.links[LINK].sends;
    s.publish(&direct, "m-1", r#"{"text":"hi"}"#);
    s.settle();
    assert_eq!(s.links[LINK].sends - before, 1, "the message crossed the link once");
    assert_eq!(seqs_of(&s.take(&ann), "message"), [1]);
    assert_eq!(seqs_of(&s.take(&bob), "message"), [1]);
    assert_eq!(seqs_of(&s.take(&direct), "ack"), [1]);

    // A write from one of the link's sessions: its ack is its own (one
    // send), the message goes to everyone, ann too, and crosses once.
    let before = s.links[LINK].sends;
    s.publish(&ann, "m-2", r#"{"text":"hello"}"#);
    s.settle();
    assert_eq!(s.links[LINK].sends - before, 2, "ann's ack, and the message for ann and bob");
    let to_ann = s.take(&ann);
    assert_eq!((seqs_of(&to_ann, "ack"), seqs_of(&to_ann, "message")), (vec![2], vec![2]));
    assert_eq!(seqs_of(&s.take(&bob), "message"), [2]);
    assert_eq!(seqs_of(&s.take(&direct), "message"), [2]);
    assert_eq!(s.disk.seq, 2);
}

/// The sessions named in the `leaves` of the presence frames among `frames`.
fn leaves(frames: &[Value]) -> BTreeSet<String> {
    of_type(frames, "presence")
        .iter()
        .flat_map(|p| p["leaves"].as_array().cloned().unwrap_or_default())
        .map(|v| v.as_str().expect("a session").to_owned())
        .collect()
}

#[test]
fn a_link_that_drops_keeps_its_members_for_the_grace_and_a_returning_one_never_left() {
    let (mut s, direct, ann, bob) = room();
    let sent = s.links[LINK].sends;
    s.close_link(LINK);
    s.settle();
    // Nothing is sent over a gone link (the simulator refuses it), and its
    // sockets were not closed by the room: they went with the link.
    assert_eq!(s.links[LINK].sends, sent);
    assert_eq!((s.sockets[&ann].closed, s.sockets[&bob].closed), (None, None));
    // Their connections are gone; they are still members, away, and nobody is told a leave.
    assert_eq!((s.room.members(), s.room.connections(), s.room.away()), (3, 1, 2));
    assert!(leaves(&s.take(&direct)).is_empty());
    // Away members live in memory only: the room keeps a timer, so it is not hibernated.
    assert!(!s.hibernatable(), "awake while members are away");
    // Ann comes back through the relay's next link within the grace: the member she was.
    let grace = RoomConfig::default().link_grace_ms;
    s.run_until(s.now.plus_ms(grace - 1_000));
    let again = s.connect_via("relay-oc-2", "sess-anne", "ann", "OC");
    s.settle();
    let welcome = &s.take(&again)[0];
    assert_eq!(welcome["type"], "welcome");
    assert!(
        welcome["presence"]["members"]["sess-bobb"].is_object(),
        "bob is away, still listed: {welcome}"
    );
    assert_eq!((s.room.members(), s.room.away()), (3, 1));
    let to_direct = s.take(&direct);
    assert!(of_type(&to_direct, "presence").is_empty(), "a quiet return: {to_direct:?}");
    // Bob does not: he leaves when his grace ends, not before, and is told to everyone left.
    s.run_until(s.now.plus_ms(999));
    assert_eq!(s.room.members(), 3, "not before the grace ends");
    s.run_until(s.now.plus_ms(1_000));
    assert_eq!((s.room.members(), s.room.away()), (2, 0));
    let want = BTreeSet::from(["sess-bobb".to_owned()]);
    assert_eq!(leaves(&s.take(&direct)), want);
    assert_eq!(leaves(&s.take(&again)), want);
    s.settle();
    assert!(s.hibernatable(), "nobody away: the room may hibernate again");
}

#[test]
fn a_link_that_went_silent_keeps_its_members_only_for_the_rest_of_the_grace() {
    let (mut s, direct, ann, bob) = room();
    let grace = RoomConfig::default().link_grace_ms;
    let heard = s.now;
    // Its relay hung and the home closed it 12 s on (a lease ran out): the grace counts from
    // its last sign of life, so its members are away for what is left of it.
    s.run_until(heard.plus_ms(12_000));
    s.close_link_heard(LINK, heard);
    s.settle();
    assert_eq!((s.sockets[&ann].closed, s.sockets[&bob].closed), (None, None));
    assert_eq!((s.room.members(), s.room.connections(), s.room.away()), (3, 1, 2));
    s.run_until(heard.plus_ms(grace - 1));
    assert_eq!(s.room.members(), 3);
    s.run_until(heard.plus_ms(grace));
    assert_eq!((s.room.members(), s.room.connections(), s.room.away()), (1, 1, 0));
    s.settle(); // the second leave ends the presence window the first opened
    let want = BTreeSet::from(["sess-anne".to_owned(), "sess-bobb".to_owned()]);
    assert_eq!(leaves(&s.take(&direct)), want);
    // The relay comes back on a new link: its sessions rejoin, still theirs.
    let again = s.connect_via("relay-oc-2", "sess-anne", "ann", "OC");
    s.settle();
    assert_eq!(s.take(&again)[0]["type"], "welcome");
    assert_eq!(s.room.members(), 2);
    // A link closed a whole grace after it was last heard from: its members leave at once.
    let heard = s.now;
    s.run_until(heard.plus_ms(grace));
    s.close_link_heard("relay-oc-2", heard);
    assert_eq!((s.room.members(), s.room.away()), (1, 0));
    assert_eq!(leaves(&s.take(&direct)), BTreeSet::from(["sess-anne".to_owned()]));
}

#[test]
fn an_away_member_is_not_another_users_session_and_a_kick_ends_its_grace() {
    let (mut s, direct, _ann, _bob) = room();
    s.close_link(LINK);
    s.settle();
    s.take(&direct);
    // Mallory tries ann's session while ann is away: still ann's.
    let stolen = s.connect_via("relay-oc-2", "sess-anne", "mallory", "OC");
    s.settle();
    assert_eq!(s.sockets[&stolen].closed, Some(4409), "session_taken");
    assert_eq!((s.room.members(), s.room.away()), (3, 2));
    // The operator kicks bob while he is away: he leaves now, and cannot come back quietly.
    assert_eq!(s.room.kick(s.now, "bob", Block::Keep), 0, "no connection to close");
    s.pump();
    s.settle();
    assert_eq!(leaves(&s.take(&direct)), BTreeSet::from(["sess-bobb".to_owned()]));
    assert_eq!((s.room.members(), s.room.away()), (2, 1));
    // When he comes back he is a join, told to the others: he had left.
    let back = s.connect_via("relay-oc-2", "sess-bobb", "bob", "OC");
    s.settle();
    assert_eq!(s.take(&back)[0]["type"], "welcome");
    let joins: Vec<Value> = of_type(&s.take(&direct), "presence");
    assert!(joins.iter().any(|p| p["joins"]["sess-bobb"].is_object()), "{joins:?}");
}

#[test]
fn an_away_member_is_not_counted_in_her_users_connections() {
    let config = RoomConfig { user_connections: 1, ..RoomConfig::default() };
    let mut s = Sim::new(config);
    let dora = s.connect_as("sess-dora", "dora", "EU", None);
    let _ann = s.connect_via(LINK, "sess-anne", "ann", "OC");
    s.settle();
    s.close_link(LINK);
    s.settle();
    assert_eq!(s.room.away(), 1);
    // Ann, at her cap of one connection while her session is away, opens another tab: her
    // away session holds no connection, so it is admitted.
    let tab = s.connect_via("relay-oc-2", "sess-ann2", "ann", "OC");
    s.settle();
    assert_eq!(s.take(&tab)[0]["type"], "welcome");
    // Her away session coming back now would be her second connection: the cap holds.
    let back = s.connect_via("relay-oc-2", "sess-anne", "ann", "OC");
    s.settle();
    assert_eq!(s.sockets[&back].closed, Some(4429));
    assert_eq!((s.room.members(), s.room.away()), (3, 1));
    assert!(s.sockets[&dora].open);
}

#[test]
fn a_drain_of_away_members_starts_the_retention() {
    let (mut s, direct, _ann, _bob) = room();
    assert_eq!(s.room.kick(s.now, "dora", Block::Keep), 1);
    s.pump();
    s.settle();
    assert_eq!(s.sockets[&direct].closed, Some(4403));
    s.close_link(LINK);
    s.settle();
    assert_eq!((s.room.connections(), s.room.away()), (0, 2));
    assert_eq!(s.disk.idle_since, None, "not empty while they are away");
    assert_eq!(s.room.drain(s.now), 0);
    s.pump();
    assert_eq!((s.room.members(), s.room.away()), (0, 0));
    assert_eq!(s.disk.idle_since, Some(s.now), "empty once drained");
}

#[test]
fn a_links_sessions_live_as_long_as_the_link_not_by_their_own_heartbeats() {
    let (mut s, direct, ann, bob) = room();
    // Nobody pings: the room's own socket goes silent and is swept (4008);
    // the link's far end watches its clients, so its sessions stay.
    s.run_until(s.now.plus_ms(3 * RoomConfig::default().presence_ttl_ms));
    assert_eq!(s.sockets[&direct].closed, Some(4008));
    assert!(s.sockets[&ann].open && s.sockets[&bob].open);
    assert_eq!(s.room.members(), 2);
    // While its sessions are all the room has, no sweep keeps the room awake.
    s.settle();
    assert!(s.hibernatable());
}

#[test]
fn a_links_sessions_come_back_after_an_eviction_and_still_go_with_it() {
    let (mut s, direct, ann, _bob) = room();
    assert_eq!(s.sockets[&ann].peer.as_ref().and_then(|p| p.link.as_deref()), Some(LINK));
    s.evict();
    assert_eq!((s.room.members(), s.room.connections()), (3, 3));
    s.publish(&direct, "m-1", r#"{"text":"after"}"#);
    s.settle();
    assert_eq!(seqs_of(&s.take(&ann), "message"), [1]);
    s.close_link(LINK);
    assert_eq!((s.room.members(), s.room.connections()), (3, 1), "away for the grace");
    s.run_until(s.now.plus_ms(RoomConfig::default().link_grace_ms));
    assert_eq!((s.room.members(), s.room.connections()), (1, 1));
}

#[test]
fn an_operator_kick_reaches_one_session_over_the_link() {
    let (mut s, direct, ann, bob) = room();
    let before = s.links[LINK].sends;
    assert_eq!(s.room.kick(s.now, "ann", Block::Keep), 1);
    s.pump();
    s.settle();
    assert_eq!(s.sockets[&ann].closed, Some(4403), "closed over the link");
    assert!(s.sockets[&bob].open && s.sockets[&direct].open);
    // The close, and ann's leave for bob: two sends, whatever else is due.
    assert!(s.links[LINK].sends - before >= 2, "{}", s.links[LINK].sends - before);
    assert_eq!(s.room.members(), 2);
}

/// Ann over a link whose relay speaks link version 1 (it names none), Bob over one of version
/// 2, neither echoing marks, while Dora publishes 100 messages of 60 KB: the room keeps Ann's
/// window, as before versions (at most a window handed over, then 4013 past the backlog bound),
/// and hands Bob's relay everything at once with no mark (his relay keeps his window).
#[test]
fn a_relay_of_link_version_1_has_its_sessions_windows_kept_by_the_room() {
    // One writer at 600 KB a second: past a user's byte budget, which is not what this tests.
    let config = RoomConfig {
        user_bytes_per_sec: 1 << 30,
        user_bytes_burst: 1 << 30,
        ..RoomConfig::default()
    };
    let window = config.send_window;
    let mut s = Sim::new(config);
    s.links.insert("relay-v1".into(), Link { open: true, v1: true, ..Default::default() });
    let ann = s.connect_via("relay-v1", "sess-anne", "ann", "OC");
    let bob = s.connect_via(LINK, "sess-bobb", "bob", "OC");
    let dora = s.connect_as("sess-dora", "dora", "EU", None);
    s.settle();
    for conn in [&ann, &bob, &dora] {
        assert_eq!(s.take(conn)[0]["type"], "welcome");
    }
    s.sockets.get_mut(&ann).expect("ann").silent = true;
    s.sockets.get_mut(&bob).expect("bob").silent = true;
    let (ann_bytes, bob_bytes) = (s.sockets[&ann].bytes, s.sockets[&bob].bytes);
    for i in 0..100 {
        let data = format!(r#"{{"i":{i},"pad":"{}"}}"#, "x".repeat(60_000));
        s.publish(&dora, &format!("m-{i}"), &data);
        s.advance(100);
        s.take(&dora);
    }
    s.settle();
    let marks =
        |s: &Sim, conn: &str| s.sockets[conn].inbox.iter().filter(|f| f["type"] == "mark").count();
    assert!(marks(&s, &ann) >= 1, "the room marks a version 1 relay's session");
    assert_eq!(marks(&s, &bob), 0, "and not a version 2 relay's");
    let ann_sent = s.sockets[&ann].bytes - ann_bytes;
    assert!(ann_sent <= window + 70_000, "{ann_sent} bytes for Ann without an echo");
    assert_eq!(s.sockets[&ann].closed, Some(4013));
    let bob_got = seqs_of(&s.take(&bob), "message");
    assert_eq!(bob_got, (1..=100).collect::<Vec<u64>>());
    assert!(s.sockets[&bob].bytes - bob_bytes > 6_000_000);
    assert_eq!(s.sockets[&bob].closed, None);
}
