//! Structured logs (issue 4, README "The edge Worker"): on the token runtime, one JSON object per
//! line with an `event`: `connect` (room, region, colo, user, resume), `refused` (the path without
//! its query, status, code), `close` (the client's code), `closed_by_room` and `drain`; and the
//! auth mode once. Each line is matched to what this trial did (its own room and user).

use std::time::Duration;

use serde_json::Value;

use crate::check;
use crate::client::Dial;
use crate::edge_support::{self as es, admin, bearer_admin, token, token_exp, wait_log, TOKENS};
use crate::harness::Spec;
use crate::presence::SYD;
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![es::on("edge_logs::connect_refused_close_drain_lines", &TOKENS, logs)]
}

const WAIT: Duration = Duration::from_secs(5);

async fn logs(ctx: Ctx) -> R {
    let port = ctx.port;
    let room = support::room("logs");
    let user = format!("logger-{}", support::room("u"));
    let s = support::session("logs");
    let dial = Dial::new(port, &room, &s).via(SYD.0, SYD.1, SYD.2).token(&token(&room, &user));

    // connect, then a resume.
    let c = dial.clone().connect().await?;
    let (epoch, seq) = (c.epoch(), c.welcome_seq());
    // A private close code only this trial uses, to find its `close` line.
    c.close_with(4321, "edge logs").await;
    // The room's line for that close, before the resume: a resume the room takes before it
    // hears the close supersedes the old socket (a `closed_by_room` 4001 of its own, which
    // the drain's count below would see; a full run saw it once).
    wait_log(&ctx.log, "close", 1, WAIT, |v| v["code"] == 4321 && v["clean"] == true).await?;
    let c = dial.clone().since(seq, &epoch).connect().await?;
    let lines = wait_log(&ctx.log, "connect", 2, WAIT, |v| v["room"] == room.as_str()).await?;
    let shape = |v: &Value, resume: bool| {
        v["region"] == "OC"
            && v["colo"] == "SYD"
            && v["user"] == user.as_str()
            && v["resume"] == resume
    };
    check!(
        lines.len() == 2 && shape(&lines[0], false) && shape(&lines[1], true),
        "two connect lines (region OC, colo SYD, user {user}, resume false then true) expected: {lines:?}"
    );

    // refused: each with its status and code, the path without the query (no token in logs).
    let other = support::room("logs-other");
    let expired = token_exp(&room, &user, es::now_secs() - 30);
    let cases = [
        (
            format!("/rooms/{room}/ws?session={s}&token={expired}"),
            format!("/rooms/{room}/ws"),
            401,
            "token_expired",
        ),
        (
            format!("/rooms/{other}/ws?session={s}&token={}", token(&room, &user)),
            format!("/rooms/{other}/ws"),
            403,
            "token_wrong_room",
        ),
        (
            format!("/rooms/{other}/ws?session={s}"),
            format!("/rooms/{other}/ws"),
            401,
            "token_missing",
        ),
    ];
    // A token refusal opens the socket and closes it (4401, the code as the reason), so the
    // line says 101 and the close code.
    for (path, logged, _, code) in &cases {
        es::check_token_close(path, port, path, code).await?;
        wait_log(&ctx.log, "refused", 1, WAIT, |v| {
            v["path"] == logged.as_str()
                && v["status"] == 101
                && v["close"] == 4401
                && v["code"] == *code
        })
        .await?;
    }
    let resp = es::get(port, &format!("/rooms/{other}/ws?session={s}"), &[]).await?;
    es::check_refusal("a plain GET", &resp, 426, "upgrade_required")?;
    wait_log(&ctx.log, "refused", 1, WAIT, |v| {
        v["path"] == format!("/rooms/{other}/ws").as_str()
            && v["status"] == 426
            && v["code"] == "upgrade_required"
    })
    .await?;
    let resp = admin(port, "POST", &room, "drain", Some("Bearer wrong"), None, "").await?;
    es::check_refusal("a drain with a wrong key", &resp, 401, "bad_admin_key")?;
    wait_log(&ctx.log, "refused", 1, WAIT, |v| {
        v["path"] == format!("/rooms/{room}/drain").as_str()
            && v["status"] == 401
            && v["code"] == "bad_admin_key"
    })
    .await?;

    // drain: one line with the count, a closed_by_room 1001 for the one socket.
    let resp = admin(port, "POST", &room, "drain", Some(&bearer_admin()), None, "").await?;
    es::json_200("POST /drain", &resp)?;
    let mut c = c;
    let code = c.expect_close(WAIT).await?;
    check!(code == Some(1001), "the drained client should be closed with 1001, got {code:?}");
    let drains = wait_log(&ctx.log, "drain", 1, WAIT, |v| v["room"] == room.as_str()).await?;
    check!(
        drains.len() == 1 && drains[0]["closed"] == 1,
        "one drain line with closed 1: {drains:?}"
    );
    let closes =
        wait_log(&ctx.log, "closed_by_room", 1, WAIT, |v| v["room"] == room.as_str()).await?;
    check!(
        closes.len() == 1 && closes[0]["code"] == 1001 && closes[0]["conn"].is_string(),
        "one closed_by_room line with code 1001: {closes:?}"
    );

    // The auth mode, announced once per isolate: tokens.
    let modes = ctx.log.events("auth_mode");
    check!(
        !modes.is_empty() && modes.iter().all(|v| v["mode"] == "tokens"),
        "the token runtime should announce mode `tokens`: {modes:?}"
    );
    Ok(())
}
