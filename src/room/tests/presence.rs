//! Presence on virtual time: newest-wins sessions, exact counts, TTL expiry,
//! summary cadence and the large-room switch.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::room::sim::Sim;
use crate::room::RoomConfig;

fn of_type(frames: &[Value], kind: &str) -> Vec<Value> {
    frames.iter().filter(|f| f["type"] == kind).cloned().collect()
}

fn summary_of(sim: &mut Sim) -> Value {
    let list: Value = serde_json::from_str(&sim.room.presence_json()).unwrap();
    list["summary"].clone()
}

#[test]
fn a_session_hopping_region_is_never_two_members() {
    let mut s = Sim::new(RoomConfig::default());
    let obs = s.connect("sess-obsv", "EU", None);
    let old = s.connect_as("sess-hopr", "u1", "EU", None);
    s.presence_window_ends(); // its join, a window after the observer's
    s.take(&obs);
    // The phone moves networks: the new socket arrives before the old one closes.
    let new = s.connect_as("sess-hopr", "u1", "OC", None);
    assert_eq!(s.sockets[&old].closed, Some(4001));
    assert_eq!((s.room.members(), s.room.connections()), (2, 2));
    s.presence_window_ends();
    let f = s.take(&obs);
    let presence = of_type(&f, "presence");
    assert_eq!(presence.len(), 1, "one frame: {f:?}");
    assert_eq!(presence[0]["joins"]["sess-hopr"]["region"], "OC");
    assert_eq!(presence[0]["leaves"], json!([]));
    let w = &s.take(&new)[0];
    assert_eq!(w["presence"]["summary"]["members"], 2);
    assert_eq!(
        w["presence"]["summary"]["regions"],
        json!({"EU":{"members":1,"users":1},"OC":{"members":1,"users":1}})
    );
    // The old socket's close arrives late: not a leave.
    s.runtime_close(&old);
    s.run_until(s.now.plus_ms(10_000));
    assert!(of_type(&s.take(&obs), "presence").is_empty());
    assert_eq!(summary_of(&mut s)["members"], 2);
}

#[test]
fn users_are_distinct_people_and_members_are_tabs() {
    let mut s = Sim::new(RoomConfig::default());
    s.connect_as("tab-one-1", "alice", "EU", None);
    s.connect_as("tab-two-2", "alice", "EU", None);
    s.connect_as("tab-bob-1", "bob", "NA", None);
    let sum = summary_of(&mut s);
    assert_eq!(
        (sum["members"].clone(), sum["users"].clone(), sum["connections"].clone()),
        (json!(3), json!(2), json!(3))
    );
    assert_eq!(sum["regions"]["EU"], json!({"members":2,"users":1}));
}

#[test]
fn a_silent_connection_leaves_after_the_ttl_and_a_pinging_one_stays() {
    let mut s = Sim::new(RoomConfig::default());
    let t0 = s.now;
    let silent = s.connect("sess-slnt", "EU", None);
    let pinger = s.connect("sess-ping", "EU", None);
    let talker = s.connect("sess-talk", "EU", None);
    s.run_until(t0.plus_ms(5_000)); // the trailing summary of the joins
    assert_eq!(s.alarm, Some(t0.plus_ms(60_000)), "a sweep is scheduled one TTL out");
    s.take(&pinger);
    for step in 1..=5u64 {
        s.run_until(t0.plus_ms(step * 25_000));
        s.ping_runtime(&pinger);
        s.send(&talker, r#"{"type":"get_state"}"#);
    }
    s.run_until(t0.plus_ms(130_000));
    assert_eq!(s.sockets[&silent].closed, Some(4008));
    assert!(s.sockets[&pinger].open && s.sockets[&talker].open);
    let leaves: Vec<Value> = of_type(&s.take(&pinger), "presence");
    assert_eq!(leaves, [json!({"type":"presence","joins":{},"leaves":["sess-slnt"]})]);
    assert_eq!(s.room.members(), 2);
}

#[test]
fn an_early_alarm_is_a_harmless_no_op() {
    let mut s = Sim::new(RoomConfig::default());
    let a = s.connect("sess-aaaa", "EU", None);
    let b = s.connect("sess-bbbb", "EU", None);
    s.settle();
    s.take(&a);
    s.advance(1_000);
    s.fire_alarm();
    assert!(s.sockets[&a].open && s.sockets[&b].open);
    assert_eq!(s.room.members(), 2);
    assert!(s.take(&a).is_empty(), "nothing to say");
    assert!(s.alarm.is_some_and(|at| at > s.now), "re-armed for the real deadline");
}

#[test]
fn the_ttl_survives_eviction_through_the_attachment() {
    let mut s = Sim::new(RoomConfig::default());
    let t0 = s.now;
    let talker = s.connect("sess-talk", "EU", None);
    let silent = s.connect("sess-slnt", "EU", None);
    for step in 1..=8u64 {
        s.run_until(t0.plus_ms(step * 20_000));
        s.send(&talker, r#"{"type":"get_state"}"#);
        s.evict();
    }
    assert_eq!(s.sockets[&silent].closed, Some(4008));
    assert!(s.sockets[&talker].open, "its sign of life was in the attachment");
}

#[test]
fn summaries_are_coalesced_to_one_per_interval() {
    let mut s = Sim::new(RoomConfig::default());
    let obs = s.connect("sess-obsv", "EU", None);
    s.run_until(s.now.plus_ms(5_000));
    s.take(&obs);
    let t0 = s.now;
    let mut sent_at = Vec::new();
    for i in 0..50u64 {
        s.run_until(t0.plus_ms(i * 40)); // 50 joins within 2 s
        s.connect(&format!("sess-{i:04}"), if i % 2 == 0 { "EU" } else { "NA" }, None);
        sent_at.extend(of_type(&s.take(&obs), "summary").into_iter().map(|_| s.now));
    }
    s.run_until(t0.plus_ms(10_000));
    let last = of_type(&s.take(&obs), "summary");
    sent_at.extend(last.iter().map(|_| t0.plus_ms(2_000)));
    assert_eq!(sent_at.len(), 2, "leading and trailing edge only: {sent_at:?}");
    assert!(sent_at[1].since(sent_at[0]) >= 2_000);
    assert_eq!(last[0]["members"], 51);
    assert_eq!(last[0]["regions"]["NA"]["members"], 25);
}

#[test]
fn a_summary_is_sent_only_when_the_counts_changed() {
    let mut s = Sim::new(RoomConfig::default());
    let obs = s.connect("sess-obsv", "EU", None);
    s.run_until(s.now.plus_ms(5_000));
    s.connect("sess-bbbb", "EU", None); // goes out at once: 2 members
    s.advance(100);
    let a = s.connect("sess-aaaa", "EU", None);
    s.send(&a, r#"{"type":"presence","state":{"typing":true}}"#);
    s.advance(100);
    s.drop_conn(&a); // joined and left within the interval: back to 2
    s.run_until(s.now.plus_ms(5_000));
    let f = s.take(&obs);
    let summaries = of_type(&f, "summary");
    assert_eq!(summaries.len(), 1, "only b's join changed the counts: {f:?}");
    assert_eq!(summaries[0]["members"], 2);
    s.run_until(s.now.plus_ms(30_000)); // quiet, within the TTL
    assert!(of_type(&s.take(&obs), "summary").is_empty());
}

#[test]
fn a_large_room_sends_summaries_only_and_switches_back() {
    let config = RoomConfig { large_room: 10, ..RoomConfig::default() };
    let mut s = Sim::new(config);
    let obs = s.connect("sess-obsv", "EU", None);
    let mut conns = Vec::new();
    for i in 0..9 {
        conns.push(s.connect(&format!("sess-{i:04}"), "EU", None));
    }
    s.presence_window_ends();
    // 10 members: diffs (the observer's join opened a window; the others' go in one at its end).
    let diffs = of_type(&s.take(&obs), "presence");
    let joined = diffs[0]["joins"].as_object().map(|j| j.len());
    assert_eq!((diffs.len(), joined), (1, Some(9)), "{diffs:?}");
    conns.push(s.connect("sess-0009", "EU", None)); // 11 members > 10
    let f = of_type(&s.take(&obs), "presence");
    assert_eq!(f, [json!({"type":"presence","joins":{},"leaves":[],"reset":true,"large":true})]);
    conns.push(s.connect("sess-0010", "EU", None));
    let late = s.connect("sess-late", "EU", None);
    assert!(of_type(&s.take(&obs), "presence").is_empty(), "large: no diffs");
    let w = &s.take(&late)[0];
    assert_eq!(
        (w["presence"]["members"].clone(), w["presence"]["large"].clone()),
        (json!({}), json!(true))
    );
    assert_eq!(w["presence"]["summary"]["members"], 13);
    let list: Value = serde_json::from_str(&s.room.presence_json()).unwrap();
    assert_eq!(list["members"].as_object().unwrap().len(), 13, "HTTP lists everyone");
    // 12, 11, 10: still large (hysteresis); at 9 back to small with the full list.
    s.drop_conn(&late);
    s.drop_conn(&conns.pop().unwrap());
    s.drop_conn(&conns.pop().unwrap());
    assert!(of_type(&s.take(&obs), "presence").is_empty(), "large: no diffs");
    s.drop_conn(&conns.pop().unwrap());
    let f = of_type(&s.take(&obs), "presence");
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["reset"], true);
    assert_eq!(f[0]["joins"].as_object().unwrap().len(), 9);
    assert!(f[0].get("large").is_none());
    s.drop_conn(&conns.pop().unwrap());
    s.presence_window_ends(); // the window the last diff opened is still open: this leave waits
    assert_eq!(of_type(&s.take(&obs), "presence")[0]["leaves"], json!(["sess-0007"]));
}

#[test]
fn a_socket_the_room_closes_is_not_sent_its_own_leave() {
    let mut s = Sim::new(RoomConfig::default());
    let obs = s.connect("sess-obsv", "EU", None);
    let quiet = s.connect("sess-qiet", "EU", None);
    s.take(&quiet);
    let t0 = s.now;
    for step in 1..=3u64 {
        s.run_until(t0.plus_ms(step * 30_000));
        s.ping_runtime(&obs);
    }
    assert_eq!(s.sockets[&quiet].closed, Some(4008));
    let own_leave = json!(["sess-qiet"]);
    assert!(s.take(&quiet).iter().all(|f| f["leaves"] != own_leave), "not told of its own leave");
    assert!(of_type(&s.take(&obs), "presence").iter().any(|f| f["leaves"] == json!(["sess-qiet"])));
}

// ---- the presence window: a small room's changes coalesce --------------

/// What `frames` (a connection's from its welcome on) tell it of the others: session -> member.
fn view_of(frames: &[Value], own: &str) -> BTreeMap<String, Value> {
    let mut view = BTreeMap::new();
    for f in frames {
        let (joins, leaves) = match f["type"].as_str() {
            Some("welcome") => (&f["presence"]["members"], &Value::Null),
            Some("presence") => {
                assert!(f["reset"] == true || f["joins"].get(own).is_none(), "told of itself: {f}");
                if f["reset"] == true {
                    view.clear();
                }
                (&f["joins"], &f["leaves"])
            }
            _ => continue,
        };
        for (s, m) in joins.as_object().into_iter().flatten() {
            view.insert(s.clone(), m.clone());
        }
        for s in leaves.as_array().into_iter().flatten() {
            assert!(view.remove(s.as_str().unwrap()).is_some(), "a leave of a stranger {s}: {f}");
        }
    }
    view.remove(own);
    view
}

/// The room's member list, less `own`.
fn room_view(s: &Sim, own: &str) -> BTreeMap<String, Value> {
    let list: Value = serde_json::from_str(&s.room.presence_json()).unwrap();
    let mut view: BTreeMap<String, Value> =
        list["members"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    view.remove(own);
    view
}

/// 40 members join a room of one within a few milliseconds: `(presence frames sent, every
/// reader's view right)`.
fn join_storm(window_ms: u64) -> (usize, bool) {
    let mut s = Sim::new(RoomConfig { presence_window_ms: window_ms, ..RoomConfig::default() });
    let mut conns = vec![(s.connect("sess-obsv", "EU", None), "sess-obsv".to_owned())];
    for i in 0..40 {
        if i % 4 == 0 {
            s.advance(1);
        }
        let session = format!("sess-{i:04}");
        conns.push((s.connect(&session, "EU", None), session));
    }
    s.presence_window_ends();
    let mut diffs = 0;
    let mut right = true;
    for (conn, session) in &conns {
        let frames = s.take(conn);
        diffs += of_type(&frames, "presence").len();
        right &= view_of(&frames, session) == room_view(&s, session);
    }
    (diffs, right)
}

#[test]
fn a_storm_of_joins_into_a_small_room_costs_each_reader_one_diff_per_window() {
    // At once (no window): each join is a diff to each member there, 40 * 41 / 2 of them.
    assert_eq!(join_storm(0), (820, true));
    // The window: the observer hears all 40 joins in one diff at its end; each newcomer one of
    // those after its welcome (the last, none): 1 + 39.
    assert_eq!(join_storm(50), (40, true));
}

#[test]
fn a_member_who_came_and_went_within_a_window_is_no_news() {
    let mut s = Sim::new(RoomConfig::default());
    let obs = s.connect("sess-obsv", "EU", None);
    let flash = s.connect("sess-flsh", "EU", None);
    let mid = s.connect("sess-midl", "EU", None); // welcomed with the flash in its list
    s.drop_conn(&flash);
    s.presence_window_ends();
    let to_obs = of_type(&s.take(&obs), "presence");
    assert_eq!(to_obs.len(), 1, "{to_obs:?}");
    assert_eq!(to_obs[0]["leaves"], json!([]), "never saw it, so no leave");
    assert!(to_obs[0]["joins"].get("sess-flsh").is_none());
    assert!(to_obs[0]["joins"]["sess-midl"].is_object());
    let to_mid = s.take(&mid);
    assert_eq!(to_mid[0]["presence"]["members"].as_object().map(|m| m.len()), Some(3));
    let diffs = of_type(&to_mid, "presence");
    assert_eq!(diffs, [json!({"type":"presence","joins":{},"leaves":["sess-flsh"]})]);
}

#[test]
fn a_state_changed_within_a_window_reaches_the_others_once_as_its_latest() {
    let mut s = Sim::new(RoomConfig::default());
    let a = s.connect("sess-aaaa", "EU", None);
    let b = s.connect("sess-bbbb", "EU", None);
    s.settle();
    s.take(&a);
    s.take(&b);
    for n in 1..=5 {
        s.send(&a, &format!(r#"{{"type":"presence","state":{{"x":{n}}}}}"#));
        if n == 1 {
            let first = of_type(&s.take(&b), "presence");
            assert_eq!(
                first[0]["joins"]["sess-aaaa"]["state"],
                json!({"x":1}),
                "the first at once"
            );
        }
    }
    s.presence_window_ends();
    let rest = of_type(&s.take(&b), "presence");
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["joins"]["sess-aaaa"]["state"], json!({"x":5}));
    assert!(of_type(&s.take(&a), "presence").is_empty(), "its own changes are its own");
    // A quiet spell: the next change goes at once again.
    s.advance(1_000);
    s.send(&b, r#"{"type":"presence","state":{"y":1}}"#);
    assert_eq!(of_type(&s.take(&a), "presence")[0]["joins"]["sess-bbbb"]["state"], json!({"y":1}));
}

/// A Wasm reset while a window holds a join: the memory goes with the held diff, and the
/// readers who never heard of the member would never hear of it. The adapter keeps the fact
/// that presence was owed outside the Wasm's memory; the next load sends every connection the
/// whole list. The control (an adapter that forgets it) shows what was lost.
#[test]
fn a_reset_inside_a_presence_window_sends_every_reader_the_whole_list() {
    const OBS: &str = "sess-obsv";
    let run = |kept: bool| -> (bool, Vec<String>, Vec<Value>) {
        let mut s = Sim::new(RoomConfig::default());
        s.keeps_owed = kept;
        let obs = s.connect(OBS, "EU", None);
        s.presence_window_ends();
        s.connect("sess-aaaa", "EU", None); // at once: the leading edge
        s.connect("sess-bbbb", "NA", None); // held for the window's end
        assert!(s.room.presence_owed(), "the window holds b's join");
        let mut frames = s.take(&obs);
        let held: Vec<String> = view_of(&frames, OBS).into_keys().collect();
        assert_eq!(held, ["sess-aaaa"], "b is held: {frames:?}");
        s.reload(); // a Wasm reset: the sockets stay, the memory goes
        s.settle();
        s.run_until(s.now.plus_ms(10_000));
        assert!(!s.room.presence_owed());
        let after = s.take(&obs);
        frames.extend(after.iter().cloned());
        let view = view_of(&frames, OBS);
        let exact = view == room_view(&s, OBS);
        (exact, view.into_keys().collect(), of_type(&after, "presence"))
    };
    let (exact, view, presence) = run(true);
    assert!(exact, "the observer's view is the room's: {view:?} {presence:?}");
    assert_eq!(view, ["sess-aaaa", "sess-bbbb"]);
    assert_eq!(presence.len(), 1, "one reset: {presence:?}");
    assert_eq!(presence[0]["reset"], true);
    let (exact, view, _) = run(false);
    assert!(!exact, "control: an adapter that forgets it leaves b unheard of: {view:?}");
    assert_eq!(view, ["sess-aaaa"]);
}

/// A room that owes nothing when it is rebuilt (a hibernation's wake, or a reset after the
/// window ended) sends nobody a list: the whole list goes only where something was lost.
#[test]
fn a_reload_that_owed_nothing_sends_no_list() {
    let mut s = Sim::new(RoomConfig::default());
    let obs = s.connect("sess-obsv", "EU", None);
    s.connect("sess-aaaa", "EU", None);
    s.presence_window_ends();
    assert!(!s.room.presence_owed());
    s.take(&obs);
    s.reload();
    s.settle();
    s.run_until(s.now.plus_ms(10_000));
    assert!(of_type(&s.take(&obs), "presence").is_empty());
    s.evict();
    s.run_until(s.now.plus_ms(10_000));
    assert!(of_type(&s.take(&obs), "presence").is_empty());
}
