//! What the edge trials (`edge_*.rs`, issue 4) share: the runtimes they run on, token minting
//! (natively, with the crate's own `homeroom::auth::mint`), refusal checks, admin requests and log
//! polling.
//!
//! Runtimes, each started lazily by the first trial that needs it and shared by the rest:
//! - [`TOKENS`]: token mode (`AUTH_SECRET`; the harness's `ANONYMOUS_DEV=true` is ignored then)
//!   with the admin routes on (`ADMIN_KEY`) and `--test-scheduled` (the cron trigger over HTTP);
//! - [`CLOSED`]: neither a secret nor dev mode (`ANONYMOUS_DEV=false` overrides the harness's
//!   `true`: wrangler keeps the last `--var`), and a canary room that is no room name;
//! - [`PLACED`]: `HOME`, `ROOM_HOMES`, and `MAX_FRAME_BYTES=16`, which the welcome (outbound)
//!   does not care about but the canary's 29-byte ping does.
//!
//! The main shared runtime (anonymous dev mode, no `ADMIN_KEY`) serves the rest.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use homeroom::auth::{mint, Claims, Key};
use serde_json::{json, Value};

use crate::harness::Spec;
use crate::http;
use crate::runtime::{LazyRuntime, Log};
use crate::support::{Ctx, R};

/// The token runtime's signing secret and admin key.
pub const SECRET: &str = "e2e-edge-secret-4f1c9a-0123456789abcdef";
pub const ADMIN_KEY: &str = "e2e-admin-key-77d2b0-0123456789abcdef";

/// The secret the token runtime is rotating away from (`AUTH_SECRET_PREVIOUS`), and the key
/// ids of both (`AUTH_SECRET_PREVIOUS_KID`, `AUTH_SECRET_KID`).
pub const PREVIOUS_SECRET: &str = "e2e-previous-secret-31b7e5-0123456789abcdef";
pub const PREVIOUS_KID: &str = "2026-10";
pub const CURRENT_KID: &str = "2026-11";

/// How long one HTTP exchange may take.
pub const T: Duration = Duration::from_secs(10);

pub static TOKENS: LazyRuntime = LazyRuntime::new("edge-tokens", || {
    args(&[
        "--var",
        &format!("AUTH_SECRET:{SECRET}"),
        "--var",
        &format!("AUTH_SECRET_KID:{CURRENT_KID}"),
        "--var",
        &format!("AUTH_SECRET_PREVIOUS:{PREVIOUS_SECRET}"),
        "--var",
        &format!("AUTH_SECRET_PREVIOUS_KID:{PREVIOUS_KID}"),
        "--var",
        &format!("ADMIN_KEY:{ADMIN_KEY}"),
        "--var",
        &format!("CORS_ORIGINS:{APP_ORIGIN}, {OTHER_APP_ORIGIN}/, {NOT_AN_ORIGIN}"),
        "--test-scheduled",
    ])
});

/// The origins the token runtime's `CORS_ORIGINS` allows, and an entry in it that is no origin.
pub const APP_ORIGIN: &str = "https://app.example.test";
pub const OTHER_APP_ORIGIN: &str = "http://127.0.0.1:5173";
pub const NOT_AN_ORIGIN: &str = "app.example.test/path";

/// The canary room of [`CLOSED`]: `/` makes it no room name, so the canary fails at `connect`.
pub const BAD_CANARY_ROOM: &str = "bad/room";

pub static CLOSED: LazyRuntime = LazyRuntime::new("edge-closed", || {
    args(&[
        "--var",
        "ANONYMOUS_DEV:false",
        "--var",
        &format!("CANARY_ROOM:{BAD_CANARY_ROOM}"),
        "--test-scheduled",
    ])
});

/// The room [`PLACED`]'s `ROOM_HOMES` names.
pub const VIP_ROOM: &str = "vip";

pub static PLACED: LazyRuntime = LazyRuntime::new("edge-placed", || {
    args(&[
        "--var",
        "HOME:weur",
        "--var",
        &format!(r#"ROOM_HOMES:{{"{VIP_ROOM}":"apac"}}"#),
        "--var",
        "MAX_FRAME_BYTES:16",
        "--test-scheduled",
    ])
});

fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// A trial on one of the lazily started runtimes; a failure carries the tail of its log.
pub fn on<F, Fut>(name: &str, runtime: &'static LazyRuntime, f: F) -> Spec
where
    F: FnOnce(Ctx) -> Fut + Send + 'static,
    Fut: Future<Output = R> + Send + 'static,
{
    crate::harness::after_start(
        name,
        move || runtime.ctx(),
        move |ctx| async move {
            let log = ctx.log.clone();
            f(ctx).await.map_err(|e| with_log_tail(e, &log))
        },
    )
}

pub fn with_log_tail(e: String, log: &Log) -> String {
    format!("{e}\n--- runtime log (tail) ---\n{}", log.tail(60))
}

pub fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A token signed with [`SECRET`] for `room` (or `"*"`) of the kind `rooms`, valid for an hour.
pub fn token(room: &str, sub: &str) -> String {
    token_exp(room, sub, now_secs() + 3600)
}

/// A token signed with [`SECRET`] for `room` of the kind `kind`, valid for an hour.
pub fn token_for(kind: &str, room: &str, sub: &str) -> String {
    let claims = Claims::new(room, sub, now_secs() + 3600).with_kind(kind);
    mint(&Key::new(SECRET.as_bytes()), &claims)
}

/// An HS256 JWT signed with [`SECRET`] for `room` of the kind `rooms` until `exp`.
pub fn token_exp(room: &str, sub: &str, exp: u64) -> String {
    mint(&Key::new(SECRET.as_bytes()), &Claims::new(room, sub, exp).with_kind("rooms"))
}

/// A token of the format before JWTs (two parts, no header), accepted during the transition.
pub fn legacy_token(room: &str, sub: &str) -> String {
    let claims = Claims::new(room, sub, now_secs() + 3600).with_kind("rooms");
    homeroom::auth::legacy::mint(SECRET.as_bytes(), &claims)
}

/// Unpadded base64url of `text`.
pub fn b64(text: &str) -> String {
    URL_SAFE_NO_PAD.encode(text)
}

/// The parts of a JWT: header, payload, signature (still base64url).
fn parts(token: &str) -> (&str, &str, &str) {
    let mut it = token.splitn(3, '.');
    match (it.next(), it.next(), it.next()) {
        (Some(h), Some(p), Some(s)) => (h, p, s),
        _ => panic!("a JWT has three parts: {token}"),
    }
}

/// `token` with its signature's bytes changed by `f` (re-encoded, so still well-formed).
pub fn with_signature(token: &str, f: impl FnOnce(&mut Vec<u8>)) -> String {
    let (header, payload, sig) = parts(token);
    let mut bytes = URL_SAFE_NO_PAD.decode(sig).expect("signature is base64url");
    f(&mut bytes);
    format!("{header}.{payload}.{}", URL_SAFE_NO_PAD.encode(bytes))
}

/// `token`'s signature on another payload (what an attacker who edits the claims gets).
pub fn with_payload(token: &str, payload: &Value) -> String {
    let (header, _, sig) = parts(token);
    format!("{header}.{}.{sig}", URL_SAFE_NO_PAD.encode(payload.to_string()))
}

/// A JWT for any header and payload text, signed with `secret` (for tokens `mint` would not
/// write: other algorithms, key ids, bad claims).
pub fn sign_jwt(secret: &[u8], header: &str, payload: &str) -> String {
    use hmac::{KeyInit, Mac};
    let signing = format!("{}.{}", URL_SAFE_NO_PAD.encode(header), URL_SAFE_NO_PAD.encode(payload));
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret)
        .expect("HMAC takes keys of any length");
    mac.update(signing.as_bytes());
    format!("{signing}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

/// A JWT for any payload text, signed with [`SECRET`] under the usual header.
pub fn sign_raw(payload: &str) -> String {
    sign_jwt(SECRET.as_bytes(), r#"{"alg":"HS256","typ":"JWT"}"#, payload)
}

/// The claims a token carries (decoded, not verified).
pub fn claims_of(token: &str) -> Value {
    let (_, payload, _) = parts(token);
    let bytes = URL_SAFE_NO_PAD.decode(payload).expect("payload is base64url");
    serde_json::from_slice(&bytes).expect("payload is JSON")
}

/// How a WebSocket upgrade at `path` ended: the close code and reason of a socket that was
/// opened and then closed by the server, or an error (an HTTP refusal, a frame before the
/// close, no close within [`T`]).
pub async fn upgrade_closed(port: u16, path: &str) -> R<(u16, String)> {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let url = format!("ws://127.0.0.1:{port}{path}");
    let (mut ws, _) = tokio::time::timeout(T, tokio_tungstenite::connect_async(url.as_str()))
        .await
        .map_err(|_| "the upgrade timed out".to_string())?
        .map_err(|e| format!("the upgrade failed: {e}"))?;
    let next = tokio::time::timeout(T, ws.next()).await.map_err(|_| "no close".to_string())?;
    match next {
        Some(Ok(Message::Close(Some(f)))) => Ok((u16::from(f.code), f.reason.to_string())),
        other => Err(format!("expected a close frame first, got {other:?}")),
    }
}

/// A token refusal on an upgrade: the socket opens and closes at once with 4401 and the
/// refusal's `code` as the reason (a browser cannot read an HTTP status).
pub async fn check_token_close(what: &str, port: u16, path: &str, code: &str) -> R {
    match upgrade_closed(port, path).await {
        Ok((4401, reason)) if reason == code => Ok(()),
        Ok((c, reason)) => Err(format!("{what}: expected close 4401 {code}, got {c} {reason}")),
        Err(e) => Err(format!("{what}: expected close 4401 {code}: {e}")),
    }
}

/// The response must have exactly `status` and the body `{"error": code, "message": <string>}`.
pub fn check_refusal(what: &str, resp: &http::Response, status: u16, code: &str) -> R {
    let body = resp.json();
    let ok = resp.status == status
        && body.as_ref().is_some_and(|b| b["error"] == code && b["message"].is_string());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{what}: expected {status} {{\"error\":\"{code}\",\"message\":..}}, got {} {}",
            resp.status, resp.body
        ))
    }
}

/// A GET (never compressed: local dev may brotli-compress a response when asked for nothing).
pub async fn get(port: u16, path: &str, headers: &[(&str, &str)]) -> R<http::Response> {
    let mut h: Vec<(&str, &str)> = vec![("Accept-Encoding", "identity")];
    h.extend_from_slice(headers);
    http::get(port, path, &h, T).await
}

/// A 200 JSON answer or an error naming what was asked.
pub fn json_200(what: &str, resp: &http::Response) -> R<Value> {
    if resp.status != 200 {
        return Err(format!("{what}: HTTP {} {}", resp.status, resp.body));
    }
    resp.json().ok_or_else(|| format!("{what}: not JSON: {}", resp.body))
}

/// The `MF-CF-Blob` header value for a place (colo, country, continent).
pub fn cf_blob(place: (&str, &str, &str)) -> String {
    json!({"colo": place.0, "country": place.1, "continent": place.2}).to_string()
}

/// An admin request: `method` `/rooms/{room}/{what}` with `Authorization: <auth>` if given, and
/// the caller "in" `place` if given.
pub async fn admin(
    port: u16,
    method: &str,
    room: &str,
    what: &str,
    auth: Option<&str>,
    place: Option<(&str, &str, &str)>,
    body: &str,
) -> R<http::Response> {
    let blob = place.map(cf_blob);
    let mut h: Vec<(&str, &str)> = vec![("Accept-Encoding", "identity")];
    if let Some(a) = auth {
        h.push(("Authorization", a));
    }
    if let Some(b) = &blob {
        h.push(("MF-CF-Blob", b));
    }
    let path = format!("/rooms/{room}/{what}");
    match method {
        "GET" => http::get(port, &path, &h, T).await,
        "POST" => http::post(port, &path, &h, body, T).await,
        m => Err(format!("no such method in these tests: {m}")),
    }
}

pub fn bearer_admin() -> String {
    format!("Bearer {ADMIN_KEY}")
}

/// `POST /rooms/{room}/messages` with the admin key from `place` → the `seq` it answers.
pub async fn server_publish(
    port: u16,
    room: &str,
    place: (&str, &str, &str),
    id: &str,
    data: Value,
) -> R<u64> {
    let body = json!({"id": id, "topic": "news", "data": data}).to_string();
    let resp =
        admin(port, "POST", room, "messages", Some(&bearer_admin()), Some(place), &body).await?;
    let v = json_200(&format!("POST /rooms/{room}/messages {id}"), &resp)?;
    v["seq"].as_u64().ok_or_else(|| format!("POST /messages {id}: no numeric seq: {v}"))
}

/// `GET /rooms/{room}/stats` with the admin key.
pub async fn stats(port: u16, room: &str) -> R<Value> {
    let resp = admin(port, "GET", room, "stats", Some(&bearer_admin()), None, "").await?;
    json_200(&format!("GET /rooms/{room}/stats"), &resp)
}

/// Polls `log` until `count` lines of `event` satisfy `pred`; returns them.
pub async fn wait_log(
    log: &Log,
    event: &str,
    count: usize,
    timeout: Duration,
    pred: impl Fn(&Value) -> bool,
) -> R<Vec<Value>> {
    let deadline = Instant::now() + timeout;
    loop {
        let found: Vec<Value> = log.events(event).into_iter().filter(|v| pred(v)).collect();
        if found.len() >= count {
            return Ok(found);
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "expected {count} matching `{event}` log line(s) within {timeout:?}, found {}: {found:?}",
                found.len()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs the cron trigger (`wrangler dev --test-scheduled`) and returns the `canary` line it logs.
pub async fn cron_canary(ctx: &Ctx) -> R<Value> {
    let before = ctx.log.events("canary").iter().filter(|v| v["trigger"] == "cron").count();
    let resp = get(ctx.port, "/__scheduled?cron=*+*+*+*+*", &[]).await?;
    if resp.status != 200 {
        return Err(format!("GET /__scheduled: HTTP {} {}", resp.status, resp.body));
    }
    let lines = wait_log(&ctx.log, "canary", before + 1, Duration::from_secs(15), |v| {
        v["trigger"] == "cron"
    })
    .await?;
    Ok(lines[before].clone())
}
