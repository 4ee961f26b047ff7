//! A relayed room at rest (issue 19): its home hibernates with its relays' links attached (the
//! runtime evicts it, proved by a second `room_loaded` line), its members notice nothing, and
//! the write that wakes it is acked on the socket that sent it (the home keeps it until the
//! writer's relay has given her session back), stored and delivered once.

use std::time::Duration;

use serde_json::{json, Value};

use crate::check;
use crate::client::Client;
use crate::edge_support as es;
use crate::harness::Spec;
use crate::relays::{dial, presence, relay_stats, PLACES, RELAYED};
use crate::support::{self, check_contiguous, seq, Ctx, R};

/// The home keeps looking at its links every 5 s for 20 s after the room's last event
/// (`LINK_REST_MS`), and workerd evicts an object about 10 s after its last event (its own
/// alarm included): 20 + 10, and 6 s for a busy machine.
const AT_REST: Duration = Duration::from_secs(36);

pub fn trials() -> Vec<Spec> {
    vec![es::on(
        "relays::a_home_at_rest_hibernates_with_relays_attached_and_its_members_notice_nothing",
        &RELAYED,
        at_rest,
    )]
}

async fn at_rest(ctx: Ctx) -> R {
    let room = support::room("relay-rest");
    let (oc, eu) = (PLACES[0], PLACES[1]);
    let mut reader = dial(ctx.port, &room, &format!("{}-rest", oc.1), oc.0).await?;
    let mut writer = dial(ctx.port, &room, &format!("{}-rest", eu.1), eu.0).await?;
    let first = writer.publish_acked("before", "chat", json!("before")).await?;
    reader.message("before").await?;
    writer.message("before").await?;
    let loads = ctx.log.wait_room_loaded(&room, 1, es::T).await?.len();

    // Nobody writes, connects or leaves; only the pings, which the runtime answers.
    tokio::time::sleep(AT_REST).await;

    let woke = writer.publish_acked("wake", "chat", json!("wake")).await?;
    let loaded = ctx.log.wait_room_loaded(&room, loads + 1, es::T).await.map_err(|e| {
        format!("the home was not loaded again after {AT_REST:?} at rest (no hibernation?): {e}")
    })?;
    let reload = loaded.last().cloned().unwrap_or_default();
    check!(reload["seq"] == first, "the home woke at seq {first}: {reload}");
    check!(woke == first + 1, "the waking write at {woke}, after {first}");
    reader.message("wake").await?;
    writer.message("wake").await?;
    for c in [&reader, &writer] {
        check_contiguous(&c.session, &c.messages(), first)?;
        let once = c.messages().iter().filter(|m| m["id"] == "wake").count();
        check!(once == 1, "[{}] had the waking write {once} times", c.session);
        check!(quiet(c), "[{}] saw a leave, a join again or a second welcome", c.session);
    }
    let stats = es::stats(ctx.port, &room).await?;
    check!(stats["topology"]["relayed"] == 2, "both sessions came back: {stats}");
    let r = relay_stats(ctx.port, &room, &format!("{}-0", eu.1)).await?;
    check!(r["recalls"].as_u64() >= Some(1), "the writer's relay was asked for its sessions: {r}");
    let p = presence(ctx.port, &room).await?;
    check!(p["summary"]["members"] == 2, "both members, once each: {p}");
    // Still one socket each: a write from the reader's side too.
    let after = reader.publish_acked("after", "chat", json!("after")).await?;
    check!(after == woke + 1, "the next write at {after}");
    let m = writer.message("after").await?;
    check!(seq(&m) == after, "the writer got it at {}", seq(&m));
    Ok(())
}

/// Whether `c` had one welcome and no presence frame naming a leave, or a join of the other
/// member after the first.
fn quiet(c: &Client) -> bool {
    let welcomes = c.history.iter().filter(|f| f["type"] == "welcome").count();
    let presence: Vec<&Value> = c.history.iter().filter(|f| f["type"] == "presence").collect();
    let leaves = presence.iter().any(|f| f["leaves"].as_array().is_some_and(|l| !l.is_empty()));
    let joins = presence.iter().filter(|f| f["joins"].as_object().is_some_and(|j| !j.is_empty()));
    welcomes == 1 && !leaves && joins.count() <= 1
}
