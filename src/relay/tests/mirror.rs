//! A relay makes its clients' welcomes and state replies (link version 3): the home sends the
//! session's part of each welcome (what it decided: `seq`, `resumed`, `missed`, the presence
//! the welcome shows) and the word for a `state` or `resync` frame, and tells each link the
//! room's parts and state once (and every write after); the client gets the same frames the
//! home would have sent.

use serde_json::Value;

use super::{REGIONS, RELAYS};
use crate::protocol::link::{Down, DownOp, Welcome};
use crate::relay::sim::Topo;
use crate::relay::{Input, Output, Relay};
use crate::room::{RoomConfig, Time};

/// One scenario, with the home serving its relays in link `version`: members join over four
/// relays (the room crosses the large-room line on the way), messages and state writes pass,
/// members ask for the state while writes are on their way to them, one member drops and
/// resumes, one resumes from a log it cannot know (a resync), one moves region. Returns the
/// topology, every client's welcomes as text and every frame each client got, in the order of
/// their connections.
fn scenario(version: u32) -> (Topo, Vec<String>, Vec<Vec<Value>>, u64) {
    let config = RoomConfig { large_room: 5, ..RoomConfig::default() };
    let mut t = Topo::new(config, 15);
    t.link_version = version;
    let mut all = Vec::new();
    for i in 0..2 {
        for (r, region) in RELAYS.iter().zip(REGIONS) {
            let user = format!("{region}-user{i}");
            all.push(t.connect(r, &format!("sess-{user}"), &user, region, None));
            t.settle();
        }
    }
    // What the home sent its links for the joins.
    let joins = t.home_link_bytes;
    for i in 0..3 {
        t.publish(&all[1], &format!("m-{i}"), r#"{"n":1}"#);
        let set = format!(r#"{{"type":"set","id":"s-{i}","key":"k{i}","value":{{"v":{i}}}}}"#);
        t.send(&all[2], &set);
        // Asked for while the writes are on their way: the reply comes after them.
        t.send(&all[5], r#"{"type":"get_state"}"#);
    }
    t.settle();
    let big = format!(r#"{{"type":"set","id":"s-big","key":"k0","value":"{}"}}"#, "x".repeat(6000));
    t.send(&all[3], &big);
    t.settle();
    t.send(&all[6], r#"{"type":"get_state"}"#);
    t.settle();
    t.drop_client(&all[0]);
    t.settle();
    t.publish(&all[1], "m-3", r#"{"n":2}"#);
    t.publish(&all[1], "m-4", r#"{"n":2}"#);
    t.settle();
    t.resume(&all[0], "oc-0");
    t.settle();
    t.drop_client(&all[2]);
    t.connect("na-0", "sess-NA-user0", "NA-user0", "NA", Some((2, "e-not-this-log")));
    t.resume_in(&all[3], "eu-0", "EU");
    t.settle();
    let welcomes = t.clients.values().flat_map(|c| c.welcomes.clone()).collect();
    let conns: Vec<String> = t.clients.keys().cloned().collect();
    let frames = conns.iter().map(|c| t.take(c)).collect();
    (t, welcomes, frames, joins)
}

#[test]
fn a_relay_makes_its_clients_welcomes_and_state_replies_as_the_home_would() {
    let (old, before, old_frames, old_joins) = scenario(2);
    let (new, after, new_frames, new_joins) = scenario(3);
    assert_eq!(before.len(), 11, "every connect welcomed: {before:#?}");
    for (home_made, relay_made) in before.iter().zip(&after) {
        assert_eq!(home_made, relay_made, "the same bytes");
    }
    assert_eq!(before.len(), after.len());
    // The scenario shows what a welcome can hold: a member list below the large-room line,
    // none above it, a resume with what it missed, a resync's, a relay's name.
    let has = |needle: &str| after.iter().any(|w| w.contains(needle));
    assert!(has(r#""members":{"sess-"#) && has(r#""members":{},"#) && has(r#""large":true"#));
    assert!(has(r#""resumed":true,"missed":2"#) && has(r#""resumed":false"#));
    assert!(after.iter().all(|w| w.contains(r#""relay":""#) && w.contains(r#""limits":{"#)));

    // Version 2: every welcome crossed the link whole; version 3: none did, each relay made its
    // own, and the joins took less link text (the room's parts and its state cross once per
    // link instead; a state write crosses each link again for its mirror).
    assert_eq!(old.home_link_welcomes, 11);
    assert_eq!(new.home_link_welcomes, 0);
    let made: u64 = new.nodes.values().map(|n| n.relay.stats().welcomes).sum();
    assert_eq!(made, 11);
    assert_eq!(new.home.relay_welcomes, 11);
    assert!(new_joins < old_joins, "{new_joins} bytes of link text against {old_joins}");

    // Every client got the same frames either way, the state replies among them (4 asked, and
    // a resync), each the state at its `seq` (the topology checks each against the stored
    // writes); under version 3 none of them crossed the link whole.
    assert_eq!(old_frames, new_frames);
    let states = |frames: &[Vec<Value>]| {
        frames.iter().flatten().filter(|f| f["type"] == "state" || f["type"] == "resync").count()
    };
    assert_eq!(states(&new_frames), 5);
    assert!(old.home_link_states >= 2, "{} whole state frames crossed", old.home_link_states);
    assert_eq!(new.home_link_states, 0);
    let replies: u64 = new.nodes.values().map(|n| n.relay.stats().state_replies).sum();
    assert_eq!((replies, new.home.relay_states), (5, 5));
}

/// A welcome a relay cannot make (the home never told it the room's parts, as no home does
/// unasked) closes the client to resume, rather than sending it a frame without them.
#[test]
fn a_welcome_without_the_rooms_parts_closes_the_client_to_resume() {
    let mut relay = Relay::new("oc-0", 1, RoomConfig::default());
    let now = Time::from_ms(1_000);
    relay.handle(now, Input::Open(super::hello("oc-0.c1", "ann")));
    let part = Welcome {
        conn: "oc-0.c1".into(),
        seq: 0,
        resumed: false,
        missed: 0,
        expires: None,
        presence: "{}".into(),
    };
    let epoch = DownOp::Epoch { epoch: "e-1".into() };
    let down = Down { ops: vec![epoch, DownOp::Welcome(part)] }.to_text();
    relay.handle(now, Input::Down(&down));
    let outs: Vec<Output> = std::iter::from_fn(|| relay.poll_output()).collect();
    assert!(
        outs.iter().any(|o| matches!(o, Output::Close { conn, code: 1012, reason }
            if conn == "oc-0.c1" && reason == "relay_unwelcome")),
        "{outs:?}"
    );
    let sends = |o: &Output| {
        matches!(o, Output::Send { .. } | Output::Multicast { .. } | Output::AllBut { .. })
    };
    assert!(!outs.iter().any(sends));
    assert_eq!(relay.stats().bad_down, 1);
    assert_eq!(relay.clients(), 0);
}

/// A home rebuilt while its links stayed open sends a link that owes it its sessions the
/// room's frames one by one; the opens of a relay's turn are applied before their outputs (as
/// the adapter does), so a broadcast made before a newcomer joined found it among the link's
/// sessions and went to it before its welcome (the relay, which admits a client only by its
/// welcome, closed it 1012: 6 of 1,000 clients in each `bench/split` round). Now such a
/// broadcast does not reach a session whose welcome has not gone.
#[test]
fn opens_while_a_relay_owes_its_sessions_get_their_welcome_first() {
    let mut t = Topo::new(RoomConfig::default(), 20);
    let ann = t.connect("oc-0", "sess-ann1", "ann", "OC", None);
    let eve = t.connect("eu-0", "sess-eve1", "eve", "EU", None);
    t.settle();
    assert!(t.evict_home(), "the runtime could evict the home");
    // The relay's turn: three opens, before the home's recall reaches it.
    let new: Vec<String> = (0..3)
        .map(|i| t.connect("oc-0", &format!("sess-new{i}"), &format!("new{i}"), "OC", None))
        .collect();
    t.publish(&eve, "m-1", r#"{"n":1}"#);
    t.settle();
    for conn in &new {
        let got = t.take(conn);
        assert_eq!(
            got.first().map(|f| f["type"].clone()),
            Some("welcome".into()),
            "{conn}: {got:?}"
        );
        assert!(t.clients[conn].open, "{conn} was closed: {:?}", t.clients[conn].closed);
    }
    assert!(t.clients[&ann].open);
    assert_eq!(t.relay("oc-0").stats().bad_down, 0);
}
