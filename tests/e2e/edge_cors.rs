//! CORS for the HTTP room routes (`CORS_ORIGINS`, README "Embedding"), on the token runtime,
//! which allows two origins: a page of an allowed origin gets its preflight answered and may
//! read answers and refusals alike; any other origin gets no CORS header at all (so its page
//! reads nothing); an entry that is no origin is logged as a config error; sockets are not
//! affected.

use std::time::Duration;

use crate::check;
use crate::client::{enc, Dial};
use crate::edge_support::{self as es, token, APP_ORIGIN, NOT_AN_ORIGIN, OTHER_APP_ORIGIN, TOKENS};
use crate::harness::Spec;
use crate::http;
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![es::on("edge_cors::allowed_origins_only", &TOKENS, allowed_origins_only)]
}

const CORS_HEADERS: [&str; 4] = [
    "Access-Control-Allow-Origin",
    "Access-Control-Allow-Methods",
    "Access-Control-Allow-Headers",
    "Access-Control-Max-Age",
];

async fn preflight(port: u16, path: &str, origin: &str) -> R<http::Response> {
    let headers = [
        ("Origin", origin),
        ("Access-Control-Request-Method", "GET"),
        ("Access-Control-Request-Headers", "authorization"),
    ];
    http::call(port, "OPTIONS", path, &headers, "", es::T).await
}

async fn allowed_origins_only(ctx: Ctx) -> R {
    let room = support::room("cors");
    let viewer = token(&room, "viewer");
    // The room exists (a member), so the presence read has something to answer.
    let member =
        Dial::new(ctx.port, &room, &support::session("cors")).token(&viewer).connect().await?;
    let presence = format!("/rooms/{room}/presence");
    let bearer = format!("Bearer {viewer}");

    // An allowed origin's preflight: 204, naming the origin (never `*`), the methods, the
    // Authorization header, and `Vary: Origin` so a cache keeps origins apart.
    for origin in [APP_ORIGIN, OTHER_APP_ORIGIN] {
        let resp = preflight(ctx.port, &presence, origin).await?;
        let allowed_headers = resp.header("Access-Control-Allow-Headers").unwrap_or("");
        check!(
            resp.status == 204
                && resp.header("Access-Control-Allow-Origin") == Some(origin)
                && resp.header("Access-Control-Allow-Methods").is_some_and(|m| m.contains("GET"))
                && allowed_headers.to_ascii_lowercase().contains("authorization")
                && resp.header("Vary").is_some_and(|v| v.contains("Origin")),
            "preflight from {origin}: {} {:?}",
            resp.status,
            resp.headers
        );
    }
    // Its reads, answers and refusals alike, carry the origin.
    let resp =
        es::get(ctx.port, &presence, &[("Origin", APP_ORIGIN), ("Authorization", &bearer)]).await?;
    let body = es::json_200("presence from an allowed origin", &resp)?;
    check!(
        body["summary"]["members"] == 1
            && resp.header("Access-Control-Allow-Origin") == Some(APP_ORIGIN),
        "a presence read from {APP_ORIGIN}: {:?} {body}",
        resp.headers
    );
    let resp = es::get(ctx.port, &presence, &[("Origin", APP_ORIGIN)]).await?;
    es::check_refusal("presence without a token", &resp, 401, "token_missing")?;
    check!(
        resp.header("Access-Control-Allow-Origin") == Some(APP_ORIGIN),
        "a refusal to an allowed origin should be readable by its page: {:?}",
        resp.headers
    );

    // Any other origin, or a near miss of an allowed one: no CORS header on anything (the
    // request itself is served as before: CORS is the browser's check, the token is ours).
    for origin in [
        "https://evil.example",
        "http://app.example.test",
        "https://app.example.test.evil.example",
        "http://127.0.0.1:51730",
        "null",
    ] {
        let resp = preflight(ctx.port, &presence, origin).await?;
        let leaked: Vec<&str> =
            CORS_HEADERS.iter().copied().filter(|h| resp.header(h).is_some()).collect();
        check!(
            resp.status != 204 && leaked.is_empty(),
            "preflight from {origin} should not be allowed: {} {:?}",
            resp.status,
            resp.headers
        );
        let resp =
            es::get(ctx.port, &presence, &[("Origin", origin), ("Authorization", &bearer)]).await?;
        check!(
            resp.status == 200 && resp.header("Access-Control-Allow-Origin").is_none(),
            "a read from {origin}: {} {:?}",
            resp.status,
            resp.headers
        );
    }
    // Routes outside the rooms get none either.
    let resp = es::get(ctx.port, "/region", &[("Origin", APP_ORIGIN)]).await?;
    check!(
        resp.header("Access-Control-Allow-Origin").is_none(),
        "/region should not carry CORS headers: {:?}",
        resp.headers
    );

    // A socket opened with an allowed Origin header is a socket like any other.
    let path =
        format!("/rooms/{room}/ws?session={}&token={}", support::session("cors-ws"), enc(&viewer));
    let resp = http::get_upgrade_with(ctx.port, &path, &[("Origin", APP_ORIGIN)], es::T).await?;
    check!(resp.status == 101, "an upgrade from {APP_ORIGIN}: {} {}", resp.status, resp.body);

    // The entry that is no origin was reported once, by name.
    es::wait_log(&ctx.log, "config_error", 1, Duration::from_secs(5), |v| {
        v["problem"]
            .as_str()
            .is_some_and(|p| p.contains("CORS_ORIGINS") && p.contains(NOT_AN_ORIGIN))
    })
    .await?;
    member.close().await;
    Ok(())
}
