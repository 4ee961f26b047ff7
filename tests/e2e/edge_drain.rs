//! Drain (issue 4, PROTOCOL.md "Close codes"), on the token runtime: 50 clients in five regions,
//! a server publisher at ~20/s over the admin route; `POST /drain` closes every one with 1001 and
//! answers `{"closed": 50}`; each reconnects after a jitter of 0-1 s with `since`/`epoch` (the
//! client rule for 1001) and resumes (`resumed: true`, `missed` = what it replays) while the
//! publisher goes on. Once the publisher stops, every client has seen every seq from its first
//! welcome to the last publish exactly once, in order. The log has the drain and a
//! `closed_by_room` 1001 line per socket.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::watch;

use crate::check;
use crate::client::{Client, Dial, Event};
use crate::edge_support::{self as es, admin, bearer_admin, token, TOKENS};
use crate::harness::Spec;
use crate::presence::{note, Place, DFW, FRA, GRU, SYD};
use crate::support::{self, check_contiguous, seq, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![es::on("edge_drain::fifty_clients_close_1001_and_resume_without_gaps", &TOKENS, drain)]
}

const CLIENTS: usize = 50;
const PLACES: [Place; 5] = [SYD, FRA, DFW, GRU, ("NRT", "JP", "AS")];
/// ~20 publishes per second.
const PUBLISH_EVERY: Duration = Duration::from_millis(50);
/// Publishing before the drain, and after it: longer than the reconnect jitter, so most
/// clients come back while messages still flow.
const BEFORE_DRAIN: Duration = Duration::from_millis(1000);
const AFTER_DRAIN: Duration = Duration::from_millis(2000);
const JITTER_MS: u64 = 1000;
/// Messages sequenced before the drain, at least.
const MIN_BEFORE_DRAIN: usize = 5;
/// How long a client may take to see the last seq once the publisher stopped (a reconnect
/// storm may hold a replay back for up to 2 s).
const CATCH_UP: Duration = Duration::from_secs(15);

/// What one client went through.
struct Outcome {
    session: String,
    first_welcome_seq: u64,
    close_code: Option<u16>,
    since: u64,
    second_welcome: Value,
    /// Every message of both connections, in arrival order.
    messages: Vec<Value>,
}

fn jitter(i: usize) -> Duration {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let mut x = (nanos as u64) ^ ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    Duration::from_millis(x % (JITTER_MS + 1))
}

/// The highest seq such that every seq from `from + 1` up to it is in `messages`.
fn applied_through(from: u64, messages: &[Value]) -> u64 {
    let mut seqs: Vec<u64> = messages.iter().map(seq).collect();
    seqs.sort_unstable();
    let mut at = from;
    for s in seqs {
        if s == at + 1 {
            at = s;
        }
    }
    at
}

/// One client's life: read until the drain closes it, wait the jitter, resume, read until it
/// has the last seq (known once the publisher stops).
async fn client_life(
    mut c: Client,
    dial: Dial,
    i: usize,
    mut last: watch::Receiver<Option<u64>>,
) -> R<Outcome> {
    let first_welcome_seq = c.welcome_seq();
    let close_code = c
        .expect_close(Duration::from_secs(20))
        .await
        .map_err(|e| format!("[{}] was not closed by the drain: {e}", c.session))?;
    let mut messages = c.messages();
    // A client applies messages in order; `since` is the last one it has without a gap.
    let since = applied_through(first_welcome_seq, &messages);
    tokio::time::sleep(jitter(i)).await;
    let mut c2 = dial
        .since(since, &c.epoch())
        .connect()
        .await
        .map_err(|e| format!("[{}] reconnect after the drain: {e}", c.session))?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        // (`borrow_and_update`: `changed` then waits for the next change, it does not spin.)
        let target = *last.borrow_and_update();
        if let Some(target) = target {
            if applied_through(since, &c2.messages()) >= target {
                break;
            }
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        tokio::select! {
            changed = last.changed() => {
                if changed.is_err() {
                    return Err(format!("[{}] the test stopped before the last seq was known", c2.session));
                }
            }
            ev = c2.next_event_within(left) => match ev? {
                Event::Frame(_) => {}
                Event::Closed(code) => {
                    return Err(format!("[{}] resumed connection closed ({code:?})", c2.session))
                }
            },
        }
    }
    messages.extend(c2.messages());
    let outcome = Outcome {
        session: c.session.clone(),
        first_welcome_seq,
        close_code,
        since,
        second_welcome: c2.welcome.clone(),
        messages,
    };
    c2.close().await;
    Ok(outcome)
}

/// Stops the publisher however the trial ends (a failed check returns early).
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn drain(ctx: Ctx) -> R {
    let port = ctx.port;
    let room = support::room("drain");
    // Connect all 50 at once, ten per region, each as its own user.
    let dials: Vec<Dial> = (0..CLIENTS)
        .map(|i| {
            let p = PLACES[i % PLACES.len()];
            Dial::new(port, &room, &support::session(&format!("d{i}")))
                .via(p.0, p.1, p.2)
                .token(&token(&room, &format!("user-{i}")))
        })
        .collect();
    let connects: Vec<_> = dials.iter().cloned().map(|d| tokio::spawn(d.connect())).collect();
    let (tx, rx) = watch::channel(None);
    let mut lives = Vec::new();
    for (i, (h, dial)) in connects.into_iter().zip(dials).enumerate() {
        let c = h.await.map_err(|e| e.to_string())??;
        check!(
            c.welcome["user"] == format!("user-{i}").as_str() && c.welcome["resumed"] == false,
            "client {i}'s welcome: {}",
            c.welcome
        );
        lives.push(tokio::spawn(client_life(c, dial, i, rx.clone())));
    }
    drop(rx);
    let st = es::stats(port, &room).await?;
    check!(
        st["connections"] == CLIENTS,
        "stats before the drain should count {CLIENTS} connections: {st}"
    );

    // The publisher: server messages at ~20/s from rotating regions, until told to stop.
    let started = Instant::now();
    let done = Arc::new(AtomicUsize::new(0));
    // Told to stop AFTER_DRAIN after the drain: a slow machine's drain comes later, and the
    // publisher goes on publishing until then.
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_return = StopOnDrop(stop.clone());
    let publisher = tokio::spawn({
        let room = room.clone();
        let done = done.clone();
        let stop = stop.clone();
        async move {
            let mut published: BTreeMap<u64, String> = BTreeMap::new();
            let mut ticker = tokio::time::interval(PUBLISH_EVERY);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut n = 0usize;
            while !stop.load(Ordering::SeqCst) {
                ticker.tick().await;
                let id = format!("p{n}");
                let place = PLACES[n % PLACES.len()];
                let s = es::server_publish(port, &room, place, &id, serde_json::json!({"n": n}))
                    .await?;
                if let Some(old) = published.insert(s, id.clone()) {
                    return Err(format!("seq {s} answered for both {old} and {id}"));
                }
                n += 1;
                done.store(n, Ordering::SeqCst);
            }
            R::Ok(published)
        }
    });

    tokio::time::sleep(BEFORE_DRAIN).await;
    // However slow the machine, some messages are sequenced before the drain (and the drain
    // delivers what was sequenced before it closes), so every client has something to resume
    // from.
    let gate = Instant::now() + Duration::from_secs(30);
    while done.load(Ordering::SeqCst) < MIN_BEFORE_DRAIN {
        check!(
            Instant::now() < gate,
            "the publisher did not get {MIN_BEFORE_DRAIN} messages out in {:?}",
            started.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let resp = admin(port, "POST", &room, "drain", Some(&bearer_admin()), None, "").await?;
    let drained_at = started.elapsed();
    tokio::time::sleep(AFTER_DRAIN).await;
    stop.store(true, Ordering::SeqCst);
    let published_for = started.elapsed();
    let body = es::json_200("POST /drain", &resp)?;
    check!(
        body == serde_json::json!({"closed": CLIENTS}),
        "the drain should answer {{\"closed\": {CLIENTS}}} (every client and nobody else is connected): {body}"
    );

    let published = publisher.await.map_err(|e| e.to_string())??;
    let last_seq = *published.keys().next_back().ok_or("nothing was published")?;
    check!(
        published.keys().copied().eq(1..=last_seq),
        "the publisher's seqs should be 1..={last_seq} without gaps: {:?}",
        published.keys().collect::<Vec<_>>()
    );
    let _ = tx.send(Some(last_seq));
    let waited = Instant::now();

    let mut outcomes = Vec::new();
    let mut failures = Vec::new();
    for (i, h) in lives.into_iter().enumerate() {
        match tokio::time::timeout(CATCH_UP, h).await {
            Ok(Ok(Ok(o))) => outcomes.push(o),
            Ok(Ok(Err(e))) => failures.push(format!("client {i}: {e}")),
            Ok(Err(e)) => failures.push(format!("client {i}: task failed: {e}")),
            Err(_) => failures.push(format!(
                "client {i}: did not see seq {last_seq} within {CATCH_UP:?} of the publisher's end"
            )),
        }
    }
    check!(
        failures.is_empty(),
        "{} of {CLIENTS} clients failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let catch_up = waited.elapsed();

    let mut replayed_before_drain_seen = 0;
    for o in &outcomes {
        let who = &o.session;
        check!(
            o.close_code == Some(1001),
            "[{who}] the drain should close with 1001, got {:?}",
            o.close_code
        );
        let w = &o.second_welcome;
        check!(
            w["resumed"] == true && w["seq"].as_u64().is_some_and(|s| s >= o.since),
            "[{who}] the reconnect with since={} should resume: {w}",
            o.since
        );
        let missed = w["seq"].as_u64().unwrap_or(0) - o.since;
        check!(
            w["missed"] == missed,
            "[{who}] welcome.missed should be {missed} (seq - since): {w}"
        );
        // Every seq from the first welcome to the last publish, once each, in order.
        check_contiguous(who, &o.messages, o.first_welcome_seq + 1)?;
        let got_last = o.messages.last().map(seq).unwrap_or(o.first_welcome_seq);
        check!(
            got_last == last_seq,
            "[{who}] ends at seq {got_last}, not at the last publish {last_seq}"
        );
        for m in &o.messages {
            let s = seq(m);
            check!(
                published.get(&s).is_some_and(|id| m["id"] == id.as_str())
                    && m["session"] == "$server",
                "[{who}] message {s} is not the one published at that seq: {m}"
            );
        }
        if o.since > o.first_welcome_seq {
            replayed_before_drain_seen += 1;
        }
    }
    let replayed = outcomes.iter().filter(|o| o.second_welcome["missed"] != 0).count();
    note(format!(
        "drain: {} published in {:?}, drained at {drained_at:?}, all caught up {catch_up:?} after the publisher stopped; {replayed_before_drain_seen} clients had messages before the drain, {replayed} got a replay on resuming",
        last_seq, published_for
    ));
    // Messages were sequenced before the drain, so every client had something to resume from.
    check!(
        replayed_before_drain_seen == CLIENTS,
        "only {replayed_before_drain_seen} of {CLIENTS} clients had seen messages before the drain"
    );

    // The log: one drain line for the room, and a 1001 close per socket.
    es::wait_log(&ctx.log, "drain", 1, Duration::from_secs(5), |v| v["room"] == room.as_str())
        .await
        .and_then(|lines| {
            if lines.len() == 1 && lines[0]["closed"] == CLIENTS {
                Ok(())
            } else {
                Err(format!("one drain line with closed {CLIENTS} expected: {lines:?}"))
            }
        })?;
    let closes = es::wait_log(&ctx.log, "closed_by_room", CLIENTS, Duration::from_secs(5), |v| {
        v["room"] == room.as_str()
    })
    .await?;
    check!(
        closes.len() == CLIENTS && closes.iter().all(|v| v["code"] == 1001),
        "{CLIENTS} closed_by_room lines with code 1001 expected for {room}: {closes:?}"
    );
    // Everyone is back.
    let st = es::stats(port, &room).await?;
    note(format!("drain: stats after the resumes: {st}"));
    check!(
        st["seq"] == last_seq && st["messages"].as_u64().is_some_and(|m| m == last_seq),
        "stats after the drain: seq and messages should be {last_seq}: {st}"
    );
    Ok(())
}
