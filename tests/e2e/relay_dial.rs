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
            "relays::a_flood_while_a_relay_dials_stops_at_her_budget_and_closes_nobody_else",
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

/// Mallory reaches a relay whose new instance is dialing a slow home, beside Bob, and sends as
/// fast as she can: 300 publishes of 60 KB (18 MB). What she says used to wait for the link in
/// the relay's memory until 16 MiB (`DIAL_HOLD_BYTES`), when the instance stopped and closed every
/// client of it 1012, Bob too, within seconds of her flood: one member could keep a region off
/// the room, in a loop. Now a frame takes its bytes from her budget at the relay before it goes
/// up, and past it goes nowhere (a client not yet admitted sends nothing more): nothing
/// overflows, and Bob is closed only when the dial's lease runs out (10 s from the instance's
/// start), as every client of a dial that hangs is.
async fn flood_while_dialing(ctx: Ctx) -> R {
    let room = support::room("att-dial-flood");
    let place = PLACES[2].0;
    stall_home(&ctx, &room).await?;
    let open = |sub: &'static str| {
        Dial::new(ctx.port, &room, &support::session(sub))
            .token(&es::token(&room, sub))
            .via(place.0, place.1, place.2)
            .open()
    };
    let mut bob = open("bob-dial").await?;
    let instance_began = std::time::Instant::now();
    let mut mallory = open("mallory-dial").await?;
    let pad = "x".repeat(60_000);
    for i in 0..300 {
        let frame = json!({"type": "publish", "id": format!("f{i}"), "topic": "chat", "data": pad});
        if mallory.send_text(frame.to_string()).await.is_err() {
            break;
        }
    }
    let flooded = instance_began.elapsed();
    let code = bob.expect_close(GIVEN_UP_WITHIN).await?;
    let closed = instance_began.elapsed();
    check!(code == Some(1012), "Bob closed {code:?}, not 1012 to come back");
    check!(
        closed >= Duration::from_millis(9_500),
        "Bob was closed {closed:?} after his relay's instance began, before its dial's lease \
         (the flood took {flooded:?}): her flood stopped the instance"
    );
    let overflow =
        es::wait_log(&ctx.log, "link_dial_overflow", 1, Duration::from_secs(1), |_| true).await;
    check!(overflow.is_err(), "the instance stopped for her flood: {overflow:?}");
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
