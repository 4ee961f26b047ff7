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
        es::on("edge_auth::token_info_and_room_patterns", &TOKENS, info_and_patterns),
        es::on("edge_auth::tokens_from_pyjwt_are_accepted", &TOKENS, pyjwt),
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

/// How an upgrade must be refused.
enum Refused {
    /// Opened, then closed at once with 4401 and this code as the reason (token refusals).
    Close(&'static str),
    /// An HTTP refusal with this status and code (everything checked before the token).
    Http(u16, &'static str),
}

async fn refusals(ctx: Ctx) -> R {
    use Refused::{Close, Http};
    let room = support::room("auth");
    let other = support::room("auth-other");
    let good = token(&room, "alice");
    let star = token("*", "alice");
    let past = es::now_secs() - 60;
    let later = es::now_secs() + 600;
    let signed = es::sign_raw;
    let claims = |room: &str| json!({"room": room, "sub": "alice", "exp": later}).to_string();
    let mut tampered_sub = claims_of(&good);
    tampered_sub["sub"] = json!("mallory");
    let mut tampered_room = claims_of(&good);
    tampered_room["room"] = json!("*");
    let mut tampered_exp = claims_of(&token_exp(&room, "alice", past));
    tampered_exp["exp"] = json!(es::now_secs() + 3600);
    let other_secret = homeroom::auth::mint(
        &homeroom::auth::Key::new(b"not-the-deployment-secret-0123456789"),
        &homeroom::auth::Claims::new(&room, "alice", later),
    );
    let unsigned =
        format!("{}.{}.", es::b64(r#"{"alg":"none","typ":"JWT"}"#), es::b64(&claims(&room)));
    let long_room = "r".repeat(65);

    let cases: Vec<(&str, String, Refused)> = vec![
        ("no token", ws_path(&room, None), Close("token_missing")),
        ("empty token", ws_path(&room, Some("")), Close("token_missing")),
        ("token for another room", ws_path(&other, Some(&good)), Close("token_wrong_room")),
        (
            "expired token",
            ws_path(&room, Some(&token_exp(&room, "alice", past))),
            Close("token_expired"),
        ),
        // exp is checked before the room.
        (
            "expired token for another room",
            ws_path(&other, Some(&token_exp(&room, "alice", past))),
            Close("token_expired"),
        ),
        (
            "signature with its first byte flipped",
            ws_path(&room, Some(&with_signature(&good, |s| s[0] ^= 0x01))),
            Close("token_bad_signature"),
        ),
        (
            "signature with its last byte flipped",
            ws_path(&room, Some(&with_signature(&good, |s| *s.last_mut().unwrap() ^= 0x80))),
            Close("token_bad_signature"),
        ),
        (
            "signature one byte short",
            ws_path(
                &room,
                Some(&with_signature(&good, |s| {
                    s.pop();
                })),
            ),
            Close("token_bad_signature"),
        ),
        (
            "payload with another sub, old signature",
            ws_path(&room, Some(&with_payload(&good, &tampered_sub))),
            Close("token_bad_signature"),
        ),
        (
            "payload widened to room *, old signature",
            ws_path(&other, Some(&with_payload(&good, &tampered_room))),
            Close("token_bad_signature"),
        ),
        (
            "expired payload extended, old signature",
            ws_path(&room, Some(&with_payload(&good, &tampered_exp))),
            Close("token_bad_signature"),
        ),
        (
            "signed with another secret",
            ws_path(&room, Some(&other_secret)),
            Close("token_bad_signature"),
        ),
        // The header: HS256 only, whatever else it claims.
        ("alg none, no signature", ws_path(&room, Some(&unsigned)), Close("token_alg")),
        (
            "alg RS256",
            ws_path(
                &room,
                Some(&es::sign_jwt(
                    es::SECRET.as_bytes(),
                    r#"{"alg":"RS256","typ":"JWT"}"#,
                    &claims(&room),
                )),
            ),
            Close("token_alg"),
        ),
        (
            "alg hs256 in lower case",
            ws_path(
                &room,
                Some(&es::sign_jwt(es::SECRET.as_bytes(), r#"{"alg":"hs256"}"#, &claims(&room))),
            ),
            Close("token_alg"),
        ),
        (
            "a kid no secret has",
            ws_path(
                &room,
                Some(&es::sign_jwt(
                    es::SECRET.as_bytes(),
                    r#"{"alg":"HS256","kid":"k9"}"#,
                    &claims(&room),
                )),
            ),
            Close("token_unknown_kid"),
        ),
        (
            "the previous secret's kid on the current secret's signature",
            ws_path(
                &room,
                Some(&es::sign_jwt(
                    es::SECRET.as_bytes(),
                    &format!(r#"{{"alg":"HS256","kid":"{}"}}"#, es::PREVIOUS_KID),
                    &claims(&room),
                )),
            ),
            Close("token_bad_signature"),
        ),
        (
            "typ other than JWT",
            ws_path(
                &room,
                Some(&es::sign_jwt(
                    es::SECRET.as_bytes(),
                    r#"{"alg":"HS256","typ":"at+jwt"}"#,
                    &claims(&room),
                )),
            ),
            Close("token_malformed"),
        ),
        (
            "nbf ten minutes ahead",
            ws_path(
                &room,
                Some(&signed(
                    &json!({"room": room, "sub": "alice", "exp": later, "nbf": later - 10})
                        .to_string(),
                )),
            ),
            Close("token_not_yet_valid"),
        ),
        (
            "info that is not an object",
            ws_path(
                &room,
                Some(&signed(
                    &json!({"room": room, "sub": "alice", "exp": later, "info": [1]}).to_string(),
                )),
            ),
            Close("token_malformed"),
        ),
        (
            "info over 1 KiB",
            ws_path(
                &room,
                Some(&signed(
                    &json!({"room": room, "sub": "alice", "exp": later,
                        "info": {"bio": "x".repeat(1100)}})
                    .to_string(),
                )),
            ),
            Close("token_malformed"),
        ),
        ("garbage token", ws_path(&room, Some("garbage")), Close("token_malformed")),
        ("four parts", ws_path(&room, Some(&format!("{good}.x"))), Close("token_malformed")),
        ("not base64url", ws_path(&room, Some("a+b.c/d.e")), Close("token_malformed")),
        (
            "signed payload that is not JSON",
            ws_path(&room, Some(&signed("not json"))),
            Close("token_malformed"),
        ),
        (
            "signed payload without exp",
            ws_path(&room, Some(&signed(&json!({"room": room, "sub": "alice"}).to_string()))),
            Close("token_malformed"),
        ),
        (
            "signed payload with a sub that has a space",
            ws_path(&room, Some(&token(&room, "bad user"))),
            Close("token_malformed"),
        ),
        (
            // (A signature is checked before its payload is read.)
            "2 KiB of the format before JWTs with a made-up signature",
            ws_path(&room, Some(&format!("{}.{}", "a".repeat(2100), "b".repeat(43)))),
            Close("token_bad_signature"),
        ),
        // A query over 4 KiB is refused before anything in it is read.
        (
            "query over 4 KiB",
            ws_path(&room, Some(&format!("{good}{}", "A".repeat(4200)))),
            Http(400, "bad_param"),
        ),
        // Names are checked before the token (a `*` token is good everywhere).
        ("room with an encoded slash", ws_path("a%2Fb", Some(&star)), Http(400, "bad_room")),
        ("room with unicode", ws_path("caf%C3%A9", Some(&star)), Http(400, "bad_room")),
        ("room of 65 chars", ws_path(&long_room, Some(&star)), Http(400, "bad_room")),
        // A literal `/` makes another path: `/rooms/a/b/ws` is the route `b/ws` of room `a`
        // (the room kind's own routes), and room `a` does not exist. The URL parser folds `..`
        // (also `%2E%2E`) away before the Worker sees it: `/rooms/../ws` arrives as `/ws`, no
        // route.
        ("room with a literal slash", ws_path("a/b", Some(&star)), Http(404, "room_not_found")),
        ("room `..`", ws_path("..", Some(&star)), Http(404, "not_found")),
        ("room `%2E%2E`", ws_path("%2E%2E", Some(&star)), Http(404, "not_found")),
        // `/rooms/./ws` folds to `/rooms/ws`: the room route of `DELETE /rooms/{room}`.
        ("room `.`", ws_path(".", Some(&star)), Http(405, "method_not_allowed")),
        (
            "bad session with a good token",
            format!("/rooms/{room}/ws?session=short&token={good}"),
            Http(400, "bad_session"),
        ),
        (
            "bad since with a good token",
            format!("{}&since=x", ws_path(&room, Some(&good))),
            Http(400, "bad_param"),
        ),
    ];
    let mut failures = Vec::new();
    for (what, path, refused) in &cases {
        let checked = match refused {
            Close(code) => es::check_token_close(what, ctx.port, path, code).await,
            Http(status, code) => match http::get_upgrade(ctx.port, path, es::T).await {
                Ok(resp) => check_refusal(what, &resp, *status, code),
                Err(e) => Err(format!("{what}: {e}")),
            },
        };
        if let Err(e) = checked {
            failures.push(e);
        }
    }
    // Not an upgrade, with a good token: 426.
    let resp = es::get(ctx.port, &ws_path(&room, Some(&good)), &[]).await?;
    if let Err(e) = check_refusal("a GET without Upgrade", &resp, 426, "upgrade_required") {
        failures.push(e);
    }
    // The same token and path are welcomed: the cases above failed for their one defect only.
    // So are the tokens a rotation and the transition leave in users' hands.
    let previous = homeroom::auth::Key {
        secret: es::PREVIOUS_SECRET.as_bytes().to_vec(),
        kid: Some(es::PREVIOUS_KID.into()),
    };
    let unnamed_previous = homeroom::auth::Key::new(es::PREVIOUS_SECRET.as_bytes());
    let welcomed = [
        ("the good token", room.clone(), good.clone()),
        ("the `*` token", other.clone(), star.clone()),
        (
            "a token signed with the previous secret, naming its kid",
            room.clone(),
            homeroom::auth::mint(
                &previous,
                &homeroom::auth::Claims::new(&room, "alice", later).with_kind("rooms"),
            ),
        ),
        (
            "a token signed with the previous secret, no kid",
            room.clone(),
            homeroom::auth::mint(
                &unnamed_previous,
                &homeroom::auth::Claims::new(&room, "alice", later).with_kind("rooms"),
            ),
        ),
        ("a token of the format before JWTs", room.clone(), es::legacy_token(&room, "alice")),
    ];
    for (what, r, t) in &welcomed {
        let dial = Dial::new(ctx.port, r, &support::session("auth-ok")).token(t);
        match dial.connect().await {
            Ok(c) if c.welcome["user"] == "alice" => c.close().await,
            Ok(c) => failures.push(format!("{what}: welcomed as {}", c.welcome["user"])),
            Err(e) => failures.push(format!("{what} should be welcomed: {e}")),
        }
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
            cases.len() + welcomed.len() + 1,
            failures.join("\n")
        ))
    }
}

/// A token's `info` is the member's verified `info` in presence, seen by everyone; a `room`
/// claim ending in `*` covers the rooms that start with it, and no other.
async fn info_and_patterns(ctx: Ctx) -> R {
    let prefix = support::room("auth-pat");
    let room = format!("{prefix}-lot7");
    let claims = json!({"room": format!("{prefix}*"), "kind": "rooms", "sub": "carol", "exp": es::now_secs() + 600,
        "iat": es::now_secs(), "nbf": es::now_secs(), "info": {"name": "Carol", "role": "bidder"}});
    let carol_token = es::sign_raw(&claims.to_string());
    let mut watcher = Dial::new(ctx.port, &room, &support::session("watch"))
        .token(&token(&room, "w"))
        .connect()
        .await?;
    let sc = support::session("carol");
    let carol = Dial::new(ctx.port, &room, &sc).token(&carol_token).connect().await?;
    check!(
        carol.welcome["presence"]["members"][&sc]["info"]
            == json!({"name": "Carol", "role": "bidder"}),
        "the welcome should show carol's verified info: {}",
        carol.welcome["presence"]
    );
    let joined = read_until(&mut watcher, "carol's join", es::T, |f| {
        f["type"] == "presence" && f["joins"][&sc].is_object()
    })
    .await?;
    check!(
        joined["joins"][&sc]["info"] == json!({"name": "Carol", "role": "bidder"})
            && joined["joins"][&sc]["user"] == "carol",
        "the others should see carol's info: {joined}"
    );
    // The pattern is a prefix of the room name, not a glob: a room that does not start with it
    // is another room.
    let elsewhere = support::room("auth-elsewhere");
    let path = format!("/rooms/{elsewhere}/ws?session={sc}&token={}", enc(&carol_token));
    es::check_token_close(
        "a pattern token outside its prefix",
        ctx.port,
        &path,
        "token_wrong_room",
    )
    .await?;
    carol.close().await;
    Ok(())
}

/// `examples/tokens/mint_token.py` (PyJWT, what the README shows a Python backend doing) mints
/// tokens the Worker takes: with the current secret and its kid, with the previous one during a
/// rotation, and with an `info` every member sees. PyJWT is installed by `scripts/setup`.
async fn pyjwt(ctx: Ctx) -> R {
    let room = support::room("pyjwt");
    let mint = |secret: &str, kid: &str, user: &str, name: Option<&str>| -> R<String> {
        let script = format!("{}/examples/tokens/mint_token.py", env!("CARGO_MANIFEST_DIR"));
        let lib = std::env::var("HOMEROOM_PYTHON").unwrap_or_else(|_| {
            format!("{}/.cache/homeroom/tools/python", std::env::var("HOME").unwrap_or_default())
        });
        let mut cmd = std::process::Command::new("python3");
        cmd.arg(&script).arg("rooms").arg(&room).arg(user).args(name);
        cmd.env("PYTHONPATH", &lib).env("AUTH_SECRET", secret).env("AUTH_SECRET_KID", kid);
        let out = cmd.output().map_err(|e| format!("python3 {script}: {e}"))?;
        check!(
            out.status.success(),
            "python3 {script} failed (scripts/setup installs PyJWT into {lib}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let cases = [
        ("the current secret, its kid", es::SECRET, es::CURRENT_KID, "py-ann"),
        ("the current secret, no kid", es::SECRET, "", "py-bob"),
        ("the previous secret, its kid", es::PREVIOUS_SECRET, es::PREVIOUS_KID, "py-cy"),
    ];
    let mut members = Vec::new();
    for (what, secret, kid, user) in cases {
        let t = mint(secret, kid, user, Some("Py Thon"))?;
        check!(t.matches('.').count() == 2, "{what}: PyJWT printed no JWT: {t}");
        let s = support::session(user);
        let c = Dial::new(ctx.port, &room, &s)
            .token(&t)
            .connect()
            .await
            .map_err(|e| format!("{what}: a PyJWT token was not welcomed: {e}"))?;
        check!(
            c.welcome["user"] == user
                && c.welcome["presence"]["members"][&s]["info"] == json!({"name": "Py Thon"}),
            "{what}: welcomed as {} with {}",
            c.welcome["user"],
            c.welcome["presence"]["members"][&s]
        );
        members.push(c);
    }
    // PyJWT with a secret the deployment does not hold, under a kid it does not know.
    let stranger =
        mint("a-secret-this-deployment-never-had-0123456789", "2025-01", "py-eve", None)?;
    let path =
        format!("/rooms/{room}/ws?session={}&token={}", support::session("eve"), enc(&stranger));
    es::check_token_close("PyJWT with an unknown kid", ctx.port, &path, "token_unknown_kid")
        .await?;
    for c in members {
        c.close().await;
    }
    Ok(())
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
    es::check_token_close(
        &format!("alice's token for {room} in {room2}"),
        ctx.port,
        &path,
        "token_wrong_room",
    )
    .await?;
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
