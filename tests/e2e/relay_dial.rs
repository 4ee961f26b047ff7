//! A relay whose dial to its home never settles (issue 19): its clients are not left waiting for
//! a welcome that cannot come. The fault (test builds): the home takes relays' links only 60 s
//! after they come (`POST /rooms/{room}/stall/60000`), so the relay's `fetch` to its home hangs,
//! as a bench run once saw the runtime leave one hanging for good (bench/README.md, "A load
//! that connected nobody"). The relay gives a dial the link's lease (10 s) from its start, then
//! closes its clients (1012) as for a link lost; they resume through its next instance.

use std::time::Duration;

use serde_json::json;

use crate::check;
use crate::client::Dial;
use crate::edge_support::{self as es, bearer_admin};
use crate::harness::Spec;
use crate::relays::{dial, PLACES, RELAYED};
use crate::support::{self, Ctx, R};

/// The lease of a dial (`LINK_LEASE_MS`, 10 s), the relay's watch that looks at it (at most
/// 5 s later), and room for a busy machine.
const GIVEN_UP_WITHIN: Duration = Duration::from_secs(30);

pub fn trials() -> Vec<Spec> {
    vec![
        es::on(
            "relays::a_relay_whose_dial_hangs_closes_its_clients_instead_of_leaving_them_unwelcomed",
            &RELAYED,
            dial_hangs,
        ),
        es::on(
            "relays::a_flood_while_a_relay_dials_is_bounded_not_kept_until_the_lease",
            &RELAYED,
            flood_while_dialing,
        ),
    ]
}

/// The room exists (the operator's write makes it), then its home takes relays' links 60 s
/// late.
async fn stall_home(ctx: &Ctx, room: &str) -> R {
    let write = json!({"id": "first", "topic": "news", "data": 1}).to_string();
    let admin = Some(bearer_admin());
    let made =
        es::admin(ctx.port, "POST", room, "messages", admin.as_deref(), None, &write).await?;
    check!(made.status == 200, "the operator's write: {} {}", made.status, made.body);
    let stall =
        es::admin(ctx.port, "POST", room, "stall/60000", admin.as_deref(), None, "").await?;
    check!(stall.status == 200, "the stall: {} {}", stall.status, stall.body);
    Ok(())
}

/// Mallory reaches a relay whose new instance is dialing a slow home and sends as fast as she
/// can: 300 publishes of 60 KB (18 MB). What she says waits for the link in the relay's memory;
/// it used to wait there until the dial's lease ran out (10 s and the watch's 5 s), however
/// much it was. Past 16 MiB (`DIAL_HOLD_BYTES`) the instance stops and its clients are closed
/// 1012 to resume, within a few seconds of the flood, not at the lease.
async fn flood_while_dialing(ctx: Ctx) -> R {
    let room = support::room("att-dial-flood");
    let place = PLACES[2].0;
    stall_home(&ctx, &room).await?;
    let sub = "mallory-dial";
    let mut mallory = Dial::new(ctx.port, &room, &support::session(sub))
        .token(&es::token(&room, sub))
        .via(place.0, place.1, place.2)
        .open()
        .await?;
    let started = std::time::Instant::now();
    let pad = "x".repeat(60_000);
    for i in 0..300 {
        let frame = json!({"type": "publish", "id": format!("f{i}"), "topic": "chat", "data": pad});
        if mallory.send_text(frame.to_string()).await.is_err() {
            break; // closed under her: the bound came first
        }
    }
    let code = mallory.expect_close(Duration::from_secs(8)).await.map_err(|e| {
        format!("a client flooding a dialing relay was not closed within 8 s of its flood: {e}")
    })?;
    check!(code == Some(1012), "closed {code:?}, not 1012 to come back");
    let took = started.elapsed();
    check!(took < Duration::from_secs(9), "closed {took:?} after the flood began, at the lease");
    let overflow = es::wait_log(&ctx.log, "link_dial_overflow", 1, es::T, |_| true).await;
    check!(overflow.is_ok(), "no link_dial_overflow line: {overflow:?}");
    Ok(())
}

async fn dial_hangs(ctx: Ctx) -> R {
    let room = support::room("relay-dial");
    let place = PLACES[1].0;
    stall_home(&ctx, &room).await?;
    let admin = Some(bearer_admin());

    // Through a relay (`RELAY_ABOVE` 0), whose new instance dials the stalled home.
    let sub = "eu-dial";
    let mut waiting = Dial::new(ctx.port, &room, &support::session(sub))
        .token(&es::token(&room, sub))
        .via(place.0, place.1, place.2)
        .open()
        .await?;
    let code = waiting.expect_close(GIVEN_UP_WITHIN).await.map_err(|e| {
        format!("a client of a relay whose dial hangs was neither welcomed nor closed: {e}")
    })?;
    check!(code == Some(1012), "closed {code:?}, not 1012 to come back");
    let welcomed = waiting.history.iter().any(|f| f["type"] == "welcome");
    check!(!welcomed, "no welcome can have come: {:?}", waiting.history);

    // The home takes links again: the client's next connect is welcomed through the relay's
    // next instance, and the room is the one the operator wrote to.
    let stall = es::admin(ctx.port, "POST", &room, "stall/0", admin.as_deref(), None, "").await?;
    check!(stall.status == 200, "the stall's end: {} {}", stall.status, stall.body);
    let mut back = dial(ctx.port, &room, sub, place).await?;
    check!(back.welcome["relay"].is_string(), "welcomed through a relay: {}", back.welcome);
    check!(back.welcome["seq"] == 1, "the room's one write: {}", back.welcome);
    let seq = back.publish_acked("after", "chat", json!("after")).await?;
    check!(seq == 2, "the next write at {seq}");
    Ok(())
}
