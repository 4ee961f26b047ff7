//! A member's flood at her relay: what crosses the link to the home, and who else pays.

use serde_json::Value;

use super::{ann_bob_and_cat, of_type};

/// A publish of about `bytes` bytes.
fn big_publish(id: &str, bytes: usize) -> String {
    format!(
        r#"{{"type":"publish","id":"{id}","topic":"chat","data":{{"pad":"{}"}}}}"#,
        "x".repeat(bytes)
    )
}

#[test]
fn a_flood_past_her_byte_budget_stops_at_her_relay() {
    // Mallory sends 64 publishes of 60 KB at once (3.8 MB), well inside her frame budget's
    // count but four times her byte budget's burst. The home refused most of them for bytes,
    // but only after each had crossed the link and been parsed, and a byte refusal does not
    // close the socket: the home's thread read everything she could upload, for free.
    let (mut t, mallory, bob, _cat) = ann_bob_and_cat(25);
    let before = t.up_bytes;
    for i in 0..64 {
        t.send(&mallory, &big_publish(&format!("m{i}"), 60_000));
    }
    t.settle();
    let crossed = t.up_bytes - before;
    assert!(crossed < 1_200_000, "{crossed} bytes crossed the link for her 3.8 MB");
    assert!(t.relay("oc-0").stats().bytes_refused >= 40);
    let refusals = t.take(&mallory);
    let refused =
        of_type(&refusals, "error").iter().filter(|e| e["code"] == "rate_limited").count();
    assert!(refused >= 40, "she hears why: {refused} refusals");
    // What her budget allowed reached Bob, in order, once.
    let got = of_type(&t.take(&bob), "message");
    assert!((10..=18).contains(&got.len()), "{} of her messages reached Bob", got.len());
    let ids: Vec<&str> = got.iter().filter_map(|m| m["id"].as_str()).collect();
    let want: Vec<String> = (0..ids.len()).map(|i| format!("m{i}")).collect();
    assert_eq!(ids, want, "her first messages, in order, each once");
    assert_eq!(t.clients[&bob].closed, None);
}

#[test]
fn a_client_not_yet_admitted_sends_up_no_more_than_her_budget() {
    // Mallory's socket is open at her relay, its open on its way to the home (a relay that
    // dials its home holds everything meanwhile): she sends as fast as she can. Everything
    // went up (or was held for the link), and a dial that took long made the relay stop and
    // close every client of the instance.
    let (mut t, _ann, bob, _cat) = ann_bob_and_cat(200);
    let before = t.up_bytes;
    let mallory = t.connect("oc-0", "sess-mal1", "mallory", "OC", None);
    for i in 0..64 {
        t.send(&mallory, &big_publish(&format!("m{i}"), 60_000));
    }
    assert!(t.relay("oc-0").stats().bytes_refused >= 40);
    t.settle();
    let crossed = t.up_bytes - before;
    assert!(crossed < 1_200_000, "{crossed} bytes crossed the link before her welcome");
    assert_eq!(t.clients[&bob].closed, None);
}

#[test]
fn a_frame_with_a_control_character_is_answered_at_the_relay_and_never_crosses_the_link() {
    // 64 KiB of U+0001 is valid UTF-8 and no JSON at all; escaped in the link's JSON each byte
    // became six (`\u0001`), which the home unescaped before it refused the frame.
    let (mut t, mallory, _bob, _cat) = ann_bob_and_cat(25);
    let before = (t.up_bytes, t.up_messages);
    t.send(&mallory, &"\u{1}".repeat(60_000));
    t.send(&mallory, "{\"type\":\"signal\",\"topic\":\"t\",\"data\":\"a\u{1}b\"}");
    t.settle();
    assert_eq!((t.up_bytes, t.up_messages), before, "nothing crossed");
    let got = t.take(&mallory);
    let bad = of_type(&got, "error").iter().filter(|e| e["code"] == "bad_frame").count();
    assert_eq!(bad, 2, "{got:?}");
    // Whitespace between a frame's tokens is JSON: it still crosses, and is taken.
    t.send(&mallory, "{\t\"type\":\n\"publish\",\r\"id\":\"ok\",\"topic\":\"chat\",\"data\":1}");
    t.settle();
    let acks = of_type(&t.take(&mallory), "ack");
    assert_eq!(acks.len(), 1, "the frame with whitespace is taken");
}

#[test]
fn mark_shaped_frames_before_her_welcome_are_paid_like_any_other() {
    // An echo of a home's mark goes up unpaid (the home takes it free); before her welcome a
    // client has been marked by nobody, and 40,000 frames of the shape (3.6 MB) filled the dialing
    // relay's hold for free.
    let (mut t, _ann, bob, _cat) = ann_bob_and_cat(200);
    let before = t.up_bytes;
    let mallory = t.connect("oc-0", "sess-mal1", "mallory", "OC", None);
    let forged = format!(r#"{{"type":"mark","mark":"{}"}}"#, "m".repeat(64));
    for _ in 0..40_000 {
        t.send(&mallory, &forged);
    }
    t.settle();
    let crossed = t.up_bytes - before;
    // Her burst (1 MiB) of them, escaped in the link's JSON; 5.5 MB when they went up unpaid.
    assert!(crossed < 2_500_000, "{crossed} bytes of forged echoes crossed the link");
    assert_eq!(t.clients[&bob].closed, None);
}

#[test]
fn a_bad_frame_before_her_welcome_is_answered_after_it() {
    // A client's first frame is its welcome (PROTOCOL.md). At the home that holds: it admits
    // an open before it reads the socket. At a relay the open waits a link's crossing (and a
    // storm's hold), and the relay answered a binary frame or a control character at once:
    // `bad_frame` came first, and a client that reads the first frame as the welcome took the
    // error for it. Under a home of each link version: one that sends whole welcomes (2), one
    // whose relay makes them (the current).
    for version in [crate::protocol::link::LINK_VERSION, 2] {
        let (mut t, _ann, _bob, _cat) = super::ann_bob_and_cat(100);
        t.link_version = version;
        let mallory = t.connect("na-0", "sess-mal1", "mallory", "NA", None);
        t.send_binary(&mallory, 10);
        t.send(&mallory, "\u{1}");
        assert!(t.clients[&mallory].inbox.is_empty(), "v{version}: nothing before her welcome");
        t.settle();
        let got = t.take(&mallory);
        let kinds: Vec<&str> = got.iter().take(3).filter_map(|f| f["type"].as_str()).collect();
        assert_eq!(kinds, ["welcome", "error", "error"], "v{version}: {got:?}");
        let bad = of_type(&got, "error").iter().filter(|e| e["code"] == "bad_frame").count();
        assert_eq!(bad, 2, "v{version}: both answered: {got:?}");
        // What waits for her welcome is bounded: a flood before it keeps at most the room's
        // burst of answers, the rest dropped.
        let burst = crate::room::RoomConfig::default().burst;
        let mallet = t.connect("na-0", "sess-mal2", "mallory", "NA", None);
        for _ in 0..burst + 30 {
            t.send_binary(&mallet, 10);
        }
        t.settle();
        let owed = of_type(&t.take(&mallet), "error").len() as u64;
        assert_eq!(owed, burst, "v{version}: the answers kept for her welcome");
        assert!(t.relay("na-0").stats().binary_dropped >= 30, "v{version}: the rest dropped");
        // Once she is in, an answer goes at once.
        t.send_binary(&mallory, 10);
        let now: Vec<Value> = t.clients[&mallory].inbox.clone();
        assert_eq!(of_type(&now, "error").len(), 1, "v{version}: at once: {now:?}");
    }
}
