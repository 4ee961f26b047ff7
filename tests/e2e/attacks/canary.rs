//! Attack (issue 11, item 4): "the health canary can be poisoned". A member tries to get into the
//! canary room (the reserved name, with a `*` token too), pushes a presence state nested far past
//! the depth limit into an ordinary room, and hammers `/health` so that every call would open a
//! socket into the canary room. The canary must stay green, the canary room must never see the
//! member, and a burst of `/health` calls must share one canary run (reused for 5 s).
//!
//! A failed canary report is reused for 5 s as well (`a_failed_report_is_reused_too`): a room
//! that recovers still reads 503 for up to 5 s, and a failing canary costs one socket per 5 s,
//! never one per `/health` call.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::check;
use crate::client::{Client, Event};
use crate::edge_support::{self as es, check_refusal, cron_canary, token, PLACED, TOKENS};
use crate::harness::{shared, Spec};
use crate::http;
use crate::presence::note;
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        shared("attacks::canary::members_cannot_join_the_canary_room", reserved_anonymous),
        es::on(
            "attacks::canary::members_cannot_join_the_canary_room_with_tokens",
            &TOKENS,
            reserved_tokens,
        ),
        shared("attacks::canary::deep_presence_state_is_refused", deep_presence),
        shared("attacks::canary::health_bursts_share_one_canary_run", health_bursts),
        es::on("attacks::canary::a_failed_report_is_reused_too", &PLACED, failed_report_reused),
    ]
}

/// The canary room of every runtime these trials use (the default `CANARY_ROOM`).
pub const CANARY_ROOM: &str = "homeroom-canary";

/// How long `/health` reuses one canary run (src/edge/health.rs `REUSE_MS`).
const REUSE: Duration = Duration::from_secs(5);

/// `GET /health` → (status, body).
async fn health(port: u16) -> R<(u16, Value)> {
    let resp = es::get(port, "/health", &[]).await?;
    let body = resp
        .json()
        .ok_or_else(|| format!("GET /health: not JSON: {} {}", resp.status, resp.body))?;
    Ok((resp.status, body))
}

/// A green canary report: 200 `{"ok":true,"room":"homeroom-canary",..}`.
fn check_green(what: &str, status: u16, v: &Value) -> R {
    check!(
        status == 200 && v["ok"] == true && v["room"] == CANARY_ROOM && v.get("step").is_none(),
        "{what}: expected 200 {{\"ok\":true,\"room\":\"{CANARY_ROOM}\"}}, got {status} {v}"
    );
    Ok(())
}

/// The `connect` log lines of the canary room so far.
fn canary_connects(ctx: &Ctx) -> Vec<Value> {
    ctx.log.events("connect").into_iter().filter(|v| v["room"] == CANARY_ROOM).collect()
}

/// Waits until no canary run can be cached: no new canary `connect` line for `REUSE` plus a
/// margin (a run's report is cached from its end, tens of ms after its connect line; the margin
/// covers that and the log's delay). Returns the number of canary connects at that point.
async fn until_cache_expired(ctx: &Ctx) -> usize {
    let margin = Duration::from_millis(1200);
    let mut seen = canary_connects(ctx).len();
    let mut since = Instant::now();
    loop {
        let now = canary_connects(ctx).len();
        if now != seen {
            seen = now;
            since = Instant::now();
        }
        if since.elapsed() >= REUSE + margin {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A `/health` answer from a canary run that started after this call began: waits until a new
/// canary `connect` line shows a run after `before` connects, then asks once more (that call
/// reuses or joins the new run).
async fn fresh_health(ctx: &Ctx, before: usize) -> R<(u16, Value)> {
    let deadline = Instant::now() + REUSE + Duration::from_secs(5);
    loop {
        let (status, v) = health(ctx.port).await?;
        if canary_connects(ctx).len() > before {
            // A run started after `before`: its report (or the run itself) is what answers now.
            return health(ctx.port).await;
        }
        check!(
            Instant::now() < deadline,
            "no new canary run within {:?} of asking /health (last answer {status} {v})",
            REUSE + Duration::from_secs(5)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The connect refusals a member gets for the canary room: the upgrade and `/presence`, with
/// `auth` as a query token (`None` in anonymous mode) and as a bearer header.
async fn try_the_canary_room(port: u16, who: &str, token: Option<&str>) -> R {
    let session = support::session("canary-intruder");
    let mut ws = format!("/rooms/{CANARY_ROOM}/ws?session={session}");
    let mut presence = format!("/rooms/{CANARY_ROOM}/presence");
    if let Some(t) = token {
        ws.push_str(&format!("&token={t}"));
        presence.push_str(&format!("?token={t}"));
    }
    let resp = http::get_upgrade(port, &ws, es::T).await?;
    check_refusal(&format!("{who}: upgrade into the canary room"), &resp, 403, "reserved_room")?;
    let resp = es::get(port, &presence, &[]).await?;
    check_refusal(&format!("{who}: GET the canary room's presence"), &resp, 403, "reserved_room")?;
    if let Some(t) = token {
        let bearer = format!("Bearer {t}");
        let path = format!("/rooms/{CANARY_ROOM}/presence");
        let resp = es::get(port, &path, &[("Authorization", &bearer)]).await?;
        check_refusal(
            &format!("{who}: GET the canary room's presence (bearer)"),
            &resp,
            403,
            "reserved_room",
        )?;
    }
    // The same through the WebSocket client a member would use.
    let mut dial = crate::client::Dial::new(port, CANARY_ROOM, &session);
    if let Some(t) = token {
        dial = dial.token(t);
    }
    match dial.open().await {
        Ok(_) => return Err(format!("{who}: a WebSocket into the canary room was accepted")),
        Err(e) => check!(
            e.contains("HTTP 403"),
            "{who}: the client's upgrade into the canary room should be refused 403: {e}"
        ),
    }
    Ok(())
}

/// No `connect` line of the canary room names a user other than the canary's own.
fn check_canary_room_saw_only_canaries(ctx: &Ctx, intruders: &[&str]) -> R {
    for line in canary_connects(ctx) {
        let user = line["user"].as_str().unwrap_or_default();
        check!(
            !intruders.contains(&user),
            "the canary room logged a connect of an intruder: {line}"
        );
    }
    Ok(())
}

async fn reserved_anonymous(ctx: Ctx) -> R {
    let (status, v) = health(ctx.port).await?;
    check_green("GET /health before the attempts", status, &v)?;
    let before = canary_connects(&ctx).len();
    try_the_canary_room(ctx.port, "anonymous member", None).await?;
    // Room names a member might try instead: percent-encoded, other case, a trailing dot.
    // Each is another room (101, and its connect line names that room) or no room name (400),
    // or folds onto the canary's name and is refused (403): never the canary room itself.
    for room in ["homeroom%2Dcanary", "HOMEROOM-CANARY", "homeroom-canary.", "homeroom-canary%20"] {
        let path = format!("/rooms/{room}/ws?session={}", support::session("canary-near"));
        let resp = http::get_upgrade(ctx.port, &path, es::T).await?;
        check!(
            [101, 400, 403].contains(&resp.status),
            "upgrade into {room:?}: expected 101 (another room), 400 or 403, got {} {}",
            resp.status,
            resp.body
        );
        note(format!("upgrade into {room:?}: {}", resp.status));
    }
    // A member is anonymous here: the user is the session, and the canary's sessions start
    // with `canary-`; the intruders' with `s_canary-`.
    for line in canary_connects(&ctx) {
        let user = line["user"].as_str().unwrap_or_default();
        check!(user.starts_with("canary-"), "the canary room logged a connect of a member: {line}");
    }
    let (status, v) = fresh_health(&ctx, before).await?;
    check_green("GET /health from a canary run after the attempts", status, &v)?;
    Ok(())
}

async fn reserved_tokens(ctx: Ctx) -> R {
    let (status, v) = health(ctx.port).await?;
    check_green("GET /health before the attempts", status, &v)?;
    let any = token("*", "mallory");
    try_the_canary_room(ctx.port, "member with a `*` token", Some(&any)).await?;
    let exact = token(CANARY_ROOM, "mallory");
    try_the_canary_room(ctx.port, "member with a token for the canary room", Some(&exact)).await?;
    // A sub that looks like the canary's own gains nothing either.
    let lookalike = token("*", "canary");
    try_the_canary_room(ctx.port, "member whose sub is `canary`", Some(&lookalike)).await?;
    check_canary_room_saw_only_canaries(&ctx, &["mallory"])?;
    // The same `*` token still opens an ordinary room: the refusal is the room, not the token.
    let room = support::room("canary-neighbour");
    let c = crate::client::Dial::new(ctx.port, &room, &support::session("neighbour"))
        .token(&any)
        .connect()
        .await?;
    c.close().await;
    // A fresh canary run (the cron trigger runs it uncached) still gets in and back out.
    let line = cron_canary(&ctx).await?;
    check!(
        line["ok"] == true && line["room"] == CANARY_ROOM,
        "cron canary after the attempts: {line}"
    );
    let (status, v) = health(ctx.port).await?;
    check_green("GET /health after the attempts", status, &v)?;
    Ok(())
}

/// `[[[...]]]` nested `n` deep.
fn nest(n: usize) -> String {
    "[".repeat(n) + &"]".repeat(n)
}

/// How deeply a JSON value nests arrays and objects (`1` is 0, `[1]` is 1).
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Reads `c` until a `presence` frame satisfies `pred` (other frames stay in `history`).
async fn until_presence(c: &mut Client, what: &str, pred: impl Fn(&Value) -> bool) -> R<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match c.next_event_within(left).await.map_err(|e| format!("waiting for {what}: {e}"))? {
            Event::Frame(f) if f["type"] == "presence" && pred(&f) => return Ok(f),
            Event::Frame(_) => {}
            Event::Closed(code) => return Err(format!("closed ({code:?}) waiting for {what}")),
        }
    }
}

async fn deep_presence(ctx: Ctx) -> R {
    let (status, v) = health(ctx.port).await?;
    check_green("GET /health before the attack", status, &v)?;
    let room = support::room("att-nest");
    let (sv, sa) = (support::session("victim"), support::session("attacker"));
    let mut victim = ctx.dial(&room, &sv).connect().await?;
    let mut attacker = ctx.dial(&room, &sa).connect().await?;
    let joined = |f: &Value, s: &str| f["joins"].get(s).is_some();
    until_presence(&mut victim, "the attacker's join", |f| joined(f, &sa)).await?;
    attacker.send(json!({"type": "presence", "state": {"mood": "calm"}})).await?;
    until_presence(&mut victim, "the attacker's first state", |f| {
        f["joins"][&sa]["state"]["mood"] == "calm"
    })
    .await?;

    // 200 levels: `{"abyss":[[[...]]]}` (about 400 bytes, under the 1 KiB presence limit, so only
    // its depth can refuse it).
    let deep = format!(r#"{{"type":"presence","state":{{"abyss":{}}}}}"#, nest(199));
    check!(deep.len() < 1024, "the deep state must fit the size limit ({} bytes)", deep.len());
    let health_during = tokio::spawn(health(ctx.port));
    attacker.send_text(deep).await?;
    let err = attacker.until("the refusal of the deep state", |f| f["type"] == "error").await?;
    check!(
        err["code"] == "invalid" && err.get("id").is_none(),
        "a presence state 200 levels deep should be refused `invalid` (no id): {err}"
    );
    // The same depth as publish data and a set value: refused with their ids, not sequenced.
    let data = format!(r#"{{"type":"publish","id":"abyss-pub","topic":"t","data":{}}}"#, nest(200));
    attacker.send_text(data).await?;
    let err = attacker.reply("abyss-pub").await?;
    check!(err["type"] == "error" && err["code"] == "invalid", "deep publish: {err}");
    let value = format!(r#"{{"type":"set","id":"abyss-set","key":"k","value":{}}}"#, nest(200));
    attacker.send_text(value).await?;
    let err = attacker.reply("abyss-set").await?;
    check!(err["type"] == "error" && err["code"] == "invalid", "deep set: {err}");
    let (status, v) = health_during.await.map_err(|e| format!("health task: {e}"))??;
    check_green("GET /health while the deep values were sent", status, &v)?;

    // At the limit (32 levels, counting the state object) a state is accepted and relayed: the
    // refusal above is the depth, not presence updates as such.
    let limit = json!({"type": "presence", "state": {"a": serde_json::from_str::<Value>(&nest(31)).unwrap()}});
    attacker.send(limit).await?;
    let seq = attacker.publish_acked("after", "t", json!("after")).await?;
    let seen = until_presence(&mut victim, "the attacker's state at the depth limit", |f| {
        f["joins"][&sa]["state"].get("a").is_some()
    })
    .await?;
    check!(
        depth(&seen["joins"][&sa]["state"]) == 32,
        "the state at the limit (32 levels) should arrive whole: {seen}"
    );
    let m = victim.message("after").await?;
    check!(support::seq(&m) == seq, "the victim's next message is `after` at {seq}: {m}");
    // The victim never saw the deep state, nor a deep message or state write.
    for f in &victim.history {
        check!(
            !f.to_string().contains("abyss"),
            "the victim received something of the refused values: {}",
            crate::client::short(f)
        );
    }
    let msgs = victim.messages();
    check!(
        msgs.len() == 1 && msgs[0]["id"] == "after",
        "the victim should have exactly one message (`after`), got {msgs:?}"
    );
    // The stored record: the presence read shows the state at the limit, never the deep one.
    let p = crate::presence::http_presence(ctx.port, &room).await?;
    let record = &p["members"][&sa];
    check!(
        record["state"].get("a").is_some() && record["state"].get("abyss").is_none(),
        "the attacker's stored presence should be the state at the limit: {p}"
    );
    check!(p["members"][&sv].is_object(), "the victim is still a member: {p}");
    let state = victim.get_state().await?;
    check!(state["state"].get("k").is_none(), "the refused set must not be stored: {state}");

    let before = canary_connects(&ctx).len();
    let (status, v) = fresh_health(&ctx, before).await?;
    check_green("GET /health from a canary run after the attack", status, &v)?;
    victim.close().await;
    attacker.close().await;
    Ok(())
}

/// `n` concurrent `GET /health` → every (status, body), the body as JSON or as text.
async fn burst(port: u16, n: usize) -> R<Vec<(u16, Value)>> {
    let calls = (0..n).map(|_| tokio::spawn(es::get(port, "/health", &[])));
    let mut out = Vec::new();
    for r in join_all(calls).await {
        let resp = r.map_err(|e| format!("health task: {e}"))??;
        let body = resp.json().unwrap_or_else(|| Value::String(resp.body.clone()));
        out.push((resp.status, body));
    }
    Ok(out)
}

/// Every answer of a burst must be `want`: fails with a summary (how many answered what).
fn check_burst(what: &str, answers: &[(u16, Value)], want: impl Fn(u16, &Value) -> bool) -> R {
    let bad: Vec<String> = answers
        .iter()
        .filter(|(s, v)| !want(*s, v))
        .map(|(s, v)| format!("{s} {}", crate::client::short(v)))
        .collect();
    check!(
        bad.is_empty(),
        "{what}: {} of {} concurrent /health calls answered otherwise, e.g. {:?}",
        bad.len(),
        answers.len(),
        bad.first()
    );
    Ok(())
}

async fn health_bursts(ctx: Ctx) -> R {
    for round in 1..=2 {
        // No cached report: this burst needs a run of its own.
        let before = until_cache_expired(&ctx).await;
        let started = Instant::now();
        let answers = burst(ctx.port, 40).await?;
        let took = started.elapsed();
        // A run's connect line is logged before it answers; give the log pipe a moment to
        // deliver it (an upper bound is checked, so there is no event to wait for).
        tokio::time::sleep(Duration::from_millis(300)).await;
        let opened = canary_connects(&ctx).len() - before;
        let ok = answers.iter().filter(|(s, _)| *s == 200).count();
        note(format!(
            "health burst {round}: 40 calls in {took:?}, {ok} answered 200, {opened} canary connection(s)"
        ));
        check_burst(&format!("burst {round}"), &answers, |s, v| check_green("", s, v).is_ok())?;
        check!(
            (1..=2).contains(&opened),
            "burst {round}: 40 concurrent /health calls (no report cached) should open 1 canary \
             connection (2 if another caller's run overlapped), opened {opened}"
        );
        // Every answer is the same report: one run served them all.
        let distinct: std::collections::BTreeSet<String> =
            answers.iter().map(|(_, v)| v["ms"].to_string()).collect();
        check!(
            distinct.len() <= opened,
            "burst {round}: {} distinct reports from {opened} run(s): {distinct:?}",
            distinct.len()
        );
    }
    Ok(())
}

async fn failed_report_reused(ctx: Ctx) -> R {
    // On this runtime the canary connects but its ping (over MAX_FRAME_BYTES=16) is closed with
    // 1009: every run fails at `pong`, after a connect line.
    let before = until_cache_expired(&ctx).await;
    let answers = burst(ctx.port, 20).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    note(format!(
        "failing canary burst: {} of 20 answered 503, {} canary connection(s)",
        answers.iter().filter(|(s, _)| *s == 503).count(),
        canary_connects(&ctx).len() - before
    ));
    check_burst("a failing canary (503 at step pong expected)", &answers, |s, v| {
        s == 503 && v["ok"] == false && v["step"] == "pong"
    })?;
    let opened = canary_connects(&ctx).len() - before;
    check!(
        (1..=2).contains(&opened),
        "20 concurrent /health calls with a failing canary should open 1 canary connection, opened {opened}"
    );
    // Asked again at once: the same failed report (same `ms`), no new socket.
    let first_ms = answers[0].1["ms"].clone();
    let after = canary_connects(&ctx).len();
    let (status, v) = health(ctx.port).await?;
    check!(
        status == 503 && v["step"] == "pong",
        "the failed report is reused: expected 503 at pong, got {status} {v}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = canary_connects(&ctx).len() - after;
    note(format!(
        "failed canary: {opened} connection(s) for 20 calls; reused report ms {} (first {first_ms}), {again} new",
        v["ms"]
    ));
    check!(
        again == 0 && v["ms"] == first_ms,
        "a /health right after a failed run should reuse its report: {again} new connection(s), report {v}"
    );
    Ok(())
}
