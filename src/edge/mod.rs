//! The edge Worker: every request passes here first. It keeps strangers out
//! (tokens, admin key), derives the client's region, routes room traffic to
//! the room's Durable Object, and answers the operator's probes. It holds no
//! room state.

pub(crate) mod config;
mod health;
mod home;
mod probe;
mod refusal;
mod region;
mod rooms;

use worker::{event, Context, Env, Request, Response, Result, ScheduleContext, ScheduledEvent};

pub(crate) use crate::logline::log;
use config::Deployment;
use refusal::HttpRefusal;

#[event(fetch)]
async fn fetch(mut req: Request, env: Env, _ctx: Context) -> Result<Response> {
    console_error_panic_hook::set_once();
    let dep = Deployment::current(&env);
    let path = req.path();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let outcome = match segments.as_slice() {
        ["rooms", room, "ws"] => {
            rooms::connect(&req, &env, &dep, room, rooms::Caller::Client).await
        }
        ["rooms", room, "kick"] => rooms::kick(&mut req, &env, &dep, room).await,
        #[cfg(feature = "fault-injection")]
        ["rooms", room, "fault"] => rooms::fault(&req, &env, &dep, room).await,
        ["rooms", room] => rooms::delete(&req, &env, &dep, room).await,
        ["rooms", room, "presence"] => rooms::presence(&req, &env, &dep, room).await,
        ["rooms", room, "messages"] => rooms::publish(&mut req, &env, &dep, room).await,
        ["rooms", room, "drain"] => rooms::drain(&req, &env, &dep, room).await,
        ["rooms", room, "stats"] => rooms::stats(&req, &env, &dep, room).await,
        ["probe"] => probe::probe(&req),
        ["region"] => probe::whereabouts(&req, &env),
        ["health"] => {
            let report = health::checked(&env, &dep).await;
            log_canary("health", &report);
            let status = if report.ok { 200 } else { 503 };
            return Ok(Response::from_json(&report)?.with_status(status));
        }
        _ => Err(HttpRefusal::NotFound),
    };
    match outcome {
        Ok(resp) => Ok(resp),
        Err(refusal) => {
            // The path only: a query may carry a token.
            log(
                "refused",
                serde_json::json!({"path": path, "status": refusal.status(), "code": refusal.code()}),
            );
            refusal.response()
        }
    }
}

/// The cron trigger: the same canary as `/health`, as a log line.
#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    console_error_panic_hook::set_once();
    let dep = Deployment::current(&env);
    let report = health::canary(&env, &dep).await;
    log_canary("cron", &report);
}

fn log_canary(trigger: &str, report: &health::Report) {
    let mut fields = serde_json::to_value(report).unwrap_or_default();
    if let Some(map) = fields.as_object_mut() {
        map.insert("trigger".into(), trigger.into());
    }
    log("canary", fields);
}
