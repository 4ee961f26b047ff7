//! Load behaviour on virtual time: coalescing windows, shedding order under
//! an outbound budget, and catch-up replay spread over a reconnect storm.

use serde_json::Value;

use crate::room::sim::{seqs, Sim};
use crate::room::RoomConfig;

fn signal(topic: &str, n: u64) -> String {
    format!(r#"{{"type":"signal","topic":"{topic}","data":{{"n":{n}}}}}"#)
}

fn of_type(frames: &[Value], kind: &str) -> Vec<Value> {
    frames.iter().filter(|f| f["type"] == kind).cloned().collect()
}

/// A room that batches past `batch_above` frames a second, with budgets no test here reaches.
fn batching(batch_above: u64) -> RoomConfig {
    RoomConfig {
        batch_above,
        rate_per_sec: 1_000,
        burst: 1_000,
        user_rate_per_sec: 1_000,
        user_burst: 1_000,
        ..RoomConfig::default()
    }
}

/// Two members, `a` and `b`, settled, with `b`'s inbox emptied.
fn pair(config: RoomConfig) -> (Sim, String, String) {
    let mut s = Sim::new(config);
    let a = s.connect("sess-aaaa", "EU", None);
    let b = s.connect("sess-bbbb", "EU", None);
    s.run_until(s.now.plus_ms(5_000));
    s.take(&b);
    (s, a, b)
}

/// Below `BATCH_ABOVE` frames asked for a second, nothing waits for a window: two members'
/// cursors at 200 signals a second reach the other member one by one, each as it is sent
/// (the lag a window adds is what a user sees as a cursor trailing behind).
#[test]
fn below_batch_above_every_signal_goes_at_once() {
    let (mut s, a, b) = pair(RoomConfig::default());
    for n in 1..=20 {
        s.send(&a, &signal("cursor", n));
        let got = s.take(&b);
        assert_eq!(got.len(), 1, "signal {n} at once, alone: {got:?}");
        assert_eq!(got[0]["data"]["n"], n);
        s.advance(5);
    }
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert_eq!(stats["signals_coalesced"], 0, "{stats}");
}

/// A room that starts asking for more than `BATCH_ABOVE` frames a second (here 10) starts
/// coalescing within that second, and stops again once a quiet second has passed.
#[test]
fn windows_open_past_batch_above_and_stop_when_the_room_calms() {
    let (mut s, a, b) = pair(RoomConfig { batch_above: 10, ..RoomConfig::default() });
    for n in 1..=20 {
        s.send(&a, &signal("cursor", n));
        s.advance(3);
    }
    s.run_until(s.now.plus_ms(500));
    let got = s.take(&b);
    assert!(got.len() < 20, "past the threshold, signals coalesced: {}", got.len());
    assert!(got.len() >= 11, "the first ten or so went at once: {}", got.len());
    assert_eq!(got.last().and_then(|f| f["data"]["n"].as_u64()), Some(20), "the latest last");
    s.run_until(s.now.plus_ms(2_000));
    for n in 21..=25 {
        s.send(&a, &signal("cursor", n));
        let got = s.take(&b);
        assert_eq!(got.len(), 1, "calm again: signal {n} at once: {got:?}");
        s.advance(5);
    }
}

/// The attacker's bound on the threshold: five members of a room of 200 move cursors at
/// their rate limit (20 signals a second each), which asks for about 20,000 texts a second.
/// Below `BATCH_ABOVE` every signal would be a text to every member; past it (within the
/// first second) each member gets the flood as one text (a batch) per 50 ms window, so from
/// then on the room sends at most about 200 × 20 texts a second, not 20,000, and every member
/// still ends with each mover's latest cursor.
#[test]
fn a_cursor_flood_costs_the_room_one_text_per_window_per_member() {
    let mut s = Sim::new(RoomConfig::default());
    let members: Vec<String> =
        (0..200).map(|i| s.connect(&format!("sess-m{i:03}"), "EU", None)).collect();
    s.run_until(s.now.plus_ms(5_000));
    let raw = |s: &Sim| members.iter().map(|m| s.sockets[m].raw).sum::<usize>();
    let movers = &members[..5];
    let mut n = 0;
    let mut flood = |s: &mut Sim, ms: u64| {
        let until = s.now.plus_ms(ms);
        while s.now < until {
            n += 1;
            for m in movers {
                s.send(m, &signal("cursor", n));
            }
            s.run_until(s.now.plus_ms(50));
        }
    };
    flood(&mut s, 1_000); // the room crosses the threshold
    let before = raw(&s);
    flood(&mut s, 2_000);
    let texts = raw(&s) - before;
    let signals = 5 * 40 * 199; // two seconds of the flood, one text per signal per receiver
    assert!(texts <= 200 * 20 * 2 * 11 / 10, "{texts} texts in 2 s (uncoalesced: {signals})");
    s.run_until(s.now.plus_ms(500));
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert!(stats["batches"].as_u64() > Some(0), "a window's signals leave as one batch: {stats}");
    for m in &members[5..] {
        let got = s.take(m);
        for i in 0..5 {
            let session = format!("sess-m{i:03}");
            let last = got
                .iter()
                .rfind(|f| f["type"] == "signal" && f["session"] == session.as_str())
                .and_then(|f| f["data"]["n"].as_u64());
            assert_eq!(last, Some(n), "{m} has {session}'s latest cursor");
        }
    }
}

/// Past `BATCH_ABOVE` (here 0: always), a signal opens a window on each receiver.
#[test]
fn signals_in_one_window_arrive_as_one_per_topic() {
    let (mut s, a, b) = pair(RoomConfig { batch_above: 0, ..RoomConfig::default() });
    let raw_before = s.sockets[&b].raw;
    for n in 1..=10 {
        s.send(&a, &signal("cursor", n));
        s.send(&a, &signal("select", n));
        s.advance(3); // 60 ms of signals: 20 of them
    }
    s.run_until(s.now.plus_ms(500));
    let got = s.take(&b);
    assert!(got.iter().all(|f| f["type"] == "signal" && f["session"] == "sess-aaaa"));
    // The first goes out at once; the rest of the window collapses to the
    // latest per topic; the trailing window carries the last ones.
    assert_eq!(got[0]["data"]["n"], 1);
    let last_cursor = got.iter().rev().find(|f| f["topic"] == "cursor").unwrap();
    let last_select = got.iter().rev().find(|f| f["topic"] == "select").unwrap();
    assert_eq!(
        (last_cursor["data"]["n"].as_u64(), last_select["data"]["n"].as_u64()),
        (Some(10), Some(10))
    );
    assert!(got.len() <= 5, "20 signals became {}: {got:?}", got.len());
    assert!(s.sockets[&b].raw - raw_before <= 3, "sent as batches");
    // per topic, values only move forward
    for topic in ["cursor", "select"] {
        let ns: Vec<u64> = got
            .iter()
            .filter(|f| f["topic"] == topic)
            .map(|f| f["data"]["n"].as_u64().unwrap())
            .collect();
        assert!(ns.windows(2).all(|w| w[0] < w[1]), "{topic}: {ns:?}");
    }
    assert!(of_type(&s.take(&a), "signal").is_empty(), "never echoed to the sender");
}

#[test]
fn a_durable_message_is_not_held_by_a_signal_window() {
    // Past `BATCH_ABOVE` (0: always), so that the signal opens a window.
    let (mut s, a, b) = pair(RoomConfig { batch_above: 0, ..RoomConfig::default() });
    s.send(&a, &signal("cursor", 1)); // opens b's window
    s.send(&a, &signal("cursor", 2)); // held
    s.publish(&a, "m1", "1"); // goes now, after the held signal
    let got = s.take(&b);
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!((got[1]["data"]["n"].as_u64(), got[2]["type"].as_str()), (Some(2), Some("message")));
}

#[test]
fn past_the_batching_threshold_one_turn_leaves_as_one_batch_per_connection() {
    let config = batching(60);
    let mut s = Sim::new(config);
    let p = s.connect("sess-pubr", "EU", None);
    let watchers: Vec<String> =
        (0..20).map(|i| s.connect(&format!("sess-w{i:03}"), "EU", None)).collect();
    s.run_until(s.now.plus_ms(5_000));
    s.take(&p);
    for w in &watchers {
        s.take(w);
    }
    // Quiet: a message goes out at once, on its own.
    s.publish(&p, "q", "1");
    for w in &watchers {
        assert_eq!(seqs(&s.take(w)), [1], "sent at once while quiet");
    }
    // A burst inside one turn: past 60 frames/s the rest waits for the turn's end.
    let raw_before: Vec<usize> = watchers.iter().map(|w| s.sockets[w].raw).collect();
    for i in 0..10 {
        s.publish(&p, &format!("m{i}"), "1");
    }
    let early = seqs(&s.sockets[&watchers[0]].inbox);
    assert!(early.len() < 10, "frames past the threshold wait for the end of the turn: {early:?}");
    assert_eq!(s.wake, Some(s.now), "the end of the turn is asked for");
    s.multicasts.clear();
    s.broadcasts.clear();
    s.run_until(s.now);
    // The watchers all waited for the same frames: one text for all 20, as a broadcast
    // that leaves out the publisher (acked, not sent its own messages).
    assert_eq!(s.broadcasts, [20], "one shared batch for the watchers");
    assert!(s.multicasts.is_empty(), "no socket looked up one by one: {:?}", s.multicasts);
    for (w, before) in watchers.iter().zip(raw_before) {
        let got = s.take(w);
        assert_eq!(seqs(&got), (2..=11).collect::<Vec<u64>>(), "every message, in order");
        let raw = s.sockets[w].raw - before;
        assert!(
            raw <= early.len() + 1,
            "{w}: {raw} frames for {} before the turn ended",
            early.len()
        );
    }
    let acks: Vec<u64> =
        of_type(&s.take(&p), "ack").iter().map(|f| f["seq"].as_u64().unwrap()).collect();
    assert_eq!(acks, (1..=11).collect::<Vec<u64>>(), "acks in order, once each");
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert!(stats["batches"].as_u64().unwrap() >= 20, "one batch per watcher at least: {stats}");
}

#[test]
fn a_turns_batch_for_most_of_the_room_leaves_out_exactly_those_who_wait() {
    // The batch for the watchers goes as one broadcast. Left out of it: the publisher, whose
    // turn also holds its acks (a text of its own), and a reader whose window is full, which
    // still gets every message, in order, once it echoes.
    let mut config = RoomConfig { send_window: 4096, ..batching(60) };
    config.finish();
    let mut s = Sim::new(config);
    let p = s.connect("sess-pubr", "EU", None);
    let slow = s.connect("sess-slow", "EU", None);
    let watchers: Vec<String> =
        (0..12).map(|i| s.connect(&format!("sess-w{i:03}"), "EU", None)).collect();
    s.run_until(s.now.plus_ms(5_000));
    for c in watchers.iter().chain([&p, &slow]) {
        s.take(c);
    }
    s.sockets.get_mut(&slow).unwrap().silent = true;
    let mut sent = 0;
    let mut left_out = false;
    let mut own = Vec::new();
    // Turn after turn until the slow reader's window is full and a turn's batch skips it.
    for turn in 0..40 {
        s.broadcasts.clear();
        for i in 0..10 {
            sent += 1;
            s.publish(&p, &format!("t{turn}-{i}"), &format!("\"{}\"", "x".repeat(100)));
        }
        s.run_until(s.now);
        for w in &watchers {
            s.take(w);
        }
        own.extend(seqs(&s.take(&p)));
        if s.room.waiting_for_echo() && !s.broadcasts.is_empty() {
            assert_eq!(s.broadcasts, [watchers.len()], "the watchers only, in one text");
            left_out = true;
            break;
        }
    }
    assert!(left_out, "the slow reader's window never filled");
    // The publisher's turns carried its acks too: a text of its own, every message in it.
    assert_eq!(own, (1..=sent).collect::<Vec<u64>>(), "the publisher's own");
    assert!(s.multicasts.iter().all(|&n| n < watchers.len()), "{:?}", s.multicasts);
    s.sockets.get_mut(&slow).unwrap().silent = false;
    let mut got = Vec::new();
    for _ in 0..100 {
        got.extend(seqs(&s.take(&slow)));
        s.run_until(s.now.plus_ms(10));
    }
    got.extend(seqs(&s.take(&slow)));
    assert_eq!(got, (1..=sent).collect::<Vec<u64>>(), "every message once, in order");
}

#[test]
fn a_resume_into_a_batching_room_gets_its_welcome_then_its_replay_then_live() {
    let config = batching(10);
    let mut s = Sim::new(config);
    let p = s.connect("sess-pubr", "EU", None);
    let r = s.connect("sess-back", "EU", None);
    let others: Vec<String> =
        (0..10).map(|i| s.connect(&format!("sess-o{i:02}"), "EU", None)).collect();
    s.run_until(s.now.plus_ms(5_000));
    let epoch = s.room.epoch().to_owned();
    s.drop_conn(&r);
    for i in 0..5 {
        s.publish(&p, &format!("m{i}"), "1"); // past 10 frames/s: batching
    }
    // It comes back inside the same turn, while the room batches, and more is live.
    let r2 = s.connect("sess-back", "EU", Some((0, epoch.as_str())));
    s.publish(&p, "live", "1");
    let before_turn = std::mem::take(&mut s.sockets.get_mut(&r2).unwrap().inbox);
    assert_eq!(before_turn.first().map(|f| f["type"].clone()), Some("welcome".into()));
    s.run_until(s.now);
    let mut got = before_turn;
    got.extend(s.take(&r2));
    assert_eq!(got[0]["type"], "welcome", "the welcome is the first frame: {got:?}");
    assert_eq!(got[0]["missed"], 5);
    assert_eq!(seqs(&got), (1..=6).collect::<Vec<u64>>(), "replay, then live, once each");
    for o in &others {
        assert_eq!(seqs(&s.take(o)), (1..=6).collect::<Vec<u64>>());
    }
}

#[test]
fn in_a_storm_while_batching_the_welcome_goes_at_once_and_the_replay_waits() {
    let config = RoomConfig { storm_resumes_per_sec: 1, ..batching(10) };
    let mut s = Sim::new(config);
    let p = s.connect("sess-pubr", "EU", None);
    let sessions: Vec<String> = (0..4).map(|i| format!("sess-r{i}")).collect();
    let conns: Vec<String> = sessions.iter().map(|x| s.connect(x, "EU", None)).collect();
    s.run_until(s.now.plus_ms(5_000));
    let epoch = s.room.epoch().to_owned();
    for c in &conns {
        s.drop_conn(c);
    }
    for i in 0..5 {
        s.publish(&p, &format!("m{i}"), "1");
    }
    let back: Vec<String> =
        sessions.iter().map(|x| s.connect(x, "EU", Some((0, epoch.as_str())))).collect();
    s.publish(&p, "live", "1");
    s.run_until(s.now); // the turn ends; deferred replays still wait
    let mut deferred = 0;
    for c in &back {
        let got = s.take(c);
        assert_eq!(got[0]["type"], "welcome", "{c}: the welcome at once: {got:?}");
        if seqs(&got).is_empty() {
            deferred += 1;
        }
        s.sockets.get_mut(c).unwrap().inbox = got; // keep for the check below
    }
    assert!(deferred >= 2, "past 1 resume/s the replays are spread: {deferred} deferred");
    s.run_until(s.now.plus_ms(2_500));
    for c in &back {
        let got = s.take(c);
        assert_eq!(seqs(&got), (1..=6).collect::<Vec<u64>>(), "{c}: replay then live, once each");
    }
}

#[test]
fn over_budget_signals_go_first_then_diffs_and_messages_still_flow() {
    let config = RoomConfig { outbound_budget: 100, ..batching(200) };
    let mut s = Sim::new(config);
    let p = s.connect("sess-pubr", "EU", None);
    let watchers: Vec<String> =
        (0..10).map(|i| s.connect(&format!("sess-w{i:03}"), "EU", None)).collect();
    s.run_until(s.now.plus_ms(5_000));
    for w in &watchers {
        s.take(w);
    }
    // 30 publishes in one second to 11 sockets: over 100 frames/s.
    for i in 0..30 {
        s.publish(&p, &format!("m{i}"), "1");
        s.send(&p, &signal("cursor", i));
        s.advance(10);
    }
    let late = s.connect("sess-late", "EU", None); // a join while shedding
    s.publish(&p, "last", "1");
    s.run_until(s.now.plus_ms(300));
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert!(stats["signals_dropped"].as_u64().unwrap() > 0, "{stats}");
    assert!(stats["batches"].as_u64().unwrap() > 0, "durable frames were batched: {stats}");
    for w in &watchers {
        let got = s.take(w);
        assert_eq!(seqs(&got), (1..=31).collect::<Vec<u64>>(), "every message, in order");
        let signals = of_type(&got, "signal").len();
        assert!(signals < 30, "signals are shed first: {signals}");
        assert!(
            of_type(&got, "presence").iter().all(|f| f["joins"].get("sess-late").is_none()),
            "no per-member diff while over budget"
        );
    }
    // Once the load is gone the next summary brings the whole list back.
    s.run_until(s.now.plus_ms(5_000));
    let got = s.take(&watchers[0]);
    let reset =
        of_type(&got, "presence").into_iter().find(|f| f["reset"] == true).expect("a reset");
    assert!(reset["joins"].get("sess-late").is_some());
    assert!(s.sockets[&late].open);
}

#[test]
fn a_reconnect_storm_spreads_catch_up_and_loses_nothing() {
    let config = RoomConfig { storm_resumes_per_sec: 5, ..RoomConfig::default() };
    let mut s = Sim::new(config);
    let p = s.connect("sess-pubr", "EU", None);
    let clients: Vec<String> =
        (0..30).map(|i| s.connect(&format!("sess-c{i:03}"), "EU", None)).collect();
    s.publish(&p, "m0", "1");
    for c in &clients {
        s.drop_conn(c); // the blip
    }
    for i in 1..=20 {
        s.publish(&p, &format!("m{i}"), "1");
    }
    let t0 = s.now;
    let back: Vec<String> =
        (0..30).map(|i| s.connect(&format!("sess-c{i:03}"), "EU", Some((1, "e-1")))).collect();
    s.publish(&p, "live", "1"); // seq 22, during the storm
    let mut first_message_at = Vec::new();
    let mut got: Vec<Vec<Value>> = vec![Vec::new(); back.len()];
    while s.now < t0.plus_ms(3_000) {
        s.run_until(s.now.plus_ms(10));
        for (i, c) in back.iter().enumerate() {
            let frames = s.take(c);
            if got[i].iter().all(|f| f["type"] != "message")
                && frames.iter().any(|f| f["type"] == "message")
            {
                first_message_at.push(s.now.since(t0));
            }
            got[i].extend(frames);
        }
    }
    for (i, frames) in got.iter().enumerate() {
        assert_eq!(frames[0]["type"], "welcome");
        assert_eq!(
            (frames[0]["resumed"].as_bool(), frames[0]["missed"].as_u64()),
            (Some(true), Some(20))
        );
        assert_eq!(
            seqs(frames),
            (2..=22).collect::<Vec<u64>>(),
            "client {i}: replay before live, no gap"
        );
    }
    let stats: Value = serde_json::from_str(&s.room.stats_json()).unwrap();
    assert_eq!(stats["deferred_replays"], 25, "past 5 resumes in a second, replays wait");
    first_message_at.sort();
    let spread = first_message_at.iter().filter(|t| **t >= 200).count();
    assert_eq!(spread, 25);
    assert!(first_message_at.iter().all(|t| *t <= 2_010), "{first_message_at:?}");
    let distinct: std::collections::BTreeSet<u64> =
        first_message_at.iter().map(|t| t / 100).collect();
    assert!(distinct.len() >= 8, "jittered, not one burst: {first_message_at:?}");
}
