//! Attacks on the relays' link (issue 19): nobody outside may speak it. A member forges the
//! header that carries the Worker's contract to ask for a link of their own; sends link-shaped
//! frames from their socket naming a victim's connection; calls a relay's admin routes
//! without the key; holding sockets through four regions' relays, floods the room to get
//! four users' budgets; and makes the link carry operations of megabytes. Each runs on the
//! runtime where every connect goes through a relay.

use std::time::{Duration, Instant};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use futures_util::future::join_all;
use serde_json::{json, Value};

use super::users::{flood_socket, USER_BURST, USER_RATE};
use crate::check;
use crate::client::Dial;
use crate::edge_support::{self as es, bearer_admin};
use crate::harness::Spec;
use crate::presence::note;
use crate::relays::{dial, presence, relay_stats, PLACES, RELAYED};
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        es::on("attacks::links::a_forged_link_header_is_a_plain_connect", &RELAYED, forged_header),
        es::on("attacks::links::link_frames_from_a_client_are_refused", &RELAYED, forged_frames),
        es::on("attacks::links::a_relays_admin_routes_need_the_key", &RELAYED, relay_admin),
        es::on("attacks::links::four_regions_get_one_users_budget", &RELAYED, four_budgets),
        es::on("attacks::links::big_frames_do_not_cut_the_link", &RELAYED, big_frames),
        es::on(
            "attacks::links::a_connect_loop_through_an_idle_relay_costs_one_link",
            &RELAYED,
            churn,
        ),
    ]
}

/// Mallory fills the room's state, then connects and leaves in a loop through a relay nobody
/// else uses (a region of her own). A relay with no client used to let its link go at once, so
/// each connect started an instance that dialed the home, which sent it the room's whole state
/// (and wrote its registry) before it had decided anything about her. A relay now lingers
/// 10 s after its last client: the loop costs the home one link, and each connect after the
/// first finds the instance that is already there.
async fn churn(ctx: Ctx) -> R {
    let room = support::room("att-link-churn");
    let (oc, sa) = (PLACES[0].0, PLACES[3].0);
    let mut victim = dial(ctx.port, &room, "victim", oc).await?;
    let big = "x".repeat(60_000);
    for k in 0..4 {
        victim.set_acked(&format!("s{k}"), &format!("k{k}"), json!(big), None).await?;
    }
    let started = |ctx: &Ctx| {
        let lines = ctx.log.events("relay_started");
        lines.iter().filter(|l| l["room"] == room.as_str() && l["relay"] == "SA-0").count()
    };
    for i in 0..6 {
        let session = support::session(&format!("mallory-churn{i}"));
        let m = Dial::new(ctx.port, &room, &session)
            .token(&es::token(&room, "mallory"))
            .via(sa.0, sa.1, sa.2)
            .connect()
            .await?;
        check!(m.welcome["relay"] == "SA-0", "through the SA relay: {}", m.welcome);
        m.close().await;
    }
    check!(started(&ctx) == 1, "one instance of SA-0 served the loop, {} started", started(&ctx));
    let stats = es::stats(ctx.port, &room).await?;
    let sa_links = stats["topology"]["links"]
        .as_object()
        .map_or(0, |m| m.keys().filter(|k| k.starts_with("SA-0#")).count());
    check!(sa_links == 1, "the home holds one link of SA-0: {stats}");
    victim.publish_acked("after-churn", "chat", json!(1)).await?;
    Ok(())
}

/// The links the home lists in its `/stats`.
async fn links(port: u16, room: &str) -> R<Vec<String>> {
    let s = es::stats(port, room).await?;
    Ok(s["topology"]["links"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default())
}

/// Mallory sends `x-homeroom-ask` with a `Link` for a relay epoch far in the future (which
/// would make every real instance of that relay stale): the Worker builds its own contract, so
/// her upgrade is an ordinary connect, and the real relay keeps its link and its members.
async fn forged_header(ctx: Ctx) -> R {
    let room = support::room("att-link-header");
    let eu = PLACES[1].0;
    let mut victim = dial(ctx.port, &room, "victim", eu).await?;
    let before = links(ctx.port, &room).await?;
    check!(before.len() == 1 && before[0].starts_with("EU-0#"), "one link: {before:?}");
    let forged = json!({"room": room, "home": null, "what": {"Link": {"relay": "EU-0", "epoch": 9_000_000_000_000_000u64}}});
    let ask = URL_SAFE_NO_PAD.encode(forged.to_string());
    let session = support::session("mallory");
    let mallory = Dial::new(ctx.port, &room, &session)
        .token(&es::token(&room, "mallory"))
        .via(eu.0, eu.1, eu.2)
        .header("x-homeroom-ask", &ask)
        .connect()
        .await?;
    check!(
        mallory.welcome["user"] == "mallory" && mallory.welcome["relay"] == "EU-0",
        "the forged upgrade is a plain connect through the EU relay: {}",
        mallory.welcome
    );
    let p = presence(ctx.port, &room).await?;
    check!(p["members"][&session]["user"] == "mallory", "mallory is a member: {p}");
    let after = links(ctx.port, &room).await?;
    check!(after == before, "the forged link is not a link: {before:?} then {after:?}");
    check!(
        !ctx.log
            .events("link")
            .iter()
            .any(|l| l["link"].as_str().is_some_and(|n| n.contains("#9000"))),
        "the home heard a link with the forged epoch"
    );
    victim.publish_acked("still-here", "chat", json!(1)).await?;
    victim.message("still-here").await?;
    Ok(())
}

/// Mallory, through the same relay as her victim, sends what the relay would send the home
/// (an `Up` closing the victim's connection, and its bare operation): the home reads them as
/// her frames, refuses them, and the victim stays in the room and keeps receiving.
async fn forged_frames(ctx: Ctx) -> R {
    let room = support::room("att-link-frames");
    let oc = PLACES[0].0;
    let mut victim = dial(ctx.port, &room, "victim", oc).await?;
    let mut mallory = dial(ctx.port, &room, "mallory", oc).await?;
    let conn = victim.welcome["conn"].as_str().ok_or("the welcome names the conn")?.to_owned();
    let link = links(ctx.port, &room).await?.pop().ok_or("a link")?;
    let (relay, epoch) = link.split_once('#').ok_or("relay#epoch")?;
    let epoch: u64 = epoch.parse().map_err(|_| format!("epoch of {link}"))?;
    let up = json!({"relay": relay, "epoch": epoch, "ops": [{"op": "closed", "conn": conn}]});
    for forged in [
        up,
        json!({"op": "closed", "conn": conn}),
        json!({"op": "text", "conn": conn, "text": "{}"}),
    ] {
        mallory.send(forged.clone()).await?;
        let e = mallory.until("the refusal", |f| f["type"] == "error").await?;
        check!(e["code"] == "bad_frame" || e["code"] == "invalid", "{forged} answered {e}");
    }
    let p = presence(ctx.port, &room).await?;
    check!(p["summary"]["members"] == 2, "the victim is still a member: {p}");
    mallory.publish_acked("after", "chat", json!(1)).await?;
    let m = victim.message("after").await?;
    check!(m["session"] == mallory.session.as_str(), "the victim still receives: {m}");
    check!(victim.closed.is_none(), "the victim was closed");
    Ok(())
}

/// A relay's `/stats` and (test builds) its fault route take the admin key only, and a name
/// that is not a relay's is refused before any object is reached.
async fn relay_admin(ctx: Ctx) -> R {
    let room = support::room("att-link-admin");
    let _member = dial(ctx.port, &room, "member", PLACES[1].0).await?;
    let member = format!("Bearer {}", es::token(&room, "member"));
    for auth in [None, Some(member.as_str())] {
        for (method, what) in [("GET", "stats?relay=EU-0"), ("POST", "fault?relay=EU-0")] {
            let resp = es::admin(ctx.port, method, &room, what, auth, None, "").await?;
            check!(
                resp.status == 401 || resp.status == 403,
                "{method} {what} with {auth:?}: {} {}",
                resp.status,
                resp.body
            );
        }
    }
    for bad in ["EU", "EU-x", "..%2F..%2Fx-0", "EU-123"] {
        let what = format!("stats?relay={bad}");
        let resp =
            es::admin(ctx.port, "GET", &room, &what, Some(&bearer_admin()), None, "").await?;
        check!(resp.status == 400, "relay {bad:?}: {} {}", resp.status, resp.body);
    }
    let r = relay_stats(ctx.port, &room, "EU-0").await?;
    check!(r["clients"] == 1, "the real relay is untouched: {r}");
    Ok(())
}

/// Mallory holds two sockets through each of four regions' relays (8, under the 10 a user may
/// hold) and floods: the home sees one user, so all eight share one user's budget, and a
/// victim's writes are acked meanwhile.
async fn four_budgets(ctx: Ctx) -> R {
    let room = support::room("att-link-budget");
    let mut sockets = Vec::new();
    for (place, _) in PLACES {
        for _ in 0..2 {
            let c = Dial::new(ctx.port, &room, &support::session("mallory"))
                .token(&es::token(&room, "mallory"))
                .via(place.0, place.1, place.2)
                .connect()
                .await?;
            sockets.push(c);
        }
    }
    let mut victim = dial(ctx.port, &room, "victor", PLACES[2].0).await?;
    let (rounds, per_round, every) = (10, 6, Duration::from_millis(200));
    let started = Instant::now();
    let tasks: Vec<_> = sockets
        .into_iter()
        .enumerate()
        .map(|(k, c)| tokio::spawn(flood_socket(c, k, rounds, per_round, every)))
        .collect();
    for i in 0..10 {
        let id = format!("v{i}");
        victim.publish(&id, "chat", json!(i)).await?;
        let reply = victim.reply(&id).await?;
        check!(reply["type"] == "ack", "the victim's {id} during the flood: {reply}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (mut acked, mut limited) = (0, 0);
    for t in join_all(tasks).await {
        let (a, l, _) = t.map_err(|e| format!("flood task: {e}"))??;
        acked += a;
        limited += l;
    }
    let total = 8 * rounds * per_round;
    let elapsed = started.elapsed().as_secs_f64();
    let budget = USER_BURST + USER_RATE * elapsed;
    note(format!(
        "relayed user flood: {acked} acked, {limited} rate_limited of {total} over 4 relays in {elapsed:.2}s (one user's budget {budget:.0})"
    ));
    check!(acked + limited == total, "every publish answered: {acked} + {limited} of {total}");
    check!(
        acked <= (budget + 10.0) as usize,
        "eight sockets over four relays got {acked} acked in {elapsed:.2}s; one user's budget is {budget:.0}"
    );
    check!(acked >= USER_BURST as usize, "at least the burst got through: {acked}");
    Ok(())
}

/// A string value that is 60 KB on the wire and twice that once quoted again: every character
/// is a `"`, which JSON escapes, and which escapes again when a frame travels inside another.
fn quotes(n: usize) -> Value {
    Value::String("\"".repeat(n))
}

/// Mallory, through the same relay as her victim, makes the link carry big operations: she
/// fills the room state with values of quotes (15 × 60 KB, which the link quotes again to
/// 1.8 MB in one operation) and asks for it, then sends a 60 KB publish of quotes on each of
/// her ten sockets at once. She gets her whole state and her acks, her victim gets every
/// message, and every socket is still at the relay. (The runtime closes a WebSocket whose peer
/// sends a message over its limit, 32 MiB here and in production; that no turn of a link
/// reaches it, however many members act in it, is the simulator's
/// `a_turn_bigger_than_a_link_message_goes_as_several_in_order`.)
async fn big_frames(ctx: Ctx) -> R {
    let room = support::room("att-link-big");
    let eu = PLACES[1].0;
    let mut victim = dial(ctx.port, &room, "victim", eu).await?;
    let token = es::token(&room, "mallory");
    let mut mallory = Vec::new();
    for _ in 0..10 {
        let session = support::session("mallory");
        mallory.push(
            Dial::new(ctx.port, &room, &session)
                .token(&token)
                .via(eu.0, eu.1, eu.2)
                .connect()
                .await?,
        );
    }
    let keys = 15;
    for k in 0..keys {
        mallory[0].set_acked(&format!("k{k}"), &format!("key{k}"), quotes(30_000), None).await?;
    }
    let state = mallory[0].get_state().await?;
    let got = state["state"].as_object().map_or(0, |m| m.len());
    check!(got == keys, "mallory's state has her {keys} keys: {got}");
    let size = state.to_string().len();
    check!(size > 800_000, "the state frame is large: {size} B");
    victim.publish_acked("after-state", "chat", json!(1)).await?;
    for round in 0..2 {
        // Ten 60 KB publishes at once are 600 KB of her byte budget (256 KiB a second, burst
        // 1 MiB, which her state took most of): she waits for it, as our client would.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        let sends = mallory.iter_mut().enumerate().map(|(i, c)| {
            let id = format!("big{round}-{i}");
            async move { c.publish_acked(&id, "chat", quotes(30_000)).await }
        });
        for r in join_all(sends).await {
            r?;
        }
    }
    victim.publish_acked("after-publishes", "chat", json!(2)).await?;
    for round in 0..2 {
        for i in 0..10 {
            victim.message(&format!("big{round}-{i}")).await?;
        }
    }
    let s = relay_stats(ctx.port, &room, "EU-0").await?;
    note(format!("relay after the big frames: {s}"));
    check!(s["clients"] == 11, "every socket is still at the relay: {s}");
    Ok(())
}
