//! The operator's and the client's probes (issue 4, PROTOCOL.md "HTTP"): `/probe` upgrades and
//! closes with 1000 at once (426 without an upgrade); `/region` reports the request's cf fields
//! and region exactly; `/health` round-trips the canary (200), in anonymous and in token mode,
//! and names the failing step with 503: `connect` when the canary room cannot be reached (a
//! canary room that is no room name), `pong` when the room is up but does not answer (frames over
//! `MAX_FRAME_BYTES=16` are closed with 1009). The cron trigger runs the same canary and logs it.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::check;
use crate::edge_support::{
    self as es, check_refusal, cron_canary, BAD_CANARY_ROOM, CLOSED, PLACED, TOKENS,
};
use crate::harness::{shared, Spec};
use crate::presence::{note, FRA, SYD};
use crate::support::{Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        shared("edge_probe::probe_upgrades_and_closes_1000", probe),
        shared("edge_probe::region_reports_cf_exactly", region),
        shared("edge_probe::health_ok", health_ok),
        es::on("edge_probe::health_and_cron_ok_in_token_mode", &TOKENS, health_ok_tokens),
        es::on("edge_probe::health_503_at_connect_when_room_unreachable", &CLOSED, health_connect),
        es::on("edge_probe::health_503_at_pong_when_room_does_not_answer", &PLACED, health_pong),
        shared("edge_probe::concurrent_health_checks_all_pass", concurrent_health),
    ]
}

const CANARY_ROOM: &str = "homeroom-canary";

async fn probe(ctx: Ctx) -> R {
    let url = format!("ws://127.0.0.1:{}/probe", ctx.port);
    for attempt in 0..3 {
        let started = Instant::now();
        let (mut ws, resp) =
            tokio::time::timeout(es::T, tokio_tungstenite::connect_async(url.as_str()))
                .await
                .map_err(|_| format!("GET /probe (upgrade) timed out after {:?}", es::T))?
                .map_err(|e| format!("GET /probe (upgrade): {e}"))?;
        check!(resp.status() == 101, "GET /probe should answer 101, got {}", resp.status());
        let opened = started.elapsed();
        // The very next thing is the close: no frames, code 1000.
        let first = tokio::time::timeout(Duration::from_secs(2), ws.next())
            .await
            .map_err(|_| "the probe socket was not closed within 2 s of opening".to_string())?;
        let closed = started.elapsed();
        match first {
            Some(Ok(Message::Close(Some(frame)))) => {
                check!(
                    u16::from(frame.code) == 1000,
                    "the probe should close with 1000, got {frame:?}"
                )
            }
            other => {
                return Err(format!(
                    "the probe's first message should be a close 1000, got {other:?}"
                ))
            }
        }
        note(format!("probe #{attempt}: open after {opened:?}, closed after {closed:?}"));
    }
    let resp = es::get(ctx.port, "/probe", &[]).await?;
    check_refusal("GET /probe without an upgrade", &resp, 426, "upgrade_required")
}

async fn region_of(port: u16, blob: &str) -> R<Value> {
    let resp = es::get(port, "/region", &[("MF-CF-Blob", blob)]).await?;
    es::json_200(&format!("GET /region with MF-CF-Blob {blob}"), &resp)
}

async fn region(ctx: Ctx) -> R {
    // With no REGIONS table the region is the continent code.
    let cases = [
        (
            es::cf_blob(SYD),
            json!({"colo": "SYD", "country": "AU", "continent": "OC", "region": "OC"}),
        ),
        (
            es::cf_blob(FRA),
            json!({"colo": "FRA", "country": "DE", "continent": "EU", "region": "EU"}),
        ),
        (
            es::cf_blob(("NRT", "JP", "AS")),
            json!({"colo": "NRT", "country": "JP", "continent": "AS", "region": "AS"}),
        ),
    ];
    for (blob, want) in &cases {
        let got = region_of(ctx.port, blob).await?;
        check!(&got == want, "GET /region from {blob}: {got}, expected exactly {want}");
    }
    Ok(())
}

/// `GET /health` → (status, body).
async fn health(ctx: &Ctx) -> R<(u16, Value)> {
    let resp = es::get(ctx.port, "/health", &[]).await?;
    let body = resp
        .json()
        .ok_or_else(|| format!("GET /health: not JSON: {} {}", resp.status, resp.body))?;
    Ok((resp.status, body))
}

/// A passing canary report: exactly ok, ms and room.
fn check_ok_report(what: &str, v: &Value) -> R {
    let keys: Vec<&String> = v.as_object().map(|o| o.keys().collect()).unwrap_or_default();
    check!(
        v["ok"] == true && v["ms"].is_u64() && v["room"] == CANARY_ROOM && v.get("step").is_none() && v.get("error").is_none(),
        "{what}: expected {{\"ok\":true,\"ms\":n,\"room\":\"{CANARY_ROOM}\"}}, got {v} (keys {keys:?})"
    );
    Ok(())
}

/// A failing canary report at `step` whose error mentions `cause`.
fn check_failed_report(what: &str, v: &Value, room: &str, step: &str, cause: &str) -> R {
    check!(
        v["ok"] == false
            && v["ms"].is_u64()
            && v["room"] == room
            && v["step"] == step
            && v["error"].as_str().is_some_and(|e| e.contains(cause)),
        "{what}: expected ok:false, room {room}, step {step:?} and an error mentioning {cause:?}, got {v}"
    );
    Ok(())
}

async fn health_ok(ctx: Ctx) -> R {
    let (status, v) = health(&ctx).await?;
    check!(status == 200, "GET /health on the main runtime: {status} {v}");
    check_ok_report("GET /health", &v)?;
    // The same report is logged.
    es::wait_log(&ctx.log, "canary", 1, Duration::from_secs(5), |l| {
        l["trigger"] == "health" && l["ok"] == true
    })
    .await?;
    Ok(())
}

async fn health_ok_tokens(ctx: Ctx) -> R {
    // The canary signs its own token with the deployment's secret and goes the clients' way.
    let (status, v) = health(&ctx).await?;
    check!(status == 200, "GET /health in token mode: {status} {v}");
    check_ok_report("GET /health in token mode", &v)?;
    let line = cron_canary(&ctx).await?;
    check_ok_report("the cron canary's log line", &line)?;
    es::wait_log(&ctx.log, "connect", 1, Duration::from_secs(5), |l| {
        l["room"] == CANARY_ROOM && l["user"] == "canary"
    })
    .await?;
    Ok(())
}

async fn health_connect(ctx: Ctx) -> R {
    let (status, v) = health(&ctx).await?;
    check!(
        status == 503,
        "GET /health with CANARY_ROOM={BAD_CANARY_ROOM} should be 503: {status} {v}"
    );
    check_failed_report("GET /health", &v, BAD_CANARY_ROOM, "connect", "bad_room")?;
    let line = cron_canary(&ctx).await?;
    check_failed_report(
        "the cron canary's log line",
        &line,
        BAD_CANARY_ROOM,
        "connect",
        "bad_room",
    )?;
    Ok(())
}

async fn health_pong(ctx: Ctx) -> R {
    let (status, v) = health(&ctx).await?;
    check!(status == 503, "GET /health with MAX_FRAME_BYTES=16 should be 503: {status} {v}");
    // Connected and welcomed; the ping the room must answer itself is too large, so it closes.
    check_failed_report("GET /health", &v, CANARY_ROOM, "pong", "1009")?;
    es::wait_log(&ctx.log, "closed_by_room", 1, Duration::from_secs(5), |l| {
        l["room"] == CANARY_ROOM && l["code"] == 1009
    })
    .await?;
    let line = cron_canary(&ctx).await?;
    check_failed_report("the cron canary's log line", &line, CANARY_ROOM, "pong", "1009")?;
    Ok(())
}

/// 30 `/health` calls at once: every one must pass (the canaries must not collide).
async fn concurrent_health(ctx: Ctx) -> R {
    let calls: Vec<_> = (0..30)
        .map(|_| {
            let ctx = ctx.clone();
            tokio::spawn(async move { health(&ctx).await })
        })
        .collect();
    let mut failed = Vec::new();
    for h in calls {
        let (status, v) = h.await.map_err(|e| e.to_string())??;
        if status != 200 {
            failed.push(v.to_string());
        }
    }
    check!(failed.is_empty(), "{} of 30 concurrent /health calls failed: {failed:?}", failed.len());
    Ok(())
}
