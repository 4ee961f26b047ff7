//! Whole-runtime restarts on their own `wrangler dev` instances: SIGKILL mid-stream loses nothing that was acked or seen (ack before visible), and a clean SIGTERM restart resumes with the same epoch and an exact replay.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::check;
use crate::client::{Client, Dial, Event};
use crate::harness::{alone, Spec};
use crate::runtime::Runtime;
use crate::support::{self, check_contiguous, id, seq, session_of, R};

pub fn trials() -> Vec<Spec> {
    vec![
        alone("restart::sigkill_mid_stream_loses_nothing_acked_or_seen", sigkill_mid_stream),
        alone("restart::clean_restart_resumes_same_epoch", clean_restart),
    ]
}

/// Adds the runtime's log tail to a failure.
fn with_log<T>(r: R<T>, rts: &[&Runtime]) -> R<T> {
    r.map_err(|e| {
        let mut e = e;
        for rt in rts {
            e.push_str(&format!("\n--- {} runtime log (tail) ---\n{}", rt.label, rt.log.tail(60)));
        }
        e
    })
}

const PUBLISHERS: usize = 3;
const PER_PUBLISHER: usize = 30; // 90 in all: a since=0 resume replays everything (≤ 100)
const PACE: Duration = Duration::from_millis(70); // ~14 publishes/s per socket, under 20/s
const KILL_AFTER_SEEN: usize = 25;

/// Everything any client learned before the kill: (session, id) -> (seq, data).
type Seen = Arc<Mutex<BTreeMap<(String, String), (u64, Value)>>>;

fn record(seen: &Seen, key: (String, String), s: u64, data: Value, how: &str) -> R {
    let mut map = seen.lock().unwrap();
    if let Some((old, old_data)) = map.get(&key) {
        check!(*old == s, "{key:?}: seq {old} and then seq {s} ({how})");
        check!(*old_data == data, "{key:?}: data {old_data} and then {data} ({how})");
    } else {
        map.insert(key, (s, data));
    }
    Ok(())
}

/// Publishes paced, recording acks (the data is what this client sent) and every message.
async fn paced_publisher(mut c: Client, p: usize, seen: Seen) -> R<Vec<(String, Value)>> {
    let mut sent: BTreeMap<String, Value> = BTreeMap::new();
    let mut order = Vec::new();
    let mut ticker = tokio::time::interval(PACE);
    let mut n = 0;
    loop {
        tokio::select! {
            _ = ticker.tick(), if n < PER_PUBLISHER => {
                let mid = format!("k{p}-{n}");
                let data = json!({"p": p, "n": n, "pad": "x".repeat(64)});
                if c.publish(&mid, "stream", data.clone()).await.is_err() {
                    return Ok(order); // runtime gone
                }
                sent.insert(mid.clone(), data.clone());
                order.push((mid, data));
                n += 1;
            }
            ev = c.next_event_within(Duration::from_secs(10)) => {
                match ev {
                    Ok(Event::Frame(f)) if f["type"] == "ack" => {
                        let data = sent.get(id(&f)).cloned().ok_or_else(|| format!("ack for an unknown id: {f}"))?;
                        record(&seen, (c.session.clone(), id(&f).to_string()), seq(&f), data, "ack")?;
                    }
                    Ok(Event::Frame(f)) if f["type"] == "message" => {
                        record(&seen, (session_of(&f).to_string(), id(&f).to_string()), seq(&f), f["data"].clone(), "message")?;
                    }
                    Ok(Event::Frame(f)) if f["type"] == "error" => return Err(format!("publisher {p}: {f}")),
                    Ok(Event::Frame(_)) => {}
                    Ok(Event::Closed(_)) => return Ok(order),
                    Err(e) => return Err(format!("publisher {p}: {e}")),
                }
            }
        }
    }
}

async fn recording_observer(mut c: Client, seen: Seen, count: Arc<Mutex<usize>>) -> R {
    loop {
        match c.next_event_within(Duration::from_secs(15)).await? {
            Event::Frame(f) if f["type"] == "message" => {
                record(
                    &seen,
                    (session_of(&f).to_string(), id(&f).to_string()),
                    seq(&f),
                    f["data"].clone(),
                    "observer",
                )?;
                *count.lock().unwrap() += 1;
            }
            Event::Frame(f) if f["type"] == "error" => return Err(format!("observer: {f}")),
            Event::Frame(_) => {}
            Event::Closed(_) => return Ok(()),
        }
    }
}

async fn sigkill_mid_stream() -> R {
    let dir = tempfile::Builder::new()
        .prefix("homeroom-e2e-kill-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let mut first = Runtime::start("kill-1", dir.path()).await?;
    let room = support::room("kill");
    let seen: Seen = Arc::default();
    let count = Arc::new(Mutex::new(0usize));

    let phase1 = async {
        let obs = Dial::new(first.port, &room, &support::session("obs")).connect().await?;
        let epoch = obs.epoch();
        check!(obs.welcome_seq() == 0, "a fresh room starts at seq 0: {}", obs.welcome);
        let mut pubs = Vec::new();
        for p in 0..PUBLISHERS {
            pubs.push(
                Dial::new(first.port, &room, &support::session(&format!("kp{p}")))
                    .connect()
                    .await?,
            );
        }
        let sessions: Vec<String> = pubs.iter().map(|c| c.session.clone()).collect();
        let obs_task = tokio::spawn(recording_observer(obs, seen.clone(), count.clone()));
        let pub_tasks: Vec<_> = pubs
            .into_iter()
            .enumerate()
            .map(|(p, c)| tokio::spawn(paced_publisher(c, p, seen.clone())))
            .collect();
        // Kill while the stream is flowing.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while *count.lock().unwrap() < KILL_AFTER_SEEN {
            check!(
                tokio::time::Instant::now() < deadline,
                "observer saw only {} messages in 20 s",
                *count.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok::<_, String>((epoch, sessions, obs_task, pub_tasks))
    };
    let (epoch, sessions, obs_task, pub_tasks) = with_log(phase1.await, &[&first])?;
    first.kill_hard().await;
    let mut sent_by = Vec::new();
    for t in pub_tasks {
        sent_by.push(t.await.map_err(|e| e.to_string())??);
    }
    obs_task.await.map_err(|e| e.to_string())??;
    let seen = seen.lock().unwrap().clone();
    let total_sent: usize = sent_by.iter().map(|s| s.len()).sum();
    check!(
        total_sent < PUBLISHERS * PER_PUBLISHER,
        "the kill came after the stream ended ({total_sent} sent): not a mid-stream kill"
    );
    let max_seen = seen.values().map(|(s, _)| *s).max().unwrap_or(0);

    let second = Runtime::start("kill-2", dir.path()).await?;
    let phase2 = async {
        let mut c = Dial::new(second.port, &room, &support::session("reader"))
            .since(0, &epoch)
            .connect()
            .await?;
        let w = c.welcome.clone();
        check!(c.epoch() == epoch, "epoch changed across the restart: {epoch} -> {w}");
        let now = c.welcome_seq();
        check!(now >= max_seen, "seq went back: saw {max_seen} before the kill, welcome says {w}");
        check!(w["resumed"] == true, "since=0 with ≤ 100 messages must resume: {w}");
        check!(w["missed"] == now, "missed must be the whole log: {w}");
        let mut replay = Vec::new();
        for _ in 0..now {
            replay.push(c.expect_type("message").await?);
        }
        check_contiguous("replay after restart", &replay, 1)?;
        let by_key: BTreeMap<(String, String), &Value> =
            replay.iter().map(|m| ((session_of(m).to_string(), id(m).to_string()), m)).collect();
        check!(by_key.len() == replay.len(), "the replay holds a message twice");
        for (key, (s, data)) in &seen {
            let Some(m) = by_key.get(key) else {
                return Err(format!("{key:?} was acked or seen at seq {s} before the kill but is gone after the restart"));
            };
            check!(seq(m) == *s, "{key:?} was at seq {s} before the kill, {} after", seq(m));
            check!(m["data"] == *data, "{key:?} data changed: {data} -> {}", m["data"]);
        }
        // Everything stored was sent by a publisher, with that data.
        for m in &replay {
            let p = sessions.iter().position(|s| s == session_of(m));
            let sent = p.and_then(|p| sent_by[p].iter().find(|(i, _)| i == id(m)));
            check!(
                sent.is_some_and(|(_, d)| *d == m["data"]),
                "stored message was never sent like that: {m}"
            );
        }
        // seq continues without a gap; a retry of an acked id gets its original seq.
        let next = c.publish_acked("after-restart", "stream", json!("hello")).await?;
        check!(next == now + 1, "first publish after restart got seq {next}, expected {}", now + 1);
        let live = c.message("after-restart").await?;
        check!(seq(&live) == next && id(&live) == "after-restart", "live message mismatch: {live}");
        if let Some(((sess, mid), (s, data))) =
            seen.iter().find(|((sess, _), _)| sessions.contains(sess))
        {
            let mut again = Dial::new(second.port, &room, sess).connect().await?;
            let retry = again.publish_acked(mid, "stream", data.clone()).await?;
            check!(retry == *s, "retry of {mid} after the restart got seq {retry}, originally {s}");
            again.get_state().await?; // fence: handled by the room after the retry
            check!(
                again.messages().is_empty(),
                "a retried publish produced a message: {:?}",
                again.messages()
            );
        }
        let loaded = second.log.wait_room_loaded(&room, 1, Duration::from_secs(5)).await?;
        check!(
            loaded[0]["seq"] == now,
            "room_loaded after restart should report seq {now}: {}",
            loaded[0]
        );
        Ok(())
    };
    let r = with_log(phase2.await, &[&first, &second]);
    let mut second = second;
    second.stop().await;
    r
}

async fn clean_restart() -> R {
    let dir = tempfile::Builder::new()
        .prefix("homeroom-e2e-restart-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let mut first = Runtime::start("restart-1", dir.path()).await?;
    let room = support::room("restart");
    let sess = support::session("writer");
    let phase1 = async {
        let mut c = Dial::new(first.port, &room, &sess).connect().await?;
        let mut acked = Vec::new();
        for i in 0..5 {
            let s = c.publish_acked(&format!("r{i}"), "log", json!({"i": i})).await?;
            acked.push(s);
        }
        let state_seq = c.set_acked("st", "phase", json!("before"), Some(0)).await?;
        let state = c.get_state().await?;
        let epoch = c.epoch();
        c.close().await;
        Ok::<_, String>((acked, state_seq, state, epoch))
    };
    let (acked, state_seq, state, epoch) = with_log(phase1.await, &[&first])?;
    let clean = first.stop().await;
    check!(clean, "wrangler dev did not exit within 10 s of SIGTERM");

    let mut second = Runtime::start("restart-2", dir.path()).await?;
    let phase2 = async {
        // Resume from after the second message: the other three and the set are missed.
        let since = acked[1];
        let mut c = Dial::new(second.port, &room, &sess).since(since, &epoch).connect().await?;
        let w = c.welcome.clone();
        check!(c.epoch() == epoch, "epoch changed across a clean restart: {epoch} -> {w}");
        check!(
            c.welcome_seq() == state_seq,
            "seq changed across a clean restart: {state_seq} -> {w}"
        );
        check!(w["resumed"] == true, "resume after restart refused: {w}");
        let missed = state_seq - since;
        check!(w["missed"] == missed, "missed should be {missed}: {w}");
        let mut replay = Vec::new();
        for _ in 0..missed {
            replay.push(c.expect_type("message").await?);
        }
        check_contiguous("replay after clean restart", &replay, since + 1)?;
        for (m, i) in replay.iter().zip(2..5) {
            check!(
                id(m) == format!("r{i}") && m["data"] == json!({"i": i}),
                "replayed message mismatch: {m}"
            );
        }
        let last = &replay[replay.len() - 1];
        check!(
            last["topic"] == "$state"
                && last["data"] == json!({"key":"phase","value":"before","version":state_seq}),
            "replayed state message mismatch: {last}"
        );
        let st = c.get_state().await?;
        check!(
            st["state"] == state["state"] && st["seq"] == state["seq"],
            "state changed across restart: {state} -> {st}"
        );
        let next = c.publish_acked("after", "log", json!(null)).await?;
        check!(next == state_seq + 1, "seq after restart: {next}, expected {}", state_seq + 1);
        let loaded = second.log.wait_room_loaded(&room, 1, Duration::from_secs(5)).await?;
        check!(
            loaded[0]["seq"] == state_seq,
            "room_loaded should report seq {state_seq}: {}",
            loaded[0]
        );
        Ok(())
    };
    let r = with_log(phase2.await, &[&second]);
    second.stop().await;
    r
}
