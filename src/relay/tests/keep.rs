//! A big frame the home addresses to several of a relay's sessions one by one in a turn (a
//! resync storm's state, the same catch-up) crosses the link once per message: the first as
//! [`DownOp::Keep`], the others as [`DownOp::Again`], which the relay sends from what it kept.

use crate::protocol::link::{Down, DownOp};
use crate::relay::sim::Topo;
use crate::relay::Downlinks;
use crate::room::RoomConfig;

#[test]
fn a_big_frame_for_many_sessions_of_a_link_crosses_once() {
    let mut down = Downlinks::default();
    let state = format!(
        r#"{{"type":"resync","reason":"gap","seq":9,"state":{{"k":"{}"}}}}"#,
        "x".repeat(50_000)
    );
    for i in 0..100 {
        let conn = format!("eu-0.c{i}");
        // Each session's own small frame (its welcome) between, as a resume's turn has them.
        down.send([(conn.as_str(), Some("eu-0#1"))], &format!(r#"{{"type":"welcome","n":{i}}}"#));
        down.send([(conn.as_str(), Some("eu-0#1"))], &state);
    }
    let messages = down.take();
    assert_eq!(messages.len(), 1);
    let text = &messages[0].1;
    assert!(text.len() < 2 * state.len() + 100 * 100, "{} bytes for 100 sessions", text.len());
    // What each session gets, in order, as the relay reads it.
    let mut kept = std::collections::HashMap::new();
    let mut got: Vec<(String, usize)> = Vec::new();
    for op in Down::parse(text).expect("a link message").ops {
        let (to, frame) = match op {
            DownOp::Send { to, frame } => (to, frame),
            DownOp::Keep { id, to, frame } => {
                kept.insert(id, frame.clone());
                (to, frame)
            }
            DownOp::Again { id, to } => (to, kept[&id].clone()),
            other => panic!("{other:?}"),
        };
        got.extend(to.into_iter().map(|c| (c, frame.len())));
    }
    let welcome = |i: usize| format!(r#"{{"type":"welcome","n":{i}}}"#).len();
    let want: Vec<(String, usize)> = (0..100)
        .flat_map(|i| [(format!("eu-0.c{i}"), welcome(i)), (format!("eu-0.c{i}"), state.len())])
        .collect();
    assert_eq!(got, want);
    // A turn's kept frames are that turn's: the next turn sends the frame itself again.
    down.send([("eu-0.c1", Some("eu-0#1"))], &state);
    let next = down.take();
    assert!(matches!(&Down::parse(&next[0].1).unwrap().ops[0], DownOp::Keep { .. }));
}

/// 25 members of one relay away for ten messages past a replay window of five come back in one
/// turn of the relay (which kept its link: one member stayed), and resync: each gets the 40 KB
/// state once. Under a home that serves link
/// `version`; returns the bytes of link text the home sent for their return, the state's, and
/// how many whole `state` or `resync` frames crossed the link in all.
fn resync_storm(version: u32) -> (u64, u64, u64) {
    // Five entries of replay window: members away for ten messages resync.
    let config = RoomConfig { replay_limit: 5, ..RoomConfig::default() };
    let mut t = Topo::new(config, 20);
    t.link_version = version;
    let writer = t.connect("eu-0", "sess-wri1", "wri", "EU", None);
    let members: Vec<String> = (0..25)
        .map(|i| t.connect("oc-0", &format!("sess-m{i}"), &format!("m{i}"), "OC", None))
        .collect();
    // One who stays: the relay keeps its link (a relay with no client closes it, and the next
    // link is told the room's state once more).
    let stayer = t.connect("oc-0", "sess-stay", "stay", "OC", None);
    t.settle();
    let value = "v".repeat(10_000);
    for k in 0..4 {
        let set = format!(r#"{{"type":"set","id":"s{k}","key":"k{k}","value":"{value}"}}"#);
        t.send(&writer, &set);
    }
    t.settle();
    for m in &members {
        t.take(m);
    }
    t.settle();
    for m in &members {
        t.drop_client(m);
    }
    t.settle();
    for i in 0..10 {
        t.publish(&writer, &format!("m-{i}"), r#"{"n":1}"#);
    }
    t.settle();
    t.take(&writer);
    t.take(&stayer);
    // All 25 come back in one turn of the relay: one message up, one turn of the home.
    let before = t.home_link_bytes;
    let back: Vec<String> = members.iter().map(|m| t.resume(m, "oc-0")).collect();
    t.settle();
    let sent = t.home_link_bytes - before;
    let state_bytes = 4 * value.len() as u64;
    for conn in &back {
        let got = t.take(conn);
        let resync: Vec<&serde_json::Value> =
            got.iter().filter(|f| f["type"] == "resync").collect();
        assert_eq!(resync.len(), 1, "{conn}: {got:?}");
        assert_eq!(resync[0]["seq"], 14);
        assert_eq!(resync[0]["state"].as_object().map(|s| s.len()), Some(4));
        assert_eq!(t.clients[conn].seq, 14);
    }
    (sent, state_bytes, t.home_link_states)
}

#[test]
fn a_resync_storm_through_a_relay_carries_the_state_once() {
    // A home of link version 2 sends the state itself: once per link message.
    let (sent, state_bytes, whole) = resync_storm(2);
    assert!(sent < 3 * state_bytes, "{sent} bytes over the link for 25 resyncs of {state_bytes}");
    assert_eq!(whole, 1, "the state crossed once");
}

#[test]
fn a_resync_storm_through_a_relay_that_mirrors_the_state_carries_none_of_it() {
    // Version 3: the relay makes each resync from its mirror; only the home's word crosses.
    let (sent, state_bytes, whole) = resync_storm(3);
    assert_eq!(whole, 0, "a state frame crossed the link");
    // The rest of the turn (25 welcomes with the member list, the joins) is the same both ways.
    let (before, _, _) = resync_storm(2);
    assert!(sent + state_bytes < before, "{sent} bytes of link text against {before}");
}
