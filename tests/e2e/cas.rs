//! Compare-and-set on room state: `if_version` 0 conflicts with the current version, and concurrent read-then-set bidders never lose an update (consecutive values, strictly increasing versions, one `$state` message per successful set).

use std::collections::HashMap;

use serde_json::{json, Value};

use crate::check;
use crate::client::Client;
use crate::harness::{shared, Spec};
use crate::support::{self, seq, session_of, Ctx, R};

const BIDDERS: usize = 5;
const ATTEMPTS: usize = 10; // 2 frames each: 20 frames per socket, below the burst of 50

pub fn trials() -> Vec<Spec> {
    vec![shared("cas::conflict_and_concurrent_bidders", cas)]
}

struct Outcome {
    session: String,
    /// (set id, seq, value) of each successful set
    wins: Vec<(String, u64, i64)>,
    conflicts: usize,
}

/// read state -> set bid = value + 1 if_version = version, ATTEMPTS times.
async fn bidder(mut c: Client, b: usize) -> R<Outcome> {
    let mut wins = Vec::new();
    let mut conflicts = 0;
    for a in 0..ATTEMPTS {
        let st = c.get_state().await?;
        let cur = &st["state"]["bid"];
        let (value, version) =
            (cur["value"].as_i64().unwrap_or(0), cur["version"].as_u64().unwrap_or(0));
        let sid = format!("b{b}-{a}");
        c.set(&sid, "bid", json!(value + 1), Some(version)).await?;
        let f = c.reply(&sid).await?;
        match (f["type"].as_str(), f["code"].as_str()) {
            (Some("ack"), _) => {
                check!(
                    seq(&f) > version,
                    "[{}] set acked at {} but read version {version}",
                    c.session,
                    seq(&f)
                );
                wins.push((sid, seq(&f), value + 1));
            }
            (Some("error"), Some("conflict")) => {
                let v = f["version"].as_u64();
                check!(
                    v.is_some_and(|v| v > version),
                    "[{}] conflict must carry the current version (newer than {version}): {f}",
                    c.session
                );
                conflicts += 1;
            }
            _ => return Err(format!("[{}] unexpected reply to {sid}: {f}", c.session)),
        }
    }
    Ok(Outcome { session: c.session.clone(), wins, conflicts })
}

async fn cas(ctx: Ctx) -> R {
    let room = support::room("cas");
    let mut obs = ctx.dial(&room, &support::session("obs")).connect().await?;
    let mut a = ctx.dial(&room, &support::session("a")).connect().await?;
    let mut b = ctx.dial(&room, &support::session("b")).connect().await?;

    let sa = a.set_acked("a1", "bid", json!(10), Some(0)).await?;
    b.set("b1", "bid", json!(20), Some(0)).await?;
    let f = b.reply("b1").await?;
    check!(
        f["type"] == "error" && f["code"] == "conflict" && f["id"] == "b1" && f["version"] == sa,
        "B's if_version 0 should conflict with version {sa}: {f}"
    );
    // A wrong non-zero version conflicts too; a right one wins.
    b.set("b2", "bid", json!(20), Some(sa + 1000)).await?;
    let f = b.reply("b2").await?;
    check!(f["code"] == "conflict" && f["version"] == sa, "stale if_version: {f}");
    let sb = b.set_acked("b3", "bid", json!(11), Some(sa)).await?;
    check!(sb == sa + 1, "B's correct set at {sb}, expected {}", sa + 1);
    // Without if_version the set is unconditional.
    let other = a.set_acked("a2", "other", json!({"x": true}), None).await?;

    // Concurrent bidders (a, b and three more).
    let mut clients = vec![a, b];
    for i in 2..BIDDERS {
        clients.push(ctx.dial(&room, &support::session(&format!("bidder{i}"))).connect().await?);
    }
    let tasks: Vec<_> =
        clients.into_iter().enumerate().map(|(i, c)| tokio::spawn(bidder(c, i))).collect();
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.map_err(|e| e.to_string())??);
    }
    let mut wins: Vec<(String, String, u64, i64)> = outcomes
        .iter()
        .flat_map(|o| o.wins.iter().map(|(i, s, v)| (o.session.clone(), i.clone(), *s, *v)))
        .collect();
    wins.sort_by_key(|w| w.2);
    let conflicts: usize = outcomes.iter().map(|o| o.conflicts).sum();
    check!(!wins.is_empty(), "no bid won at all ({conflicts} conflicts)");

    // The observer: every $state message up to the state reply.
    let st = obs.get_state().await?;
    let states: Vec<Value> =
        obs.messages().into_iter().filter(|m| m["topic"] == "$state").collect();
    let bids: Vec<&Value> = states.iter().filter(|m| m["data"]["key"] == "bid").collect();
    // a1, b3, then one per win.
    check!(
        bids.len() == 2 + wins.len(),
        "observer saw {} bid $state messages, expected {} (2 + {} successful sets; {conflicts} conflicts)",
        bids.len(),
        2 + wins.len(),
        wins.len()
    );
    let mut prev_version = 0;
    for (k, m) in bids.iter().enumerate() {
        let version = m["data"]["version"].as_u64().unwrap_or(0);
        check!(version == seq(m), "$state version must be its seq: {m}");
        check!(version > prev_version, "versions not strictly increasing: {m}");
        prev_version = version;
        // No lost update: each value is the previous one plus one (10, 11, 12, ...).
        check!(m["data"]["value"] == json!(10 + k as i64), "bid #{k} should be {}: {m}", 10 + k);
    }
    let by_seq: HashMap<u64, &(String, String, u64, i64)> = wins.iter().map(|w| (w.2, w)).collect();
    for m in &bids[2..] {
        let Some((sess, sid, _, value)) = by_seq.get(&seq(m)) else {
            return Err(format!("$state message with no matching ack: {m}"));
        };
        check!(
            session_of(m) == sess && m["id"] == sid.as_str() && m["data"]["value"] == *value,
            "$state message does not match its ack: {m}"
        );
    }
    let last = wins.last().unwrap();
    check!(
        st["state"]["bid"] == json!({"value": last.3, "version": last.2}),
        "final state should be the last successful set {last:?}: {st}"
    );
    check!(
        st["state"]["other"] == json!({"value": {"x": true}, "version": other}),
        "other key: {st}"
    );
    check!(st["seq"] == last.2, "state seq should be the last set's seq {}: {st}", last.2);
    Ok(())
}
