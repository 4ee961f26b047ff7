//! The admin routes (issue 4): `POST /rooms/{room}/messages`, `POST /drain`, `GET /stats` need
//! `Authorization: Bearer <ADMIN_KEY>` (401 `bad_admin_key` otherwise) and are off without one
//! (403 `admin_disabled`, on the main runtime); a server publish is idempotent by `id` (the
//! original `seq`, one `$server` message); the stats are exact for a small known room.
//! The drain has its own file (`edge_drain.rs`).

use serde_json::{json, Value};

use crate::check;
use crate::client::Client;
use crate::edge_support::{self as es, admin, bearer_admin, check_refusal, token, TOKENS};
use crate::harness::{shared, Spec};
use crate::presence::{dial_from, Place, FRA, SYD};
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        es::on("edge_admin::refusals", &TOKENS, refusals),
        shared("edge_admin::disabled_without_admin_key", disabled),
        es::on("edge_admin::publish_is_idempotent_and_stats_are_exact", &TOKENS, publish_and_stats),
    ]
}

/// The three admin routes: (method, what, body).
fn routes() -> [(&'static str, &'static str, String); 3] {
    [
        ("POST", "messages", json!({"id": "x1", "topic": "news", "data": 1}).to_string()),
        ("POST", "drain", String::new()),
        ("GET", "stats", String::new()),
    ]
}

async fn refusals(ctx: Ctx) -> R {
    let room = support::room("admin-refused");
    let room_token = format!("Bearer {}", token(&room, "alice"));
    let basic = format!("Basic {}", es::ADMIN_KEY);
    let bare = es::ADMIN_KEY.to_string();
    let longer = format!("Bearer {}x", es::ADMIN_KEY);
    let prefix = format!("Bearer {}", &es::ADMIN_KEY[..es::ADMIN_KEY.len() - 1]);
    let auths: [(&str, Option<&str>); 7] = [
        ("no Authorization", None),
        ("a wrong key", Some("Bearer not-the-key")),
        ("a room token", Some(&room_token)),
        ("the key with scheme Basic", Some(&basic)),
        ("the key without a scheme", Some(&bare)),
        ("the key plus one char", Some(&longer)),
        ("the key minus its last char", Some(&prefix)),
    ];
    let mut failures = Vec::new();
    for (method, what, body) in routes() {
        for (how, auth) in &auths {
            let resp = admin(ctx.port, method, &room, what, *auth, None, &body).await?;
            if let Err(e) =
                check_refusal(&format!("{method} /{what} with {how}"), &resp, 401, "bad_admin_key")
            {
                failures.push(e);
            }
        }
    }
    // Nothing was published by the refused requests: they did not even create the room.
    // With the key (the scheme is case-insensitive) the stats of a room nobody created are 404.
    let lower = format!("bearer {}", es::ADMIN_KEY);
    let resp = admin(ctx.port, "GET", &room, "stats", Some(&lower), None, "").await?;
    if let Err(e) = check_refusal(
        "stats of a room the refused requests left alone",
        &resp,
        404,
        "room_not_found",
    ) {
        failures.push(format!("`bearer <key>` should be accepted and find no room: {e}"));
    }
    let key = bearer_admin();
    let k = Some(key.as_str());
    let big = json!({"id": "big", "topic": "news", "data": "x".repeat(70_000)}).to_string();
    let cases: Vec<(&str, &str, String, &str, u16, &str)> = vec![
        ("GET /messages", "GET", room.clone(), "messages", 405, "method_not_allowed"),
        ("GET /drain", "GET", room.clone(), "drain", 405, "method_not_allowed"),
        ("a bad room", "GET", "caf%C3%A9".into(), "stats", 400, "bad_room"),
    ];
    for (what, method, r, route, status, code) in &cases {
        let resp = admin(ctx.port, method, r, route, k, None, "").await?;
        if let Err(e) = check_refusal(what, &resp, *status, code) {
            failures.push(e);
        }
    }
    let bodies: Vec<(&str, String, u16, &str)> = vec![
        ("a body that is not JSON", "nope".into(), 400, "invalid"),
        ("a body without id", json!({"topic": "news", "data": 1}).to_string(), 400, "invalid"),
        (
            "a reserved topic",
            json!({"id": "r1", "topic": "$state", "data": 1}).to_string(),
            400,
            "invalid",
        ),
        (
            "an id of 65 chars",
            json!({"id": "i".repeat(65), "topic": "news", "data": 1}).to_string(),
            400,
            "invalid",
        ),
        ("a body over 64 KiB", big, 413, "too_large"),
    ];
    for (what, body, status, code) in &bodies {
        let resp = admin(ctx.port, "POST", &room, "messages", k, None, body).await?;
        if let Err(e) = check_refusal(&format!("POST /messages with {what}"), &resp, *status, code)
        {
            failures.push(e);
        }
    }
    // A server publish is a write: it may create the room. The refused ones did, or not,
    // but sequenced nothing.
    let resp = admin(ctx.port, "GET", &room, "stats", k, None, "").await?;
    let st: Value = serde_json::from_str(&resp.body).unwrap_or(Value::Null);
    if resp.status == 200 && st["seq"] != 0 {
        failures.push(format!("a refused publish was sequenced: {st}"));
    } else if resp.status != 200 && resp.status != 404 {
        failures.push(format!("stats after refused publishes: {} {}", resp.status, resp.body));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// The main runtime has no `ADMIN_KEY`: every admin route is off, whatever the caller sends.
async fn disabled(ctx: Ctx) -> R {
    let room = support::room("admin-off");
    let mut failures = Vec::new();
    for (method, what, body) in routes() {
        for auth in [None, Some("Bearer anything"), Some("Bearer ")] {
            let resp = admin(ctx.port, method, &room, what, auth, None, &body).await?;
            let how = format!("{method} /{what} with {auth:?} and no ADMIN_KEY configured");
            if let Err(e) = check_refusal(&how, &resp, 403, "admin_disabled") {
                failures.push(e);
            }
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

const AMS: Place = ("AMS", "NL", "EU");

/// Reads `c` until the message with `id` arrived; returns every message it has seen.
async fn messages_through(c: &mut Client, id: &str) -> R<Vec<Value>> {
    c.message(id).await?;
    Ok(c.messages())
}

async fn publish_and_stats(ctx: Ctx) -> R {
    let port = ctx.port;
    let room = support::room("admin-stats");
    // The first connection creates the room from EU.
    let mut e1 = dial_from(port, &room, &support::session("e1"), FRA)
        .token(&token(&room, "eve"))
        .connect()
        .await?;
    let mut e2 = dial_from(port, &room, &support::session("e2"), AMS)
        .token(&token(&room, "emil"))
        .connect()
        .await?;
    let mut o1 = dial_from(port, &room, &support::session("o1"), SYD)
        .token(&token(&room, "olive"))
        .connect()
        .await?;
    let st = es::stats(port, &room).await?;
    let want_before = json!({
        "room": room, "epoch": e1.epoch(), "home": "weur", "seq": 0,
        "connections": 3, "members": 3, "connections_by_region": {"EU": 2, "OC": 1},
        "messages": 0, "deliveries": 0, "cross_region_deliveries": 0, "cross_region_ratio": 0.0,
    });
    check_fields("stats before any publish", &st, &want_before)?;
    for k in [
        "counted_since",
        "outbound_per_sec",
        "frames_per_sec",
        "signals_dropped",
        "signals_coalesced",
        "batches",
        "deferred_replays",
    ] {
        check!(st[k].is_number(), "stats field {k} should be a number: {st}");
    }

    // A from EU, the same id again (other data), B from EU, C from OC.
    let sa = es::server_publish(port, &room, FRA, "A", json!({"n": 1})).await?;
    let sa2 = es::server_publish(port, &room, FRA, "A", json!({"n": "retry"})).await?;
    check!(sa2 == sa, "a retried id should get its original seq {sa}, got {sa2}");
    let sb = es::server_publish(port, &room, AMS, "B", json!({"n": 2})).await?;
    let sc = es::server_publish(port, &room, SYD, "C", json!({"n": 3})).await?;
    check!(
        (sa, sb, sc) == (1, 2, 3),
        "seqs should be 1, 2, 3 (nothing sequenced for the retry), got {sa}, {sb}, {sc}"
    );
    for c in [&mut e1, &mut e2, &mut o1] {
        let got: Vec<Value> = messages_through(c, "C")
            .await?
            .iter()
            .map(|m| {
                json!([
                    m["seq"],
                    m["id"],
                    m["session"],
                    m["user"],
                    m["region"],
                    m["topic"],
                    m["data"]
                ])
            })
            .collect();
        let want = vec![
            json!([1, "A", "$server", "$server", "EU", "news", {"n": 1}]),
            json!([2, "B", "$server", "$server", "EU", "news", {"n": 2}]),
            json!([3, "C", "$server", "$server", "OC", "news", {"n": 3}]),
        ];
        check!(
            got == want,
            "[{}] should have seen exactly A, B, C once each from $server: {got:?}",
            c.session
        );
    }
    // A retry after the fact changes nothing either.
    let sa3 = es::server_publish(port, &room, SYD, "A", json!({"n": "late"})).await?;
    check!(sa3 == sa, "a late retry of A should get seq {sa}, got {sa3}");

    // 3 messages × 3 connections; cross-region: A and B (EU) reach 1 OC, C (OC) reaches 2 EU.
    let st = es::stats(port, &room).await?;
    let want_after = json!({
        "room": room, "epoch": e1.epoch(), "home": "weur", "seq": 3,
        "connections": 3, "members": 3, "connections_by_region": {"EU": 2, "OC": 1},
        "messages": 3, "deliveries": 9, "cross_region_deliveries": 4,
    });
    check_fields("stats after three publishes", &st, &want_after)?;
    let ratio = st["cross_region_ratio"].as_f64().unwrap_or(-1.0);
    let exact = (ratio - 4.0 / 9.0).abs() < 1e-9;
    check!(exact, "cross_region_ratio should be 4/9, got {ratio}: {st}");

    // One leaves: the connection counts follow.
    o1.close().await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let st = es::stats(port, &room).await?;
        if st["connections"] == 2 && st["connections_by_region"] == json!({"EU": 2}) {
            break;
        }
        check!(
            std::time::Instant::now() < deadline,
            "after the OC client left, stats should count 2 EU connections: {st}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    e1.close().await;
    e2.close().await;
    Ok(())
}

/// Every field of `want` must be in `got` with that value.
fn check_fields(what: &str, got: &Value, want: &Value) -> R {
    let mut wrong = Vec::new();
    for (k, v) in want.as_object().expect("an object") {
        if &got[k] != v {
            wrong.push(format!("{k}: {} (expected {v})", got[k]));
        }
    }
    check!(wrong.is_empty(), "{what}: {} in {got}", wrong.join(", "));
    Ok(())
}
