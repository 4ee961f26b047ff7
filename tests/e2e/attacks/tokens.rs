//! Attack 3, "a token is checked only at the upgrade" (issue 11): a member whose token expired,
//! or who was kicked, keeps their socket and keeps writing. The room now ends a connection at its
//! token's `exp` (4401 `token_expired`, by the alarm or at the next frame, which is not applied),
//! an operator kicks a user's every socket (4403 `kicked`) and blocks them for a while (4403
//! `blocked`), and the edge refuses tokens that would live too long (401 `token_lifetime`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::sessions::{refused, wait_leave, Raw, CLOSE_WAIT};
use crate::check;
use crate::client::{enc, Client, Dial};
use crate::edge_support::{
    self as es, admin, bearer_admin, check_refusal, now_secs, token, token_exp, TOKENS,
};
use crate::harness::Spec;
use crate::presence::read_until;
use crate::support::{self, check_contiguous, seq, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        es::on("attacks::tokens::a_connection_ends_at_its_tokens_exp", &TOKENS, ends_at_exp),
        es::on("attacks::tokens::a_frame_after_exp_is_not_applied", &TOKENS, frame_after_exp),
        es::on("attacks::tokens::kick_closes_every_socket_and_blocks", &TOKENS, kick),
        es::on(
            "attacks::tokens::a_blocked_socket_that_never_answers_its_close_stays_out_after_a_reload",
            &TOKENS,
            unanswered_close,
        ),
        es::on("attacks::tokens::long_lived_tokens_are_refused", &TOKENS, lifetime),
    ]
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Sleeps until the wall clock reads `at` (ms since the Unix epoch).
async fn sleep_until_ms(at: u64) {
    let now = now_ms();
    if at > now {
        tokio::time::sleep(Duration::from_millis(at - now)).await;
    }
}

/// (a) A token good for ~3 s: the welcome says when it ends, the alarm closes the socket then,
/// and the others see the member leave.
async fn ends_at_exp(ctx: Ctx) -> R {
    // The member must connect and publish before its `exp`, which is in the token, so chosen
    // before the connect: 3-4 s ahead (`exp` is in whole seconds) is usually plenty, but under
    // the whole suite's load a connect and a publish have taken longer (at +3, as little as 2 s
    // was left; a CI run at +4 had its publish arrive after `exp`, refused as late). Such a
    // setup proves nothing about the close: when the publish was refused and the clock says
    // `exp` had passed, it goes again, in a new room, with more time.
    with_time_to_spare("expiry", &[4, 7, 10], |ahead| exp_attempt(&ctx, ahead)).await
}

/// Runs `attempt` with `exp` each of `aheads` seconds out in turn until one had its setup in
/// before `exp` (`Some`): a setup the machine's load made late proves nothing, so it goes
/// again with more time.
async fn with_time_to_spare<F, Fut>(what: &str, aheads: &[u64], attempt: F) -> R
where
    F: Fn(u64) -> Fut,
    Fut: std::future::Future<Output = R<Option<()>>>,
{
    for &ahead in aheads {
        if attempt(ahead).await?.is_some() {
            return Ok(());
        }
        // Said always: a retry is the machine's load, and the log should show it.
        eprintln!(
            "e2e: tokens: {what}: the setup came after exp (+{ahead} s); again with more time"
        );
    }
    Err(format!("{what}: the member never got in before its exp, even {aheads:?} s ahead"))
}

/// Reads `raw` until the ack of publish `id` (`Some`), or `None` when the room closed it 4401
/// and the clock says `exp_ms` had passed: the publish came too late to prove anything.
async fn acked_before_exp(raw: &mut Raw, id: &str, exp_ms: u64) -> R<Option<()>> {
    loop {
        match raw.next(Duration::from_secs(10)).await? {
            Ok(f) if f["type"] == "ack" && f["id"] == id => return Ok(Some(())),
            Ok(_) => continue,
            Err(end) if now_ms() >= exp_ms && end.code == Some(4401) => return Ok(None),
            Err(end) => return Err(format!("closed before {id}'s ack: {end:?}")),
        }
    }
}

/// One try of [`ends_at_exp`] with `exp` `ahead` seconds from now: `None` when the member's
/// publish reached the room only after `exp` (the setup was too slow; nothing was checked).
async fn exp_attempt(ctx: &Ctx, ahead: u64) -> R<Option<()>> {
    let room = support::room("att-tok-exp");
    let mut observer = Dial::new(ctx.port, &room, &support::session("obs"))
        .token(&token(&room, "obs"))
        .connect()
        .await?;
    let exp = now_secs() + ahead;
    let short = support::session("short");
    let dial = Dial::new(ctx.port, &room, &short).token(&token_exp(&room, "ann", exp));
    let (mut raw, welcome) = match Raw::connect(&dial).await {
        Err(e) if now_ms() >= exp * 1000 && e.contains("token_expired") => return Ok(None),
        other => other?,
    };
    check!(welcome["expires"] == exp * 1000, "welcome.expires should be {}: {welcome}", exp * 1000);
    // Until then it is a member like any other: its publish is acked and the others get it.
    raw.send(json!({"type":"publish","id":"before","topic":"chat","data":1})).await?;
    if acked_before_exp(&mut raw, "before", exp * 1000).await?.is_none() {
        return Ok(None);
    }
    observer.message("before").await?;
    // From `exp` until the close arrives, the observer asks the same room for its state every
    // 100 ms: the slowest answer is how far behind the room's thread ran then. The alarm that
    // closes the socket runs on that thread, so it may be late by as much (a CI run with the
    // drain trial's 50-client storm beside this one saw the whole runtime answer ~2 s late and
    // the close come 2.4 s after `exp`), and by nothing more than the 2 s allowance besides.
    let closing = AtomicBool::new(false);
    let (end, lag) = tokio::join!(
        async {
            let end = raw.until_close(Duration::from_secs(8)).await;
            closing.store(true, Ordering::SeqCst);
            end.map(|e| (e, now_ms()))
        },
        async {
            sleep_until_ms(exp * 1000).await;
            let mut worst = 0;
            while !closing.load(Ordering::SeqCst) {
                let asked = now_ms();
                observer.get_state().await?;
                worst = worst.max(now_ms() - asked);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            R::Ok(worst)
        }
    );
    let ((end, closed_at), lag) = (end?, lag?);
    check!(
        end.code == Some(4401) && end.reason == "token_expired",
        "expected close 4401 token_expired, got {end:?}"
    );
    check!(
        closed_at >= exp * 1000 && closed_at <= exp * 1000 + 2000 + lag,
        "closed {} ms after exp (should be 0..2000 plus the room's slowest answer then, {lag} ms)",
        closed_at as i64 - (exp * 1000) as i64
    );
    wait_leave(&mut observer, &short, Duration::from_secs(5)).await?;
    observer.ping().await?;
    check!(observer.closed.is_none(), "the observer was closed: {:?}", observer.closed);
    let st = es::stats(ctx.port, &room).await?;
    check!(
        st["expired"] == 1 && st["members"] == 1 && st["connections"] == 1,
        "stats after the expiry: {st}"
    );
    // The same token no longer opens anything.
    let tok = token_exp(&room, "ann", exp);
    let path = format!("/rooms/{room}/ws?session={short}&token={}", enc(&tok));
    es::check_token_close("a reconnect with the expired token", ctx.port, &path, "token_expired")
        .await?;
    Ok(Some(()))
}

/// (b) A client keeps publishing across its `exp`, one frame every 10 ms: the room applies none
/// that arrives at or after `exp` (whether its alarm or the frame comes first), closes the socket
/// 4401, and nobody receives or stores a late write.
async fn frame_after_exp(ctx: Ctx) -> R {
    // 5-6 s ahead (`exp` is in whole seconds): the connect and the first publish must reach
    // the room before it (at +2, as little as 1 s was left, and a slow connect saw its first
    // publish refused as late; at +4, a run with the documents' 20,000-client chain trial
    // beside it saw the connect refused `token_expired`). A setup the machine's load made that
    // slow proves nothing: it goes again, in a new room, with more time (as `ends_at_exp`).
    with_time_to_spare("late frames", &[6, 9, 12], |ahead| late_attempt(&ctx, ahead)).await
}

/// One try of [`frame_after_exp`] with `exp` `ahead` seconds from now: `None` when the
/// member's connect or first publish reached the room only after `exp` (nothing was checked).
async fn late_attempt(ctx: &Ctx, ahead: u64) -> R<Option<()>> {
    let room = support::room("att-tok-late");
    let mut observer = Dial::new(ctx.port, &room, &support::session("obs"))
        .token(&token(&room, "obs"))
        .connect()
        .await?;
    let exp = now_secs() + ahead;
    let exp_ms = exp * 1000;
    let dial =
        Dial::new(ctx.port, &room, &support::session("late")).token(&token_exp(&room, "ann", exp));
    let (mut raw, welcome) = match Raw::connect(&dial).await {
        Err(e) if now_ms() >= exp_ms && e.contains("token_expired") => return Ok(None),
        other => other?,
    };
    raw.send(json!({"type":"publish","id":"ok1","topic":"chat","data":"in time"})).await?;
    if acked_before_exp(&mut raw, "ok1", exp_ms).await?.is_none() {
        return Ok(None);
    }
    let m = observer.message("ok1").await?;
    check!(seq(&m) == 1, "ok1 at seq {}", seq(&m));

    // 30 publishes, 10 ms apart, from 150 ms before exp to 150 ms after (under the rate limit).
    sleep_until_ms(exp_ms - 150).await;
    let mut sent = Vec::new(); // (id, sent at)
    let mut alarm_first = None;
    for i in 0..30 {
        sleep_until_ms(exp_ms - 150 + i * 10).await;
        let id = format!("p{i}");
        let at = now_ms();
        if raw.send(json!({"type":"publish","id":id,"topic":"chat","data":i})).await.is_err() {
            alarm_first.get_or_insert(at);
            break;
        }
        sent.push((id, at));
    }
    let end = raw.until_close(CLOSE_WAIT).await?;
    check!(
        end.code == Some(4401) && end.reason == "token_expired",
        "expected close 4401 token_expired, got {end:?} (frames: {:?})",
        raw.frames
    );
    let acked: Vec<String> = raw
        .frames
        .iter()
        .filter(|f| f["type"] == "ack")
        .filter_map(|f| f["id"].as_str().map(str::to_string))
        .collect();
    // A frame sent 20 ms or more after exp reached the room after exp: never acked.
    for (id, at) in &sent {
        if *at >= exp_ms + 20 {
            check!(!acked.contains(id), "{id}, sent {} ms after exp, was acked", at - exp_ms);
        }
    }
    let late_after: Vec<&(String, u64)> =
        sent.iter().filter(|(_, at)| *at >= exp_ms + 20).collect();
    check!(!late_after.is_empty(), "no publish was sent after exp (timing): {sent:?}");

    // What the room stored and delivered: only writes it applied before exp.
    let fresh = support::session("fresh");
    let mut check_client = Dial::new(ctx.port, &room, &fresh)
        .token(&token(&room, "fresh"))
        .since(0, welcome["epoch"].as_str().unwrap_or_default())
        .connect()
        .await?;
    let stored = check_client.welcome_seq();
    check!(
        stored == acked.len() as u64,
        "the room's seq is {stored}: one per acked publish expected ({acked:?})"
    );
    let sync = check_client.publish_acked("sync", "chat", json!("after")).await?;
    observer.message("sync").await?;
    let msgs = observer.messages();
    check_contiguous("observer", &msgs, 1)?;
    check!(msgs.len() as u64 == sync, "observer: {msgs:?}");
    for m in &msgs[..msgs.len() - 1] {
        let ts = m["ts"].as_u64().unwrap_or(u64::MAX);
        check!(ts < exp_ms, "a write stored at {ts}, at or after exp {exp_ms}: {m}");
        check!(
            m["user"] == "ann" && acked.iter().any(|a| m["id"] == a.as_str()),
            "a delivered write that was not acked: {m}"
        );
    }
    let st = es::stats(ctx.port, &room).await?;
    check!(st["expired"] == 1 && st["seq"] == sync, "stats: {st}");
    eprintln!(
        "attacks::tokens: exp {exp_ms}; {} publishes sent ({} at exp+20 ms or later), {} acked; the socket {}",
        sent.len(),
        late_after.len(),
        acked.len(),
        match alarm_first {
            Some(at) => format!("was already closed at {} ms after exp (the alarm came first)", at as i64 - exp_ms as i64),
            None => "took every frame; the room closed it".into(),
        }
    );
    Ok(Some(()))
}

async fn kick_req(ctx: &Ctx, room: &str, body: Value) -> R<Value> {
    let resp =
        admin(ctx.port, "POST", room, "kick", Some(&bearer_admin()), None, &body.to_string())
            .await?;
    es::json_200(&format!("POST /rooms/{room}/kick {body}"), &resp)
}

/// (c) The operator kicks a user with three sockets, then blocks them, then lifts the block.
async fn kick(ctx: Ctx) -> R {
    let room = support::room("att-tok-kick");
    let mut bystander = Dial::new(ctx.port, &room, &support::session("bob"))
        .token(&token(&room, "bob"))
        .connect()
        .await?;
    let mal = token(&room, "mallory");
    let sessions: Vec<String> = (0..3).map(|i| support::session(&format!("mal{i}"))).collect();
    let mut socks = Vec::new();
    for s in &sessions {
        socks.push(Raw::connect(&Dial::new(ctx.port, &room, s).token(&mal)).await?.0);
    }
    // The bystander sees all three join before the kick: a socket that came and went within
    // one presence window (`PRESENCE_WINDOW_MS`) is no news to it, and no leave would come.
    bystander.await_members(4).await?;

    let answer = kick_req(&ctx, &room, json!({"user":"mallory"})).await?;
    check!(answer == json!({"closed":3,"blocked_until":null}), "kick answered {answer}");
    for (i, sock) in socks.iter_mut().enumerate() {
        let end = sock.until_close(CLOSE_WAIT).await?;
        check!(
            end.code == Some(4403) && end.reason == "kicked",
            "mallory's socket {i}: expected 4403 kicked, got {end:?}"
        );
    }
    for s in &sessions {
        wait_leave(&mut bystander, s, CLOSE_WAIT).await?;
    }
    let s = bystander.publish_acked("still", "chat", json!("here")).await?;
    check!(s == 1, "the bystander's write at {s}");
    check!(bystander.closed.is_none(), "the bystander was closed: {:?}", bystander.closed);

    // A kick alone blocks nothing: mallory may come back...
    let (mut again, _) =
        Raw::connect(&Dial::new(ctx.port, &room, &sessions[0]).token(&mal)).await?;
    // ... until the operator blocks her: her socket goes, and so does every later connect.
    let before = now_ms();
    let answer = kick_req(&ctx, &room, json!({"user":"mallory","block_secs":60})).await?;
    let until = answer["blocked_until"].as_u64().unwrap_or(0);
    check!(
        answer["closed"] == 1 && until >= before + 59_000 && until <= now_ms() + 61_000,
        "kick with block_secs 60 answered {answer}"
    );
    let end = again.until_close(CLOSE_WAIT).await?;
    check!(end.code == Some(4403) && end.reason == "kicked", "the reconnected socket: {end:?}");
    for s in [sessions[1].clone(), support::session("mal-new")] {
        refused(&Dial::new(ctx.port, &room, &s).token(&mal), None, 4403, "blocked").await?;
    }
    let st = es::stats(ctx.port, &room).await?;
    check!(st["blocked_users"] == 1 && st["members"] == 1, "stats while blocked: {st}");

    let answer = kick_req(&ctx, &room, json!({"user":"mallory","block_secs":0})).await?;
    check!(answer == json!({"closed":0,"blocked_until":null}), "lifting answered {answer}");
    let (_back, w) = Raw::connect(&Dial::new(ctx.port, &room, &sessions[2]).token(&mal)).await?;
    check!(w["user"] == "mallory", "welcome after the block was lifted: {w}");
    bystander.ping().await?;
    check!(bystander.closed.is_none(), "the bystander was closed: {:?}", bystander.closed);
    Ok(())
}

/// (c') Mallory, kicked and blocked, never answers the close: her end of the socket stays
/// open, and the runtime still lists a socket it sent a close on. She waits until the room is
/// evicted (idle), then writes on that socket. The room loads again for her frame and must not
/// take her back as a member from the socket's record: nothing of hers is stored or reaches Bob,
/// and the member list does not name her.
async fn unanswered_close(ctx: Ctx) -> R {
    /// workerd evicts an idle object after about 10 s.
    const IDLE: Duration = Duration::from_secs(13);
    let room = support::room("att-tok-unanswered");
    let bob_token = token(&room, "bob");
    let mut bob =
        Dial::new(ctx.port, &room, &support::session("bob")).token(&bob_token).connect().await?;
    let mal = support::session("mal");
    let (mut mallory, _) =
        Raw::connect(&Dial::new(ctx.port, &room, &mal).token(&token(&room, "mallory"))).await?;
    bob.await_members(2).await?;
    // The idle time counts from the room's last work, so that work must be seen. A summary
    // changed within `summary_interval_ms` (2 s) of the last one waits for an alarm, which is
    // work Bob sees only when the counts differ from the last sent: before the fences, a CI run
    // saw the room still loaded 13 s after the leave. The summary of two, then the summary of one
    // after the kick (one alarm on), is the last the room does before mallory's frames.
    await_counted(&mut bob, 0, 2).await?;
    let mark = bob.history.len();
    let answer = kick_req(&ctx, &room, json!({"user":"mallory","block_secs":600})).await?;
    check!(answer["closed"] == 1, "kick answered {answer}");
    wait_leave(&mut bob, &mal, CLOSE_WAIT).await?;
    await_counted(&mut bob, mark, 1).await?;
    let seen = bob.history.len();
    let loads = ctx.log.room_loaded(&room).len();

    // Mallory reads nothing from here on: her side never sees the close, so never answers it.
    tokio::time::sleep(IDLE).await;
    let publish = json!({"type":"publish","id":"back","topic":"chat","data":"I am back"});
    mallory.send(publish).await?;
    mallory.send(json!({"type":"presence","state":{"name":"mallory"}})).await?;
    // Her frames had time to load the room (before the fix they did, and were taken).
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Bob's next write is the room's first: nothing of hers was stored before it.
    let s = bob.publish_acked("after", "chat", json!("bob")).await?;
    let loaded = ctx.log.wait_room_loaded(&room, loads + 1, Duration::from_secs(5)).await;
    check!(loaded.is_ok(), "the room was not evicted and loaded again: the trial shows nothing");
    let since: Vec<String> = bob.history[seen..].iter().map(Value::to_string).collect();
    let theirs: Vec<&String> = since.iter().filter(|f| f.contains("mallory")).collect();
    check!(
        s == 1 && theirs.is_empty(),
        "bob's write at {s}; what bob heard of mallory: {theirs:?}"
    );
    let resp = es::get(
        ctx.port,
        &format!("/rooms/{room}/presence"),
        &[("Authorization", &format!("Bearer {bob_token}"))],
    )
    .await?;
    let body = es::json_200("the member list", &resp)?;
    let names = body.to_string();
    check!(
        !names.contains("mallory") && body["summary"]["members"] == 1,
        "listed after the reload: {body}"
    );
    Ok(())
}

/// Waits for a `summary` frame of `members` members, or finds one in `c`'s history from `mark`.
async fn await_counted(c: &mut Client, mark: usize, members: u64) -> R {
    let counted = |f: &Value| f["type"] == "summary" && f["members"] == members;
    if !c.history[mark..].iter().any(counted) {
        read_until(c, &format!("a summary of {members} members"), CLOSE_WAIT, counted).await?;
    }
    Ok(())
}

/// (d) Tokens whose `exp` lies past TOKEN_MAX_TTL_SECS (default one day) are refused at the edge,
/// for connects and presence reads; one just inside the limit is accepted.
async fn lifetime(ctx: Ctx) -> R {
    let room = support::room("att-tok-life");
    let now = now_secs();
    let cases = [
        ("exp = 2^63", 1u64 << 63),
        ("exp = u64::MAX", u64::MAX),
        ("exp = now + 10 days", now + 10 * 86_400),
        ("exp = now + 1 day + 2 min", now + 86_400 + 120),
    ];
    for (what, exp) in cases {
        let tok = token_exp(&room, "longlived", exp);
        let ws = format!("/rooms/{room}/ws?session={}&token={}", support::session("ll"), enc(&tok));
        es::check_token_close(&format!("a connect with {what}"), ctx.port, &ws, "token_lifetime")
            .await?;
        let pres = format!("/rooms/{room}/presence?token={}", enc(&tok));
        let resp = es::get(ctx.port, &pres, &[]).await?;
        check_refusal(&format!("a presence read with {what}"), &resp, 401, "token_lifetime")?;
    }
    // Nothing above created the room.
    let resp = admin(ctx.port, "GET", &room, "stats", Some(&bearer_admin()), None, "").await?;
    check_refusal("stats after refused connects", &resp, 404, "room_not_found")?;
    // Just inside the limit: accepted, and the welcome says when it ends.
    let exp = now_secs() + 86_400 - 120;
    let c = Dial::new(ctx.port, &room, &support::session("ok"))
        .token(&token_exp(&room, "fine", exp))
        .connect()
        .await?;
    check!(c.welcome["expires"] == exp * 1000, "welcome: {}", c.welcome);
    Ok(())
}
