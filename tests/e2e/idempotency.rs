//! Idempotent retries by (session, id): the same socket, after a normal close and after a dropped TCP connection, for `publish` and `set`; the original ack comes back and observers see each message exactly once.

use serde_json::json;

use crate::check;
use crate::harness::{shared, Spec};
use crate::support::{self, check_contiguous, id, seq, session_of, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![shared("idempotency::retry_gets_original_ack_and_no_second_message", retry_same_id)]
}

async fn retry_same_id(ctx: Ctx) -> R {
    let room = support::room("idem");
    let sa = support::session("alice");
    let sb = support::session("bob");
    let mut obs = ctx.dial(&room, &support::session("obs")).connect().await?;
    let mut a = ctx.dial(&room, &sa).connect().await?;

    let s1 = a.publish_acked("m1", "chat", json!({"v": 1})).await?;
    // Same socket, same id: the original ack.
    let again = a.publish_acked("m1", "chat", json!({"v": 1})).await?;
    check!(again == s1, "retry on the same socket: seq {again}, original {s1}");
    let s2 = a.publish_acked("m2", "chat", json!({"v": 2})).await?;
    check!(s2 == s1 + 1, "a retry consumed a seq: m2 at {s2}, m1 at {s1}");

    // Ids are per session: bob's m1 is a different message.
    let mut b = ctx.dial(&room, &sb).connect().await?;
    let b1 = b.publish_acked("m1", "chat", json!({"v": "bob"})).await?;
    check!(b1 == s1 + 2, "bob's m1 should be new at {}, got {b1}", s1 + 2);

    // Reconnect after a normal close, retry with different data: still the original ack.
    a.close().await;
    let mut a2 = ctx.dial(&room, &sa).connect().await?;
    let retry = a2.publish_acked("m1", "chat", json!({"v": "changed"})).await?;
    check!(retry == s1, "retry after reconnect: seq {retry}, original {s1}");

    // set is idempotent too (a second apply would be a conflict: the key exists by then).
    let t = a2.set_acked("set1", "k", json!(1), Some(0)).await?;
    check!(t == s1 + 3, "set at {t}, expected {}", s1 + 3);
    let t_again = a2.set_acked("set1", "k", json!(1), Some(0)).await?;
    check!(t_again == t, "set retry: seq {t_again}, original {t}");

    // Reconnect after dropping TCP (no close frame), at once: retry m2.
    a2.drop_tcp();
    let mut a3 = ctx.dial(&room, &sa).connect().await?;
    let retry2 = a3.publish_acked("m2", "chat", json!({"v": 2})).await?;
    check!(retry2 == s2, "retry after a dropped connection: seq {retry2}, original {s2}");
    let s3 = a3.publish_acked("m3", "chat", json!({"v": 3})).await?;
    check!(s3 == t + 1, "m3 at {s3}, expected {}", t + 1);

    // The observer saw each message exactly once, in order, nothing for the retries.
    obs.message("m3").await?;
    let msgs = obs.messages();
    check_contiguous("observer", &msgs, s1)?;
    let got: Vec<(String, String)> =
        msgs.iter().map(|m| (session_of(m).to_string(), id(m).to_string())).collect();
    let want = vec![
        (sa.clone(), "m1".to_string()),
        (sa.clone(), "m2".to_string()),
        (sb.clone(), "m1".to_string()),
        (sa.clone(), "set1".to_string()),
        (sa.clone(), "m3".to_string()),
    ];
    check!(got == want, "observer saw {got:?}, expected {want:?}");
    check!(msgs[0]["data"] == json!({"v": 1}), "the retry changed m1: {}", msgs[0]);
    check!(
        msgs[3]["topic"] == "$state" && msgs[3]["data"] == json!({"key":"k","value":1,"version":t}),
        "set message: {}",
        msgs[3]
    );
    check!(seq(&msgs[4]) == s3, "m3 seq");
    // The state was applied once.
    let st = obs.get_state().await?;
    check!(st["state"]["k"] == json!({"value":1,"version":t}), "state after set retries: {st}");
    check!(st["seq"] == s3, "state seq: {st}");
    Ok(())
}
