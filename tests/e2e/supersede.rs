//! Supersede: a second connection with the same session closes the first with 4001; the new one works and the room's sequence is undisturbed.

use std::time::Duration;

use serde_json::json;

use crate::check;
use crate::harness::{shared, Spec};
use crate::support::{self, check_contiguous, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![shared("supersede::same_session_closes_older_socket_4001", supersede)]
}

async fn supersede(ctx: Ctx) -> R {
    let room = support::room("supersede");
    let sess = support::session("tab");
    let mut obs = ctx.dial(&room, &support::session("obs")).connect().await?;
    let mut first = ctx.dial(&room, &sess).connect().await?;
    let s1 = first.publish_acked("one", "chat", json!(1)).await?;

    let mut second = ctx.dial(&room, &sess).via_sydney().connect().await?;
    let code = first.expect_close(Duration::from_secs(10)).await?;
    check!(code == Some(4001), "the superseded socket should be closed with 4001, got {code:?}");
    check!(second.welcome["region"] == "OC", "new connection's region: {}", second.welcome);
    check!(second.welcome_seq() == s1, "welcome seq: {}", second.welcome);

    // Same session: its ids still count (retry of `one` is a duplicate).
    let again = second.publish_acked("one", "chat", json!(1)).await?;
    check!(again == s1, "retry from the new socket: {again}, original {s1}");
    let s2 = second.publish_acked("two", "chat", json!(2)).await?;
    check!(s2 == s1 + 1, "two at {s2}");
    second.ping().await?;
    let m = obs.message("two").await?;
    check!(
        m["region"] == "OC" && m["session"] == sess.as_str(),
        "message from the new socket: {m}"
    );
    check_contiguous("observer", &obs.messages(), s1)?;
    check!(obs.messages().len() == 2, "observer saw {:?}", obs.messages());
    check!(obs.closed.is_none(), "observer closed");
    Ok(())
}
