//! Auth at the edge (issue 4, PROTOCOL.md "Auth"), on the token runtime: every refusal before
//! the upgrade with its exact status and code; a valid token connects as its `sub` (welcome and
//! message frames), a `*` token in any room; one user in two sessions counts once in `users`;
//! `/presence` takes the token as `?token=` or a bearer. And a deployment with neither a secret
//! nor dev mode refuses rooms with 503 `auth_not_configured`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::check;
use crate::client::{enc, Dial};
use crate::edge_support::{
    self as es, check_refusal, claims_of, token, token_exp, with_payload, with_signature, CLOSED,
    TOKENS,
};
use crate::harness::Spec;
use crate::http;
use crate::presence::{dial_from, read_until, summary_body, FRA, SYD};
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        es::on("edge_auth::refusals_before_the_upgrade", &TOKENS, refusals),
        es::on("edge_auth::token_sub_is_the_user_and_star_is_any_room", &TOKENS, token_user),
        es::on("edge_auth::one_user_two_sessions_is_one_user", &TOKENS, one_user_two_sessions),
        es::on("edge_auth::presence_route_takes_query_or_bearer", &TOKENS, presence_route),
        es::on("edge_auth::unconfigured_deployment_refuses_rooms", &CLOSED, unconfigured),
    ]
}

const SESSION: &str = "s_edge-auth-1";

/// `/rooms/{room}/ws?session=..&token=..` (the token percent-encoded).
fn ws_path(room: &str, token: Option<&str>) -> String {
    let mut p = format!("/rooms/{room}/ws?session={SESSION}");
    if let Some(t) = token {
        p.push_str(&format!("&token={}", enc(t)));
    }
    p
}

async fn refusals(ctx: Ctx) -> R {
    let room = support::room("auth");
    let other = support::room("auth-other");
    let good = token(&room, "alice");
    let star = token("*", "alice");
    let past = es::now_secs() - 60;
    let signed = es::sign_raw;
    let mut tampered_sub = claims_of(&good);
    tampered_sub["sub"] = json!("mallory");
    let mut tampered_room = claims_of(&good);
    tampered_room["room"] = json!("*");
    let mut tampered_exp = claims_of(&token_exp(&room, "alice", past));
    tampered_exp["exp"] = json!(es::now_secs() + 3600);
    let other_secret = homeroom::auth::mint(
        b"not-the-deployment-secret",
        &homeroom::auth::Claims { room: room.clone(), sub: "alice".into(), exp: past + 3660 },
    );
    let long_room = "r".repeat(65);

    // (what, path, status, code)
    let cases: Vec<(&str, String, u16, &str)> = vec![
        ("no token", ws_path(&room, None), 401, "token_missing"),
        ("empty token", ws_path(&room, Some("")), 401, "token_missing"),
        ("token for another room", ws_path(&other, Some(&good)), 403, "token_wrong_room"),
        (
            "expired token",
            ws_path(&room, Some(&token_exp(&room, "alice", past))),
            401,
            "token_expired",
        ),
        // exp is checked before the room.
        (
            "expired token for another room",
            ws_path(&other, Some(&token_exp(&room, "alice", past))),
            401,
            "token_expired",
        ),
        (
            "signature with its first byte flipped",
            ws_path(&room, Some(&with_signature(&good, |s| s[0] ^= 0x01))),
            401,
            "token_bad_signature",
        ),
        (
            "signature with its last byte flipped",
            ws_path(&room, Some(&with_signature(&good, |s| *s.last_mut().unwrap() ^= 0x80))),
            401,
            "token_bad_signature",
        ),
        (
            "signature one byte short",
            ws_path(
                &room,
                Some(&with_signature(&good, |s| {
                    s.pop();
                })),
            ),
            401,
            "token_bad_signature",
        ),
        (
            "payload with another sub, old signature",
            ws_path(&room, Some(&with_payload(&good, &tampered_sub))),
            401,
            "token_bad_signature",
        ),
        (
            "payload widened to room *, old signature",
            ws_path(&other, Some(&with_payload(&good, &tampered_room))),
            401,
            "token_bad_signature",
        ),
        (
            "expired payload extended, old signature",
            ws_path(&room, Some(&with_payload(&good, &tampered_exp))),
            401,
            "token_bad_signature",
        ),
        (
            "signed with another secret",
            ws_path(&room, Some(&other_secret)),
            401,
            "token_bad_signature",
        ),
        ("garbage token", ws_path(&room, Some("garbage")), 401, "token_malformed"),
        ("three parts", ws_path(&room, Some(&format!("{good}.x"))), 401, "token_malformed"),
        ("not base64url", ws_path(&room, Some("a+b.c/d")), 401, "token_malformed"),
        (
            "signed payload that is not JSON",
            ws_path(&room, Some(&signed("not json"))),
            401,
            "token_malformed",
        ),
        (
            "signed payload without exp",
            ws_path(&room, Some(&signed(&json!({"room": room, "sub": "alice"}).to_string()))),
            401,
            "token_malformed",
        ),
        (
            "signed payload with a sub that has a space",
            ws_path(&room, Some(&token(&room, "bad user"))),
            401,
            "token_malformed",
        ),
        (
            "token over 2 KiB",
            ws_path(&room, Some(&format!("{}.{}", "a".repeat(2100), "b".repeat(43)))),
            401,
            "token_malformed",
        ),
        // A query over 4 KiB is refused before anything in it is read.
        (
            "query over 4 KiB",
            ws_path(&room, Some(&format!("{good}{}", "A".repeat(4200)))),
            400,
            "bad_param",
        ),
        // Names are checked before the token (a `*` token is good everywhere).
        ("room with an encoded slash", ws_path("a%2Fb", Some(&star)), 400, "bad_room"),
        ("room with unicode", ws_path("caf%C3%A9", Some(&star)), 400, "bad_room"),
        ("room of 65 chars", ws_path(&long_room, Some(&star)), 400, "bad_room"),
        // A literal `/` makes another path, and the URL parser folds `..` (also `%2E%2E`) away
        // before the Worker sees it: `/rooms/../ws` arrives as `/ws`. No route: 404.
        ("room with a literal slash", ws_path("a/b", Some(&star)), 404, "not_found"),
        ("room `..`", ws_path("..", Some(&star)), 404, "not_found"),
        ("room `%2E%2E`", ws_path("%2E%2E", Some(&star)), 404, "not_found"),
        // `/rooms/./ws` folds to `/rooms/ws`: the room route of `DELETE /rooms/{room}`.
        ("room `.`", ws_path(".", Some(&star)), 405, "method_not_allowed"),
        (
            "bad session with a good token",
            format!("/rooms/{room}/ws?session=short&token={good}"),
            400,
            "bad_session",
        ),
        (
            "bad since with a good token",
            format!("{}&since=x", ws_path(&room, Some(&good))),
            400,
            "bad_param",
        ),
    ];
    let mut failures = Vec::new();
    for (what, path, status, code) in &cases {
        match http::get_upgrade(ctx.port, path, es::T).await {
            Ok(resp) => {
                if let Err(e) = check_refusal(what, &resp, *status, code) {
                    failures.push(e);
                }
            }
            Err(e) => failures.push(format!("{what}: {e}")),
        }
    }
    // Not an upgrade, with a good token: 426.
    let resp = es::get(ctx.port, &ws_path(&room, Some(&good)), &[]).await?;
    if let Err(e) = check_refusal("a GET without Upgrade", &resp, 426, "upgrade_required") {
        failures.push(e);
    }
    // The same token and path do upgrade: the cases above failed for their one defect only.
    let resp = http::get_upgrade(ctx.port, &ws_path(&room, Some(&good)), es::T).await?;
    if resp.status != 101 {
        failures.push(format!("the good token should upgrade: {} {}", resp.status, resp.body));
    }
    let resp = http::get_upgrade(ctx.port, &ws_path(&other, Some(&star)), es::T).await?;
    if resp.status != 101 {
        failures.push(format!("the `*` token should upgrade: {} {}", resp.status, resp.body));
    }
    // No token, secret or query string reaches the log (refusals log the path only).
    // (The Worker's own lines; wrangler's request lines show the path only, too.)
    let leaked: Vec<String> = ctx
        .log
        .lines()
        .into_iter()
        .filter(|l| l.contains(&good) || l.contains(es::SECRET) || l.contains("token="))
        .collect();
    if !leaked.is_empty() {
        failures.push(format!("tokens or the secret appear in the runtime log: {leaked:?}"));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} refusal checks failed:\n{}",
            failures.len(),
            cases.len() + 3,
            failures.join("\n")
        ))
    }
}

async fn token_user(ctx: Ctx) -> R {
    let room = support::room("auth-user");
    let room2 = support::room("auth-star");
    let sa = support::session("alice");
    let mut a =
        Dial::new(ctx.port, &room, &sa).token(&token(&room, "alice@example.com")).connect().await?;
    check!(
        a.welcome["user"] == "alice@example.com" && a.welcome["session"] == sa.as_str(),
        "welcome.user should be the token's sub: {}",
        a.welcome
    );
    let seq = a.publish_acked("m1", "chat", json!("hi")).await?;
    let m = a.message("m1").await?;
    check!(
        m["user"] == "alice@example.com" && m["session"] == sa.as_str() && m["seq"] == seq,
        "the message should carry the token's sub as user: {m}"
    );
    // The presence entry too.
    check!(
        a.welcome["presence"]["members"][&sa]["user"] == "alice@example.com",
        "the welcome's own member should have the token's user: {}",
        a.welcome["presence"]
    );

    // One `*` token, two rooms.
    let star = token("*", "bob|42");
    let sb = support::session("bob");
    for r in [&room, &room2] {
        let b = Dial::new(ctx.port, r, &sb).token(&star).connect().await?;
        check!(
            b.welcome["user"] == "bob|42" && b.welcome["room"] == r.as_str(),
            "a `*` token should connect to {r} as bob|42: {}",
            b.welcome
        );
        b.close().await;
    }
    // Alice's room-bound token is refused in room2 even though she is connected elsewhere.
    // (Raw HTTP: the WebSocket client does not always hand over a refusal's body.)
    let path =
        format!("/rooms/{room2}/ws?session={sa}&token={}", enc(&token(&room, "alice@example.com")));
    let resp = http::get_upgrade(ctx.port, &path, es::T).await?;
    check_refusal(&format!("alice's token for {room} in {room2}"), &resp, 403, "token_wrong_room")?;
    a.close().await;
    Ok(())
}

async fn one_user_two_sessions(ctx: Ctx) -> R {
    let room = support::room("auth-tabs");
    let (t1, t2, t3) =
        (support::session("tab1"), support::session("tab2"), support::session("bob"));
    let alice = token(&room, "alice");
    let mut c1 = dial_from(ctx.port, &room, &t1, SYD).token(&alice).connect().await?;
    let c2 = dial_from(ctx.port, &room, &t2, SYD).token(&alice).connect().await?;
    let want2 = json!({"members": 2, "users": 1, "connections": 2,
        "regions": {"OC": {"members": 2, "users": 1}}});
    check!(
        c2.welcome["presence"]["summary"] == want2,
        "alice's second tab: the welcome summary should be {want2}: {}",
        c2.welcome["presence"]["summary"]
    );
    let members = &c2.welcome["presence"]["members"];
    check!(
        members[&t1]["user"] == "alice" && members[&t2]["user"] == "alice",
        "both tabs are members with user alice: {members}"
    );
    // The first tab's summary states the same (two members, one user).
    read_until(&mut c1, "the summary with two tabs", crate::presence::SUMMARY_WAIT, |f| {
        f["type"] == "summary" && summary_body(f) == want2
    })
    .await?;
    let c3 = dial_from(ctx.port, &room, &t3, FRA).token(&token(&room, "bob")).connect().await?;
    let want3 = json!({"members": 3, "users": 2, "connections": 3,
        "regions": {"OC": {"members": 2, "users": 1}, "EU": {"members": 1, "users": 1}}});
    check!(
        c3.welcome["presence"]["summary"] == want3,
        "with bob: the welcome summary should be {want3}: {}",
        c3.welcome["presence"]["summary"]
    );
    let p = presence_json(&ctx, &room, &token(&room, "carol")).await?;
    check!(p["summary"] == want3, "HTTP presence summary should be {want3}: {p}");
    let users: BTreeMap<String, Value> = p["members"]
        .as_object()
        .map(|m| m.iter().map(|(s, v)| (s.clone(), v["user"].clone())).collect())
        .unwrap_or_default();
    let want_users: BTreeMap<String, Value> =
        [(t1.clone(), json!("alice")), (t2.clone(), json!("alice")), (t3.clone(), json!("bob"))]
            .into_iter()
            .collect();
    check!(users == want_users, "HTTP presence members: {users:?}, expected {want_users:?}");
    c1.close().await;
    c2.close().await;
    c3.close().await;
    Ok(())
}

async fn presence_json(ctx: &Ctx, room: &str, token: &str) -> R<Value> {
    let resp =
        es::get(ctx.port, &format!("/rooms/{room}/presence?token={}", enc(token)), &[]).await?;
    es::json_200(&format!("GET /rooms/{room}/presence?token="), &resp)
}

async fn presence_route(ctx: Ctx) -> R {
    let room = support::room("auth-presence");
    let s = support::session("p");
    let c = Dial::new(ctx.port, &room, &s).token(&token(&room, "dora")).connect().await?;
    let path = format!("/rooms/{room}/presence");
    let good = token(&room, "viewer");
    let by_query = presence_json(&ctx, &room, &good).await?;
    let bearer = format!("Bearer {good}");
    let by_header = es::json_200(
        "GET /presence with a bearer token",
        &es::get(ctx.port, &path, &[("Authorization", &bearer)]).await?,
    )?;
    for (how, p) in [("?token=", &by_query), ("bearer", &by_header)] {
        check!(
            p["members"][&s]["user"] == "dora" && p["summary"]["members"] == 1,
            "presence by {how} should list dora's session: {p}"
        );
    }
    check_refusal(
        "presence without a token",
        &es::get(ctx.port, &path, &[]).await?,
        401,
        "token_missing",
    )?;
    let other = token(&support::room("elsewhere"), "viewer");
    check_refusal(
        "presence with another room's token",
        &es::get(ctx.port, &format!("{path}?token={other}"), &[]).await?,
        403,
        "token_wrong_room",
    )?;
    let expired = format!("Bearer {}", token_exp(&room, "viewer", es::now_secs() - 5));
    check_refusal(
        "presence with an expired bearer token",
        &es::get(ctx.port, &path, &[("Authorization", &expired)]).await?,
        401,
        "token_expired",
    )?;
    // The admin key is no room token.
    let admin = es::bearer_admin();
    check_refusal(
        "presence with the admin key as bearer",
        &es::get(ctx.port, &path, &[("Authorization", &admin)]).await?,
        401,
        "token_malformed",
    )?;
    c.close().await;
    Ok(())
}

async fn unconfigured(ctx: Ctx) -> R {
    let room = support::room("closed");
    let resp =
        http::get_upgrade(ctx.port, &format!("/rooms/{room}/ws?session={SESSION}"), es::T).await?;
    check_refusal(
        "a connect with no AUTH_SECRET and no ANONYMOUS_DEV",
        &resp,
        503,
        "auth_not_configured",
    )?;
    let resp = es::get(ctx.port, &format!("/rooms/{room}/presence"), &[]).await?;
    check_refusal(
        "presence with no AUTH_SECRET and no ANONYMOUS_DEV",
        &resp,
        503,
        "auth_not_configured",
    )?;
    // Validation still comes first: a bad room is a bad room.
    let resp =
        http::get_upgrade(ctx.port, &format!("/rooms/caf%C3%A9/ws?session={SESSION}"), es::T)
            .await?;
    check_refusal("a bad room on the closed deployment", &resp, 400, "bad_room")?;
    // And the deployment says so loudly (once per isolate).
    es::wait_log(&ctx.log, "auth_mode", 1, std::time::Duration::from_secs(5), |v| {
        v["mode"] == "unconfigured"
            && v["error"].as_str().is_some_and(|e| e.contains("AUTH_SECRET"))
    })
    .await?;
    check!(
        ctx.log.events("auth_mode").iter().all(|v| v["mode"] == "unconfigured"),
        "the closed deployment announced another mode: {:?}",
        ctx.log.events("auth_mode")
    );
    Ok(())
}
