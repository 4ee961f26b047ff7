//! A relay keeps its clients' flow windows: a member who stops reading is held and let go at
//! the relay (4013, as the home lets go of its own), whatever fills its window (the home's
//! frames or its region's signals), and no mark echo crosses the link; a long catch-up is not
//! taken for a slow reader.

use serde_json::Value;

use super::seqs;
use crate::relay::sim::Topo;
use crate::room::RoomConfig;

/// A counter of the home's `/stats`.
fn home_stat(t: &mut Topo, key: &str) -> u64 {
    let stats: Value = serde_json::from_str(&t.home.room.stats_json()).expect("json");
    stats[key].as_u64().unwrap_or_else(|| panic!("no {key} in {stats}"))
}

/// `names` connected at `relay` (region OC), welcomed, their welcomes read.
fn at(t: &mut Topo, relay: &str, names: &[&str]) -> Vec<String> {
    let conns: Vec<String> =
        names.iter().map(|n| t.connect(relay, &format!("sess-{n}"), n, "OC", None)).collect();
    t.settle();
    for c in &conns {
        assert_eq!(t.take(c)[0]["type"], "welcome", "{c}");
    }
    conns
}

/// A message of about `kb` KB with its index.
fn big(i: usize, kb: usize) -> String {
    format!(r#"{{"i":{i},"pad":"{}"}}"#, "x".repeat(kb * 1000))
}

#[test]
fn a_member_who_stops_reading_is_held_and_let_go_at_its_relay_not_at_the_home() {
    // One writer at 600 KB a second: past a user's byte budget, which is not what this tests.
    let config = RoomConfig {
        user_bytes_per_sec: 1 << 30,
        user_bytes_burst: 1 << 30,
        ..RoomConfig::default()
    };
    let (window, backlog) = (config.send_window, config.max_backlog);
    let mut t = Topo::new(config, 20);
    let oc = at(&mut t, "oc-0", &["reader", "hog"]);
    let (reader, hog) = (oc[0].clone(), oc[1].clone());
    let writer = at(&mut t, "eu-0", &["writer"]).remove(0);
    t.clients.get_mut(&hog).expect("hog").silent = true;
    let (hog_bytes, mut most_waiting) = (t.clients[&hog].bytes, 0);
    let mut got = Vec::new();
    for i in 1..=100 {
        t.publish(&writer, &format!("m-{i}"), &big(i, 60));
        t.advance(100);
        got.extend(seqs(&t.take(&reader), "message"));
        t.take(&writer);
        most_waiting = most_waiting.max(t.relay("oc-0").waiting_bytes());
    }
    t.settle();
    got.extend(seqs(&t.take(&reader), "message"));
    assert_eq!(got, (1..=100).collect::<Vec<u64>>(), "the reader got every message once");
    // The hog was sent its window and no more, and let go when its backlog was over the bound.
    let hog_got = seqs(&t.take(&hog), "message");
    let sent = t.clients[&hog].bytes - hog_bytes;
    assert!(sent <= window + 70_000, "the hog was handed {sent} bytes without reading");
    assert_eq!(hog_got, (1..=hog_got.len() as u64).collect::<Vec<u64>>(), "in order: {hog_got:?}");
    assert_eq!(t.clients[&hog].closed, Some(4013));
    assert!(most_waiting <= backlog + 70_000, "{most_waiting} bytes waited at the relay");
    assert_eq!(t.relay("oc-0").stats().backlog_closes, 1);
    assert_eq!(t.relay("oc-0").waiting_bytes(), 0, "nothing waits for a client that is gone");
    // The home held nothing for it and closed nothing: the relay did, and the home heard.
    assert_eq!(
        (home_stat(&mut t, "backlog_closes"), home_stat(&mut t, "unconfirmed_bytes")),
        (0, 0)
    );
    assert_eq!(t.home.room.members(), 2);
    // The reader's echoes stayed at its relay.
    assert!(t.relay("oc-0").stats().echoes >= 20, "{:?}", t.relay("oc-0").stats());
    assert_eq!(t.up_echoes, 0, "no echo crossed the link");
}

#[test]
fn a_member_who_never_reads_cannot_grow_its_relay_with_its_regions_signals() {
    // Three movers at 600 KB a second each: past a user's byte budget, not what this tests.
    let config = RoomConfig {
        user_bytes_per_sec: 1 << 30,
        user_bytes_burst: 1 << 30,
        ..RoomConfig::default()
    };
    let (window, backlog) = (config.send_window, config.max_backlog);
    let mut t = Topo::new(config, 20);
    let oc = at(&mut t, "oc-0", &["victim", "hog", "m1", "m2", "m3"]);
    let (victim, hog, movers) = (oc[0].clone(), oc[1].clone(), oc[2..].to_vec());
    t.clients.get_mut(&hog).expect("hog").silent = true;
    let hog_bytes = t.clients[&hog].bytes;
    let (mut most_waiting, mut victim_got, mut closed_at) = (0, 0, None);
    let pad = "y".repeat(30_000);
    // Each mover signals on a topic of its own every 50 ms (its rate): nothing coalesces.
    for step in 0..400 {
        for (m, mover) in movers.iter().enumerate() {
            let text = format!(r#"{{"type":"signal","topic":"t{step}","data":"{m}{pad}"}}"#);
            t.send(mover, &text);
        }
        t.advance(50);
        victim_got += t.take(&victim).iter().filter(|f| f["type"] == "signal").count();
        for mover in &movers {
            t.take(mover);
        }
        most_waiting = most_waiting.max(t.relay("oc-0").waiting_bytes());
        if closed_at.is_none() && t.clients[&hog].closed.is_some() {
            closed_at = Some(step);
        }
    }
    let sent = t.clients[&hog].bytes - hog_bytes;
    // 3 x 20 x 30 KB a second for 20 s would be 36 MB; the hog was handed its window.
    assert!(sent <= window + 100_000, "the hog was handed {sent} bytes without reading");
    assert_eq!(t.clients[&hog].closed, Some(4013), "closed at step {closed_at:?}");
    assert!(closed_at.is_some_and(|s| s < 100), "let go within 5 s: step {closed_at:?}");
    assert!(most_waiting <= backlog + 100_000, "{most_waiting} bytes waited at the relay");
    assert_eq!(t.relay("oc-0").stats().backlog_closes, 1);
    // The one who reads got the others' signals all along.
    assert!(victim_got >= 3 * 300, "the victim got {victim_got} signals");
}

#[test]
fn a_reader_stuck_behind_its_window_at_a_relay_is_let_go_after_the_echo_deadline() {
    let config = RoomConfig { echo_deadline_ms: 3_000, ..RoomConfig::default() };
    let mut t = Topo::new(config, 20);
    let hog = at(&mut t, "oc-0", &["hog"]).remove(0);
    let writer = at(&mut t, "eu-0", &["writer"]).remove(0);
    t.clients.get_mut(&hog).expect("hog").silent = true;
    // 24 x 60 KB: over its window (1 MiB), far under its backlog bound (4 MiB).
    for i in 1..=24 {
        t.publish(&writer, &format!("m-{i}"), &big(i, 60));
        t.advance(100);
        t.take(&writer);
    }
    let stalled = t.now;
    assert_eq!(t.clients[&hog].closed, None, "not over its backlog");
    while t.clients[&hog].closed.is_none() && t.now.ms() < stalled.ms() + 20_000 {
        t.send(&hog, r#"{"type":"ping"}"#); // it pings: not silent, only stuck
        t.advance(500);
    }
    let after = t.clients[&hog].closed_at.expect("let go").ms() - stalled.ms();
    assert_eq!(t.clients[&hog].closed, Some(4013));
    assert!((500..=8_000).contains(&after), "let go {after} ms after it stalled");
    assert_eq!(t.relay("oc-0").stats().stalled_closes, 1);
    // It comes back and resumes where it was, and gets the rest once each.
    let had = seqs(&t.take(&hog), "message");
    assert!(!had.is_empty() && had.len() < 24, "the hog had {had:?}");
    t.clients.get_mut(&hog).expect("hog").silent = false;
    let back = t.resume(&hog, "oc-0");
    let mut rest = Vec::new();
    for _ in 0..20 {
        t.settle();
        rest.extend(seqs(&t.take(&back), "message"));
    }
    let want: Vec<u64> = (had.len() as u64 + 1..=24).collect();
    assert_eq!(rest, want);
}

/// A room with a small window and backlog (64 KiB each): a catch-up of `n` 40 KB messages to a
/// member of `eu-0` who was away (another member stays there) comes whole, read as it goes.
fn long_catch_up(n: usize) -> (Topo, Vec<u64>) {
    let mut config = RoomConfig {
        send_window: 64 * 1024,
        max_backlog: 64 * 1024,
        user_bytes_per_sec: 1 << 30, // nine writers' bytes, not a user's budget, are the load
        user_bytes_burst: 1 << 30,
        ..RoomConfig::default()
    };
    config.finish(); // a mark every quarter window
    let mut t = Topo::new(config, 20);
    let eu = at(&mut t, "eu-0", &["reader", "keeper"]);
    let (reader, keeper) = (eu[0].clone(), eu[1].clone());
    let writer = at(&mut t, "oc-0", &["writer"]).remove(0);
    t.drop_client(&reader);
    for i in 1..=n {
        t.publish(&writer, &format!("m-{i}"), &big(i, 40));
        t.advance(60);
        t.take(&writer);
        t.take(&keeper);
    }
    t.settle();
    let back = t.resume(&reader, "eu-0");
    let mut got = Vec::new();
    for _ in 0..200 {
        t.advance(20);
        got.extend(seqs(&t.take(&back), "message"));
    }
    assert_eq!(t.clients[&back].closed, None, "a catch-up is not a slow reader");
    (t, got)
}

#[test]
fn a_long_catch_up_the_relay_sends_from_its_tail_is_not_a_slow_reader() {
    let (mut t, got) = long_catch_up(40); // 1.6 MB: inside the user's reply burst (2 MiB)
    assert_eq!(got, (1..=40).collect::<Vec<u64>>());
    assert_eq!(home_stat(&mut t, "tail_replays"), 1, "the relay's tail served it");
}

#[test]
fn a_long_catch_up_the_home_sends_is_not_a_slow_reader_at_the_relay() {
    let (mut t, got) = long_catch_up(60); // 2.4 MB: past the reply burst, the home paces it
    assert_eq!(got, (1..=60).collect::<Vec<u64>>());
    assert_eq!(home_stat(&mut t, "tail_replays"), 0, "the home served it");
    assert!(home_stat(&mut t, "catch_up_frames") >= 60);
}

#[test]
fn a_relay_that_falls_behind_its_link_is_closed_before_the_home_buffers_more_than_a_window() {
    use crate::protocol::link::{LEASE_MS, LINK_WINDOW, MESSAGE_MAX};
    use crate::relay::Relays;
    // Writers past a user's byte budget: the load is the point, not the budget.
    let config = RoomConfig {
        user_bytes_per_sec: 1 << 30,
        user_bytes_burst: 1 << 30,
        ..RoomConfig::default()
    };
    let mut t = Topo::new(config, 20);
    let oc = at(&mut t, "oc-0", &["ann", "bob"]);
    let reader = at(&mut t, "na-0", &["reader"]).remove(0);
    let names: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
    let writers = at(&mut t, "eu-0", &names.iter().map(String::as_str).collect::<Vec<_>>());
    let link = Relays::link("oc-0", t.relay("oc-0").epoch());
    // oc-0 stops taking its link's messages as fast as they come: it answers nothing (a relay
    // that hangs is the extreme of one that falls behind).
    t.hang_relay("oc-0");
    let hung_at = t.now;
    let (mut most, mut closed_after, mut got, mut n) = (0, None, Vec::new(), 0);
    // Eight writers, 60 KB each at 20 a second: 9.6 MB a second for every relay.
    while closed_after.is_none() && t.now.ms() < hung_at.ms() + LEASE_MS {
        for w in &writers {
            n += 1;
            t.publish(w, &format!("m-{n}"), &big(n, 60));
        }
        t.advance(50);
        most = most.max(t.home.downlinks.in_flight(&link));
        got.extend(seqs(&t.take(&reader), "message"));
        for c in writers.iter().chain(&oc) {
            t.take(c);
        }
        if t.behind_closed > 0 {
            closed_after = Some(t.now.ms() - hung_at.ms());
        }
    }
    let closed_after = closed_after.expect("the home closed the link before the lease");
    eprintln!(
        "closed {closed_after} ms after the relay stopped answering; at most {most} B in flight"
    );
    assert!(closed_after < LEASE_MS, "closed {closed_after} ms after it fell behind");
    assert!(most <= LINK_WINDOW + 2 * MESSAGE_MAX as u64, "{most} bytes in flight");
    assert_eq!(t.behind_closed, 1, "only the relay that fell behind");
    // Its members were told to come back (1012) and are back without a gap or a leave.
    let codes: Vec<Option<u16>> = oc.iter().map(|c| t.clients[c].closed).collect();
    assert_eq!(codes, [Some(1012), Some(1012)], "ann and bob were restarted");
    t.settle();
    let since: Vec<u64> = oc.iter().map(|c| t.clients[c].seq).collect();
    let back: Vec<String> = oc.iter().map(|c| t.resume(c, "oc-0")).collect();
    let mut theirs = vec![Vec::new(); 2];
    for _ in 0..100 {
        t.advance(50);
        got.extend(seqs(&t.take(&reader), "message"));
        for (i, c) in back.iter().enumerate() {
            theirs[i].extend(seqs(&t.take(c), "message"));
        }
        for c in &writers {
            t.take(c);
        }
    }
    t.settle();
    got.extend(seqs(&t.take(&reader), "message"));
    let stored = t.home.disk.seq;
    for (i, seqs) in theirs.iter().enumerate() {
        assert_eq!(*seqs, (since[i] + 1..=stored).collect::<Vec<u64>>(), "{} resumed", back[i]);
    }
    assert_eq!(got, (1..=stored).collect::<Vec<u64>>(), "the reader at a relay that kept up");
    assert_eq!(t.home.room.members(), 11, "ann and bob never left");
}
