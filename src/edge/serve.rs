//! The Worker's handlers: `fetch` routes every request, `scheduled` runs the cron canary.

use worker::{Env, Method, Request, Response, Result};

use super::config::Deployment;
use super::refusal::HttpRefusal;
use super::{cors, health, log, probe, rooms, Kind};

/// Routes one request of the Worker: `/{kind}/{room}/...` to the room,
/// `/probe`, `/region`, `/health`; anything else is 404.
pub async fn fetch(mut req: Request, env: Env, kinds: &'static [Kind]) -> Result<Response> {
    console_error_panic_hook::set_once();
    let dep = Deployment::current(&env, kinds);
    let path = req.path();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // A page of an allowed origin may read the room routes' answers.
    let origin = match segments.as_slice() {
        [kind, _, ..] if kinds.iter().any(|k| k.path == *kind) => {
            req.headers().get("Origin")?.filter(|o| dep.cors.allows(o))
        }
        _ => None,
    };
    if let Some(origin) = &origin {
        if req.method() == Method::Options && req.headers().has("Access-Control-Request-Method")? {
            return cors::preflight(origin);
        }
    }
    let outcome = match segments.as_slice() {
        ["probe"] => probe::probe(&req),
        ["region"] => probe::whereabouts(&req, &env),
        ["health"] => {
            let report = health::checked(&env, &dep).await;
            log_canary("health", &report);
            let status = if report.ok { 200 } else { 503 };
            return Ok(Response::from_json(&report)?.with_status(status));
        }
        [kind, room, rest @ ..] => match kinds.iter().find(|k| k.path == *kind) {
            Some(kind) => {
                let at = rooms::Target { kind, room };
                if kind.document {
                    documents(&mut req, &env, &dep, at, rest).await
                } else {
                    rooms::route(&mut req, &env, &dep, at, rest).await
                }
            }
            // A connect to a kind this Worker does not serve is told so in a
            // close a browser can read, so a client stops instead of retrying.
            None if rest == ["ws"] && is_upgrade(&req) => {
                return rooms::closed_socket(&path, 4404, HttpRefusal::NoSuchKind.code());
            }
            None => Err(HttpRefusal::NoSuchKind),
        },
        _ => Err(HttpRefusal::NotFound),
    };
    let resp = match outcome {
        Ok(resp) => resp,
        Err(refusal) => {
            // The path only: a query may carry a token.
            log(
                "refused",
                serde_json::json!({"path": path, "status": refusal.status(), "code": refusal.code()}),
            );
            refusal.response()?
        }
    };
    match origin {
        Some(origin) => cors::allow(resp, &origin),
        None => Ok(resp),
    }
}

/// A document kind's route; without the crate feature `documents` (no document kind can be
/// declared then: its class needs the feature) there is none.
async fn documents(
    req: &mut Request,
    env: &Env,
    dep: &Deployment,
    at: rooms::Target<'_>,
    rest: &[&str],
) -> std::result::Result<Response, HttpRefusal> {
    #[cfg(feature = "documents")]
    return super::docs::route(req, env, dep, at, rest).await;
    #[cfg(not(feature = "documents"))]
    {
        let _ = (req, env, dep, at, rest);
        Err(HttpRefusal::NoSuchKind)
    }
}

/// Whether the request asks for a WebSocket.
pub(super) fn is_upgrade(req: &Request) -> bool {
    let upgrade = req.headers().get("upgrade").ok().flatten().unwrap_or_default();
    upgrade.eq_ignore_ascii_case("websocket")
}

/// The cron trigger: the same canary as `/health`, as a log line.
pub async fn scheduled(env: Env, kinds: &'static [Kind]) {
    console_error_panic_hook::set_once();
    let dep = Deployment::current(&env, kinds);
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
