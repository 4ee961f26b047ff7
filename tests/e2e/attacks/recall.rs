//! Attacks on a relayed home that has just lost its memory (an eviction, a hibernation at
//! rest, a Wasm reset): it stores none of its relays' sessions and knows them again only when
//! each relay answers its recall. Until then it holds every open and makes an operator's kick
//! wait, so nobody can take a session, pass a user's cap or slip past a kick in that gap.
//! The test build's `forget` drops the home's memory with its links open, and the next
//! request loads it: the attacker's connect is that request.

use serde_json::json;

use super::sessions::refused;
use crate::check;
use crate::client::Dial;
use crate::edge_support::{self as es, bearer_admin};
use crate::harness::Spec;
use crate::relays::{dial, forget_home, presence, PLACES, RELAYED};
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        es::on(
            "attacks::recall::a_session_cannot_be_taken_while_the_home_recalls_its_relays",
            &RELAYED,
            takeover,
        ),
        es::on("attacks::recall::a_kick_waits_for_the_relays_answers", &RELAYED, kick),
    ]
}

/// Mallory reads the victim's session from the member list, waits for the home to lose its
/// memory, and opens that session through another region's relay: her open is what loads the
/// home, a round trip before the victim's relay gives her session back. Without the hold she
/// was welcomed as the session's owner and the victim closed 4001 for good; now her open waits
/// for every relay's answer and is refused 4409, and the victim keeps her socket.
async fn takeover(ctx: Ctx) -> R {
    let room = support::room("att-recall-take");
    let (oc, eu) = (PLACES[0].0, PLACES[1].0);
    // A member who only reads: no write of hers in the log names her session's owner.
    let mut victim = dial(ctx.port, &room, "victim", oc).await?;
    // Someone at Mallory's relay, so that its link is up and her open goes at once: the
    // message that carries it is what loads the home.
    let _bystander = dial(ctx.port, &room, "bystander", eu).await?;
    let session = victim.session.clone();
    let p = presence(ctx.port, &room).await?;
    check!(p["members"][&session]["user"] == "victim", "the victim is listed: {p}");
    forget_home(ctx.port, &room).await?;
    let attack = Dial::new(ctx.port, &room, &session)
        .token(&es::token(&room, "mallory"))
        .via(eu.0, eu.1, eu.2);
    refused(&attack, None, 4409, "session_taken").await?;
    let p = presence(ctx.port, &room).await?;
    check!(p["members"][&session]["user"] == "victim", "the session is still hers: {p}");
    let seq = victim.publish_acked("still-mine", "chat", json!(1)).await?;
    check!(seq == 1, "her write is the room's first: {seq}");
    check!(
        !victim.history.iter().any(|f| f["type"] == "welcome" && f != &victim.welcome),
        "she was not welcomed again"
    );
    Ok(())
}

/// The operator kicks a user, with a block, in the request that loads a home that has just
/// lost its memory: the kick waits for the relays' answers, so it closes her socket at her
/// relay (it found no connection of hers before), and the others stay.
async fn kick(ctx: Ctx) -> R {
    let room = support::room("att-recall-kick");
    let (oc, eu) = (PLACES[0].0, PLACES[1].0);
    let mut target = dial(ctx.port, &room, "kicked", oc).await?;
    let mut bystander = dial(ctx.port, &room, "stays", eu).await?;
    forget_home(ctx.port, &room).await?;
    let body = json!({"user": "kicked", "block_secs": 60}).to_string();
    let resp =
        es::admin(ctx.port, "POST", &room, "kick", Some(&bearer_admin()), None, &body).await?;
    let answer = es::json_200("kick", &resp)?;
    check!(answer["closed"] == 1, "the kick found her socket at her relay: {answer}");
    let code = target.expect_close(es::T).await?;
    check!(code == Some(4403), "she was closed 4403, got {code:?}");
    let seq = bystander.publish_acked("after-kick", "chat", json!(1)).await?;
    bystander.message("after-kick").await?;
    check!(seq == 1, "the bystander's write is the room's first: {seq}");
    let again = Dial::new(ctx.port, &room, &support::session("kicked-again"))
        .token(&es::token(&room, "kicked"))
        .via(oc.0, oc.1, oc.2);
    refused(&again, None, 4403, "blocked").await?;
    Ok(())
}
