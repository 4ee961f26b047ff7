//! Ordering across 20 concurrent publishers: every connection sees the same gapless, strictly increasing seq order, every acked message exactly once at its acked seq, ack before the sender's own copy, and the right session/user/region on each message.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Value};

use crate::check;
use crate::client::Client;
use crate::harness::{shared, Spec};
use crate::support::{self, check_contiguous, id, seq, session_of, Ctx, R};

const PUBLISHERS: usize = 20;
const PER_PUBLISHER: usize = 25; // below the burst of 50: no rate limiting
const WINDOW: usize = 5; // unacked publishes in flight per publisher
const TOTAL: usize = PUBLISHERS * PER_PUBLISHER;

pub fn trials() -> Vec<Spec> {
    vec![shared("ordering::twenty_concurrent_publishers", twenty_publishers)]
}

struct PublisherRun {
    client: Client,
    index: usize,
    /// id -> acked seq
    acks: HashMap<String, u64>,
}

async fn publish_all(mut c: Client, index: usize) -> R<PublisherRun> {
    let mut acks = HashMap::new();
    let mut sent = 0usize;
    let mut seen_messages = 0usize;
    // Index in this connection's history where the ack of each id arrived.
    let mut ack_pos: HashMap<String, usize> = HashMap::new();
    while acks.len() < PER_PUBLISHER || seen_messages < TOTAL {
        while sent < PER_PUBLISHER && sent - acks.len() < WINDOW {
            let mid = format!("p{index}-m{sent}");
            c.publish(&mid, "chat", json!({"p": index, "n": sent})).await?;
            sent += 1;
        }
        let f = c.next().await?;
        match f["type"].as_str() {
            Some("ack") => {
                let i = id(&f).to_string();
                check!(!acks.contains_key(&i), "[{}] second ack for {i}: {f}", c.session);
                ack_pos.insert(i.clone(), c.history.len() - 1);
                acks.insert(i, seq(&f));
            }
            Some("message") => {
                seen_messages += 1;
                if session_of(&f) == c.session {
                    // The sender gets its ack before its own copy of the message.
                    let i = id(&f);
                    check!(
                        ack_pos.contains_key(i),
                        "[{}] own message {i} (seq {}) arrived before its ack",
                        c.session,
                        seq(&f)
                    );
                }
            }
            Some("error") => return Err(format!("[{}] unexpected error: {f}", c.session)),
            _ => {} // presence, summary, ...: not this test's business
        }
    }
    Ok(PublisherRun { client: c, index, acks })
}

async fn observe(mut c: Client) -> R<Client> {
    let mut n = 0;
    while n < TOTAL {
        let f = c.next().await?;
        match f["type"].as_str() {
            Some("message") => n += 1,
            Some("error") => return Err(format!("[{}] unexpected error: {f}", c.session)),
            _ => {}
        }
    }
    Ok(c)
}

async fn twenty_publishers(ctx: Ctx) -> R {
    let room = support::room("ordering");
    let mut observers = Vec::new();
    for i in 0..2 {
        let d = ctx.dial(&room, &support::session(&format!("obs{i}")));
        observers.push(if i == 1 { d.via_sydney() } else { d }.connect().await?);
    }
    let mut publishers = Vec::new();
    for i in 0..PUBLISHERS {
        let d = ctx.dial(&room, &support::session(&format!("pub{i}")));
        // Half the publishers connect "from Sydney".
        let d = if i % 2 == 1 { d.via_sydney() } else { d };
        publishers.push(d.connect().await?);
    }
    // Nobody has published yet: every welcome agrees on seq and epoch.
    let base = observers[0].welcome_seq();
    let epoch = observers[0].epoch();
    check!(!epoch.is_empty(), "welcome without epoch: {}", observers[0].welcome);
    for c in observers.iter().chain(publishers.iter()) {
        let w = &c.welcome;
        check!(w["room"] == room.as_str(), "welcome room mismatch: {w}");
        check!(w["session"] == c.session.as_str(), "welcome session mismatch: {w}");
        check!(w["user"] == c.session.as_str(), "anonymous dev mode: user must equal session: {w}");
        check!(w["resumed"] == false, "a connect without since must not be resumed: {w}");
        check!(c.welcome_seq() == base, "welcomes disagree on seq: {w} vs {base}");
        check!(c.epoch() == epoch, "welcomes disagree on epoch: {w} vs {epoch}");
        check!(w["conn"].is_string(), "welcome without conn: {w}");
    }
    // Regions: the MF-CF-Blob continent, else the local placeholder (NA).
    let mut region_of: HashMap<String, String> = HashMap::new();
    for (i, c) in publishers.iter().enumerate() {
        let want = if i % 2 == 1 { "OC" } else { "NA" };
        check!(
            c.welcome["region"] == want,
            "publisher {i} should be in region {want}: {}",
            c.welcome
        );
        region_of.insert(c.session.clone(), want.to_string());
    }
    check!(observers[1].welcome["region"] == "OC", "observer 1 region: {}", observers[1].welcome);

    let obs_tasks: Vec<_> = observers.into_iter().map(|c| tokio::spawn(observe(c))).collect();
    let pub_tasks: Vec<_> =
        publishers.into_iter().enumerate().map(|(i, c)| tokio::spawn(publish_all(c, i))).collect();
    let mut runs = Vec::new();
    for t in pub_tasks {
        runs.push(t.await.map_err(|e| format!("publisher task: {e}"))??);
    }
    let mut observers = Vec::new();
    for t in obs_tasks {
        observers.push(t.await.map_err(|e| format!("observer task: {e}"))??);
    }

    // Every ack: (session, id) -> seq; all distinct seqs.
    let mut acked: HashMap<(String, String), u64> = HashMap::new();
    for r in &runs {
        check!(r.acks.len() == PER_PUBLISHER, "publisher {} got {} acks", r.index, r.acks.len());
        for (i, s) in &r.acks {
            acked.insert((r.client.session.clone(), i.clone()), *s);
        }
    }
    let distinct: HashSet<u64> = acked.values().copied().collect();
    check!(distinct.len() == TOTAL, "acks reuse seqs: {} distinct of {TOTAL}", distinct.len());

    let reference: Vec<Value> = observers[0].messages();
    let views = observers
        .iter()
        .map(|c| (c.session.clone(), c.messages()))
        .chain(runs.iter().map(|r| (r.client.session.clone(), r.client.messages())));
    for (who, msgs) in views {
        check!(msgs.len() == TOTAL, "{who} saw {} messages, expected {TOTAL}", msgs.len());
        check_contiguous(&who, &msgs, base + 1)?;
        for (m, r) in msgs.iter().zip(reference.iter()) {
            check!(
                session_of(m) == session_of(r) && id(m) == id(r),
                "{who} disagrees with the reference order at seq {}: {} vs {}",
                seq(m),
                id(m),
                id(r)
            );
        }
    }
    let mut seen = HashSet::new();
    for m in &reference {
        let key = (session_of(m).to_string(), id(m).to_string());
        check!(seen.insert(key.clone()), "message {key:?} delivered twice");
        let Some(acked_seq) = acked.get(&key) else {
            return Err(format!("message without an ack: {m}"));
        };
        check!(*acked_seq == seq(m), "{key:?} acked at {acked_seq} but delivered at {}", seq(m));
        check!(m["topic"] == "chat", "topic changed: {m}");
        check!(m["user"] == m["session"], "anonymous dev mode: user must equal session: {m}");
        check!(
            m["region"].as_str() == region_of.get(session_of(m)).map(|s| s.as_str()),
            "message region is not its publisher's region: {m}"
        );
        let (p, n) = id(m)
            .trim_start_matches('p')
            .split_once("-m")
            .map(|(p, n)| (p.parse::<u64>().unwrap_or(999), n.parse::<u64>().unwrap_or(999)))
            .unwrap_or((999, 999));
        check!(m["data"] == json!({"p": p, "n": n}), "data changed in transit: {m}");
        check!(m["ts"].is_number(), "message without ts: {m}");
    }
    check!(seen.len() == TOTAL, "only {} distinct messages", seen.len());
    Ok(())
}
