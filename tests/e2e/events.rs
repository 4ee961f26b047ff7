//! How an object's handlers answer the runtime (`homeroom::host::settle`): at once when they do
//! not wait, as a promise when they do. A handler that waits from its first poll on a timer
//! (which keeps the waker of that poll) still answers, and the room serves its members while
//! it waits.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::check;
use crate::client::Dial;
use crate::edge_support::{self as es, bearer_admin, TOKENS};
use crate::harness::Spec;
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![es::on("events::a_handler_that_waits_answers_and_the_room_serves_meanwhile", &TOKENS, nap)]
}

/// How long the home's handler waits (`POST /rooms/{room}/nap/{ms}`, test builds).
const NAP: Duration = Duration::from_millis(5_000);

async fn nap(ctx: Ctx) -> R {
    let room = support::room("nap");
    let token = es::token(&room, "ann");
    let session = support::session("ann");
    let mut ann = Dial::new(ctx.port, &room, &session).token(&token).connect().await?;
    let (port, at) = (ctx.port, room.clone());
    let asked = Instant::now();
    let what = format!("nap/{}", NAP.as_millis());
    let napping = tokio::spawn(async move {
        es::admin(port, "POST", &at, &what, Some(&bearer_admin()), None, "").await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // While the handler waits, the room's other events run: a publish is stored and acked.
    ann.publish_acked("during-the-nap", "chat", json!(1)).await?;
    check!(!napping.is_finished(), "the nap answered before a publish sent 100 ms into it");
    // A handler whose first poll kept its waker answers (before: a dropped wake, no answer).
    let resp = napping.await.map_err(|e| format!("nap task: {e}"))??;
    let body = es::json_200("nap", &resp)?;
    check!(body["napped"] == json!(NAP.as_millis() as u64), "nap answered {body}");
    check!(asked.elapsed() >= NAP, "answered after {:?}, before its timer", asked.elapsed());
    // And the room is as it was: the next publish gets the next seq.
    let a = ann.publish_acked("after-the-nap", "chat", json!(2)).await?;
    check!(a == 2, "the publish after the nap has seq {a}, not 2");
    Ok(())
}
