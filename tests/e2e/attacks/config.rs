//! Attack (issue 11, item 8): "weak configuration is silent". A deployment that looks configured
//! but is not safe must refuse rather than run open, and say why in its log:
//! - an `AUTH_SECRET` of 8 bytes (anyone can brute-force it and mint tokens): every room route is
//!   503 `auth_secret_weak`, a `config_error` names `AUTH_SECRET`, and `/health` is red (the
//!   canary cannot get in either);
//! - anonymous dev mode serves loopback hosts only: a request whose `Host` is a public name gets
//!   403 `anonymous_dev_local_only`, unless `ANONYMOUS_DEV_ALLOW_REMOTE=true` (logged as a warning);
//! - a token whose `exp` is further ahead than `TOKEN_MAX_TTL_SECS` (default 24 h) is refused
//!   401 `token_lifetime`, whatever the secret's holder signed.
//!
//! Also the raw HTTP the other attack files use for a method or a `Host` header `http.rs` does
//! not offer.

use std::time::Duration;

use homeroom::auth::{mint, Claims, Key};
use serde_json::Value;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Error as WsError;

use crate::check;
use crate::client::Dial;
use crate::edge_support::{self as es, check_refusal, now_secs, token_exp, TOKENS};
use crate::harness::{shared, Spec};
use crate::http::{self, Response};
use crate::presence::note;
use crate::runtime::LazyRuntime;
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        es::on("attacks::config::a_weak_auth_secret_closes_every_room_route", &WEAK, weak_secret),
        shared("attacks::config::anonymous_dev_serves_loopback_hosts_only", loopback_only),
        es::on("attacks::config::anonymous_dev_allow_remote_accepts_remote_hosts", &REMOTE, remote),
        es::on("attacks::config::token_lifetime_default_24h", &TOKENS, lifetime_default),
        es::on("attacks::config::token_lifetime_from_token_max_ttl_secs", &TTL60, lifetime_60),
    ]
}

/// An 8-byte secret: valid as a string, useless as a key.
const WEAK_SECRET: &str = "k3y-8byt";
const WEAK_ADMIN_KEY: &str = "e2e-weak-admin-key-1f7e";

pub static WEAK: LazyRuntime = LazyRuntime::new("att-weak-secret", || {
    vec![
        "--var".into(),
        format!("AUTH_SECRET:{WEAK_SECRET}"),
        "--var".into(),
        format!("ADMIN_KEY:{WEAK_ADMIN_KEY}"),
    ]
});

pub static REMOTE: LazyRuntime = LazyRuntime::new("att-allow-remote", || {
    vec!["--var".into(), "ANONYMOUS_DEV_ALLOW_REMOTE:true".into()]
});

pub static TTL60: LazyRuntime = LazyRuntime::new("att-ttl60", || {
    vec![
        "--var".into(),
        format!("AUTH_SECRET:{}", es::SECRET),
        "--var".into(),
        "TOKEN_MAX_TTL_SECS:60".into(),
    ]
});

/// A host name that is not loopback.
const REMOTE_HOST: &str = "rooms.example.com";

/// One HTTP/1.1 exchange with exact control: any method, `Host` (default `127.0.0.1:<port>`),
/// extra headers and a body. Reads the whole answer (`Connection: close` unless `headers` set
/// `Connection`); a 101 returns at once, without a body.
pub async fn raw_http(
    port: u16,
    method: &str,
    path: &str,
    host: Option<&str>,
    headers: &[(&str, &str)],
    body: &str,
) -> R<Response> {
    let host = host.map(str::to_owned).unwrap_or_else(|| format!("127.0.0.1:{port}"));
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: identity\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("connection")) {
        req.push_str("Connection: close\r\n");
    }
    if !body.is_empty() || method != "GET" {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    crate::http::request(port, req, es::T)
        .await
        .map_err(|e| format!("{method} {path} (Host {host}): {e}"))
}

/// A WebSocket upgrade of `dial`'s URL sent with `Host: host`: the welcome, or the HTTP
/// refusal as (status, body).
async fn upgrade_with_host(dial: &Dial, host: &str) -> R<Result<Value, (u16, String)>> {
    let url = dial.url();
    let mut req = url.as_str().into_client_request().map_err(|e| format!("bad url {url}: {e}"))?;
    req.headers_mut().insert("Host", host.parse().map_err(|e| format!("host header: {e}"))?);
    let connected = tokio::time::timeout(es::T, tokio_tungstenite::connect_async(req))
        .await
        .map_err(|_| format!("connect {url} (Host {host}): timed out"))?;
    match connected {
        Ok((mut ws, _)) => {
            use futures_util::StreamExt;
            let first = tokio::time::timeout(es::T, ws.next())
                .await
                .map_err(|_| format!("no welcome within {:?} (Host {host})", es::T))?;
            let text = match first {
                Some(Ok(m)) if m.is_text() => m.into_text().map_err(|e| e.to_string())?,
                other => return Err(format!("first message (Host {host}): {other:?}")),
            };
            let v: Value = serde_json::from_str(text.as_str()).map_err(|e| e.to_string())?;
            check!(v["type"] == "welcome", "first frame (Host {host}) is not a welcome: {v}");
            let _ = ws.close(None).await;
            Ok(Ok(v))
        }
        Err(WsError::Http(resp)) => {
            let body = resp
                .body()
                .as_ref()
                .map(|b| String::from_utf8_lossy(b).to_string())
                .unwrap_or_default();
            Ok(Err((resp.status().as_u16(), body)))
        }
        Err(e) => Err(format!("connect {url} (Host {host}): {e}")),
    }
}

/// A WebSocket upgrade of `dial`'s URL with `Host: host` over raw HTTP: must be refused with
/// `status` and `code` (the WebSocket client does not read a refusal's body).
async fn check_upgrade_refused(dial: &Dial, host: &str, status: u16, code: &str) -> R {
    let url = dial.url();
    let path = url.split_once(&format!("127.0.0.1:{}", dial_port(&url)?)).map(|(_, p)| p);
    let path = path.ok_or_else(|| format!("no path in {url}"))?;
    let headers = [
        ("Connection", "Upgrade"),
        ("Upgrade", "websocket"),
        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ("Sec-WebSocket-Version", "13"),
    ];
    let resp = raw_http(dial_port(&url)?, "GET", path, Some(host), &headers, "").await?;
    check_refusal(&format!("upgrade with Host {host}"), &resp, status, code)
}

/// The port in a `ws://127.0.0.1:<port>/...` URL.
fn dial_port(url: &str) -> R<u16> {
    url.strip_prefix("ws://127.0.0.1:")
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("not a local ws URL: {url}"))
}

async fn weak_secret(ctx: Ctx) -> R {
    let room = support::room("att-weak");
    let session = support::session("weak");
    // Whoever has (or guessed) the 8-byte secret mints a perfectly valid token.
    let exp = now_secs() + 600;
    let forged = mint(&Key::new(WEAK_SECRET.as_bytes()), &Claims::new(&room, "eve", exp));
    let any = mint(&Key::new(WEAK_SECRET.as_bytes()), &Claims::new("*", "eve", exp));
    for (how, t) in
        [("a room token", Some(&forged)), ("a `*` token", Some(&any)), ("no token", None)]
    {
        let mut path = format!("/rooms/{room}/ws?session={session}");
        let mut presence = format!("/rooms/{room}/presence");
        if let Some(t) = t {
            path.push_str(&format!("&token={t}"));
            presence.push_str(&format!("?token={t}"));
        }
        let resp = http::get_upgrade(ctx.port, &path, es::T).await?;
        check_refusal(&format!("upgrade with {how}"), &resp, 503, "auth_secret_weak")?;
        let resp = es::get(ctx.port, &presence, &[]).await?;
        check_refusal(&format!("GET /presence with {how}"), &resp, 503, "auth_secret_weak")?;
    }
    let lines = es::wait_log(&ctx.log, "config_error", 1, Duration::from_secs(5), |v| {
        v["problem"].as_str().is_some_and(|p| p.contains("AUTH_SECRET"))
    })
    .await?;
    check!(
        lines[0]["problem"].as_str().is_some_and(|p| p.contains("32")),
        "the config_error should say how long a secret must be: {}",
        lines[0]
    );
    // The canary cannot get in either: /health is red at `connect`, naming the reason.
    let resp = es::get(ctx.port, "/health", &[]).await?;
    let v = resp.json().ok_or_else(|| format!("GET /health: not JSON: {}", resp.body))?;
    check!(
        resp.status == 503
            && v["ok"] == false
            && v["step"] == "connect"
            && v["error"].as_str().is_some_and(|e| e.contains("auth_secret_weak")),
        "GET /health with a weak secret: expected 503 at step connect naming auth_secret_weak, got {} {v}",
        resp.status
    );
    // The admin key of this runtime is weak too (23 bytes): the admin routes refuse, with
    // their own code, even given that key; a config_error names ADMIN_KEY.
    let key = format!("Bearer {WEAK_ADMIN_KEY}");
    let resp = es::admin(ctx.port, "GET", &room, "stats", Some(&key), None, "").await?;
    note(format!("weak secret: admin GET /stats of a fresh room: {} {}", resp.status, resp.body));
    check_refusal("admin GET /stats with a weak ADMIN_KEY", &resp, 503, "admin_key_weak")?;
    let admin_lines = es::wait_log(&ctx.log, "config_error", 1, es::T, |v| {
        v["problem"].as_str().is_some_and(|p| p.contains("ADMIN_KEY"))
    })
    .await?;
    check!(
        admin_lines[0]["problem"].as_str().is_some_and(|p| p.contains("32 bytes")),
        "the config_error should say how long an admin key must be: {}",
        admin_lines[0]
    );
    // Nothing was created: no room was loaded, and no connect line was logged.
    check!(
        ctx.log.room_loaded(&room).is_empty(),
        "a room was loaded behind a weak secret: {:?}",
        ctx.log.room_loaded(&room)
    );
    let connects: Vec<Value> =
        ctx.log.events("connect").into_iter().filter(|v| v["room"] == room).collect();
    check!(connects.is_empty(), "connects were logged behind a weak secret: {connects:?}");
    Ok(())
}

async fn loopback_only(ctx: Ctx) -> R {
    let room = support::room("att-loopback");
    // The room exists (created over loopback), so a remote read would have something to show.
    let mut member = ctx.dial(&room, &support::session("local")).connect().await?;
    let session = support::session("remote");
    let dial = Dial::new(ctx.port, &room, &session);
    for host in [REMOTE_HOST, "127.0.0.1.nip.io", "localhost.example.com"] {
        check_upgrade_refused(&dial, host, 403, "anonymous_dev_local_only").await?;
        // The WebSocket client a member would use is refused too.
        let got = upgrade_with_host(&dial, host).await?;
        check!(
            matches!(got, Err((403, _))),
            "the client's upgrade with Host {host} should be refused 403: {got:?}"
        );
        let path = format!("/rooms/{room}/presence");
        let resp = raw_http(ctx.port, "GET", &path, Some(host), &[], "").await?;
        check_refusal(
            &format!("GET /presence with Host {host}"),
            &resp,
            403,
            "anonymous_dev_local_only",
        )?;
    }
    // The same requests to a loopback host work.
    let port = ctx.port;
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")]
    {
        let got =
            upgrade_with_host(&Dial::new(port, &room, &support::session("loop")), &host).await?;
        check!(got.is_ok(), "upgrade with Host {host} should be welcomed: {got:?}");
        let resp =
            raw_http(port, "GET", &format!("/rooms/{room}/presence"), Some(&host), &[], "").await?;
        let p = es::json_200(&format!("GET /presence with Host {host}"), &resp)?;
        check!(p["members"][&member.session].is_object(), "presence over {host}: {p}");
    }
    // The remote attempts never reached the room: the member never saw them join.
    member.ping().await?;
    let joined: Vec<&Value> = member
        .history
        .iter()
        .filter(|f| f["type"] == "presence" && f["joins"].get(&session).is_some())
        .collect();
    check!(joined.is_empty(), "a remote session joined the room: {joined:?}");
    let connects: Vec<Value> = ctx
        .log
        .events("connect")
        .into_iter()
        .filter(|v| v["room"] == room && v["user"] == session.as_str())
        .collect();
    check!(connects.is_empty(), "a remote connect was logged: {connects:?}");
    member.close().await;
    Ok(())
}

async fn remote(ctx: Ctx) -> R {
    let room = support::room("att-remote");
    let session = support::session("remote");
    let w = upgrade_with_host(&Dial::new(ctx.port, &room, &session), REMOTE_HOST).await?;
    let w = w.map_err(|(s, b)| {
        format!("with ANONYMOUS_DEV_ALLOW_REMOTE=true a remote upgrade should be welcomed: {s} {b}")
    })?;
    check!(w["session"] == session.as_str(), "welcome: {w}");
    let resp =
        raw_http(ctx.port, "GET", &format!("/rooms/{room}/presence"), Some(REMOTE_HOST), &[], "")
            .await?;
    es::json_200("GET /presence with a remote Host", &resp)?;
    // The risk is not silent: the isolate's first request logged the warning.
    let lines = es::wait_log(&ctx.log, "auth_mode", 1, Duration::from_secs(5), |v| {
        v["mode"] == "anonymous" && v["remote"] == true
    })
    .await?;
    check!(
        lines[0]["warning"].as_str().is_some_and(|w| w.contains("ANONYMOUS_DEV_ALLOW_REMOTE")),
        "the auth_mode line should warn about remote anonymous access: {}",
        lines[0]
    );
    Ok(())
}

/// A connect of `sub` with a token expiring `ahead` seconds from now: the welcome, or the error.
async fn connect_with_exp(ctx: &Ctx, room: &str, ahead: u64) -> R<Result<Value, String>> {
    let exp = now_secs() + ahead;
    let t = token_exp(room, "tess", exp);
    let dial = Dial::new(ctx.port, room, &support::session("ttl")).token(&t);
    match dial.connect().await {
        Ok(c) => {
            let w = c.welcome.clone();
            check!(
                w["expires"].as_u64() == Some(exp * 1000),
                "the welcome should carry expires = exp × 1000 ({}): {w}",
                exp * 1000
            );
            c.close().await;
            Ok(Ok(w))
        }
        Err(e) => Ok(Err(e)),
    }
}

/// A token `ahead` seconds out must be refused 401 token_lifetime (upgrade and presence).
async fn check_too_long(ctx: &Ctx, room: &str, ahead: u64) -> R {
    let t = token_exp(room, "tess", now_secs() + ahead);
    let path = format!("/rooms/{room}/ws?session={}&token={t}", support::session("ttl"));
    es::check_token_close(
        &format!("upgrade with exp {ahead} s ahead"),
        ctx.port,
        &path,
        "token_lifetime",
    )
    .await?;
    let bearer = format!("Bearer {t}");
    let resp = es::get(ctx.port, &format!("/rooms/{room}/presence"), &[("Authorization", &bearer)])
        .await?;
    check_refusal(
        &format!("GET /presence with exp {ahead} s ahead"),
        &resp,
        401,
        "token_lifetime",
    )?;
    let got = connect_with_exp(ctx, room, ahead).await?;
    check!(got.is_err(), "a token {ahead} s ahead was welcomed: {got:?}");
    Ok(())
}

async fn lifetime_default(ctx: Ctx) -> R {
    let room = support::room("att-ttl-default");
    // A year, and a day plus an hour: refused.
    check_too_long(&ctx, &room, 365 * 24 * 3600).await?;
    check_too_long(&ctx, &room, 24 * 3600 + 3600).await?;
    // A day minus a minute: accepted.
    let w = connect_with_exp(&ctx, &room, 24 * 3600 - 60).await?;
    check!(w.is_ok(), "a token 23h59m ahead should be welcomed: {w:?}");
    // Now the room exists: the presence read with a too-long token is still refused.
    check_too_long(&ctx, &room, 24 * 3600 + 3600).await?;
    Ok(())
}

async fn lifetime_60(ctx: Ctx) -> R {
    let room = support::room("att-ttl60");
    check_too_long(&ctx, &room, 120).await?;
    let w = connect_with_exp(&ctx, &room, 30).await?;
    check!(w.is_ok(), "with TOKEN_MAX_TTL_SECS=60 a token 30 s ahead should be welcomed: {w:?}");
    check_too_long(&ctx, &room, 120).await?;
    Ok(())
}
