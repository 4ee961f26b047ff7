//! The canary: a real WebSocket to a canary room through the same path
//! clients take (validation, auth, routing, the room object), one welcome and
//! one ping that the room itself must answer. `/health` and the cron trigger
//! run it; the failing step tells an unreachable room (`connect`) from a
//! degraded one (`welcome`, `pong`).

use std::time::Duration;

use std::cell::{Cell, RefCell};

use futures::future::{select, Either};
use futures::StreamExt;
use serde::Serialize;
use worker::{Delay, Env, Headers, Method, Request, RequestInit, WebsocketEvent};

use super::config::{AuthMode, Deployment};
use super::rooms;
use crate::auth;
use crate::clock::now_ms;

/// How long each step may take.
const STEP_MS: u64 = 5_000;
/// Not the exact auto-response text, so the room itself must answer it.
const CANARY_PING: &str = r#"{"type":"ping","canary":true}"#;

/// What one canary run found.
#[derive(Serialize, Clone)]
pub struct Report {
    pub ok: bool,
    pub ms: u64,
    pub room: String,
    /// The step that failed: `connect`, `welcome` or `pong`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

type StepError = (&'static str, String);

/// How long a `/health` answer is reused: `/health` needs no credentials,
/// so each call must not open a socket into the canary room.
const REUSE_MS: u64 = 5_000;
/// How often a caller waiting for another caller's canary run looks for
/// its report.
const POLL_MS: u64 = 20;

thread_local! {
    /// The last report of this isolate and when it was made, and when the
    /// run in flight (if any) started.
    static LAST: RefCell<Option<(u64, Report)>> = const { RefCell::new(None) };
    static RUNNING: Cell<Option<u64>> = const { Cell::new(None) };
}

/// The canary for `/health`: at most one run per isolate at a time, and
/// its report reused for [`REUSE_MS`]. A caller that comes while a run is
/// in flight waits for its report on a timer of its own: the runtime lets
/// no request await I/O that another request started.
pub async fn checked(env: &Env, dep: &Deployment) -> Report {
    let fresh = |since: u64| {
        LAST.with(|l| l.borrow().as_ref().filter(|(at, _)| *at >= since).map(|(_, r)| r.clone()))
    };
    let now = now_ms();
    if let Some(report) = fresh(now.saturating_sub(REUSE_MS)) {
        return report;
    }
    // A run started by another request: wait for what it finds, or take over
    // if it never reports (its request was cancelled).
    if let Some(started) = RUNNING.with(Cell::get) {
        let give_up = started + 2 * STEP_MS + 1_000;
        while now_ms() < give_up {
            Delay::from(Duration::from_millis(POLL_MS)).await;
            if let Some(report) = fresh(started) {
                return report;
            }
        }
    }
    let started = now_ms();
    RUNNING.with(|r| r.set(Some(started)));
    let report = canary(env, dep).await;
    LAST.with(|l| *l.borrow_mut() = Some((now_ms(), report.clone())));
    RUNNING.with(|r| {
        if r.get() == Some(started) {
            r.set(None);
        }
    });
    report
}

pub async fn canary(env: &Env, dep: &Deployment) -> Report {
    let started = now_ms();
    let outcome = run(env, dep).await;
    let ms = now_ms().saturating_sub(started);
    let (step, error) = match outcome {
        Ok(()) => (None, None),
        Err((step, error)) => (Some(step), Some(error)),
    };
    Report { ok: step.is_none(), ms, room: dep.canary_room.clone(), step, error }
}

async fn run(env: &Env, dep: &Deployment) -> Result<(), StepError> {
    let connect = |e: worker::Error| ("connect", e.to_string());
    let room = &dep.canary_room;
    // A session of its own: concurrent canaries (monitoring, the cron, two
    // `/health` calls) must not supersede one another.
    let mut nonce = [0u8; 8];
    let _ = getrandom::fill(&mut nonce);
    let nonce: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    let mut query = format!("session=canary-{}-{nonce}", now_ms());
    let kind = dep.canary_kind();
    if let AuthMode::Tokens(verifier) = &dep.auth {
        let claims = auth::Claims::new(room, "canary", now_ms() / 1000 + 60).with_kind(kind.path);
        query.push_str(&format!("&token={}", auth::mint(&verifier.keys.current, &claims)));
    }
    let headers = Headers::new();
    headers.set("upgrade", "websocket").map_err(connect)?;
    let mut init = RequestInit::new();
    init.with_method(Method::Get).with_headers(headers);
    let url = format!("https://canary.invalid/{}/{room}/ws?{query}", kind.path);
    let req = Request::new_with_init(&url, &init).map_err(connect)?;
    let at = rooms::Target { kind, room };
    let response = rooms::connect(&req, env, dep, at, rooms::Caller::Canary)
        .await
        .map_err(|r| ("connect", format!("{} {}: {}", r.status(), r.code(), r.message())))?;
    let status = response.status_code();
    let ws = response.websocket().ok_or(("connect", format!("no WebSocket (HTTP {status})")))?;
    ws.accept().map_err(connect)?;
    let mut events = ws.events().map_err(connect)?;
    wait_for(&mut events, "welcome").await?;
    ws.send_with_str(CANARY_PING).map_err(|e| ("pong", e.to_string()))?;
    wait_for(&mut events, "pong").await?;
    let _ = ws.close(Some(1000), Some("canary done"));
    Ok(())
}

/// Waits for a frame of type `kind`; the step named `kind` fails on a
/// close, an error or the timeout.
async fn wait_for(
    events: &mut worker::EventStream<'_>,
    kind: &'static str,
) -> Result<(), StepError> {
    let mut deadline = Delay::from(Duration::from_millis(STEP_MS));
    loop {
        match select(events.next(), &mut deadline).await {
            Either::Left((Some(Ok(WebsocketEvent::Message(m))), _)) => {
                let text = m.text().unwrap_or_default();
                if crate::protocol::server::carries(&text, kind) {
                    return Ok(());
                }
            }
            Either::Left((Some(Ok(WebsocketEvent::Close(c))), _)) => {
                return Err((kind, format!("closed with {} before {kind}", c.code())))
            }
            Either::Left((Some(Err(e)), _)) => return Err((kind, e.to_string())),
            Either::Left((None, _)) => return Err((kind, format!("socket ended before {kind}"))),
            Either::Right(_) => return Err((kind, format!("no {kind} within {STEP_MS} ms"))),
        }
    }
}
