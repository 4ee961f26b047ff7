//! A forced Wasm reset inside a room (the test-only `fault-injection` build: `POST
//! /rooms/{room}/fault` panics in the room's object). Rust on wasm32 cannot unwind: a panic
//! resets the whole instance, every room it holds included. Nothing acked may be lost and no
//! member may be dropped: the next event rebuilds each room from SQLite and the attachments of
//! the sockets that stayed connected.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::check;
use crate::client::{Client, Dial};
use crate::edge_support::{self as es};
use crate::harness::Spec;
use crate::runtime::LazyRuntime;
use crate::support::{self, check_contiguous, id, seq, session_of, Ctx, R};

/// The `wrangler dev` arguments of a reset trial's runtime: tokens, the admin key, and `vars`.
fn with_vars(vars: &[&str]) -> Vec<String> {
    let mut args = vec![
        "--var".to_owned(),
        format!("AUTH_SECRET:{}", es::SECRET),
        "--var".to_owned(),
        format!("ADMIN_KEY:{}", es::ADMIN_KEY),
    ];
    for var in vars {
        args.extend(["--var".to_owned(), (*var).to_owned()]);
    }
    args
}

/// A runtime of its own: a reset takes every room of the instance with it, so a trial that
/// shares the runtime would see its rooms reload (and its requests in flight cancelled).
static RESET: LazyRuntime = LazyRuntime::new("wasm-reset", || with_vars(&[]));

/// Another, whose presence windows last 10 s: long enough that a join is surely still held
/// when the reset comes, however loaded the machine.
static RESET_WINDOW: LazyRuntime =
    LazyRuntime::new("wasm-reset-window", || with_vars(&["PRESENCE_WINDOW_MS:10000"]));

/// And another, whose flow windows are 4 KiB: a reader that reads nothing soon has frames
/// waiting for it in the room.
static RESET_QUEUE: LazyRuntime =
    LazyRuntime::new("wasm-reset-queue", || with_vars(&["SEND_WINDOW_BYTES:4096"]));

/// The same two, again, for the trials whose room hears nothing after the reset (each reset
/// trial has a runtime of its own, above).
static QUIET_WINDOW: LazyRuntime =
    LazyRuntime::new("wasm-reset-quiet-window", || with_vars(&["PRESENCE_WINDOW_MS:10000"]));
static QUIET_QUEUE: LazyRuntime =
    LazyRuntime::new("wasm-reset-quiet-queue", || with_vars(&["SEND_WINDOW_BYTES:4096"]));

pub fn trials() -> Vec<Spec> {
    vec![
        es::on(
            "wasm_reset::a_panic_in_a_room_loses_no_acked_write_and_no_member",
            &RESET,
            panic_in_a_room,
        ),
        es::on(
            "wasm_reset::a_join_held_in_a_presence_window_reaches_every_member_after_a_reset",
            &RESET_WINDOW,
            held_join,
        ),
        es::on(
            "wasm_reset::frames_waiting_for_a_reader_at_a_reset_reach_it_by_a_resume",
            &RESET_QUEUE,
            queued_frames,
        ),
        es::on(
            "wasm_reset::a_room_quiet_after_a_reset_settles_what_it_owed_by_itself",
            &QUIET_QUEUE,
            quiet_after_reset,
        ),
        es::on(
            "wasm_reset::a_join_held_at_a_reset_reaches_a_member_who_says_nothing",
            &QUIET_WINDOW,
            held_join_quiet,
        ),
    ]
}

/// How soon a room that owed something at a reset, and hears nothing after it, settles: the
/// look in JavaScript a second after it began to owe (`OWED_CHECK_MS`) sets its alarm for now,
/// and the alarm loads it. Without the look it waited for its next event: here, the heartbeat
/// sweep's alarm, 60 s away.
const SETTLED_WITHIN: Duration = Duration::from_secs(8);

/// How long the quiet trials let a room settle before the reset: past the alarm of its first
/// joins (a summary 2 s after a change), so that no alarm of its own is near when it resets.
const SETTLE: Duration = Duration::from_secs(3);

/// As `queued_frames`, but after the reset nobody sends or asks anything: the room loads by
/// itself and closes the reader 1012 to resume, well before its sweep would have.
async fn quiet_after_reset(ctx: Ctx) -> R {
    let room = support::room("reset-quiet");
    let mut publisher = dial(&ctx, &room, "publisher").await?;
    let mut reader = dial(&ctx, &room, "reader").await?;
    tokio::time::sleep(SETTLE).await;
    let pad = "p".repeat(3_000);
    for i in 0..6 {
        publisher.publish_acked(&format!("m{i}"), "chat", json!(pad)).await?;
    }
    let st = es::stats(ctx.port, &room).await?;
    check!(st["waiting_bytes"].as_u64().unwrap_or(0) > 0, "a frame waits for the reader: {st}");
    let loaded_before = ctx.log.room_loaded(&room).len();
    force_reset(&ctx, &room).await?;
    ctx.log.wait_room_loaded(&room, loaded_before + 1, SETTLED_WITHIN).await.map_err(|e| {
        format!("the room owed its reader frames and did not load again by itself: {e}")
    })?;
    let code = reader.expect_close(SETTLED_WITHIN).await?;
    check!(code == Some(1012), "the reader should be closed 1012 room_reset, got {code:?}");
    Ok(())
}

/// As `held_join`, but the observer says nothing after the reset: the held join reaches it in
/// a whole list before the 10 s window would have ended, though the window's timer went with the
/// instance.
async fn held_join_quiet(ctx: Ctx) -> R {
    let room = support::room("reset-window-quiet");
    let mut obs = dial(&ctx, &room, "observer").await?;
    tokio::time::sleep(SETTLE).await;
    let late = dial(&ctx, &room, "late").await?; // held for the end of the observer's window
    obs.get_state().await?;
    tokio::time::sleep(SETTLE).await;
    check!(obs.members_seen().len() == 1, "the late join is held: {:?}", obs.members_seen());
    force_reset(&ctx, &room).await?;
    let reset_at = std::time::Instant::now();
    tokio::time::timeout(SETTLED_WITHIN, obs.await_members(2))
        .await
        .map_err(|_| format!("no whole list within {SETTLED_WITHIN:?} of the reset"))??;
    let seen = obs.members_seen();
    check!(seen.contains(&late.session), "the observer's list after the reset: {seen:?}");
    let reset = obs.history.iter().find(|f| f["type"] == "presence" && f["reset"] == true);
    check!(reset.is_some(), "the newcomer came in a whole list: {:?}", obs.history);
    eprintln!(
        "e2e: wasm_reset: the held join reached the quiet observer {:?} after the reset",
        reset_at.elapsed()
    );
    Ok(())
}

/// A reader reads nothing while six messages of 3 KB go out: its 4 KiB flow window fills,
/// and the rest wait in the room for its echo of a mark. The instance resets: what waited
/// went with the memory. The next load finds that frames were owed (kept in JavaScript),
/// closes the room's sockets 1012 `room_reset`, and the reader resumes from what it read:
/// every message once, in order, without a gap (`room::tests::scenarios`, with the control
/// that shows the gap).
async fn queued_frames(ctx: Ctx) -> R {
    let room = support::room("reset-queued");
    let mut publisher = dial(&ctx, &room, "publisher").await?;
    let mut reader = dial(&ctx, &room, "reader").await?;
    let epoch = reader.epoch();
    let pad = "p".repeat(3_000);
    for i in 0..6 {
        publisher.publish_acked(&format!("m{i}"), "chat", json!(pad)).await?;
    }
    let st = es::stats(ctx.port, &room).await?;
    check!(st["waiting_bytes"].as_u64().unwrap_or(0) > 0, "a frame waits for the reader: {st}");
    force_reset(&ctx, &room).await?;
    // The next request loads the room again.
    let st = es::stats(ctx.port, &room).await?;
    check!(st["connections"] == 0, "the room's sockets were closed to resume: {st}");
    let code = reader.expect_close(Duration::from_secs(5)).await?;
    check!(code == Some(1012), "the reader should be closed 1012 room_reset, got {code:?}");
    let read: Vec<u64> =
        reader.history.iter().filter(|f| f["type"] == "message").map(seq).collect();
    let last = read.last().copied().unwrap_or(0);
    let session = reader.session.clone();
    let token = es::token(&room, "reader");
    let dial = Dial::new(ctx.port, &room, &session).token(&token).since(last, &epoch);
    let mut back = dial.connect().await?;
    check!(back.welcome["resumed"] == true, "the reader resumes: {}", back.welcome);
    let mut all = read.clone();
    while all.len() < 6 {
        all.push(seq(&back.expect_type("message").await?));
    }
    let want: Vec<u64> = (1..=6).collect();
    check!(all == want, "the reader's messages, before and after the resume: {all:?}");
    Ok(())
}

/// A member joins while a presence window holds the changes after the first (10 s here), and
/// the instance resets before the window ends: the held join went with the memory. The room's
/// next load finds that it owed presence (kept in JavaScript, which the reset does not reach)
/// and sends every member the whole list; without it the observer would never hear of the
/// newcomer (`room::tests::presence`, the control).
async fn held_join(ctx: Ctx) -> R {
    let room = support::room("reset-window");
    let mut obs = dial(&ctx, &room, "observer").await?; // its join opens a window
    let late = dial(&ctx, &room, "late").await?; // held for the window's end
    obs.get_state().await?; // what the room sent the observer before this answer is read
    check!(
        obs.members_seen().len() == 1,
        "the late join should still be held: {:?}",
        obs.members_seen()
    );
    let loaded_before = ctx.log.room_loaded(&room).len();
    force_reset(&ctx, &room).await?;
    // The held timer went with the instance: the observer's next frame loads the room again.
    obs.get_state().await?;
    ctx.log.wait_room_loaded(&room, loaded_before + 1, Duration::from_secs(5)).await?;
    obs.await_members(2).await?;
    let seen = obs.members_seen();
    check!(seen.contains(&late.session), "the observer's list after the reset: {seen:?}");
    let reset = obs.history.iter().find(|f| f["type"] == "presence" && f["reset"] == true);
    check!(reset.is_some(), "the newcomer came in a whole list: {:?}", obs.history);
    check!(obs.closed.is_none(), "the observer was disconnected: {:?}", obs.closed);
    Ok(())
}

const MEMBERS: usize = 4;
const PER_MEMBER: usize = 8;

/// The fault: `room`'s object panics mid-request, and the instance resets. The request itself
/// never gets an answer (the aborted promise is never settled), so it runs on its own while the
/// test goes on; returns it once the runtime logged the fault.
async fn force_reset(
    ctx: &Ctx,
    room: &str,
) -> R<tokio::task::JoinHandle<R<crate::http::Response>>> {
    let (port, faulty) = (ctx.port, room.to_owned());
    let fault = tokio::spawn(async move {
        es::admin(port, "POST", &faulty, "fault", Some(&es::bearer_admin()), None, "").await
    });
    es::wait_log(&ctx.log, "fault_injected", 1, Duration::from_secs(5), |v| v["room"] == room)
        .await?;
    Ok(fault)
}

async fn dial(ctx: &Ctx, room: &str, sub: &str) -> R<Client> {
    let token = es::token(room, sub);
    Dial::new(ctx.port, room, &support::session(sub)).token(&token).connect().await
}

async fn panic_in_a_room(ctx: Ctx) -> R {
    let room = support::room("reset");
    let other_room = support::room("reset-bystander");
    let mut members = Vec::new();
    for m in 0..MEMBERS {
        let mut c = dial(&ctx, &room, &format!("user{m}")).await?;
        c.send(json!({"type":"presence","state":{"name": format!("member {m}")}})).await?;
        members.push(c);
    }
    // A room that shares the instance and did nothing wrong.
    let mut bystander = dial(&ctx, &other_room, "bystander").await?;
    let before = bystander.publish_acked("b-1", "chat", json!("before")).await?;

    let mut acked: BTreeMap<(String, String), (u64, Value)> = BTreeMap::new();
    for n in 0..PER_MEMBER {
        for (m, c) in members.iter_mut().enumerate() {
            let id = format!("m{m}-{n}");
            let data = json!({"m": m, "n": n});
            let s = c.publish_acked(&id, "chat", data.clone()).await?;
            acked.insert((c.session.clone(), id), (s, data));
        }
    }
    let epoch = members[0].epoch();
    let loaded_before = ctx.log.room_loaded(&room).len();

    let fault = force_reset(&ctx, &room).await?;

    // Every member is still connected: each publishes again, and everyone gets every message.
    for (m, c) in members.iter_mut().enumerate() {
        let id = format!("after-{m}");
        let s = c.publish_acked(&id, "chat", json!({"after": m})).await?;
        acked.insert((c.session.clone(), id), (s, json!({"after": m})));
    }
    for c in members.iter_mut() {
        for m in 0..MEMBERS {
            c.message(&format!("after-{m}")).await?;
        }
        check!(c.closed.is_none(), "[{}] was disconnected by the reset", c.session);
    }
    let loaded = ctx.log.wait_room_loaded(&room, loaded_before + 1, Duration::from_secs(5)).await?;
    let last = loaded.last().unwrap();
    check!(last["sockets"] == MEMBERS, "the room came back with its sockets: {last}");
    check!(last["epoch"] == epoch.as_str(), "same epoch after the reset: {last}");

    // Presence: every member, with its state, exactly once.
    let resp = es::get(
        ctx.port,
        &format!("/rooms/{room}/presence?token={}", es::token(&room, "observer")),
        &[],
    )
    .await?;
    let presence = es::json_200("presence after the reset", &resp)?;
    let listed = presence["members"].as_object().cloned().unwrap_or_default();
    check!(listed.len() == MEMBERS, "{} members listed after the reset: {presence}", listed.len());
    for (m, c) in members.iter().enumerate() {
        let member = &listed.get(&c.session).cloned().unwrap_or(Value::Null);
        check!(
            member["state"]["name"] == format!("member {m}")
                && member["user"] == format!("user{m}"),
            "member {m} lost its presence record: {member}"
        );
    }
    check!(presence["summary"]["members"] == MEMBERS, "summary: {presence}");

    // The log: every acked write once, at its seq, in order, from a resume at 0.
    let mut reader =
        Dial::new(ctx.port, &room, &support::session("reader")).token(&es::token(&room, "reader"));
    reader = reader.since(0, &epoch);
    let mut reader = reader.connect().await?;
    check!(reader.welcome["resumed"] == true, "a resume from 0 replays: {}", reader.welcome);
    let total = reader.welcome_seq();
    let mut log = Vec::new();
    for _ in 0..total {
        log.push(reader.expect_type("message").await?);
    }
    check_contiguous("the log after the reset", &log, 1)?;
    check!(log.len() == acked.len(), "{} messages in the log, {} acked", log.len(), acked.len());
    for m in &log {
        let key = (session_of(m).to_string(), id(m).to_string());
        let Some((s, data)) = acked.get(&key) else {
            return Err(format!("a message nobody was acked for: {m}"));
        };
        check!(seq(m) == *s && m["data"] == *data, "{key:?} acked at {s} with {data}, stored {m}");
    }

    // The bystander's room lost nothing either.
    let next = bystander.publish_acked("b-2", "chat", json!("after")).await?;
    check!(next == before + 1, "the bystander's room continues at {}, got {next}", before + 1);
    // Whatever became of the fault request, it was not a success.
    if let Ok(Ok(Ok(resp))) = tokio::time::timeout(Duration::from_millis(100), fault).await {
        check!(resp.status != 200, "the fault request succeeded: {}", resp.body);
    }
    for c in members {
        c.close().await;
    }
    reader.close().await;
    bystander.close().await;
    Ok(())
}
