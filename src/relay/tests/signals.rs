//! Signals at a relay: the order of one sender's, and which frames are signals at all.

use super::{ann_bob_and_cat, ann_bob_and_cat_with, of_type};
use crate::room::RoomConfig;

/// The `i` of each signal `frames` hold, in order.
fn is(frames: &[serde_json::Value]) -> Vec<u64> {
    of_type(frames, "signal").iter().filter_map(|s| s["data"]["i"].as_u64()).collect()
}

#[test]
fn a_signal_after_a_window_ended_but_before_its_flush_keeps_its_senders_order() {
    // The relay's window opens at Ann's second signal (`batch_above` 1), and her third waits in
    // it; her fourth arrives when the window has ended but before its wake-up ran (on a busy
    // relay the timer races the sockets). Sent at once, it went before the third, still waiting.
    let mut config = RoomConfig { batch_above: 1, ..RoomConfig::default() };
    config.finish();
    let (mut t, ann, bob, _cat) = ann_bob_and_cat_with(config, 25);
    for i in 0..3 {
        t.signal(&ann, &format!(r#"{{"i":{i}}}"#)); // the second opens the window, the third waits
    }
    t.now = t.now.plus_ms(60); // past the 50 ms window; its wake-up not yet run
    t.signal(&ann, r#"{"i":3}"#);
    t.settle();
    let got = is(&t.take(&bob));
    assert!(got.windows(2).all(|w| w[0] < w[1]), "Bob saw Ann's signals out of order: {got:?}");
    assert_eq!(got.last(), Some(&3), "the latest arrives: {got:?}");
}

#[test]
fn a_signal_spelled_with_an_escape_reaches_the_senders_own_relay_too() {
    // `"\u0073ignal"` is `"signal"` to the home's parser. The relay, looking for the word,
    // forwarded it without delivering it; the home, taking it for one the relay had delivered,
    // sent it to everyone but the relay's members: Mallory showed her region one stream and
    // the rest of the room another.
    let (mut t, ann, bob, cat) = ann_bob_and_cat(25);
    t.send(&ann, r#"{"type":"\u0073ignal","topic":"vote","data":{"i":7}}"#);
    t.settle();
    assert_eq!(is(&t.take(&bob)), vec![7], "Bob, at Ann's relay");
    assert_eq!(is(&t.take(&cat)), vec![7], "Cat, at another");
}

#[test]
fn one_users_big_signals_do_not_close_the_readers_at_her_relay() {
    // Ann, with three sockets at oc-0, sends 150 signals of 60 KB, each on a topic of its own
    // (nothing to coalesce), back to back. The relay delivered them all to Bob at once, 9 MB,
    // more than a reader may have in flight and waiting: Bob was closed 4013. The relay now
    // keeps each user's byte budget for the signals it delivers itself, as the home does.
    let (mut t, ann, bob, _cat) = ann_bob_and_cat(25);
    let mut anns = vec![ann];
    for s in ["sess-ann2", "sess-ann3"] {
        anns.push(t.connect("oc-0", s, "ann", "OC", None));
    }
    t.settle();
    for a in &anns {
        t.take(a);
    }
    t.take(&bob);
    let pad = "x".repeat(60_000);
    for i in 0..50 {
        // (The home refuses most of them for her budget too; a flood of refusals closes a
        // socket of hers 4029, and she sends on the others.)
        for a in &anns {
            if t.clients[a].closed.is_some() {
                continue;
            }
            let topic = format!("t-{a}-{i}");
            let frame =
                format!(r#"{{"type":"signal","topic":"{topic}","data":{{"pad":"{pad}"}}}}"#);
            t.send(a, &frame);
        }
    }
    let mut got = t.take(&bob);
    t.settle();
    got.extend(t.take(&bob));
    assert_eq!(t.clients[&bob].closed, None, "Bob stays");
    let signals = of_type(&got, "signal").len();
    assert!(signals <= (1 << 20) / 60_000 + 1, "{signals} signals of 60 KB reached Bob at once");
    let stats = t.relay("oc-0").stats();
    assert!(stats.local_signals_refused + stats.bytes_refused >= 100);
}

#[test]
fn a_users_publishes_and_signals_share_one_budget_at_her_relay() {
    // Mallory at oc-0 sends 16 publishes of 60 KB (the home takes them: her budget's burst),
    // then 16 signals of 60 KB on topics of their own. The relay, keeping a budget for her
    // signals only, found it full and delivered them all: Bob got twice her budget at once.
    let (mut t, mallory, bob, _cat) = ann_bob_and_cat(25);
    let pad = "x".repeat(60_000);
    for i in 0..16 {
        t.publish(&mallory, &format!("p{i}"), &format!(r#"{{"pad":"{pad}"}}"#));
    }
    for i in 0..16 {
        t.send(
            &mallory,
            &format!(r#"{{"type":"signal","topic":"s{i}","data":{{"pad":"{pad}"}}}}"#),
        );
    }
    t.settle();
    let got = t.take(&bob);
    let (messages, signals) = (of_type(&got, "message").len(), of_type(&got, "signal").len());
    assert!(
        messages + signals <= (1 << 20) / 60_000 + 2,
        "{messages} messages and {signals} signals of 60 KB"
    );
    assert!(messages >= 10, "her publishes came: {messages}");
}
