//! The second attack round (issue 17): what the first round's fixes left open in the rules, the
//! routes and the tokens. Each trial plays the attacker's sequence against the real runtime and
//! asserts the victim's experience and the attacker's take (the floods are in `budgets.rs`):
//! - 1: a bid of 2^64-1 made the next minimum wrap, so a bid of 110 displaced a standing 5,000;
//! - 4: a token minted for `/chat/R` opened `/auction/R` and `/rooms/R`;
//! - 5: a user the operator blocked still read the member list;
//! - 7: a weak `ADMIN_KEY` still opened and closed lots on the auction's own routes;
//! - 8: an outsider with no credentials reached a fresh Durable Object on every call;
//! - 9: the examples took identity and size from the payload (a bid "won by Victor" for
//!   Mallory's bid; a 60 kB chat message stored whole);
//! - 10: a JWT with an unknown `crit` header was accepted;
//! - 11: the public lot page showed every bidder's `sub`, session and region, and an empty
//!   auction room reopened its lot forever.

use std::time::Duration;

use serde_json::{json, Value};

use super::config::raw_http;
use super::rooms::{files_under, with_room_schema};
use crate::check;
use crate::client::{enc, Client, Dial};
use crate::edge_support::{self as es, check_refusal, check_token_close};
use crate::harness::{alone, Spec};
use crate::http;
use crate::runtime::{LazyRuntime, Runtime};
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        es::on("attacks::holes::no_bid_wins_without_outbidding", &HOLES, overflow_bid),
        es::on("attacks::holes::a_token_opens_only_the_kinds_it_names", &HOLES, kinds),
        es::on(
            "attacks::holes::tokens_without_a_kind_open_rooms_only_when_the_transition_says_so",
            &LOOSE,
            transition,
        ),
        es::on("attacks::holes::a_blocked_user_reads_no_member_list", &HOLES, blocked_reads),
        es::on("attacks::holes::a_weak_admin_key_opens_no_rules_route", &LOOSE, weak_admin),
        alone("attacks::holes::an_outsider_reaches_no_object", outsiders),
        es::on("attacks::holes::a_bid_is_named_from_the_token", &HOLES, bid_names),
        es::on("attacks::holes::a_chat_message_is_stored_as_checked", &HOLES, chat_padding),
        es::on("attacks::holes::a_jwt_with_critical_extensions_is_refused", &HOLES, crit),
        es::on("attacks::holes::the_public_lot_shows_display_names_only", &HOLES, public_lot),
        es::on("attacks::holes::an_empty_auction_room_keeps_no_timer", &HOLES, idle_lot),
    ]
}

/// Tokens, the admin key, a chat quota no test reaches, and a 2 s pause between lots.
pub static HOLES: LazyRuntime = LazyRuntime::new("att-holes", holes_args);

/// The variables of [`HOLES`].
pub fn holes_args() -> Vec<String> {
    [
        "--var",
        &format!("AUTH_SECRET:{}", es::SECRET),
        "--var",
        &format!("ADMIN_KEY:{}", es::ADMIN_KEY),
        "--var",
        "CHAT_QUOTA:1000",
        "--var",
        "AUCTION_PAUSE_SECONDS:2",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A deployment configured loosely: an `ADMIN_KEY` of 23 bytes (refused as weak) and the
/// transition's `ALLOW_TOKENS_WITHOUT_KIND=true`.
static LOOSE: LazyRuntime = LazyRuntime::new("att-loose", || {
    [
        "--var",
        &format!("AUTH_SECRET:{}", es::SECRET),
        "--var",
        &format!("ADMIN_KEY:{WEAK_ADMIN_KEY}"),
        "--var",
        "ALLOW_TOKENS_WITHOUT_KIND:true",
    ]
    .map(str::to_owned)
    .to_vec()
});

const WEAK_ADMIN_KEY: &str = "e2e-weak-admin-key-9c2d";

const T: Duration = Duration::from_secs(10);

/// `sub` in `room` of `kind`, with a token of that kind (and `info`, if given).
async fn member(ctx: &Ctx, kind: &str, room: &str, sub: &str, info: Option<Value>) -> R<Client> {
    let mut claims = homeroom::auth::Claims::new(room, sub, es::now_secs() + 3600).with_kind(kind);
    claims.info = info.map(|i| serde_json::value::to_raw_value(&i).expect("info is JSON"));
    let token = homeroom::auth::mint(&homeroom::auth::Key::new(es::SECRET.as_bytes()), &claims);
    let tab = support::session(&sub.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
    Dial::new(ctx.port, room, &tab).kind(kind).token(&token).connect().await
}

/// `method /{kind}/{room}/{path}` with `auth` as the `Authorization` header, if any.
async fn call(
    port: u16,
    method: &str,
    path: &str,
    auth: Option<&str>,
    body: &str,
) -> R<http::Response> {
    let mut h = vec![("Accept-Encoding", "identity")];
    if let Some(a) = auth {
        h.push(("Authorization", a));
    }
    http::call(port, method, path, &h, body, T).await
}

async fn admin(port: u16, method: &str, path: &str, body: &str) -> R<http::Response> {
    call(port, method, path, Some(&es::bearer_admin()), body).await
}

/// Sends a bid and returns its answer (`ack` or `error`).
async fn bid(c: &mut Client, id: &str, value: Value) -> R<Value> {
    c.set(id, "bid", value, None).await?;
    c.reply(id).await
}

async fn top_bid(c: &mut Client) -> R<Value> {
    Ok(c.get_state().await?["state"]["bid"]["value"].clone())
}

// ---- 1 ----------------------------------------------------------------------------------------

async fn overflow_bid(ctx: Ctx) -> R {
    let room = support::room("att-overflow");
    let opened = admin(
        ctx.port,
        "POST",
        &format!("/auction/{room}/open"),
        r#"{"start":100,"step":10,"seconds":60}"#,
    )
    .await?;
    es::json_200("open the lot", &opened)?;
    let mut victim =
        member(&ctx, "auction", &room, "vic", Some(json!({"name": "Victoria"}))).await?;
    let mut mallory = member(&ctx, "auction", &room, "mallory", None).await?;
    check!(
        bid(&mut victim, "v1", json!({"amount": 5_000})).await?["type"] == "ack",
        "the standing bid"
    );
    // 2^64 - 1, then 110: the sequence that reset the price.
    let huge: Value = serde_json::from_str("18446744073709551615").expect("a u64");
    let r = bid(&mut mallory, "m1", json!({ "amount": huge })).await?;
    check!(r["type"] == "error" && r["code"] == "bad_bid", "a bid of 2^64-1: {r}");
    let r = bid(&mut mallory, "m2", json!({"amount": 110})).await?;
    check!(r["type"] == "error" && r["code"] == "bid_too_low", "a bid of 110 under 5,000: {r}");
    let top = top_bid(&mut victim).await?;
    check!(top["amount"] == 5_000 && top["bidder"] == "vic", "the victim's bid stands: {top}");
    // The backend closes the lot: the victim wins it.
    let closed = es::json_200(
        "close",
        &admin(ctx.port, "POST", &format!("/auction/{room}/close"), "").await?,
    )?;
    check!(closed["lot"]["winner"]["bidder"] == "vic", "the winner: {closed}");
    victim.close().await;
    mallory.close().await;
    Ok(())
}

// ---- 4 ----------------------------------------------------------------------------------------

async fn kinds(ctx: Ctx) -> R {
    let room = support::room("att-kind");
    let chat = es::token_for("chat", &room, "mallory");
    let path = |kind: &str, token: &str| {
        format!("/{kind}/{room}/ws?session={}&token={}", support::session("k"), enc(token))
    };
    // Her chat token opens the chat, and nothing else.
    let c = member(&ctx, "chat", &room, "mallory", None).await?;
    c.close().await;
    for kind in ["auction", "rooms"] {
        check_token_close(
            &format!("a chat token on /{kind}"),
            ctx.port,
            &path(kind, &chat),
            "token_wrong_kind",
        )
        .await?;
    }
    let resp = es::get(ctx.port, &format!("/rooms/{room}/presence?token={chat}"), &[]).await?;
    check_refusal("a chat token reading /rooms presence", &resp, 403, "token_wrong_kind")?;
    // A token naming no kind opens none.
    let kindless = homeroom::auth::mint(
        &homeroom::auth::Key::new(es::SECRET.as_bytes()),
        &homeroom::auth::Claims::new(&room, "mallory", es::now_secs() + 600),
    );
    for kind in ["chat", "auction", "rooms"] {
        check_token_close(
            &format!("a token without kind on /{kind}"),
            ctx.port,
            &path(kind, &kindless),
            "token_wrong_kind",
        )
        .await?;
    }
    // Kicked and blocked in /chat/R, her chat token opens nothing in this room's other kinds.
    let kick = admin(
        ctx.port,
        "POST",
        &format!("/chat/{room}/kick"),
        r#"{"user":"mallory","block_secs":60}"#,
    )
    .await?;
    check!(kick.status == 200, "kick: {} {}", kick.status, kick.body);
    let (code, reason) = es::upgrade_closed(ctx.port, &path("chat", &chat)).await?;
    check!(code == 4403 && reason == "blocked", "blocked in the chat: {code} {reason}");
    for kind in ["auction", "rooms"] {
        check_token_close(
            &format!("the blocked user's chat token on /{kind}"),
            ctx.port,
            &path(kind, &chat),
            "token_wrong_kind",
        )
        .await?;
    }
    // A token for several kinds, or all, opens them.
    let both = homeroom::auth::mint(
        &homeroom::auth::Key::new(es::SECRET.as_bytes()),
        &homeroom::auth::Claims::new(&room, "ann", es::now_secs() + 600)
            .with_kind(vec!["chat", "auction"]),
    );
    for kind in ["chat", "auction"] {
        let c = Dial::new(ctx.port, &room, &support::session("ann"))
            .kind(kind)
            .token(&both)
            .connect()
            .await?;
        c.close().await;
    }
    check_token_close(
        "a chat+auction token on /rooms",
        ctx.port,
        &path("rooms", &both),
        "token_wrong_kind",
    )
    .await?;
    let all = es::token_for("*", &room, "ann");
    let c = Dial::new(ctx.port, &room, &support::session("ann")).token(&all).connect().await?;
    c.close().await;
    Ok(())
}

/// The transition setting loosens the kind binding only when set, and says so in the log.
async fn transition(ctx: Ctx) -> R {
    let room = support::room("att-kindless");
    let kindless = homeroom::auth::mint(
        &homeroom::auth::Key::new(es::SECRET.as_bytes()),
        &homeroom::auth::Claims::new(&room, "ann", es::now_secs() + 600),
    );
    for kind in ["rooms", "chat"] {
        let c = Dial::new(ctx.port, &room, &support::session("ann"))
            .kind(kind)
            .token(&kindless)
            .connect()
            .await?;
        c.close().await;
    }
    // A token that names a kind still opens only that one.
    let chat = es::token_for("chat", &room, "ann");
    let path = format!("/auction/{room}/ws?session={}&token={}", support::session("a"), enc(&chat));
    check_token_close(
        "a chat token on /auction in the transition",
        ctx.port,
        &path,
        "token_wrong_kind",
    )
    .await?;
    let warned = ctx.log.events("config_warning");
    check!(
        warned.iter().any(|w| w["warning"]
            .as_str()
            .is_some_and(|t| t.contains("ALLOW_TOKENS_WITHOUT_KIND"))),
        "the transition setting must be logged as a warning: {warned:?}"
    );
    Ok(())
}

// ---- 5 ----------------------------------------------------------------------------------------

async fn blocked_reads(ctx: Ctx) -> R {
    let room = support::room("att-blockread");
    let mut victim = member(&ctx, "rooms", &room, "vic", None).await?;
    victim
        .send(json!({"type": "presence", "state": {"where": "the victim's secret corner"}}))
        .await?;
    victim.ping().await?;
    let mallory = member(&ctx, "rooms", &room, "mallory", None).await?;
    let kick = admin(
        ctx.port,
        "POST",
        &format!("/rooms/{room}/kick"),
        r#"{"user":"mallory","block_secs":60}"#,
    )
    .await?;
    check!(kick.status == 200, "kick: {} {}", kick.status, kick.body);
    drop(mallory);
    let list = |sub: &str| {
        let path = format!("/rooms/{room}/presence?token={}", es::token(&room, sub));
        async move { es::get(ctx.port, &path, &[]).await }
    };
    let resp = list("mallory").await?;
    check_refusal("the blocked user's member list", &resp, 403, "blocked")?;
    check!(!resp.body.contains("secret corner"), "the refusal shows nothing: {}", resp.body);
    let bearer = format!("Bearer {}", es::token(&room, "mallory"));
    let resp = es::get(ctx.port, &format!("/rooms/{room}/presence"), &[("Authorization", &bearer)])
        .await?;
    check_refusal("the blocked user's member list (bearer)", &resp, 403, "blocked")?;
    let resp = list("obs").await?;
    let p = es::json_200("another member's list", &resp)?;
    check!(
        resp.body.contains("secret corner") && p["summary"]["members"] == 1,
        "others still read it: {p}"
    );
    victim.close().await;
    Ok(())
}

// ---- 7 ----------------------------------------------------------------------------------------

async fn weak_admin(ctx: Ctx) -> R {
    let room = support::room("att-weakadmin");
    let key = format!("Bearer {WEAK_ADMIN_KEY}");
    for route in ["open", "close"] {
        let resp = call(
            ctx.port,
            "POST",
            &format!("/auction/{room}/{route}"),
            Some(&key),
            r#"{"seconds":60}"#,
        )
        .await?;
        check_refusal(
            &format!("POST /auction/{{room}}/{route} with the weak key"),
            &resp,
            503,
            "admin_key_weak",
        )?;
    }
    // Nothing was created: the room does not exist.
    let resp = call(ctx.port, "GET", &format!("/auction/{room}/lot"), None, "").await?;
    check_refusal("the lot after the refused open", &resp, 404, "room_not_found")?;
    check!(ctx.log.room_loaded(&room).is_empty(), "the weak key's requests loaded the room");
    // The built-in admin routes say the same.
    let resp = call(ctx.port, "GET", &format!("/rooms/{room}/stats"), Some(&key), "").await?;
    check_refusal("GET /stats with the weak key", &resp, 503, "admin_key_weak")?;
    Ok(())
}

// ---- 8 ----------------------------------------------------------------------------------------

async fn outsiders() -> R {
    let dir = tempfile::Builder::new()
        .prefix("homeroom-e2e-outsiders-")
        .tempdir()
        .map_err(|e| format!("temp dir: {e}"))?;
    let secret = format!("AUTH_SECRET:{}", es::SECRET);
    let key = format!("ADMIN_KEY:{}", es::ADMIN_KEY);
    let mut rt =
        Runtime::start_with("att-outsiders", dir.path(), &["--var", &secret, "--var", &key])
            .await?;
    let result = outsiders_on(&rt, dir.path()).await;
    rt.stop().await;
    result.map_err(|e| es::with_log_tail(e, &rt.log))
}

async fn outsiders_on(rt: &Runtime, dir: &std::path::Path) -> R {
    let port = rt.port;
    // One real room first, so what a kind's namespace costs once is not counted below.
    let warm = support::room("out-warm");
    let c = Dial::new(port, &warm, &support::session("warm"))
        .kind("chat")
        .token(&es::token_for("chat", &warm, "w"))
        .connect()
        .await?;
    c.close().await;
    let before = files_under(dir);
    let mut names = Vec::new();
    // No credentials, a bad token, another room's token, another kind's token: every rules
    // route of every kind stops such a caller at the edge.
    for i in 0..20 {
        let name = support::room(&format!("out-{i}"));
        let other_room = es::token_for("chat", "elsewhere", "mallory");
        let other_kind = es::token_for("rooms", &name, "mallory");
        let (method, path, token, status, code) = match i % 5 {
            0 => ("GET", format!("/chat/{name}/x"), None, 401, "token_missing"),
            1 => ("POST", format!("/auction/{name}/anything"), None, 401, "token_missing"),
            2 => (
                "GET",
                format!("/chat/{name}/quota"),
                Some("not.a.token".to_owned()),
                401,
                "token_malformed",
            ),
            3 => ("GET", format!("/chat/{name}/quota"), Some(other_room), 403, "token_wrong_room"),
            _ => ("GET", format!("/chat/{name}/quota"), Some(other_kind), 403, "token_wrong_kind"),
        };
        let bearer = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            bearer.iter().map(|b| ("Authorization", b.as_str())).collect();
        let resp = raw_http(port, method, &path, None, &headers, "").await?;
        check_refusal(&format!("{method} {path} by an outsider"), &resp, status, code)?;
        names.push(name);
    }
    // The kind's one public route reaches the room, and a room nobody created answers 404
    // and writes nothing.
    for i in 0..5 {
        let name = support::room(&format!("out-lot-{i}"));
        let resp = raw_http(port, "GET", &format!("/auction/{name}/lot"), None, &[], "").await?;
        check_refusal("the public lot of a room nobody created", &resp, 404, "room_not_found")?;
        names.push(name);
    }
    let loaded: Vec<Value> = rt
        .log
        .events("room_loaded")
        .into_iter()
        .filter(|v| names.iter().any(|n| v["room"] == n.as_str()))
        .collect();
    check!(loaded.is_empty(), "outsiders' requests loaded rooms: {loaded:?}");
    let after = files_under(dir);
    let new: Vec<&std::path::PathBuf> = after.keys().filter(|p| !before.contains_key(*p)).collect();
    let schema = with_room_schema(&new);
    check!(schema.is_empty(), "outsiders' requests wrote a room's schema: {schema:?}");
    // The 20 refused at the edge reached no object: only the 5 public reads may have made
    // the runtime's own per-object files.
    let dbs = new.iter().filter(|p| p.extension().is_some_and(|e| e == "sqlite")).count();
    check!(
        dbs <= 5,
        "{dbs} new object databases for 20 refused outsiders and 5 public reads: {new:?}"
    );
    Ok(())
}

// ---- 9 ----------------------------------------------------------------------------------------

async fn bid_names(ctx: Ctx) -> R {
    let room = support::room("att-names");
    admin(ctx.port, "POST", &format!("/auction/{room}/open"), r#"{"seconds":60}"#).await?;
    let mut victim =
        member(&ctx, "auction", &room, "victor", Some(json!({"name": "Victor"}))).await?;
    let mut mallory =
        member(&ctx, "auction", &room, "mallory", Some(json!({"name": "Mallory"}))).await?;
    let r = bid(&mut mallory, "m1", json!({"amount": 100, "name": "Victor", "bidder": "victor"}))
        .await?;
    check!(r["type"] == "ack", "Mallory's bid: {r}");
    let top = top_bid(&mut victim).await?;
    check!(top["name"] == "Mallory" && top["bidder"] == "mallory", "named from her token: {top}");
    let closed = es::json_200(
        "close",
        &admin(ctx.port, "POST", &format!("/auction/{room}/close"), "").await?,
    )?;
    check!(closed["lot"]["winner"]["name"] == "Mallory", "won by Mallory, not Victor: {closed}");
    let announced = victim
        .until("the close", |f| f["topic"] == "auction" && f["data"]["event"] == "closed")
        .await?;
    check!(announced["data"]["winner"]["name"] == "Mallory", "the announcement: {announced}");
    victim.close().await;
    mallory.close().await;
    Ok(())
}

async fn chat_padding(ctx: Ctx) -> R {
    let room = support::room("att-pad");
    let mut victim = member(&ctx, "chat", &room, "victor", None).await?;
    let mut mallory = member(&ctx, "chat", &room, "mallory", None).await?;
    let data = json!({"text": "hi", "name": "Victor", "pad": "p".repeat(60_000)});
    mallory.publish_acked("m1", "chat", data).await?;
    let m = victim.message("m1").await?;
    check!(
        m["data"] == json!({"text": "hi"}) && m["user"] == "mallory",
        "what the victim got: {}",
        crate::client::short(&m)
    );
    let log =
        es::json_200("log", &admin(ctx.port, "GET", &format!("/chat/{room}/log"), "").await?)?;
    let stored = &log["messages"][0];
    check!(
        stored["data"] == json!({"text": "hi"}),
        "what was stored: {}",
        crate::client::short(stored)
    );
    check!(stored.to_string().len() < 400, "no padding stored: {} B", stored.to_string().len());
    victim.close().await;
    mallory.close().await;
    Ok(())
}

// ---- 10 ---------------------------------------------------------------------------------------

async fn crit(ctx: Ctx) -> R {
    let room = support::room("att-crit");
    let payload =
        json!({"room": room, "kind": "rooms", "sub": "mallory", "exp": es::now_secs() + 600})
            .to_string();
    for header in [
        r#"{"alg":"HS256","typ":"JWT","crit":["exp"]}"#,
        r#"{"alg":"HS256","typ":"JWT","crit":["urn:example:must-understand"],"urn:example:must-understand":true}"#,
        r#"{"alg":"HS256","typ":"JWT","b64":false,"crit":["b64"]}"#,
    ] {
        let t = es::sign_jwt(es::SECRET.as_bytes(), header, &payload);
        let path =
            format!("/rooms/{room}/ws?session={}&token={}", support::session("crit"), enc(&t));
        check_token_close(&format!("header {header}"), ctx.port, &path, "token_crit").await?;
    }
    // The same claims under a plain header are welcomed: the header was the only defect.
    let t = es::sign_jwt(es::SECRET.as_bytes(), r#"{"alg":"HS256","typ":"JWT"}"#, &payload);
    let c = Dial::new(ctx.port, &room, &support::session("plain")).token(&t).connect().await?;
    c.close().await;
    Ok(())
}

// ---- 11 ---------------------------------------------------------------------------------------

async fn public_lot(ctx: Ctx) -> R {
    let room = support::room("att-lot");
    admin(ctx.port, "POST", &format!("/auction/{room}/open"), r#"{"seconds":60}"#).await?;
    let mut ann =
        member(&ctx, "auction", &room, "ann@example.com", Some(json!({"name": "Ann"}))).await?;
    bid(&mut ann, "a1", json!({"amount": 100})).await?;
    bid(&mut ann, "a2", json!({"amount": 120})).await?;
    let region = ann.welcome["region"].as_str().unwrap_or_default().to_owned();
    let resp = call(ctx.port, "GET", &format!("/auction/{room}/lot"), None, "").await?;
    let lot = es::json_200("the public lot", &resp)?;
    check!(lot["bid"]["amount"] == 120 && lot["bid"]["name"] == "Ann", "the lot page: {lot}");
    check!(lot["bid"]["history"][0]["amount"] == 100, "the history shows amounts: {lot}");
    for private in
        ["ann@example.com", ann.session.as_str(), &format!("\"{region}\""), "bidder", "session"]
    {
        check!(!resp.body.contains(private), "the public lot shows `{private}`: {}", resp.body);
    }
    ann.close().await;
    Ok(())
}

async fn idle_lot(ctx: Ctx) -> R {
    let room = support::room("att-idle");
    admin(ctx.port, "POST", &format!("/auction/{room}/open"), r#"{"seconds":2}"#).await?;
    let visitor = member(&ctx, "auction", &room, "ann", None).await?;
    visitor.close().await;
    let lot = || async {
        let resp = call(ctx.port, "GET", &format!("/auction/{room}/lot"), None, "").await?;
        es::json_200("the lot", &resp)
    };
    // The lot closes after 2 s; with nobody there, no next lot after the 2 s pause.
    tokio::time::sleep(Duration::from_millis(2_000 + 2_000 + 2_500)).await;
    let l = lot().await?;
    check!(l["lot"]["open"] == false, "an empty room opened a next lot: {l}");
    // A visitor comes back: the next lot opens after the pause.
    let visitor = member(&ctx, "auction", &room, "ann", None).await?;
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let l = lot().await?;
    check!(l["lot"]["open"] == true, "the next visitor's lot: {l}");
    visitor.close().await;
    Ok(())
}
