//! What the fuzzer found once it held every frame to its connection's budget and every send of
//! the rules to its payer's (issue 17): each as it was found, now fixed. The first ten are at
//! the end of `fuzz.rs`.

use serde_json::{json, Value};

use super::fuzz_budgets::Sender;
use crate::room::sim::Sim;
use crate::room::RoomConfig;

fn of_type(frames: &[Value], kind: &str) -> Vec<Value> {
    frames.iter().filter(|f| f["type"] == kind).cloned().collect()
}

/// Finding 11: after a load of the room, a connection's marks started again from the same
/// key and counter, so the first mark of the new load had the token of the first mark of the
/// old one. A client echoing an old mark it kept confirmed bytes sent after the load, which it
/// never read: its window opened without reading, and the runtime buffered what it could not
/// take. Now each load makes its marks from a key mixed with the load's own randomness.
#[test]
fn finding_11_an_old_mark_echoed_after_a_load_confirms_nothing() {
    let mut c = RoomConfig { send_window: 4096, ..RoomConfig::default() };
    c.finish();
    let mut s = Sim::new(c);
    let reader = s.connect_as("sess-reader", "ann", "EU", None);
    let writer = s.connect_as("sess-writer", "bob", "EU", None);
    s.sockets.get_mut(&reader).unwrap().silent = true;
    let big = json!("x".repeat(1_500)).to_string();
    for i in 0..3 {
        s.publish(&writer, &format!("a{i}"), &big);
        s.take(&writer);
    }
    let old: Vec<String> = of_type(&s.sockets[&reader].inbox, "mark")
        .iter()
        .map(|m| m["mark"].as_str().unwrap().to_owned())
        .collect();
    assert!(!old.is_empty(), "marks before the load");
    // The reader confirms everything it was sent, and the room hibernates.
    for m in &old {
        s.send(&reader, &format!(r#"{{"type":"mark","mark":"{m}"}}"#));
    }
    s.take(&reader);
    s.evict();
    // After the load the room sends a window's worth and more; the reader reads nothing
    // and echoes the marks it kept from before.
    for i in 0..8 {
        s.publish(&writer, &format!("b{i}"), &big);
        s.take(&writer);
    }
    let waiting = |s: &mut Sim| -> u64 {
        let v: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
        v["waiting_bytes"].as_u64().unwrap()
    };
    let before = waiting(&mut s);
    assert!(before > 0, "frames wait behind the reader's full window");
    for m in &old {
        s.send(&reader, &format!(r#"{{"type":"mark","mark":"{m}"}}"#));
    }
    assert!(waiting(&mut s) >= before, "an old mark opened the window of the new load");
    let new: Vec<String> = of_type(&s.sockets[&reader].inbox, "mark")
        .iter()
        .map(|m| m["mark"].as_str().unwrap().to_owned())
        .collect();
    assert!(new.iter().all(|m| !old.contains(m)), "a mark of the new load repeats an old one");
}

/// Finding 12: a drain sent every frame waiting for a connection before closing it, those
/// held for the user's reply budget included: the rules' sends a user could not pay for yet
/// went out all at once. Now a drain sends what waits for a window, not what is held.
#[test]
fn finding_12_a_drain_sends_nothing_held_for_the_reply_budget() {
    let mut c = RoomConfig::default();
    c.finish();
    let burst = c.reply_burst_bytes as usize;
    let rules = Sender { join_blob: burst / 3, poke_blob: 10 };
    let mut s = Sim::with_rules(c, move || Box::new(rules));
    let tabs: Vec<String> =
        (0..4).map(|i| s.connect_as(&format!("sess-tab-{i:03}"), "ann", "EU", None)).collect();
    let histories = |s: &Sim, conn: &str| {
        of_type(&s.sockets[conn].inbox, "signal").iter().filter(|f| f["topic"] == "history").count()
    };
    let before: Vec<usize> = tabs.iter().map(|t| histories(&s, t)).collect();
    assert_eq!(before[3], 0, "the fourth history waits for the budget: {before:?}");
    s.room.drain(s.now);
    s.pump();
    assert_eq!(s.sockets[&tabs[3]].closed, Some(1001));
    let after: Vec<usize> = tabs.iter().map(|t| histories(&s, t)).collect();
    assert_eq!(after, before, "the drain sent what the budget had not paid for");
}
