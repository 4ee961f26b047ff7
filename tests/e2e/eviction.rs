//! Object eviction after > 10 s idle (proved by a second `room_loaded` log line): epoch, seq and state survive with nobody connected, and a hibernated socket that stayed connected still sends and receives afterwards.

use std::time::Duration;

use serde_json::json;

use crate::check;
use crate::harness::{shared, Spec};
use crate::support::{self, id, seq, Ctx, R};

/// workerd evicts an idle object after about 10 s.
const IDLE: Duration = Duration::from_secs(13);
/// A member's leave within `summary_interval_ms` (2 s) of the last summary holds the next one
/// for an alarm: the room works once more up to this long after it, and is idle only from then.
const SUMMARY_HELD: Duration = Duration::from_secs(2);

pub fn trials() -> Vec<Spec> {
    vec![
        shared("eviction::idle_room_reloads_with_same_epoch_seq_state", idle_reload),
        shared("eviction::hibernated_socket_survives_eviction", hibernated_socket),
    ]
}

async fn idle_reload(ctx: Ctx) -> R {
    let room = support::room("evict");
    let sa = support::session("a");
    let mut a = ctx.dial(&room, &sa).connect().await?;
    let e0 = a.publish_acked("e0", "chat", json!(0)).await?;
    for i in 1..3 {
        a.publish_acked(&format!("e{i}"), "chat", json!(i)).await?;
    }
    let v = a.set_acked("s1", "kept", json!({"deep": [1, 2, 3]}), Some(0)).await?;
    let before = a.get_state().await?;
    let epoch = a.epoch();
    let last = seq(&before);
    check!(last == v, "state seq {last} should be the set's seq {v}");
    let loads = ctx.log.wait_room_loaded(&room, 1, Duration::from_secs(5)).await?.len();
    a.close().await;

    // Nobody is left to see the held summary's alarm go off (it sends nothing): wait it out.
    tokio::time::sleep(SUMMARY_HELD + IDLE).await;

    let mut b = ctx.dial(&room, &support::session("b")).since(last, &epoch).connect().await?;
    let loaded =
        ctx.log.wait_room_loaded(&room, loads + 1, Duration::from_secs(5)).await.map_err(|e| {
            format!("the room was not reloaded after {IDLE:?} idle (no eviction?): {e}")
        })?;
    let reload = loaded.last().unwrap();
    check!(reload["seq"] == last, "room_loaded after eviction should report seq {last}: {reload}");
    let w = b.welcome.clone();
    check!(b.epoch() == epoch, "epoch changed across eviction: {epoch} -> {w}");
    check!(b.welcome_seq() == last, "seq changed across eviction: {last} -> {w}");
    check!(w["resumed"] == true && w["missed"] == 0, "resume after eviction: {w}");
    let after = b.get_state().await?;
    check!(after == before, "state changed across eviction: {before} -> {after}");
    // Idempotency survives too: a's retry of e0 gets its original seq.
    let mut a2 = ctx.dial(&room, &sa).connect().await?;
    let retry = a2.publish_acked("e0", "chat", json!(0)).await?;
    check!(retry == e0, "retry of e0 after eviction: seq {retry}, originally {e0}");
    let s = b.publish_acked("after-evict", "chat", json!("x")).await?;
    check!(s == last + 1, "first publish after eviction at {s}, expected {}", last + 1);
    Ok(())
}

async fn hibernated_socket(ctx: Ctx) -> R {
    let room = support::room("hibernate");
    let sa = support::session("stay");
    let mut a = ctx.dial(&room, &sa).connect().await?;
    let first = a.publish_acked("h0", "chat", json!("first")).await?;
    let h1 = a.publish_acked("h1", "chat", json!("second")).await?;
    a.message("h1").await?;
    let epoch = a.epoch();
    let loads = ctx.log.wait_room_loaded(&room, 1, Duration::from_secs(5)).await?.len();

    tokio::time::sleep(IDLE).await; // a stays connected, silent

    // Another client wakes the room; the object must have been evicted meanwhile.
    let mut b = ctx.dial(&room, &support::session("waker")).connect().await?;
    let loaded =
        ctx.log.wait_room_loaded(&room, loads + 1, Duration::from_secs(5)).await.map_err(|e| {
            format!("the room was not reloaded after {IDLE:?} idle with a hibernated socket: {e}")
        })?;
    let reload = loaded.last().unwrap();
    check!(reload["seq"] == h1, "room_loaded should report seq {h1}: {reload}");
    check!(
        reload["sockets"].as_u64().is_some_and(|n| n >= 1),
        "the hibernated socket should be found on reload: {reload}"
    );
    check!(b.epoch() == epoch && b.welcome_seq() == h1, "epoch/seq after eviction: {}", b.welcome);

    // The hibernated socket receives live messages...
    let s = b.publish_acked("wake", "chat", json!("hello")).await?;
    check!(s == h1 + 1, "publish after eviction at {s}, expected {}", h1 + 1);
    let m = a.until("live message after hibernation", |f| f["type"] == "message").await?;
    check!(id(&m) == "wake" && seq(&m) == s, "hibernated socket got {m}");
    // ...and can still publish, with its session intact (idempotency survives: h0 retry).
    let retry = a.publish_acked("h0", "chat", json!("first")).await?;
    check!(retry == first, "retry of h0 after eviction: seq {retry}, originally {first}");
    let s2 = a.publish_acked("from-hibernated", "chat", json!(2)).await?;
    check!(s2 == s + 1, "publish from the hibernated socket at {s2}, expected {}", s + 1);
    let m = b.message("from-hibernated").await?;
    check!(
        m["session"] == sa.as_str() && m["user"] == sa.as_str(),
        "session/user of the hibernated socket lost: {m}"
    );
    a.ping().await?;
    Ok(())
}
