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
