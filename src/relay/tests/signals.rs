//! Signals at a relay: the order of one sender's, and which frames are signals at all.

use serde_json::Value;

use super::{ann_bob_and_cat, ann_bob_and_cat_with, of_type, signal_is, REGIONS, RELAYS};
use crate::protocol::link::LINK_VERSION;
use crate::relay::sim::Topo;
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

/// A relayed room of 60 members over four relays, one user (two sockets) signalling at her
/// whole allowed rate (40 a second, a new topic each: nothing coalesces), Vic at another relay
/// moving a cursor ten times a second, scaled so that the room sends its members more than
/// `OUTBOUND_BUDGET` frames a second (600 here; 50,000 by default, which 2,600+ relayed members
/// reach the same way). The home counted every relayed member as a send of its own, found itself
/// over its budget and shed everyone's signals to the other relays: Cat, at a third, missed
/// Vic's cursor. A relay of link version 4 takes each signal once and coalesces and sheds it for
/// its own members: the home sends a signal once per relay, never per member.
#[test]
fn one_members_signals_do_not_take_the_homes_budget_for_everyone_elses() {
    let (got, home_sends, shed, home_signals) = signals_past_the_budget(LINK_VERSION);
    assert_eq!(got, 50, "Cat got {got} of Vic's 50 cursor moves ({shed} shed at the home)");
    assert_eq!(shed, 0, "the home shed signals");
    // Each signal crossed once to each relay but its sender's: Mallory's 200 and Vic's 50.
    assert_eq!(home_signals, 250, "signals the home sent na-0 once each");
    assert!(home_sends <= 3 * 60, "the home's sends a second: {home_sends}");
}

/// The same room with relays of link version 3, whose sessions the home windows one by one:
/// the hole above, kept for them (the home serves each link in its relay's version).
#[test]
fn with_relays_of_link_version_3_the_home_still_windows_each_session() {
    let (got, home_sends, shed, home_signals) = signals_past_the_budget(3);
    assert!(shed > 0 && got < 50, "nothing shed: Cat got {got}, home sends {home_sends}/s");
    assert_eq!(home_signals, 0, "a relay of version 3 is sent no keyed signal");
}

/// Cat's count of Vic's 50 signals, the home's sends a second at the end, the signals the home
/// shed, and the keyed signals Cat's relay was sent.
fn signals_past_the_budget(version: u32) -> (usize, u64, u64, u64) {
    let mut config = RoomConfig { outbound_budget: 600, batch_above: 60, ..RoomConfig::default() };
    config.finish();
    let mut t = Topo::new(config, 10);
    t.link_version = version;
    let mut conns = Vec::new();
    for (r, region) in RELAYS.iter().zip(REGIONS) {
        for i in 0..15 {
            let user = format!("{region}-u{i}");
            conns.push(t.connect(r, &format!("sess-{user}"), &user, region, None));
        }
    }
    let mallory = [conns[0].clone(), t.connect("oc-0", "sess-OC-u0b", "OC-u0", "OC", None)];
    let (vic, cat) = (conns[15].clone(), conns[30].clone()); // at eu-0 and na-0
    t.settle();
    for c in conns.iter().chain(&mallory) {
        t.take(c);
    }
    for step in 0..200u64 {
        let m = &mallory[step as usize % 2];
        t.send(m, &format!(r#"{{"type":"signal","topic":"m{step}","data":{{"i":{step}}}}}"#));
        if step % 4 == 0 {
            t.signal(&vic, &format!(r#"{{"i":{step}}}"#));
        }
        t.advance(25);
    }
    t.settle();
    let got = signal_is(&t.take(&cat), "sess-EU-u0");
    assert!(got.windows(2).all(|w| w[0] < w[1]), "Vic's in order at Cat: {got:?}");
    let stats: Value = serde_json::from_str(&t.home.room.stats_json()).expect("JSON");
    let sends = stats["outbound_per_sec"].as_u64().expect("a rate");
    let shed = stats["signals_dropped"].as_u64().expect("a count");
    (got.len(), sends, shed, t.relay("na-0").stats().home_signals)
}

/// A room with sockets of the home's own beside one relay's members (a room crossing the
/// relay threshold keeps its direct sockets). Ann signals at oc-0: her relay delivers it to Bob
/// at once, and the home sends it to Dan, its own socket. With no other relay to send it to, the
/// home made it a plain broadcast, which went back over oc-0's link skipping only Ann: Bob got
/// it twice, the second a round trip late, uncoalesced.
#[test]
fn a_signal_from_a_relay_beside_the_homes_own_sockets_does_not_come_back_to_it() {
    let mut t = Topo::new(RoomConfig::default(), 10);
    let ann = t.connect("oc-0", "sess-ann1", "ann", "OC", None);
    let bob = t.connect("oc-0", "sess-bob1", "bob", "OC", None);
    let dan = t.home.connect("sess-dan1", "EU", None);
    t.settle();
    for c in [&ann, &bob] {
        t.take(c);
    }
    t.home.take(&dan);
    t.signal(&ann, r#"{"i":1}"#);
    t.settle();
    assert_eq!(is(&t.take(&bob)), vec![1], "Bob, at Ann's relay, once");
    assert_eq!(is(&t.home.take(&dan)), vec![1], "Dan, the home's own socket");
    assert!(is(&t.take(&ann)).is_empty(), "Ann never gets her own");
}
