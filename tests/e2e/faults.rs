//! Faults on their own `wrangler dev` instances: a SIGKILL of wrangler and workerd in the middle of a burst from 20 publishers loses nothing that was acked or seen, stores nothing twice and nothing that was not sent, keeps the epoch, and a retry after the restart gets the original seq.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::Notify;

use crate::check;
use crate::client::{Client, Dial, Event};
use crate::harness::{alone, Spec};
use crate::runtime::Runtime;
use crate::support::{self, check_contiguous, id, seq, session_of, R};

pub fn trials() -> Vec<Spec> {
    vec![alone("faults::sigkill_mid_burst_of_twenty_publishers", sigkill_mid_burst)]
}

const PUBLISHERS: usize = 20;
/// Sent back to back at the start: half the bucket of 50, so no refusal.
const BURST: usize = 25;
/// Then one every `PACE`, under the refill of 20/s.
const PACED: usize = 35;
const PACE: Duration = Duration::from_millis(60);
const PER_PUBLISHER: usize = BURST + PACED;
const TOTAL: usize = PUBLISHERS * PER_PUBLISHER; // 1200
/// The kill comes once this many publishes are out (and some are acked): the burst is over,
/// the paced part is running, about 1.5 s of sending is left (room for a slow first ack).
const KILL_AT_SENT: usize = 700;
/// A resume replays at most `REPLAY_LIMIT` messages and only the newest `REPLAY_LIMIT` can be
/// resumed from at all, so with up to 1200 messages the log can be read back whole only by one
/// `since=0` resume with the limit raised; the log keeps as many (nothing is trimmed, every id
/// stays deduplicated).
const RUNTIME_ARGS: [&str; 4] = ["--var", "REPLAY_LIMIT:1500", "--var", "LOG_RETAIN:1500"];
const TOPIC: &str = "burst";

/// Adds the runtimes' log tails to a failure.
fn with_log<T>(r: R<T>, rts: &[&Runtime]) -> R<T> {
    r.map_err(|mut e| {
        for rt in rts {
            e.push_str(&format!("\n--- {} runtime log (tail) ---\n{}", rt.label, rt.log.tail(60)));
        }
        e
    })
}

/// What every client task shares: what was learned before the kill and the kill trigger.
#[derive(Default)]
struct Shared {
    /// (session, id) -> (seq, data), from acks (with the data the publisher sent) and messages.
    seen: Mutex<BTreeMap<(String, String), (u64, Value)>>,
    /// (session, id) of every ack received.
    acked: Mutex<BTreeMap<(String, String), u64>>,
    sent: AtomicUsize,
    acks: AtomicUsize,
    fired: AtomicBool,
    kill: Notify,
}

impl Shared {
    fn record(&self, key: (String, String), s: u64, data: Value, how: &str) -> R {
        let mut map = self.seen.lock().unwrap();
        if let Some((old, old_data)) = map.get(&key) {
            check!(*old == s, "{key:?}: seq {old} and then seq {s} ({how})");
            check!(*old_data == data, "{key:?}: data {old_data} and then {data} ({how})");
        } else {
            map.insert(key, (s, data));
        }
        Ok(())
    }

    /// Fires the kill once enough is sent and something is acked.
    fn maybe_fire(&self) {
        if self.sent.load(Ordering::SeqCst) >= KILL_AT_SENT
            && self.acks.load(Ordering::SeqCst) > 0
            && !self.fired.swap(true, Ordering::SeqCst)
        {
            self.kill.notify_one();
        }
    }
}

fn item(p: usize, n: usize) -> (String, Value) {
    (format!("f{p}-{n}"), json!({"p": p, "n": n, "pad": "y".repeat(24)}))
}

/// What one publisher sent, in order: (id, data).
type Sent = Vec<(String, Value)>;

/// Handles one frame on a publisher's or the observer's socket.
fn on_frame(f: &Value, who: &str, own: Option<(&str, &Sent)>, sh: &Shared) -> R {
    match f["type"].as_str() {
        Some("ack") => {
            let Some((session, sent)) = own else {
                return Err(format!("{who} got an ack it never asked for: {f}"));
            };
            let data = sent
                .iter()
                .find(|(i, _)| i == id(f))
                .map(|(_, d)| d.clone())
                .ok_or_else(|| format!("{who}: ack for an id it never sent: {f}"))?;
            let key = (session.to_string(), id(f).to_string());
            if let Some(old) = sh.acked.lock().unwrap().insert(key.clone(), seq(f)) {
                check!(old == seq(f), "{who}: {key:?} acked at {old}, then at {}", seq(f));
            }
            sh.record(key, seq(f), data, "ack")?;
            sh.acks.fetch_add(1, Ordering::SeqCst);
            sh.maybe_fire();
        }
        Some("message") => {
            let key = (session_of(f).to_string(), id(f).to_string());
            sh.record(key, seq(f), f["data"].clone(), &format!("message to {who}"))?;
        }
        // Far under the rate (a bucket of 50, 20/s): a refusal here is a failure.
        Some("error") => return Err(format!("{who}: unexpected error {f}")),
        _ => {}
    }
    Ok(())
}

/// A burst of `BURST`, then one every `PACE`, reading acks and messages all along, until the
/// runtime goes away. Returns what it sent.
async fn publisher(mut c: Client, p: usize, sh: Arc<Shared>) -> R<Sent> {
    let who = format!("publisher {p}");
    let session = c.session.clone();
    let mut sent: Sent = Vec::new();
    for n in 0..BURST {
        let (mid, data) = item(p, n);
        if c.publish(&mid, TOPIC, data.clone()).await.is_err() {
            return Ok(sent); // the runtime is gone already
        }
        sent.push((mid, data));
        sh.sent.fetch_add(1, Ordering::SeqCst);
        sh.maybe_fire();
    }
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + PACE, PACE);
    loop {
        tokio::select! {
            _ = ticker.tick(), if sent.len() < PER_PUBLISHER => {
                let (mid, data) = item(p, sent.len());
                if c.publish(&mid, TOPIC, data.clone()).await.is_err() {
                    return Ok(sent);
                }
                sent.push((mid, data));
                sh.sent.fetch_add(1, Ordering::SeqCst);
                sh.maybe_fire();
            }
            ev = c.next_event_within(Duration::from_secs(20)) => match ev {
                Ok(Event::Frame(f)) => on_frame(&f, &who, Some((&session, &sent)), &sh)?,
                Ok(Event::Closed(_)) => return Ok(sent),
                Err(e) => return Err(format!("{who}: {e}")),
            }
        }
    }
}

async fn observer(mut c: Client, sh: Arc<Shared>) -> R {
    loop {
        match c.next_event_within(Duration::from_secs(20)).await {
            Ok(Event::Frame(f)) => on_frame(&f, "observer", None, &sh)?,
            Ok(Event::Closed(_)) => return Ok(()),
            Err(e) => return Err(format!("observer: {e}")),
        }
    }
}

async fn sigkill_mid_burst() -> R {
    let dir = tempfile::Builder::new()
        .prefix("homeroom-e2e-faults-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let mut first = Runtime::start_with("faults-1", dir.path(), &RUNTIME_ARGS).await?;
    let room = support::room("faults");
    let sh = Arc::new(Shared::default());

    let phase1 = async {
        let obs = Dial::new(first.port, &room, &support::session("fobs")).connect().await?;
        let epoch = obs.epoch();
        check!(obs.welcome_seq() == 0, "a fresh room starts at seq 0: {}", obs.welcome);
        let mut pubs = Vec::new();
        for p in 0..PUBLISHERS {
            let c = Dial::new(first.port, &room, &support::session(&format!("fp{p}")))
                .connect()
                .await?;
            check!(c.epoch() == epoch && c.welcome_seq() == 0, "welcome: {}", c.welcome);
            pubs.push(c);
        }
        let sessions: Vec<String> = pubs.iter().map(|c| c.session.clone()).collect();
        let obs_task = tokio::spawn(observer(obs, sh.clone()));
        let pub_tasks: Vec<_> = pubs
            .into_iter()
            .enumerate()
            .map(|(p, c)| tokio::spawn(publisher(c, p, sh.clone())))
            .collect();
        let fired = tokio::time::timeout(Duration::from_secs(30), sh.kill.notified()).await;
        check!(
            fired.is_ok(),
            "the kill trigger never fired: {} sent, {} acked in 30 s",
            sh.sent.load(Ordering::SeqCst),
            sh.acks.load(Ordering::SeqCst)
        );
        Ok::<_, String>((epoch, sessions, obs_task, pub_tasks))
    };
    let (epoch, sessions, obs_task, pub_tasks) = with_log(phase1.await, &[&first])?;
    first.kill_hard().await;
    let acks_at_kill = sh.acks.load(Ordering::SeqCst);

    let mut sent_by: Vec<Sent> = Vec::new();
    for t in pub_tasks {
        sent_by.push(with_log(t.await.map_err(|e| e.to_string())?, &[&first])?);
    }
    with_log(obs_task.await.map_err(|e| e.to_string())?, &[&first])?;
    let total_sent: usize = sent_by.iter().map(Vec::len).sum();
    let seen = sh.seen.lock().unwrap().clone();
    let acked = sh.acked.lock().unwrap().clone();
    // Really in the middle of the burst: not everything was out, and the room had answered.
    check!(
        total_sent < TOTAL,
        "the kill came after every publish was sent ({total_sent} of {TOTAL}): not mid-burst"
    );
    check!(total_sent >= KILL_AT_SENT, "only {total_sent} publishes went out before the kill");
    check!(!acked.is_empty(), "no ack at all before the kill ({total_sent} sent)");
    let max_seen = seen.values().map(|(s, _)| *s).max().unwrap_or(0);
    eprintln!(
        "faults: killed with {total_sent} of {TOTAL} sent, {acks_at_kill} acked, {} distinct \
         writes acked or seen (up to seq {max_seen})",
        seen.len()
    );

    let second = Runtime::start_with("faults-2", dir.path(), &RUNTIME_ARGS).await?;
    let phase2 = async {
        let mut reader = Dial::new(second.port, &room, &support::session("freader"))
            .since(0, &epoch)
            .connect()
            .await?;
        let w = reader.welcome.clone();
        check!(reader.epoch() == epoch, "epoch changed across the SIGKILL: {epoch} -> {w}");
        let now = reader.welcome_seq();
        check!(now >= max_seen, "seq went back: saw {max_seen} before the kill, welcome says {w}");
        check!(
            now as usize <= total_sent,
            "the log holds {now} messages but only {total_sent} were ever sent: {w}"
        );
        check!(w["resumed"] == true && w["missed"] == now, "since=0 must replay the log: {w}");
        let mut replay = Vec::new();
        for _ in 0..now {
            replay.push(reader.expect_type("message").await?);
        }
        // Strictly increasing from 1 without gaps.
        check_contiguous("log read back after the SIGKILL", &replay, 1)?;
        // Exactly once.
        let mut by_key: BTreeMap<(String, String), &Value> = BTreeMap::new();
        for m in &replay {
            let key = (session_of(m).to_string(), id(m).to_string());
            if let Some(old) = by_key.insert(key.clone(), m) {
                return Err(format!(
                    "{key:?} is stored twice: seq {} and seq {}",
                    seq(old),
                    seq(m)
                ));
            }
        }
        // Nothing acked or seen before the kill is lost or moved.
        for (key, (s, data)) in &seen {
            let Some(m) = by_key.get(key) else {
                return Err(format!(
                    "{key:?} was acked or seen at seq {s} before the kill but is gone after it"
                ));
            };
            check!(seq(m) == *s, "{key:?} was at seq {s} before the kill, {} after", seq(m));
            check!(m["data"] == *data, "{key:?} data changed: {data} -> {}", m["data"]);
        }
        // Everything stored is what a publisher sent, under its own session.
        for m in &replay {
            let p = sessions.iter().position(|s| s == session_of(m));
            let sent = p.and_then(|p| sent_by[p].iter().find(|(i, _)| i == id(m)));
            check!(
                sent.is_some_and(|(_, d)| *d == m["data"]) && m["topic"] == TOPIC,
                "a stored message was never sent like that: {m}"
            );
        }
        // Retries after the restart: each publisher's last acked id and, where the kill
        // caught one stored but not acked, one of those: the stored seq, no new message.
        let mut retries: Vec<(String, String, u64, Value)> = Vec::new();
        for (p, session) in sessions.iter().enumerate() {
            let last_acked = sent_by[p]
                .iter()
                .rev()
                .find(|(i, _)| acked.contains_key(&(session.clone(), i.clone())));
            let stored_unacked = sent_by[p].iter().find(|(i, _)| {
                let key = (session.clone(), i.clone());
                !acked.contains_key(&key) && by_key.contains_key(&key)
            });
            for (i, data) in last_acked.into_iter().chain(stored_unacked) {
                let stored = seq(by_key[&(session.clone(), i.clone())]);
                retries.push((session.clone(), i.clone(), stored, data.clone()));
            }
        }
        check!(!retries.is_empty(), "nothing to retry");
        for (session, mid, stored, data) in &retries {
            let mut again = Dial::new(second.port, &room, session).connect().await?;
            let got = again.publish_acked(mid, TOPIC, data.clone()).await?;
            check!(
                got == *stored,
                "retry of {mid} after the restart got seq {got}, stored {stored}"
            );
            again.get_state().await?; // fence: the room handled the retry before this
            check!(
                again.messages().is_empty(),
                "a retried publish produced a message: {:?}",
                again.messages()
            );
            again.close().await;
        }
        // Publishing goes on at seq + 1: the retries took no seq, and the reader's next
        // message after the replay is this one.
        let next = reader.publish_acked("after-restart", TOPIC, json!("hello")).await?;
        check!(
            next == now + 1,
            "first publish after the restart got seq {next}, expected {}",
            now + 1
        );
        let live = reader.until("a live message", |f| f["type"] == "message").await?;
        check!(
            id(&live) == "after-restart" && seq(&live) == next,
            "the first live message after the replay should be after-restart at {next}: {live}"
        );
        let loaded = second.log.wait_room_loaded(&room, 1, Duration::from_secs(5)).await?;
        check!(loaded[0]["seq"] == now, "room_loaded should report seq {now}: {}", loaded[0]);
        eprintln!(
            "faults: after the restart the log holds {now} messages ({} stored but never \
             acked); {} retries got their stored seq",
            (now as usize).saturating_sub(acked.len()),
            retries.len()
        );
        Ok(())
    };
    let r = with_log(phase2.await, &[&first, &second]);
    let mut second = second;
    second.stop().await;
    r
}
