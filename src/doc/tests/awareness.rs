//! Awareness: kept per socket, removed when the socket goes or stops renewing, never stored.

use super::*;
use crate::doc::wire::Entry;

fn state(client: u64, clock: u32, json: &str) -> Vec<u8> {
    wire::awareness([Entry { client, clock, json: json.into() }].iter())
}

/// The awareness entries editor `i` received, newest last.
fn seen(sim: &Sim, i: usize) -> Vec<Entry> {
    sim.editors[i]
        .inbox
        .iter()
        .filter_map(|f| match wire::decode(f) {
            Ok(Message::Awareness(entries)) => Some(entries),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn a_closed_sockets_state_is_removed_for_the_others_and_never_stored() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    sim.send(0, &state(100, 1, r#"{"name":"ann"}"#));
    assert_eq!(seen(&sim, 1).last().unwrap().json, r#"{"name":"ann"}"#);
    let stored = sim.stored.bytes();
    sim.disconnect(0);
    let last = seen(&sim, 1).pop().unwrap();
    assert_eq!((last.client, last.clock, last.json.as_str()), (100, 2, "null"));
    assert_eq!(sim.stored.bytes(), stored, "awareness is never stored");
}

#[test]
fn a_state_not_renewed_goes_after_the_timeout() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    sim.send(0, &state(100, 1, "{}"));
    let due = sim.room.tick(sim.now).expect("a state to expire");
    assert_eq!(due, sim.now + 30_000);
    sim.now = due - 1;
    sim.room.tick(sim.now);
    sim.apply();
    assert!(!seen(&sim, 1).last().unwrap().is_removal());
    // A renewal at the same clock keeps it alive.
    sim.send(0, &state(100, 1, "{}"));
    sim.now = due + 1;
    sim.room.tick(sim.now);
    sim.apply();
    assert!(!seen(&sim, 1).last().unwrap().is_removal());
    sim.now += 30_000;
    sim.room.tick(sim.now);
    sim.apply();
    assert!(seen(&sim, 1).last().unwrap().is_removal());
}

#[test]
fn a_late_joiner_sees_everyone_and_the_newest_socket_of_a_tab_wins() {
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect_as(0, member("ann"));
    sim.send(0, &state(100, 1, r#"{"at":1}"#));
    // Ann's tab reconnects on a new socket before the old one is seen to close.
    let old = sim.editors[0].conn.unwrap();
    sim.connect_as(0, member("ann"));
    sim.send(0, &state(100, 2, r#"{"at":2}"#));
    sim.room.close(sim.now, old);
    sim.apply();
    sim.connect(2);
    let seen2 = seen(&sim, 2);
    assert_eq!(seen2.len(), 1);
    assert_eq!(seen2[0].json, r#"{"at":2}"#, "the old socket's close did not remove the tab");
}

#[test]
fn a_member_cannot_take_or_remove_another_users_state() {
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect_as(0, member("ann"));
    sim.connect_as(1, member("mallory"));
    sim.connect_as(2, member("bob"));
    sim.send(0, &state(100, 1, r#"{"name":"ann"}"#));
    // Mallory learned Ann's client id from the broadcast and removes it, then poses as it.
    sim.send(1, &state(100, 2, "null"));
    sim.send(1, &state(100, 9, r#"{"name":"mallory"}"#));
    let bob = seen(&sim, 2);
    assert_eq!(bob.len(), 1, "Bob saw only Ann's own state");
    assert_eq!(bob[0].json, r#"{"name":"ann"}"#);
    assert!(sim.editors[1].conn.is_some(), "refused, not closed: a stock client would loop");
}

#[test]
fn awareness_is_bounded_per_socket_and_per_state() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect(0);
    sim.connect(1);
    for client in 0..10 {
        sim.send(0, &state(1000 + client, 1, "{}"));
    }
    let states: std::collections::BTreeSet<u64> = seen(&sim, 1).iter().map(|e| e.client).collect();
    assert_eq!(states.len(), DocConfig::default().awareness_per_socket);
    let big = format!(r#"{{"x":"{}"}}"#, "x".repeat(9000));
    let before = seen(&sim, 1).len();
    sim.send(0, &state(1000, 2, &big));
    assert_eq!(seen(&sim, 1).len(), before, "a 9 KB state is not sent on");
}

#[test]
fn a_stock_clients_echo_of_anothers_state_is_ignored_not_refused() {
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect_as(0, member("ann"));
    sim.connect_as(1, member("bob"));
    sim.send(0, &state(100, 1, r#"{"name":"ann"}"#));
    // y-websocket sends back every state it receives, at the clock it received.
    sim.send(1, &state(100, 1, r#"{"name":"ann"}"#));
    let refused = sim.trace.iter().any(|e| matches!(e, Effect::Refused(..)));
    assert!(!refused, "an echo is no attack");
    assert_eq!(seen(&sim, 0).len(), 1, "and changes nothing, so nothing is sent on");
}

#[test]
fn a_sockets_attachment_fits_the_runtimes_16_kib_and_keeps_its_count_of_updates() {
    let mut sim = Sim::new(DocConfig::default(), 1);
    sim.connect_as(0, Member { extensions: true, ..member("ann") });
    sim.edit(0, "a");
    let conn = sim.editors[0].conn.unwrap();
    sim.send(0, &state(100, 1, r#"{"name":"ann"}"#));
    let text = sim.room.attachment(conn).unwrap();
    assert_eq!(crate::doc::attachment_conn(&text), Some(conn));
    let (_, small) = crate::doc::read_attachment(&text).unwrap();
    assert_eq!(small.awareness.len(), 1, "a small state is kept across hibernation");
    // Four states of 8 KiB of quotes: 32 KiB raw, about 64 KiB once escaped in the attachment.
    let quotes = format!(r#"{{"q":"{}"}}"#, "\\\"".repeat(4000));
    for client in 200..203 {
        sim.send(0, &state(client, 1, &quotes));
    }
    assert_eq!(sim.room.record(conn).unwrap().awareness.len(), 4, "all four are live");
    let text = sim.room.attachment(conn).unwrap();
    assert!(text.len() <= crate::doc::MAX_ATTACHMENT, "{} bytes", text.len());
    let (id, big) = crate::doc::read_attachment(&text).unwrap();
    assert_eq!(id, conn);
    assert!(big.awareness.is_empty(), "the states give way");
    assert_eq!(big.updates, 2, "the count of updates (its step 2 and its edit) is kept");
}

#[test]
fn a_tab_that_lost_its_socket_finds_its_state_its_own_again() {
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect_as(0, member("ann"));
    sim.connect_as(1, member("mallory"));
    sim.connect_as(2, member("bob"));
    sim.send(0, &state(100, 1, r#"{"name":"ann"}"#));
    // Ann's socket drops: her state is removed, and Mallory claims it at once, far ahead.
    sim.disconnect(0);
    sim.send(1, &state(100, 1000, r#"{"name":"ann","cursor":"forged"}"#));
    assert_eq!(refusals(&sim), vec![DocError::NotYourClient]);
    assert!(seen(&sim, 2).iter().all(|e| !e.json.contains("forged")), "Bob saw no forgery");
    // Ann's tab reconnects as the same user and takes its state back.
    sim.connect_as(0, member("ann"));
    sim.send(0, &state(100, 3, r#"{"name":"ann"}"#));
    let last = seen(&sim, 2).pop().unwrap();
    assert_eq!((last.client, last.clock, last.json.as_str()), (100, 3, r#"{"name":"ann"}"#));
}

#[test]
fn a_member_cannot_hold_the_state_of_a_client_another_user_writes_for() {
    let mut sim = Sim::new(DocConfig::default(), 3);
    sim.connect_as(0, member("ann"));
    sim.connect_as(1, member("mallory"));
    sim.connect_as(2, member("bob"));
    sim.edit(0, "ann's words"); // client 100 writes for Ann
                                // Long after her state (if any) was forgotten, Mallory poses as her tab.
    sim.now += 120_000;
    sim.send(1, &state(100, 1, r#"{"name":"ann"}"#));
    assert_eq!(refusals(&sim), vec![DocError::NotYourClient]);
    assert!(seen(&sim, 2).is_empty());
}

#[test]
fn a_tab_without_a_token_reconnects_as_another_user_and_keeps_its_client() {
    // Anonymous dev mode: each socket is a user of its own, so nothing binds to it.
    let anon = |n: u32| Member { anonymous: true, ..member(&format!("anon-{n}")) };
    let mut sim = Sim::new(DocConfig::default(), 2);
    sim.connect_as(0, anon(1));
    sim.connect(1);
    sim.send(0, &state(100, 1, "{}"));
    sim.edit(0, "draft");
    sim.disconnect(0);
    sim.connect_as(0, anon(2));
    sim.send(0, &state(100, 3, "{}"));
    sim.edit(0, " two");
    assert!(refusals(&sim).is_empty(), "{:?}", refusals(&sim));
    assert_eq!(sim.editors[1].text(), "draft two");
}

#[test]
fn asking_for_everyones_cursors_is_paid_from_the_askers_reply_budget() {
    // Two editors hold four 8 KiB states each; Mallory asks for all of them 400 times (a
    // one-byte frame each, her whole frame burst). Each answer is 64 KiB: 26 MB the room made
    // and sent for 400 bytes, with nothing charged. It is now paid like a sync step 1's answer.
    // A small document, so the reply burst (twice the largest frame) is 256 KiB: well under
    // the window that closes a reader who never confirms (4 MiB), which bounded it before.
    let config = DocConfig { max_doc_bytes: 64 * 1024, ..DocConfig::default() };
    let mut sim = Sim::new(config, 3);
    for i in 0..3 {
        sim.connect(i);
    }
    let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(8_000));
    for i in 0..2 {
        for k in 0..4u64 {
            sim.send(i, &state(100 + 10 * i as u64 + k, 1, &big));
        }
    }
    sim.editors[2].inbox.clear();
    for _ in 0..400 {
        if sim.editors[2].closed.is_some() {
            break; // refused often enough to be let go (4029): that holds too
        }
        sim.send(2, &[3]); // query awareness
    }
    let got: usize = sim.editors[2].inbox.iter().map(Vec::len).sum();
    let burst = config.reply_burst() as usize;
    assert!(got <= burst + 70_000, "{got} bytes of cursors for 400 one-byte asks (burst {burst})");
    let refused = refusals(&sim);
    assert!(
        refused.contains(&DocError::RateLimited),
        "the asks past it are refused: {refused:?} {:?} {got}",
        sim.editors[2].closed
    );
}
