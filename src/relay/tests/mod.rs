//! A home and its relays in the simulated topology: the room's guarantees hold
//! across objects, the home sends once per relay, signals stay local, and
//! resets, dropped links and stale instances lose and double nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::sim::Topo;
use super::{Input, Output, Relay};
use crate::room::{Block, RoomConfig, Time};

mod floods;
mod flow;
mod fuzz;
mod keep;
mod mirror;
mod recall;
mod signals;
mod storm;
mod tail;
mod turns;

const RELAYS: [&str; 4] = ["oc-0", "eu-0", "na-0", "as-0"];
const REGIONS: [&str; 4] = ["OC", "EU", "NA", "AS"];

fn of_type(frames: &[Value], kind: &str) -> Vec<Value> {
    frames.iter().filter(|f| f["type"] == kind).cloned().collect()
}

fn seqs(frames: &[Value], kind: &str) -> Vec<u64> {
    of_type(frames, kind).iter().map(|f| f["seq"].as_u64().expect("a seq")).collect()
}

/// `per` members at each of the four relays, welcomed and settled; their
/// connections by relay.
fn room(delay_ms: u64, per: usize) -> (Topo, Vec<Vec<String>>) {
    let mut t = Topo::new(RoomConfig::default(), delay_ms);
    let mut all = Vec::new();
    for (r, region) in RELAYS.iter().zip(REGIONS) {
        let mut here = Vec::new();
        for i in 0..per {
            let user = format!("{region}-user{i}");
            here.push(t.connect(r, &format!("sess-{user}"), &user, region, None));
        }
        all.push(here);
    }
    t.settle();
    for conn in all.iter().flatten() {
        let frames = t.take(conn);
        assert_eq!(
            frames.first().map(|f| f["type"].clone()),
            Some("welcome".into()),
            "{conn}: {frames:?}"
        );
    }
    t.settle();
    (t, all)
}

#[test]
fn the_home_sends_a_durable_message_once_per_relay_not_once_per_member() {
    let (mut t, all) = room(20, 25);
    assert_eq!(t.home.room.members(), 100);
    let writer = all[0][0].clone();
    let mut per_message = Vec::new();
    for i in 0..10 {
        let before = t.home_link_messages;
        t.publish(&writer, &format!("m-{i}"), r#"{"text":"hi"}"#);
        t.settle();
        per_message.push(t.home_link_messages - before);
        for conn in all.iter().flatten() {
            t.take(conn); // members read, and echo their marks
        }
        t.settle();
    }
    // Four relays have members: four messages, the writer's ack riding
    // with the message to its own relay (at most one more).
    assert!(
        per_message.iter().all(|n| (4..=5).contains(n)),
        "home link messages per message: {per_message:?}"
    );
    assert_eq!(t.home.disk.seq, 10);
}

#[test]
fn every_member_of_every_relay_gets_every_message_once_and_in_order() {
    let (mut t, all) = room(30, 5);
    let writers = [all[0][0].clone(), all[1][1].clone(), all[2][2].clone()];
    for round in 0..30 {
        for (w, conn) in writers.iter().enumerate() {
            t.publish(conn, &format!("w{w}-{round}"), r#"{"n":1}"#);
        }
        t.advance(7);
        if round % 5 == 0 {
            for conn in all.iter().flatten() {
                t.take(conn);
            }
        }
    }
    t.settle();
    let mut got: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for _ in 0..20 {
        for conn in all.iter().flatten() {
            got.entry(conn.clone()).or_default().extend(seqs(&t.take(conn), "message"));
        }
        t.settle();
    }
    assert_eq!(t.home.disk.seq, 90);
    let want: Vec<u64> = (1..=90).collect();
    // Messages read before the count (at the takes in the loop) are not
    // in `got`: every member's list is a gapless tail of 1..=90.
    for (conn, seqs) in &got {
        let from = seqs.first().copied().unwrap_or(91);
        assert_eq!(seqs[..], want[(from - 1) as usize..], "{conn}");
    }
    let ids: BTreeSet<&str> = t.home.disk.log.values().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), 90, "each write stored once");
}

/// Ann and Bob at `oc-0`, Cat at `eu-0`, welcomed and settled, over links of `delay_ms`.
fn ann_bob_and_cat(delay_ms: u64) -> (Topo, String, String, String) {
    ann_bob_and_cat_with(RoomConfig::default(), delay_ms)
}

fn ann_bob_and_cat_with(config: RoomConfig, delay_ms: u64) -> (Topo, String, String, String) {
    let mut t = Topo::new(config, delay_ms);
    let ann = t.connect("oc-0", "sess-ann1", "ann", "OC", None);
    let bob = t.connect("oc-0", "sess-bob1", "bob", "OC", None);
    let cat = t.connect("eu-0", "sess-cat1", "cat", "EU", None);
    t.settle();
    for c in [&ann, &bob, &cat] {
        t.take(c);
    }
    t.settle();
    (t, ann, bob, cat)
}

#[test]
fn a_signal_between_members_of_one_relay_never_waits_for_the_home() {
    let (mut t, ann, bob, cat) = ann_bob_and_cat(80);
    let sent = t.now;
    t.signal(&ann, r#"{"x":1}"#);
    // At once, with nothing crossing the link yet.
    let to_bob = of_type(&t.clients[&bob].inbox, "signal");
    assert_eq!(to_bob.len(), 1, "bob has ann's signal at once");
    assert_eq!(to_bob[0]["session"], "sess-ann1");
    assert!(of_type(&t.clients[&cat].inbox, "signal").is_empty());
    // Cat, at the other relay, has it after a trip to the home and back.
    t.run_until(sent.plus_ms(159));
    assert!(of_type(&t.clients[&cat].inbox, "signal").is_empty(), "not before two crossings");
    t.settle();
    assert_eq!(of_type(&t.take(&cat), "signal").len(), 1);
    // Nobody gets it twice, the sender not at all.
    assert_eq!(of_type(&t.take(&bob), "signal").len(), 1, "the home did not send it back to oc-0");
    assert!(of_type(&t.take(&ann), "signal").is_empty());
    assert_eq!(t.relay("oc-0").stats().local_signals, 1);
}

#[test]
fn signals_from_one_sender_arrive_in_the_order_sent_at_both_relays() {
    let (mut t, ann, bob, cat) = ann_bob_and_cat(25);
    for i in 0..15 {
        t.signal(&ann, &format!(r#"{{"i":{i}}}"#));
        t.advance(50);
    }
    t.settle();
    for who in [&bob, &cat] {
        let is: Vec<u64> = of_type(&t.take(who), "signal")
            .iter()
            .map(|s| s["data"]["i"].as_u64().unwrap())
            .collect();
        assert!(is.windows(2).all(|w| w[0] < w[1]), "{who}: {is:?}");
        assert_eq!(is.last(), Some(&14), "{who}: the latest arrives");
    }
}

#[test]
fn presence_counts_every_relays_members_once_per_region() {
    let (mut t, all) = room(10, 3);
    let members: Value = serde_json::from_str(&t.home.room.presence_json()).unwrap();
    for region in REGIONS {
        assert_eq!(members["summary"]["regions"][region]["members"], 3, "{members}");
    }
    // A member moves from Oceania to Europe: the newest socket wins, the old
    // one is closed as superseded, and observers see no one leave.
    let mover = all[0][0].clone();
    let moved = t.resume_in(&mover, "eu-0", "EU");
    t.settle();
    assert_eq!(t.clients[&mover].closed, Some(4001));
    let welcome = &t.take(&moved)[0];
    assert_eq!(welcome["type"], "welcome");
    assert_eq!(welcome["relay"], "eu-0", "the welcome names the relay: {welcome}");
    t.settle();
    let members: Value = serde_json::from_str(&t.home.room.presence_json()).unwrap();
    assert_eq!(members["summary"]["regions"]["OC"]["members"], 2, "{members}");
    assert_eq!(members["summary"]["regions"]["EU"]["members"], 4, "{members}");
    assert_eq!(t.home.room.members(), 12);
    let observer = all[2][0].clone();
    let leaves: Vec<Value> = of_type(&t.take(&observer), "presence")
        .iter()
        .flat_map(|p| p["leaves"].as_array().cloned().unwrap_or_default())
        .collect();
    assert!(leaves.is_empty(), "a move is not a leave: {leaves:?}");
}

/// Acked ids and message seqs a client saw, across its reconnects.
#[derive(Default)]
struct Seen {
    acked: BTreeSet<String>,
    seqs: Vec<u64>,
}

fn read(t: &mut Topo, conn: &str, seen: &mut Seen) {
    for f in t.take(conn) {
        match f["type"].as_str() {
            Some("ack") => {
                seen.acked.insert(f["id"].as_str().expect("an id").to_owned());
            }
            Some("message") => seen.seqs.push(f["seq"].as_u64().expect("a seq")),
            _ => {}
        }
    }
}

/// A writer at `oc-0` and a reader at `oc-0` keep going while `fault` hits
/// relay `oc-0` mid-burst; both resume. Nothing acked is lost, nothing is
/// stored or delivered twice, and the reader's seqs are gapless.
fn burst_through(fault: impl Fn(&mut Topo)) {
    let mut t = Topo::new(RoomConfig::default(), 15);
    let mut writer = t.connect("oc-0", "sess-wri1", "wri", "OC", None);
    let mut reader = t.connect("oc-0", "sess-rea1", "rea", "OC", None);
    let mut other = t.connect("eu-0", "sess-oth1", "oth", "EU", None);
    t.settle();
    let (mut w, mut r, mut o) = (Seen::default(), Seen::default(), Seen::default());
    let mut sent: Vec<String> = Vec::new();
    for i in 0..60 {
        if i == 25 {
            fault(&mut t);
        }
        if !t.clients[&writer].open {
            t.settle();
            read(&mut t, &writer, &mut w);
            writer = t.resume(&writer, "oc-0");
            t.settle();
            read(&mut t, &writer, &mut w);
            // Our client sends again what was not acked, with the same ids.
            for id in sent.iter().filter(|id| !w.acked.contains(*id)).cloned().collect::<Vec<_>>() {
                t.publish(&writer, &id, r#"{"again":true}"#);
            }
        }
        if !t.clients[&reader].open {
            t.settle();
            read(&mut t, &reader, &mut r);
            reader = t.resume(&reader, "oc-0");
        }
        if !t.clients[&other].open {
            t.settle();
            read(&mut t, &other, &mut o);
            other = t.resume(&other, "eu-0");
        }
        let id = format!("w-{i}");
        t.publish(&writer, &id, r#"{"n":1}"#);
        sent.push(id);
        t.advance(5);
        read(&mut t, &writer, &mut w);
        read(&mut t, &reader, &mut r);
        read(&mut t, &other, &mut o);
    }
    for _ in 0..10 {
        t.settle();
        read(&mut t, &writer, &mut w);
        read(&mut t, &reader, &mut r);
        read(&mut t, &other, &mut o);
    }
    let stored: Vec<&str> = t.home.disk.log.values().map(|e| e.id.as_str()).collect();
    let unique: BTreeSet<&str> = stored.iter().copied().collect();
    assert_eq!(stored.len(), unique.len(), "a write stored twice: {stored:?}");
    assert_eq!(unique.len(), 60, "every write stored");
    assert!(w.acked.iter().all(|id| unique.contains(id.as_str())), "an acked write was lost");
    assert_eq!(w.acked.len(), 60, "every write acked in the end");
    let all: Vec<u64> = (1..=t.home.disk.seq).collect();
    for (who, seen) in [("reader", &r), ("other", &o), ("writer", &w)] {
        assert_eq!(seen.seqs, all, "{who}: gapless, once each, across the reconnect");
    }
}

#[test]
fn a_relay_reset_mid_burst_loses_nothing_and_doubles_nothing() {
    burst_through(|t| t.reset_relay("oc-0"));
}

#[test]
fn a_dropped_link_mid_burst_loses_nothing_and_doubles_nothing() {
    burst_through(|t| t.drop_link("oc-0"));
}

#[test]
fn a_home_eviction_mid_burst_loses_nothing_and_the_links_stay() {
    burst_through(|t| {
        // The runtime hibernates an object with no timer pending: the end
        // of the turn under way runs first.
        t.settle();
        assert!(t.evict_home(), "the home could hibernate");
        assert!(t.home.links.values().all(|l| l.open));
    });
}

#[test]
fn a_home_reset_mid_burst_loses_nothing_and_doubles_nothing() {
    burst_through(|t| t.reset_home());
}

#[test]
fn a_stale_relay_instance_is_refused_and_its_clients_move_to_the_current_one() {
    let mut t = Topo::new(RoomConfig::default(), 10);
    let watcher = t.connect("eu-0", "sess-wat1", "wat", "EU", None);
    t.settle();
    t.take(&watcher);
    // Two instances of oc-0 start at once, each with a client; the older
    // one's first message is slow and reaches the home second.
    let ann = t.connect("oc-0", "sess-ann1", "ann", "OC", None);
    let slow = t.clients[&ann].instance.clone();
    t.extra_delay.insert(slow, 50);
    t.split_relay("oc-0");
    let bob = t.connect("oc-0", "sess-bob1", "bob", "OC", None);
    t.settle();
    // The home listens to the newer instance; the older one is refused,
    // and closes its client (1012) instead of speaking for it.
    assert_eq!(t.take(&bob)[0]["type"], "welcome");
    assert_eq!(t.stale_refused, 1);
    assert!(t.take(&ann).is_empty(), "ann was never welcomed by a stale instance");
    assert_eq!(t.clients[&ann].closed, Some(1012), "ann is told to reconnect");
    assert_eq!(t.home.room.members(), 2, "bob and the watcher");
    // She reconnects, reaching the current instance, and writes.
    let ann = t.resume(&ann, "oc-0");
    t.settle();
    assert_eq!(t.take(&ann)[0]["type"], "welcome");
    t.publish(&ann, "m-1", r#"{"text":"now"}"#);
    t.settle();
    assert_eq!(seqs(&t.take(&ann), "ack"), [1]);
    assert_eq!(seqs(&t.take(&watcher), "message"), [1]);
    assert_eq!(t.home.room.members(), 3);
}

#[test]
fn an_instance_replaced_under_its_clients_loses_no_acked_write() {
    let mut t = Topo::new(RoomConfig::default(), 10);
    let old = t.connect("oc-0", "sess-ann1", "ann", "OC", None);
    let watcher = t.connect("eu-0", "sess-wat1", "wat", "EU", None);
    t.settle();
    t.take(&old);
    t.take(&watcher);
    // A second instance starts and its first client is on its way to the
    // home; ann's write, to the old instance, is a moment behind it.
    t.split_relay("oc-0");
    let new = t.connect("oc-0", "sess-bob1", "bob", "OC", None);
    t.advance(5);
    t.publish(&old, "m-stale", r#"{"text":"from the past"}"#);
    t.settle();
    // The home listens to the new instance from its first message and
    // closes the old one's link: its sessions are gone, the write that was
    // on its way over it with them (never acked), and the old instance,
    // which cannot take the relay's storage back, resets.
    assert_eq!(t.take(&new)[0]["type"], "welcome");
    assert_eq!(t.home.disk.seq, 0, "nothing stored from a replaced instance");
    assert!(seqs(&t.take(&old), "ack").is_empty());
    assert_eq!(t.clients[&old].closed, Some(1006));
    assert_eq!(t.home.room.members(), 3, "bob, the watcher, and ann, away for the grace");
    assert_eq!(t.home.room.away(), 1);
    // She resumes at the current instance and sends again: stored once.
    let ann = t.resume(&old, "oc-0");
    t.settle();
    t.publish(&ann, "m-stale", r#"{"text":"from the past"}"#);
    t.settle();
    assert_eq!(seqs(&t.take(&ann), "ack"), [1]);
    let seen = t.take(&watcher);
    assert_eq!(seqs(&seen, "message"), [1]);
    assert!(leaves_and_joins(&seen).0.is_empty(), "ann never left: {seen:?}");
    assert_eq!(t.home.room.members(), 3);
}

/// The leaves told in the `presence` frames among `frames`, and the sessions they listed as
/// joins.
fn leaves_and_joins(frames: &[Value]) -> (Vec<String>, Vec<String>) {
    let presence = of_type(frames, "presence");
    let names = |key: &str| -> Vec<String> {
        presence
            .iter()
            .filter(|p| p["reset"] != true)
            .flat_map(|p| match &p[key] {
                Value::Array(l) => l.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect(),
                Value::Object(m) => m.keys().cloned().collect::<Vec<_>>(),
                _ => Vec::new(),
            })
            .collect()
    };
    (names("leaves"), names("joins"))
}

/// A relay dies (a reset): its link closes and its members are away, not gone. The others
/// hear no leave, and a member who resumes through its next instance within the grace is the
/// member she was (no join told either), caught up without a gap. One who does not come back
/// leaves when the grace ends (`link_grace_ms` after the home heard the link close), not
/// before.
#[test]
fn a_dead_relays_members_are_away_for_the_grace_and_come_back_without_a_leave() {
    let (mut t, all) = room(15, 2);
    let (ann, bob) = (all[0][0].clone(), all[0][1].clone());
    let watchers: Vec<String> = all[1..].iter().flatten().cloned().collect();
    let died = t.now;
    t.reset_relay("oc-0");
    assert_eq!(t.clients[&ann].closed, Some(1006));
    assert_eq!((t.home.room.members(), t.home.room.away()), (8, 2));
    // A write while they are away: she gets it when she is back.
    t.publish(&watchers[0], "m-1", r#"{"n":1}"#);
    t.settle();
    let ann2 = t.resume(&ann, "oc-0");
    t.settle();
    assert_eq!((t.home.room.members(), t.home.room.away()), (8, 1));
    let to_ann = t.take(&ann2);
    assert_eq!(to_ann[0]["resumed"], true, "{to_ann:?}");
    assert_eq!(seqs(&to_ann, "message"), [1], "caught up, once");
    for w in &watchers {
        assert_eq!(leaves_and_joins(&t.take(w)), (vec![], vec![]), "{w}: nothing told yet");
    }
    // Bob does not come back.
    let grace = RoomConfig::default().link_grace_ms;
    t.run_until(died.plus_ms(grace - 1));
    assert_eq!((t.home.room.members(), t.home.room.away()), (8, 1), "not before the grace ends");
    t.run_until(died.plus_ms(grace));
    assert_eq!((t.home.room.members(), t.home.room.away()), (7, 0));
    t.settle();
    let gone = t.clients[&bob].session.clone();
    for w in watchers.iter().chain([&ann2]) {
        assert_eq!(leaves_and_joins(&t.take(w)), (vec![gone.clone()], vec![]), "{w}");
    }
}

/// A dropped link (both ends alive): the relay closes its clients (1012) and they come back
/// through its next instance within the grace, so its members never leave; a member moving
/// to another region while away is told as a join (her region changed), never a leave.
#[test]
fn a_dropped_links_members_come_back_without_a_leave_even_from_another_region() {
    let (mut t, all) = room(15, 2);
    let (ann, bob) = (all[0][0].clone(), all[0][1].clone());
    let watcher = all[1][0].clone();
    t.drop_link("oc-0");
    t.settle();
    assert_eq!(t.clients[&ann].closed, Some(1012));
    let ann2 = t.resume(&ann, "oc-0");
    let bob2 = t.resume_in(&bob, "na-0", "NA");
    t.settle();
    assert_eq!((t.home.room.members(), t.home.room.away()), (8, 0));
    assert!(t.clients[&ann2].open && t.clients[&bob2].open);
    let bob_session = t.clients[&bob].session.clone();
    assert_eq!(leaves_and_joins(&t.take(&watcher)), (vec![], vec![bob_session]));
    let presence = t.operator(|home| home.room.presence_json());
    let p: Value = serde_json::from_str(&presence).expect("json");
    assert_eq!(p["summary"]["regions"]["NA"]["members"], 3, "{p}");
    assert_eq!(p["summary"]["regions"]["OC"]["members"], 1, "{p}");
}

/// A retention shorter than the room's life: the home is evicted and rebuilt with no socket of
/// its own (its relays give their sessions back after its load), and later a relay dies. The
/// room is not empty while its members are away: its log outlives the grace.
#[test]
fn a_relayed_room_is_not_deleted_while_its_members_are_away() {
    let config = RoomConfig { retention_ms: 5_000, ..RoomConfig::default() };
    let mut t = Topo::new(config, 10);
    let ann = t.connect("oc-0", "sess-ann1", "ann", "OC", None);
    let bob = t.connect("oc-0", "sess-bob1", "bob", "OC", None);
    t.settle();
    t.publish(&ann, "m-1", r#"{"text":"kept"}"#);
    t.settle();
    t.take(&ann);
    t.take(&bob);
    assert!(t.evict_home());
    t.settle();
    assert_eq!(t.home.room.members(), 2, "given back by their relay");
    t.advance(6_000);
    t.reset_relay("oc-0");
    assert_eq!(t.home.room.away(), 2);
    t.advance(5_000);
    assert_eq!(t.home.disk.deleted, 0, "deleted while its members were away");
    assert_eq!(t.home.disk.seq, 1);
    // Ann is back in the grace, and the room's log is as it was.
    let again = t.resume(&ann, "oc-0");
    t.settle();
    let welcome = t.take(&again);
    assert_eq!(
        (welcome[0]["type"].as_str(), welcome[0]["seq"].as_u64()),
        (Some("welcome"), Some(1))
    );
    assert_eq!(t.home.disk.deleted, 0);
}

#[test]
fn an_operator_kick_reaches_the_one_member_at_its_relay() {
    let (mut t, all) = room(10, 2);
    let victim = all[1][0].clone();
    let user = t.clients[&victim].user.clone();
    assert_eq!(t.operator(|home| home.room.kick(home.now, &user, Block::Keep)), 1);
    t.settle();
    assert_eq!(t.clients[&victim].closed, Some(4403));
    let open = all.iter().flatten().filter(|c| t.clients[*c].open).count();
    assert_eq!(open, 7);
    assert_eq!(t.home.room.members(), 7);
}

#[test]
fn a_relay_closes_its_silent_clients_and_the_home_hears_once() {
    let (mut t, all) = room(10, 2);
    let ttl = RoomConfig::default().presence_ttl_ms;
    let quiet = all[2][0].clone();
    // Everyone else pings; the quiet one sends nothing for a TTL. The
    // relays answer the pings: none crosses a link.
    let up = t.up_messages;
    for _ in 0..(ttl / 10_000 + 1) {
        for conn in all.iter().flatten().filter(|c| **c != quiet) {
            t.send(conn, r#"{"type":"ping"}"#);
            assert_eq!(of_type(&t.clients[conn].inbox, "pong").len(), 1, "answered at once");
            t.take(conn);
        }
        t.advance(10_000);
    }
    assert_eq!(t.up_messages - up, 1, "no ping went to the home; the quiet one's close did");
    t.settle();
    assert_eq!(t.clients[&quiet].closed, Some(4008));
    assert_eq!(t.home.room.members(), 7);
    assert_eq!(t.relay("na-0").stats().timed_out, 1);
}

#[test]
fn a_relay_told_it_is_stale_closes_its_clients_and_takes_no_more() {
    use super::{Input, Output, Relay};
    use crate::protocol::link::{Down, DownOp};
    let hello = |conn: &str| hello(conn, "ann");
    let now = Time::from_ms(5_000);
    let mut relay = Relay::new("oc-0", 3, RoomConfig::default());
    relay.handle(now, Input::Open(hello("oc-0.c1")));
    let stale = Down { ops: vec![DownOp::Stale { epoch: 4 }] }.to_text();
    relay.handle(now, Input::Down(&stale));
    relay.handle(now, Input::Open(hello("oc-0.c2")));
    relay.handle(now, Input::Wake);
    let outs: Vec<Output> = std::iter::from_fn(|| relay.poll_output()).collect();
    let closes: Vec<(&str, u16)> = outs
        .iter()
        .filter_map(|o| match o {
            Output::Close { conn, code, .. } => Some((conn.as_str(), *code)),
            _ => None,
        })
        .collect();
    assert_eq!(closes, [("oc-0.c1", 1012), ("oc-0.c2", 1012)]);
    assert!(
        !outs.iter().any(|o| matches!(o, Output::Up(_))),
        "nothing goes up from a stale instance"
    );
    assert!(relay.spent());
    assert_eq!(relay.clients(), 0);
}

#[test]
fn a_relays_open_becomes_a_session_over_its_link_and_bad_info_is_refused() {
    use crate::protocol::link::{Open, Up, UpOp};
    let open = |info: Option<&str>| Open {
        conn: "oc-0.c1".into(),
        session: "s-ann1".into(),
        user: "ann".into(),
        region: "OC".into(),
        since: Some(4),
        epoch: Some("e-1".into()),
        rand: 1,
        secret: 2,
        expires: Some(9_000),
        info: info.map(str::to_owned),
        tail: Some(6),
    };
    let hello = open(Some(r#"{"name":"Ann"}"#)).into_hello("oc-0#3", 2).expect("JSON info");
    assert!(hello.relay_flow, "a relay of link version 2 keeps its clients' windows");
    assert_eq!(hello.link.as_deref(), Some("oc-0#3"));
    assert_eq!((hello.since, hello.expires.map(|t| t.ms())), (Some(4), Some(9_000)));
    assert_eq!(hello.tail, Some(6), "what its relay can replay itself crosses with it");
    assert_eq!(hello.info.map(|i| i.get().to_owned()).as_deref(), Some(r#"{"name":"Ann"}"#));
    assert!(!hello.canary, "a relay cannot vouch for the health canary");
    assert!(!open(None).into_hello("oc-0#3", 1).expect("no info").relay_flow, "version 1 does not");
    assert!(open(Some("{not json")).into_hello("oc-0#3", 2).is_err());
    // What crosses the link parses back to itself.
    let up = Up { relay: "oc-0".into(), epoch: 3, heard: 0, ops: vec![UpOp::Open(open(None))] };
    assert_eq!(Up::parse(&up.to_text()), Ok(up));
    // An operation of a later version of the link is skipped, not the message it came in.
    let later = Up::parse(
        r#"{"relay":"oc-0","epoch":3,"ops":[{"op":"forge","x":1},{"op":"closed","conn":"oc-0.c1"}]}"#,
    );
    let ops = later.expect("a later version's message parses").ops;
    assert_eq!(ops, [UpOp::Unknown, UpOp::Closed { conn: "oc-0.c1".into() }]);
    assert!(
        Up::parse(r#"{"relay":"oc-0","epoch":3,"ops":[{"conn":"oc-0.c1"}]}"#).is_err(),
        "no op"
    );
}

#[test]
fn a_frame_over_the_limit_is_closed_at_the_relay_and_never_crosses_the_link() {
    let (mut t, ann, bob, _cat) = ann_bob_and_cat(10);
    let up = t.up_messages;
    let big =
        format!(r#"{{"type":"publish","id":"m1","topic":"chat","data":"{}"}}"#, "x".repeat(70_000));
    assert!(big.len() > RoomConfig::default().max_frame);
    t.send(&ann, &big);
    assert_eq!(t.clients[&ann].closed, Some(1009), "closed at once, as the home would");
    t.settle();
    assert_eq!(t.up_messages - up, 1, "only the close went up");
    assert_eq!(t.home.disk.seq, 0);
    assert_eq!(t.home.room.members(), 2);
    assert!(t.clients[&bob].open);
}

/// Mallory, a member at `oc-0`, floods signals to the members of her own
/// relay, which deliver them without asking the home. The relay holds her
/// to the room's per-connection rate, and the home, which hears every
/// frame, refuses the rest and closes her (4029) as it would a direct socket.
#[test]
fn a_member_flooding_signals_at_her_relay_gets_the_rooms_rate_and_then_4029() {
    let (mut t, mallory, bob, cat) = ann_bob_and_cat(10);
    let config = RoomConfig::default();
    let flood = config.burst + config.abuse_limit + 50;
    for i in 0..flood {
        if t.clients[&mallory].open {
            t.signal(&mallory, &format!(r#"{{"i":{i}}}"#));
        }
    }
    t.settle();
    let signals = of_type(&t.take(&bob), "signal");
    let to_bob = signals.len() as u64;
    assert!(
        to_bob <= config.burst,
        "bob got {to_bob} of her signals; the burst is {}",
        config.burst
    );
    // Two members ask for far less than `BATCH_ABOVE`: the relay delivers each signal it takes
    // at once, and bob gets exactly those.
    let taken = t.relay("oc-0").stats().local_signals;
    assert_eq!(to_bob, taken, "the relay delivers every signal it takes, at once");
    let last = signals.last().and_then(|f| f["data"]["i"].as_u64());
    assert!(last >= Some(config.burst - 1), "the last one bob saw is her latest: {last:?}");
    let to_cat = of_type(&t.take(&cat), "signal").len() as u64;
    assert!(to_cat <= config.burst, "cat, through the home, got {to_cat}");
    assert_eq!(t.clients[&mallory].closed, Some(4029), "the home closed the flood");
    assert!(t.relay("oc-0").stats().local_signals_refused > 0);
    assert!(t.clients[&bob].open && t.clients[&cat].open);
}

#[test]
fn a_binary_flood_is_refused_at_the_relay_and_never_crosses_the_link() {
    use crate::protocol::link::{Down, DownOp};
    let config = RoomConfig::default();
    let mut relay = Relay::new("oc-0", 1, config.clone());
    let now = Time::from_ms(1_000);
    let conn = "oc-0.c1";
    relay.handle(now, Input::Open(hello(conn, "mallory")));
    relay.handle(now, Input::Wake);
    // The home addresses her (a home of link version 2 sends her whole welcome): answers go at
    // once from here (before it they wait for the welcome, `floods::a_bad_frame_before_…`).
    let welcome = r#"{"type":"welcome"}"#.to_owned();
    let down = Down { ops: vec![DownOp::Send { to: vec![conn.into()], frame: welcome }] };
    relay.handle(now, Input::Down(&down.to_text()));
    while relay.poll_output().is_some() {}
    for _ in 0..200 {
        relay.handle(now, Input::Binary { conn, len: 10 });
    }
    relay.handle(now, Input::Wake);
    let (mut refused, mut up) = (0, 0);
    while let Some(out) = relay.poll_output() {
        match out {
            Output::Send { frame, .. } if frame.contains(r#""code":"bad_frame""#) => refused += 1,
            Output::Up(_) => up += 1,
            _ => {}
        }
    }
    assert_eq!(refused, config.burst as usize, "answered at the per-connection burst");
    assert_eq!(relay.stats().binary_dropped, 200 - config.burst);
    assert_eq!(up, 0, "nothing crossed the link");
    // One over the frame limit is closed (1009), and the home hears the close.
    relay.handle(now, Input::Binary { conn, len: config.max_frame + 1 });
    relay.handle(now, Input::Wake);
    let outs: Vec<Output> = std::iter::from_fn(|| relay.poll_output()).collect();
    assert!(outs.iter().any(|o| matches!(o, Output::Close { code: 1009, .. })), "{outs:?}");
    assert!(outs.iter().any(|o| matches!(o, Output::Up(t) if t.contains(r#""op":"closed""#))));
}

/// A client of a relay (as the relay's adapter would open it).
pub(super) fn hello(conn: &str, user: &str) -> crate::room::Hello {
    crate::room::Hello {
        conn: conn.into(),
        session: format!("s-{user}-{conn}"),
        user: user.into(),
        region: "OC".into(),
        since: None,
        epoch: None,
        rand: 1,
        secret: 2,
        expires: None,
        info: None,
        canary: false,
        link: None,
        tail: None,
        relay_flow: false,
        relay_mirror: false,
        relay_signals: false,
    }
}

/// A publish of `n` quotes: `2n` bytes as a frame, `4n` once quoted again on the link.
fn quotes(id: usize, n: usize) -> String {
    format!(r#"{{"type":"publish","id":"m{id}","topic":"t","data":"{}"}}"#, "\\\"".repeat(n))
}

/// Two hundred members at one relay each send a frame near the limit in the same turn, frames
/// of quotes that the link quotes again: the turn is 24 MB of link text, and a WebSocket
/// message over the runtime's limit would close the link and every member of the relay with
/// it. The relay sends it as several messages within [`MESSAGE_MAX`], every frame in order.
#[test]
fn a_turn_bigger_than_a_link_message_goes_as_several_in_order() {
    use crate::protocol::link::{Up, UpOp, MESSAGE_MAX};
    let mut relay = Relay::new("oc-0", 1, RoomConfig::default());
    let now = Time::from_ms(1_000);
    let conns: Vec<String> = (0..200).map(|i| format!("oc-0.c{i}")).collect();
    for (i, c) in conns.iter().enumerate() {
        relay.handle(now, Input::Open(hello(c, &format!("u{i}"))));
    }
    relay.handle(now, Input::Wake);
    while relay.poll_output().is_some() {}
    let frames: Vec<String> = (0..200).map(|i| quotes(i, 30_000)).collect();
    assert!(frames[0].len() < RoomConfig::default().max_frame);
    for (c, f) in conns.iter().zip(&frames) {
        relay.handle(now, Input::Text { conn: c, text: f });
    }
    relay.handle(now, Input::Wake);
    let mut ups = Vec::new();
    while let Some(out) = relay.poll_output() {
        match out {
            Output::Up(text) => ups.push(text),
            Output::Close { conn, .. } => panic!("{conn} closed"),
            _ => {}
        }
    }
    let total: usize = ups.iter().map(String::len).sum();
    assert!(total > 2 * MESSAGE_MAX, "the turn is {total} bytes of link text");
    assert!(ups.len() >= 3, "{} messages", ups.len());
    let mut sent = Vec::new();
    for up in &ups {
        assert!(up.len() <= MESSAGE_MAX, "a message of {} bytes", up.len());
        let up = Up::parse(up).expect("a link message");
        assert_eq!((up.relay.as_str(), up.epoch), ("oc-0", 1));
        sent.extend(up.ops);
    }
    let want: Vec<UpOp> = conns
        .iter()
        .zip(&frames)
        .map(|(c, f)| UpOp::Text { conn: c.clone(), text: f.clone() })
        .collect();
    assert_eq!(sent, want, "every frame once, in the order received");
    assert_eq!(relay.stats().up, 1 + ups.len() as u64);
}

/// A deployment that lets frames be as big as the runtime takes: a relay still closes (1009) a
/// frame its link could not carry, and forwards one that fits.
#[test]
fn a_frame_the_link_could_not_carry_is_closed_at_the_relay() {
    use crate::protocol::link::FRAME_MAX;
    let mut config = RoomConfig { max_frame: 32 << 20, ..RoomConfig::default() };
    config.finish(); // a user's byte burst is at least a frame, as from the runtime's variables
    let mut relay = Relay::new("oc-0", 1, config);
    let now = Time::from_ms(1_000);
    relay.handle(now, Input::Open(hello("oc-0.a", "ann")));
    relay.handle(now, Input::Open(hello("oc-0.b", "bob")));
    relay.handle(now, Input::Wake);
    while relay.poll_output().is_some() {}
    let fits = format!(
        r#"{{"type":"publish","id":"m1","topic":"t","data":"{}"}}"#,
        "x".repeat(FRAME_MAX - 100)
    );
    let over =
        format!(r#"{{"type":"publish","id":"m2","topic":"t","data":"{}"}}"#, "x".repeat(FRAME_MAX));
    relay.handle(now, Input::Text { conn: "oc-0.a", text: &fits });
    relay.handle(now, Input::Text { conn: "oc-0.b", text: &over });
    relay.handle(now, Input::Wake);
    let (mut closed, mut ups) = (Vec::new(), Vec::new());
    while let Some(out) = relay.poll_output() {
        match out {
            Output::Close { conn, code, .. } => closed.push((conn, code)),
            Output::Up(text) => ups.push(text),
            _ => {}
        }
    }
    assert_eq!(closed, vec![("oc-0.b".to_owned(), 1009)]);
    assert_eq!(ups.len(), 1);
    let sent = crate::protocol::link::Up::parse(&ups[0]).expect("a link message").ops;
    use crate::protocol::link::UpOp;
    let want = vec![
        UpOp::Text { conn: "oc-0.a".into(), text: fits },
        UpOp::Closed { conn: "oc-0.b".into() },
    ];
    assert_eq!(sent, want, "the frame that fits crosses, the one over only as its close");
}

/// The home's side: what a turn owes one link goes as several messages within
/// [`MESSAGE_MAX`](crate::protocol::link::MESSAGE_MAX), in order, and other links' are apart.
#[test]
fn the_home_cuts_a_links_big_turn_into_messages_in_order() {
    use crate::protocol::link::{Down, DownOp, MESSAGE_MAX};
    use crate::relay::Downlinks;
    let mut down = Downlinks::default();
    // A different frame each time (the same one would cross once: `Keep`, `Again`).
    let frame =
        |i: usize| format!(r#"{{"type":"batch","frames":["{i}{}"]}}"#, "\\\"".repeat(100_000));
    for i in 0..100 {
        let conn = format!("eu-0.c{i}");
        down.send([(conn.as_str(), Some("eu-0#1")), ("oc-0.c1", Some("oc-0#1"))], &frame(i));
    }
    let messages = down.take();
    let eu: Vec<&String> = messages.iter().filter(|(l, _)| l == "eu-0#1").map(|(_, t)| t).collect();
    let oc = messages.iter().filter(|(l, _)| l == "oc-0#1").count();
    assert!(eu.len() >= 5 && oc >= 5, "{} and {oc} messages", eu.len());
    let mut to = Vec::new();
    for text in eu {
        assert!(text.len() <= MESSAGE_MAX, "{} bytes", text.len());
        for op in Down::parse(text).expect("a link message").ops {
            match op {
                DownOp::Keep { to: conns, frame: f, .. } if f == frame(to.len()) => {
                    to.extend(conns)
                }
                other => panic!("{other:?}"),
            }
        }
    }
    let want: Vec<String> = (0..100).map(|i| format!("eu-0.c{i}")).collect();
    assert_eq!(to, want);
}

/// The `i`s of `sender`'s signals in `frames`.
fn signal_is(frames: &[Value], sender: &str) -> Vec<u64> {
    of_type(frames, "signal")
        .iter()
        .filter(|s| s["session"] == sender)
        .map(|s| s["data"]["i"].as_u64().expect("i"))
        .collect()
}

/// Ann and Dan move their cursors at one relay, a signal every 5 ms each for 200 ms, as
/// cursors do, in a room past `BATCH_ABOVE` (here 0 frames asked for a second). The relay
/// delivers the first at once and then, like the home for its own sockets, coalesces each
/// sender's topic to its latest inside a 50 ms window: Bob, at the same relay, gets a handful
/// of texts instead of eighty, in order per sender and ending with each one's latest; neither
/// sender gets their own; and the home still hears every signal for Cat at the other relay.
#[test]
fn a_relay_coalesces_its_members_cursors_to_one_text_per_window() {
    let config = RoomConfig { batch_above: 0, ..RoomConfig::default() };
    let (mut t, ann, bob, cat) = ann_bob_and_cat_with(config, 10);
    let dan = t.connect("oc-0", "sess-dan1", "dan", "OC", None);
    t.settle();
    for c in [&ann, &bob, &cat, &dan] {
        t.take(c);
    }
    let texts = t.clients[&bob].texts;
    let rounds = 40;
    for i in 0..rounds {
        t.signal(&ann, &format!(r#"{{"i":{i}}}"#));
        t.signal(&dan, &format!(r#"{{"i":{i}}}"#));
        t.advance(5);
    }
    t.settle();
    let to_bob = t.clients[&bob].texts - texts;
    let window = RoomConfig::default().batch_window_ms;
    let windows = rounds * 5 / window + 2;
    assert!(to_bob <= windows + 1, "bob got {to_bob} texts of 80 signals over {windows} windows");
    let frames = t.take(&bob);
    for sender in ["sess-ann1", "sess-dan1"] {
        let is = signal_is(&frames, sender);
        assert!(is.windows(2).all(|w| w[0] < w[1]), "{sender} in order at bob: {is:?}");
        assert_eq!(is.last(), Some(&(rounds - 1)), "{sender}'s latest reaches bob: {is:?}");
    }
    let at_ann = t.take(&ann);
    assert!(signal_is(&at_ann, "sess-ann1").is_empty(), "ann never gets her own");
    assert_eq!(signal_is(&at_ann, "sess-dan1").last(), Some(&(rounds - 1)));
    let at_dan = t.take(&dan);
    assert!(signal_is(&at_dan, "sess-dan1").is_empty(), "dan never gets his own");
    assert_eq!(signal_is(&at_dan, "sess-ann1").last(), Some(&(rounds - 1)));
    let stats = t.relay("oc-0").stats().clone();
    assert!(stats.signals_coalesced >= rounds, "coalesced {}", stats.signals_coalesced);
    let at_cat = t.take(&cat);
    assert_eq!(signal_is(&at_cat, "sess-ann1").last(), Some(&(rounds - 1)), "cat, via the home");
}

/// The same cursors in a room under `BATCH_ABOVE`: nothing waits for a window; each of
/// Ann's and Dan's signals reaches Bob, at their relay, the moment it is sent.
#[test]
fn below_batch_above_a_relay_sends_every_cursor_at_once() {
    let (mut t, ann, bob, _cat) = ann_bob_and_cat(10);
    let dan = t.connect("oc-0", "sess-dan1", "dan", "OC", None);
    t.settle();
    t.take(&bob);
    for i in 0..40 {
        t.signal(&ann, &format!(r#"{{"i":{i}}}"#));
        t.signal(&dan, &format!(r#"{{"i":{i}}}"#));
        let got = of_type(&t.take(&bob), "signal");
        assert_eq!(got.len(), 2, "round {i}: both at once: {got:?}");
        t.advance(5);
    }
    assert_eq!(t.relay("oc-0").stats().signals_coalesced, 0);
}

/// A relay over its outbound budget sheds its members' local signals (counted), as the home
/// does its own: durable messages still go to everyone, and the home still hears the signals.
#[test]
fn a_relay_over_its_outbound_budget_sheds_local_signals_not_messages() {
    let config = RoomConfig { outbound_budget: 20, ..RoomConfig::default() };
    let mut t = Topo::new(config, 10);
    let conns: Vec<String> = (0..10)
        .map(|i| t.connect("oc-0", &format!("sess-m{i}-1"), &format!("m{i}"), "OC", None))
        .collect();
    t.settle();
    for c in &conns {
        t.take(c);
    }
    for i in 0..30 {
        t.signal(&conns[i % 10], &format!(r#"{{"i":{i}}}"#));
        t.advance(60);
    }
    t.publish(&conns[0], "after", r#"{"n":1}"#);
    t.settle();
    let stats = t.relay("oc-0").stats().clone();
    assert!(stats.signals_shed > 0, "nothing shed: {stats:?}");
    assert_eq!(stats.local_signals, 30, "every signal was taken, and went up to the home");
    for c in &conns {
        let got = t.take(c);
        let msgs = of_type(&got, "message");
        assert!(msgs.iter().any(|m| m["id"] == "after"), "{c} missed the message: {got:?}");
    }
}

/// A relay hangs with its link open mid-burst (it takes frames and forwards nothing): the
/// home's lease closes the link 10 s after its last sign of life, the relay closes its clients
/// (1012), and they resume at its next instance and send again what was not acked. Nothing
/// acked is lost, nothing is stored twice, and while it hung its members were still members
/// (no ghost after: the home's members are the open sessions).
#[test]
fn a_hung_relays_lease_runs_out_and_its_members_resume_with_nothing_lost() {
    use crate::protocol::link::LEASE_MS;
    let (mut t, ann, bob, cat) = ann_bob_and_cat(15);
    for i in 0..10 {
        t.publish(&ann, &format!("a{i}"), r#"{"n":1}"#);
        t.advance(5);
    }
    t.hang_relay("oc-0");
    let hung = t.now;
    for i in 10..20 {
        t.publish(&ann, &format!("a{i}"), r#"{"n":1}"#);
        t.advance(5);
    }
    t.run_until(hung.plus_ms(LEASE_MS - 1));
    assert!(t.clients[&ann].open && t.clients[&bob].open, "open until the lease runs out");
    assert_eq!(t.home.room.members(), 3, "still members while the lease holds");
    t.run_until(hung.plus_ms(LEASE_MS));
    assert_eq!(t.clients[&ann].closed, Some(1012), "closed when the lease ran out");
    assert_eq!(t.clients[&bob].closed, Some(1012));
    assert!(t.hung_dropped > 0, "the hung relay forwarded nothing");
    // Their grace counts from the hang: what is left of it is theirs to come back in.
    assert_eq!((t.home.room.members(), t.home.room.away()), (3, 2), "away, not gone");
    let acked: Vec<String> = of_type(&t.take(&ann), "ack")
        .iter()
        .map(|a| a["id"].as_str().expect("an id").to_owned())
        .collect();
    let ann2 = t.resume(&ann, "oc-0");
    t.resume(&bob, "oc-0");
    t.settle();
    for i in 0..20 {
        let id = format!("a{i}");
        if !acked.contains(&id) {
            t.publish(&ann2, &id, r#"{"n":1}"#);
        }
    }
    t.settle();
    let stored: Vec<&str> = t.home.disk.log.values().map(|e| e.id.as_str()).collect();
    let unique: BTreeSet<&str> = stored.iter().copied().collect();
    assert_eq!(unique.len(), stored.len(), "stored twice: {stored:?}");
    assert_eq!(unique.len(), 20, "every write stored once: {stored:?}");
    assert!(acked.len() >= 10 && acked.len() < 20, "acked before the hang only: {acked:?}");
    let to_cat = t.take(&cat);
    let seqs = seqs(&to_cat, "message");
    assert_eq!(seqs, (1..=20).collect::<Vec<u64>>(), "cat, at the other relay, got each once");
    assert_eq!(leaves_and_joins(&to_cat).0, Vec::<String>::new(), "back in the grace: no leave");
    assert_eq!((t.home.room.members(), t.home.room.away()), (3, 0));
}

/// In a large room (summaries only), a change of who is present reaches every relay's members
/// as the home's per-region summary on its slow cadence: one link message per relay, and every
/// member gets the same exact counts, whichever relay holds it.
#[test]
fn per_region_summaries_go_once_per_relay_on_the_slow_cadence() {
    let config = RoomConfig { large_room: 4, ..RoomConfig::default() };
    let interval = config.summary_interval_ms;
    let mut t = Topo::new(config, 10);
    let mut all = Vec::new();
    for (r, region) in RELAYS.iter().zip(REGIONS) {
        for i in 0..3 {
            let user = format!("{region}-user{i}");
            all.push(t.connect(r, &format!("sess-{user}"), &user, region, None));
        }
    }
    t.settle();
    t.advance(2 * interval);
    for c in &all {
        t.take(c);
    }
    let before = t.home_link_messages;
    // Two members of Oceania leave; the summary says so once, within one interval.
    for c in &all[..2] {
        t.drop_client(&c.clone());
    }
    t.settle();
    t.advance(interval + 100);
    let sent = t.home_link_messages - before;
    let mut seen = None;
    for c in &all[2..] {
        let summaries = of_type(&t.take(c), "summary");
        // The first change at once, the second at the end of the interval: the throttle's
        // leading and trailing edges, the same for everyone.
        assert!(matches!(summaries.len(), 1..=2), "{c}: {summaries:?}");
        assert!(
            seen.as_ref().is_none_or(|s| *s == summaries),
            "{c}: {summaries:?} against {seen:?}"
        );
        let s = summaries.last().expect("one").clone();
        seen = Some(summaries);
        assert_eq!(s["members"], 10, "{c}: {s}");
        assert_eq!(s["regions"]["OC"]["members"], 1, "{c}: {s}");
        for region in &REGIONS[1..] {
            assert_eq!(s["regions"][region]["members"], 3, "{c}: {s}");
        }
    }
    let per_member = seen.map_or(0, |s| s.len()) as u64;
    assert_eq!(sent, RELAYS.len() as u64 * per_member, "a message per relay per summary: {sent}");
}

/// A later home's operation the relay does not know is skipped, and the rest of its message
/// is applied (before versions, one unknown operation made the relay drop the whole message,
/// and with it the frames its clients were owed).
#[test]
fn an_operation_of_a_later_link_version_is_skipped_not_the_message() {
    let mut relay = Relay::new("oc-0", 1, RoomConfig::default());
    let now = Time::from_ms(1_000);
    relay.handle(now, Input::Open(hello("oc-0.c1", "ann")));
    let later = r#"{"ops":[{"op":"send","to":["oc-0.c1"],"frame":"{\"type\":\"welcome\"}"},{"op":"mirror","state":{}},{"op":"all","skip":[],"frame":"{\"type\":\"summary\"}"}]}"#;
    relay.handle(now, Input::Down(later));
    let sent: Vec<String> = std::iter::from_fn(|| relay.poll_output())
        .filter_map(|o| match o {
            Output::Send { frame, .. } | Output::AllBut { frame, .. } => Some(frame.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(sent, [r#"{"type":"welcome"}"#, r#"{"type":"summary"}"#]);
    assert_eq!((relay.stats().unknown_ops, relay.stats().bad_down), (1, 0));
}

/// A relay does not look at every client after every input to find its next sweep: 100
/// clients each sending a frame, oldest first (each input moves the earliest due time), ask
/// for the alarm once, at the first client, not once per frame; and a silent client is still
/// closed by the sweep in time.
#[test]
fn a_relay_asks_for_its_sweep_once_not_after_every_frame() {
    let config = RoomConfig::default();
    let ttl = config.presence_ttl_ms;
    let mut relay = Relay::new("oc-0", 1, config);
    let mut alarms = Vec::new();
    let drain = |relay: &mut Relay, alarms: &mut Vec<u64>| {
        while let Some(out) = relay.poll_output() {
            if let Output::SetAlarm(at) = out {
                alarms.push(at.ms());
            }
        }
    };
    let t0 = 1_000;
    for i in 0..100 {
        relay.handle(Time::from_ms(t0), Input::Open(hello(&format!("oc-0.c{i}"), "ann")));
    }
    drain(&mut relay, &mut alarms);
    assert_eq!(alarms, [t0 + ttl], "one alarm for the first client's due time");
    for round in 1..=3 {
        for i in 0..100 {
            let now = Time::from_ms(t0 + round * 1_000 + i);
            relay.handle(
                now,
                Input::Text { conn: &format!("oc-0.c{i}"), text: r#"{"type":"ping"}"# },
            );
        }
    }
    drain(&mut relay, &mut alarms);
    assert_eq!(alarms.len(), 1, "no alarm asked for again: {alarms:?}");
    // Client 0 went quiet after its last ping (t0 + 3,000): the sweep at the first alarm finds
    // nobody due yet and asks for the next one; the next closes it.
    relay.handle(Time::from_ms(t0 + ttl), Input::Alarm);
    drain(&mut relay, &mut alarms);
    assert_eq!(alarms[1], t0 + 3_000 + ttl, "the earliest due time after the sweep");
    assert_eq!(relay.clients(), 100);
    relay.handle(Time::from_ms(alarms[1]), Input::Alarm);
    assert_eq!((relay.clients(), relay.stats().timed_out), (99, 1));
}

/// The adapter reads every socket for the runtime's answers to pings only when an alarm may
/// find a silent client (`sweep_due`), not at every wake of its own: a client that only pings
/// (the runtime answers, the relay never hears it) still stays, its heartbeat given at the
/// sweep that would otherwise have closed it.
#[test]
fn a_relay_wants_heartbeats_only_when_a_client_may_be_due() {
    let config = RoomConfig::default();
    let ttl = config.presence_ttl_ms;
    let mut relay = Relay::new("oc-0", 1, config);
    let t0 = 1_000;
    relay.handle(Time::from_ms(t0), Input::Open(hello("oc-0.pinger", "ann")));
    relay.handle(Time::from_ms(t0 + 10), Input::Open(hello("oc-0.quiet", "bob")));
    while relay.poll_output().is_some() {}
    // The link's watch wakes the adapter every 5 s: no heartbeats wanted then.
    for at in (t0..t0 + ttl).step_by(5_000) {
        assert!(!relay.sweep_due(Time::from_ms(at)), "at {at}");
        relay.handle(Time::from_ms(at), Input::Alarm);
    }
    assert_eq!(relay.clients(), 2);
    let due = Time::from_ms(t0 + ttl);
    assert!(relay.sweep_due(due));
    relay.handle(due, Input::Heartbeat { conn: "oc-0.pinger", at: Time::from_ms(t0 + ttl - 500) });
    relay.handle(due, Input::Alarm);
    assert!(!relay.sweep_due(due), "the next sweep is further out");
    let last = Time::from_ms(t0 + ttl + 10);
    assert!(relay.sweep_due(last), "the quiet one's due time");
    relay.handle(last, Input::Alarm);
    assert_eq!((relay.clients(), relay.stats().timed_out), (1, 1), "the quiet one went");
}

/// Under a home of link version 1, which marks a relayed session with the client's secret
/// itself, the echo of the home's mark is not taken for the relay's own (which the relay
/// makes with a key of its own): it goes up to the home, whose window it opens.
#[test]
fn a_version_1_homes_mark_is_not_taken_for_the_relays_own() {
    use crate::protocol::link::{Down, DownOp};
    use crate::room::flow::Flow;
    let config = RoomConfig::default();
    let every = config.mark_every;
    let mut relay = Relay::new("oc-0", 1, config);
    let now = Time::from_ms(1_000);
    let ann = hello("oc-0.c1", "ann");
    let secret = ann.secret;
    relay.handle(now, Input::Open(ann));
    // The home sends her a frame big enough for a mark from each of them.
    let frame = format!(r#"{{"type":"x","pad":"{}"}}"#, "a".repeat(every as usize + 10));
    let down =
        Down { ops: vec![DownOp::Send { to: vec!["oc-0.c1".into()], frame: frame.clone() }] };
    relay.handle(now, Input::Down(&down.to_text()));
    let relays_mark = std::iter::from_fn(|| relay.poll_output())
        .any(|o| matches!(o, Output::Send { frame, .. } if frame.contains(r#""type":"mark""#)));
    assert!(relays_mark, "the relay marked her stream");
    let homes = Flow::new(secret).sent(frame.len() as u64, every).expect("the home's first mark");
    let echo = format!(r#"{{"type":"mark","mark":"{homes}"}}"#);
    // Her byte budget here spent by her own big writes: the echo still goes up, as the home
    // takes it, free (refused here, the home's window never opened again: 4013).
    for size in [60_000, 1_000, 100, 20] {
        for _ in 0..100 {
            relay.handle(now, Input::Text { conn: "oc-0.c1", text: &"x".repeat(size) });
        }
    }
    assert!(relay.stats().bytes_refused > 0, "her budget is spent");
    relay.handle(now, Input::Text { conn: "oc-0.c1", text: &echo });
    relay.handle(now, Input::Wake);
    let up: Vec<String> = std::iter::from_fn(|| relay.poll_output())
        .filter_map(|o| match o {
            Output::Up(text) => Some(text),
            _ => None,
        })
        .collect();
    assert!(up.iter().any(|t| t.contains(&homes)), "the echo went to the home: {up:?}");
    assert_eq!(relay.stats().echoes, 0, "the relay took none of its own");
}
