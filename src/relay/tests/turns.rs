//! A busy relayed room's turns: the home sends each frame once per link and counts it so, and
//! a relay packs what one of the home's messages brings each client into one text.

use serde_json::Value;

use super::{of_type, room, seqs};

/// The home's stats, as JSON.
fn home_stats(t: &mut crate::relay::sim::Topo) -> Value {
    serde_json::from_str(&t.home.room.stats_json()).expect("stats are JSON")
}

/// 120 members over four relays; five members of oc-0 publish in one turn of their relay, 40
/// such turns 100 ms apart (50 messages a second). Counted per member, that is 6,000 frames
/// asked for a second, past `BATCH_ABOVE` (5,000): the home went batching, queueing every
/// message in each of the 120 members' outboxes and packing them at the end of its turn, work
/// per member that the relays are there to take (a native publish at 1,000 relayed members
/// cost the home 273 µs batching against 24 µs). The home now counts one send per link, never
/// batches for its relays' sessions, and sends each message once per link at once; the relay
/// packs the turn's five messages for each of its clients into one text. Every member still
/// gets every message once, in order.
#[test]
fn a_busy_relayed_room_is_batched_by_its_relays_not_per_member_at_the_home() {
    let (mut t, all) = room(10, 30);
    let writers: Vec<String> = all[0][..5].to_vec();
    let reader = all[1][0].clone(); // at eu-0
    let texts = t.clients[&reader].texts;
    for turn in 0..40 {
        for (w, conn) in writers.iter().enumerate() {
            t.publish(conn, &format!("t{turn}-w{w}"), r#"{"n":1}"#);
        }
        t.settle();
        t.advance(100);
    }
    let stats = home_stats(&mut t);
    assert_eq!(stats["batches"], 0, "the home batched per member: {stats}");
    let asked = stats["frames_per_sec"].as_u64().expect("a rate");
    assert!(asked <= 50 * 5, "the home counted {asked} frames a second for 50 messages");
    let got = t.take(&reader);
    let seen = seqs(&got, "message");
    assert_eq!(seen, (1..=200).collect::<Vec<u64>>(), "every message once, in order");
    let sent = t.clients[&reader].texts - texts;
    assert!(sent <= 40 + 5, "the reader got {sent} texts for 40 turns of 5 messages");
    for writer in &writers {
        let got = t.take(writer);
        assert_eq!(seqs(&got, "ack").len(), 40, "{writer}'s acks");
        assert_eq!(of_type(&got, "message").len(), 200, "{writer} got every message");
    }
}
