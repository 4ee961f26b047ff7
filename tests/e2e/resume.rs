//! Resume with since/epoch: exact replay of up to 100 missed messages before any live frame (after a dropped or a closed connection), `resync` with reason `gap` past the limit and `epoch` for a wrong epoch, and no replay without `since`.

use serde_json::{json, Value};

use crate::check;
use crate::client::Client;
use crate::harness::{shared, Spec};
use crate::support::{self, check_contiguous, id, seq, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        shared("resume::exact_replay_after_dropped_connection", replay_after_drop),
        shared("resume::exact_replay_after_normal_close", replay_after_close),
        shared("resume::replay_limit_100_then_resync_gap", resync_gap),
        shared("resume::wrong_epoch_resyncs_and_no_since_does_not_replay", resync_epoch),
    ]
}

/// Publishes `n` messages over several sockets (each below the burst of 50, so no rate
/// limiting), all acked; returns the ids in seq order and the last seq.
async fn publish_many(ctx: &Ctx, room: &str, tag: &str, n: usize) -> R<(Vec<(u64, String)>, u64)> {
    let sockets = n.div_ceil(40).max(1);
    let mut tasks = Vec::new();
    for s in 0..sockets {
        let mut c = ctx.dial(room, &support::session(&format!("{tag}{s}"))).connect().await?;
        let ids: Vec<String> = (s..n).step_by(sockets).map(|i| format!("{tag}-{i}")).collect();
        tasks.push(tokio::spawn(async move {
            for i in &ids {
                c.publish(i, "bulk", json!({"i": i})).await?;
            }
            let mut acked = Vec::new();
            for i in &ids {
                acked.push((c.ack(i).await?, i.clone()));
            }
            c.close().await;
            Ok::<_, String>(acked)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.map_err(|e| e.to_string())??);
    }
    all.sort();
    let last = all.last().map(|a| a.0).unwrap_or(0);
    Ok((all, last))
}

/// Connects, receives a few messages, goes away (`drop_tcp` or close), misses `k`, resumes.
async fn replay_scenario(ctx: Ctx, abrupt: bool) -> R {
    let room = support::room(if abrupt { "resume-drop" } else { "resume-close" });
    let sc = support::session("reader");
    let mut c = ctx.dial(&room, &sc).connect().await?;
    let mut p = ctx.dial(&room, &support::session("writer")).connect().await?;
    for i in 0..3 {
        p.publish_acked(&format!("before{i}"), "chat", json!(i)).await?;
    }
    let last_seen = c.until("before2", |f| f["type"] == "message" && f["id"] == "before2").await?;
    let since = seq(&last_seen);
    let epoch = c.epoch();
    if abrupt {
        c.drop_tcp();
    } else {
        c.close().await;
    }
    let k = 7u64;
    let mut missed_ids = Vec::new();
    for i in 0..k {
        let mid = format!("missed{i}");
        let s = p.publish_acked(&mid, "chat", json!({"i": i})).await?;
        check!(s == since + 1 + i, "{mid} at {s}, expected {}", since + 1 + i);
        missed_ids.push(mid);
    }
    // Reconnect and publish a live message at once: the replay must still come first.
    let mut c = ctx.dial(&room, &sc).since(since, &epoch).connect().await?;
    p.publish("live", "chat", json!("now")).await?;
    let w = c.welcome.clone();
    check!(w["resumed"] == true, "resume with {k} missed must succeed: {w}");
    check!(w["missed"] == k, "missed should be {k}: {w}");
    check!(w["epoch"] == epoch.as_str(), "epoch changed: {w}");
    check!(c.welcome_seq() >= since + k, "welcome seq {} behind the log", c.welcome_seq());
    let mut replay: Vec<Value> = Vec::new();
    for _ in 0..k {
        let f = c.next().await?;
        check!(
            f["type"] == "message",
            "expected the {k} missed messages before anything else, got {f}"
        );
        replay.push(f);
    }
    check_contiguous("replay", &replay, since + 1)?;
    let got: Vec<&str> = replay.iter().map(id).collect();
    check!(got == missed_ids, "replayed {got:?}, expected {missed_ids:?}");
    for (i, m) in replay.iter().enumerate() {
        check!(m["data"] == json!({"i": i}), "replayed data changed: {m}");
    }
    let live_ack = p.ack("live").await?;
    check!(live_ack == since + k + 1, "live publish at {live_ack}, expected {}", since + k + 1);
    let live = c.until("the live message", |f| f["type"] == "message").await?;
    check!(
        id(&live) == "live" && seq(&live) == since + k + 1,
        "first live frame should be `live` at {}: {live}",
        since + k + 1
    );
    // Nothing was delivered twice.
    check_contiguous("resumed connection", &c.messages(), since + 1)?;
    Ok(())
}

async fn replay_after_drop(ctx: Ctx) -> R {
    replay_scenario(ctx, true).await
}

async fn replay_after_close(ctx: Ctx) -> R {
    replay_scenario(ctx, false).await
}

async fn expect_resync(c: &mut Client, reason: &str, seq_now: u64, state: &Value) -> R {
    let w = c.welcome.clone();
    check!(w["resumed"] == false, "must not resume ({reason}): {w}");
    let f = c.next().await?;
    check!(f["type"] == "resync", "expected a resync ({reason}) right after the welcome, got {f}");
    check!(f["reason"] == reason, "resync reason should be {reason}: {f}");
    check!(seq(&f) == seq_now, "resync seq should be {seq_now}: {f}");
    check!(f["state"] == *state, "resync state should be {state}: {f}");
    check!(c.welcome_seq() == seq_now, "welcome seq should be {seq_now}: {w}");
    Ok(())
}

async fn resync_gap(ctx: Ctx) -> R {
    let room = support::room("resync-gap");
    let mut w = ctx.dial(&room, &support::session("writer")).connect().await?;
    let v1 = w.set_acked("k1", "k1", json!("one"), Some(0)).await?;
    let v2 = w.set_acked("k2", "k2", json!({"n": 2}), Some(0)).await?;
    let epoch = w.epoch();
    let since = v2;
    let state =
        json!({"k1": {"value": "one", "version": v1}, "k2": {"value": {"n": 2}, "version": v2}});

    // Exactly 100 missed: still a resume, with all 100 in order.
    let (ids, last) = publish_many(&ctx, &room, "hundred", 100).await?;
    check!(last == since + 100, "100 publishes ended at {last}, expected {}", since + 100);
    let mut c =
        ctx.dial(&room, &support::session("at-limit")).since(since, &epoch).connect().await?;
    check!(
        c.welcome["resumed"] == true && c.welcome["missed"] == 100,
        "100 missed must resume: {}",
        c.welcome
    );
    let mut replay = Vec::new();
    for _ in 0..100 {
        replay.push(c.expect_type("message").await?);
    }
    check_contiguous("replay of 100", &replay, since + 1)?;
    for (m, (s, i)) in replay.iter().zip(ids.iter()) {
        check!(seq(m) == *s && id(m) == i, "replay mismatch: {m} vs {s} {i}");
    }
    c.close().await;

    // One more: 101 missed is past the limit.
    w.publish_acked("one-more", "bulk", json!(null)).await?;
    let now = last + 1;
    let mut c =
        ctx.dial(&room, &support::session("past-limit")).since(since, &epoch).connect().await?;
    expect_resync(&mut c, "gap", now, &state).await?;
    // No message is replayed; the next frame is live.
    let s = w.publish_acked("after-resync", "chat", json!(1)).await?;
    check!(s == now + 1, "publish after resync at {s}");
    let f = c
        .until("a frame after the resync", |f| f["type"] == "message" || f["type"] == "error")
        .await?;
    check!(
        f["type"] == "message" && seq(&f) == now + 1 && id(&f) == "after-resync",
        "after a resync the first message must be live: {f}"
    );

    // A far-behind since (still in the log but > 100 behind) gives a gap too.
    let mut c2 = ctx.dial(&room, &support::session("far")).since(1, &epoch).connect().await?;
    expect_resync(&mut c2, "gap", now + 1, &state).await?;
    Ok(())
}

async fn resync_epoch(ctx: Ctx) -> R {
    let room = support::room("resync-epoch");
    let mut w = ctx.dial(&room, &support::session("writer")).connect().await?;
    let v = w.set_acked("s", "color", json!("red"), Some(0)).await?;
    let m = w.publish_acked("m", "chat", json!("x")).await?;
    let state = json!({"color": {"value": "red", "version": v}});
    let epoch = w.epoch();
    check!(!epoch.is_empty(), "welcome without epoch");

    let wrong = format!("{epoch}x");
    let mut c =
        ctx.dial(&room, &support::session("wrong-epoch")).since(1, &wrong).connect().await?;
    expect_resync(&mut c, "epoch", m, &state).await?;
    c.ping().await?;
    check!(c.messages().is_empty(), "wrong epoch must not replay: {:?}", c.messages());

    // No since: resumed false, no replay, no resync; the next frame is the pong.
    let mut n = ctx.dial(&room, &support::session("fresh")).connect().await?;
    check!(n.welcome["resumed"] == false, "no since → resumed false: {}", n.welcome);
    check!(n.welcome_seq() == m, "welcome seq: {}", n.welcome);
    n.send(json!({"type": "get_state"})).await?;
    let f = n.next().await?;
    check!(
        f["type"] == "state",
        "without since the first frame after welcome should answer get_state, got {f}"
    );
    check!(f["state"] == state && seq(&f) == m, "state: {f}");

    // The correct epoch with since = current seq: resumed, nothing missed.
    let mut r = ctx.dial(&room, &support::session("current")).since(m, &epoch).connect().await?;
    check!(
        r.welcome["resumed"] == true && r.welcome["missed"] == 0,
        "up-to-date resume: {}",
        r.welcome
    );
    r.send(json!({"type": "get_state"})).await?;
    let f = r.next().await?;
    check!(f["type"] == "state", "nothing may be replayed for an up-to-date resume, got {f}");
    Ok(())
}
