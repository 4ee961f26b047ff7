//! Attack 1, session takeover (issue 11): a member with a valid token of their own connects with
//! a session that belongs to another user (the victim's, read from the presence list) to close the
//! victim's socket (newest wins), wear its presence record, or have the victim's later writes
//! "deduplicated" against the attacker's. The room must close the attacker with 4409
//! `session_taken` before any welcome and leave the victim untouched: its socket, its presence
//! record (user and state), its ids, and no leave/join seen by anyone.
//!
//! Also the raw socket these attack trials use where the close *reason* matters (the test client
//! reports only the code): [`Raw`].

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::check;
use crate::client::{enc, Client, Dial, Event, Ws};
use crate::edge_support::{self as es, token, TOKENS};
use crate::harness::Spec;
use crate::support::{self, check_contiguous, seq, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        es::on("attacks::sessions::another_user_cannot_take_a_present_session", &TOKENS, present),
        es::on("attacks::sessions::the_victims_ids_stay_its_own", &TOKENS, ids_stay_own),
        es::on("attacks::sessions::walking_the_presence_list_closes_nobody", &TOKENS, walking),
        es::on("attacks::sessions::a_dropped_victim_keeps_its_session", &TOKENS, dropped_victim),
    ]
}

/// How long a refused connect may take to be closed.
pub(super) const CLOSE_WAIT: Duration = Duration::from_secs(10);

/// A bare WebSocket (no helpers between the test and the wire): every text frame it received
/// (batches flattened) and, once closed, the close code and reason.
pub(super) struct Raw {
    ws: Ws,
    /// Every frame received, in order (marks included; they are echoed when `echo_marks`).
    pub frames: Vec<Value>,
    pub echo_marks: bool,
}

/// How a [`Raw`] socket ended: the close frame's code and reason (`None`/empty: no close frame).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct End {
    pub code: Option<u16>,
    pub reason: String,
}

impl Raw {
    /// Opens the socket of `dial` (an HTTP refusal is an error) without reading anything.
    pub async fn open(dial: &Dial) -> R<Raw> {
        let ws = dial.socket(CLOSE_WAIT).await?;
        Ok(Raw { ws, frames: Vec::new(), echo_marks: true })
    }

    /// Opens and reads the first frame, which must be a `welcome`; returns it.
    pub async fn connect(dial: &Dial) -> R<(Raw, Value)> {
        let mut raw = Raw::open(dial).await?;
        match raw.next(CLOSE_WAIT).await? {
            Ok(w) if w["type"] == "welcome" => Ok((raw, w)),
            Ok(f) => Err(format!("{}: first frame is not a welcome: {f}", dial.url())),
            Err(end) => Err(format!("{}: closed before the welcome: {end:?}", dial.url())),
        }
    }

    pub async fn send(&mut self, frame: Value) -> R {
        self.ws.send(Message::text(frame.to_string())).await.map_err(|e| format!("send: {e}"))
    }

    /// The next frame (`Ok`), or how the socket ended (`Err`); a timeout is an error.
    pub async fn next(&mut self, timeout: Duration) -> R<Result<Value, End>> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut pending: Vec<Value> = Vec::new();
        loop {
            if !pending.is_empty() {
                let f = pending.remove(0);
                return Ok(Ok(f));
            }
            let msg = match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Err(_) => return Err(format!("no frame within {timeout:?}")),
                Ok(None) | Ok(Some(Err(_))) => {
                    return Ok(Err(End { code: None, reason: String::new() }))
                }
                Ok(Some(Ok(m))) => m,
            };
            match msg {
                Message::Text(t) => {
                    let v: Value = serde_json::from_str(t.as_str())
                        .map_err(|e| format!("a non-JSON text frame ({e}): {}", t.as_str()))?;
                    let frames = if v["type"] == "batch" {
                        v["frames"].as_array().cloned().unwrap_or_default()
                    } else {
                        vec![v]
                    };
                    for f in frames {
                        if f["type"] == "mark" && self.echo_marks {
                            let echo = json!({"type": "mark", "mark": f["mark"]});
                            let _ = self.ws.send(Message::text(echo.to_string())).await;
                        }
                        self.frames.push(f.clone());
                        pending.push(f);
                    }
                }
                Message::Close(frame) => {
                    let (code, reason) = match frame {
                        Some(f) => (Some(u16::from(f.code)), f.reason.as_str().to_string()),
                        None => (None, String::new()),
                    };
                    return Ok(Err(End { code, reason }));
                }
                Message::Binary(b) => return Err(format!("a binary frame ({} bytes)", b.len())),
                _ => {}
            }
        }
    }

    /// Reads until the socket ends (frames go to `frames`); returns how it ended.
    pub async fn until_close(&mut self, timeout: Duration) -> R<End> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await.map_err(|e| format!("waiting for the close: {e}"))? {
                Ok(_) => {}
                Err(end) => return Ok(end),
            }
        }
    }
}

/// Connects with `dial` and expects the room to close the socket with `code` and `reason`
/// before sending anything at all (no welcome, nothing of the room). `first` is sent right after
/// the upgrade, before the close can arrive (what an attacker would try to slip in).
pub(super) async fn refused(dial: &Dial, first: Option<Value>, code: u16, reason: &str) -> R {
    let mut raw = Raw::open(dial).await?;
    if let Some(f) = first {
        // The room may already have closed the socket: then the send fails, which is fine.
        let _ = raw.send(f).await;
    }
    let end = raw.until_close(CLOSE_WAIT).await?;
    check!(
        end.code == Some(code) && end.reason == reason,
        "{}: expected close {code} {reason:?}, got {end:?}",
        dial.url()
    );
    check!(
        raw.frames.is_empty(),
        "{}: a refused connect must receive nothing, got {:?}",
        dial.url(),
        raw.frames
    );
    Ok(())
}

/// `GET /rooms/{room}/presence` with `tok` (token mode) → the JSON.
pub(super) async fn presence_of(port: u16, room: &str, tok: &str) -> R<Value> {
    let resp = es::get(port, &format!("/rooms/{room}/presence?token={}", enc(tok)), &[]).await?;
    es::json_200(&format!("GET /rooms/{room}/presence"), &resp)
}

/// The `presence` frames in `frames` that mention `session` (a join or a leave).
pub(super) fn presence_about(frames: &[Value], session: &str) -> Vec<Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "presence")
        .filter(|f| {
            f["joins"].get(session).is_some()
                || f["leaves"].as_array().is_some_and(|l| l.iter().any(|s| s == session))
                || f["reset"] == true
        })
        .cloned()
        .collect()
}

/// A token-mode client of `room` for user `sub` with session `session`.
fn dial(ctx: &Ctx, room: &str, session: &str, sub: &str) -> Dial {
    Dial::new(ctx.port, room, session).token(&token(room, sub))
}

/// The victim (user `vic`, presence `{"name":"Victoria"}`, one write) and an observer (user `obs`)
/// who has seen that write.
async fn victim_and_observer(ctx: &Ctx, room: &str, vic: &str) -> R<(Client, Client)> {
    let mut observer = dial(ctx, room, &support::session("obs"), "obs").connect().await?;
    let mut victim = dial(ctx, room, vic, "vic").connect().await?;
    victim.send(json!({"type":"presence","state":{"name":"Victoria"}})).await?;
    let s1 = victim.publish_acked("m1", "chat", json!("hello from vic")).await?;
    check!(s1 == 1, "the victim's first write should be seq 1, got {s1}");
    let m = observer.message("m1").await?;
    check!(m["user"] == "vic" && m["session"] == vic, "the observer's m1: {m}");
    // The victim's join and state may wait for the end of a presence window (50 ms): what
    // the observer sees after this is the attack's doing.
    let victoria =
        |f: &Value| f["type"] == "presence" && f["joins"][vic]["state"]["name"] == "Victoria";
    if !observer.history.iter().any(victoria) {
        let wait = Duration::from_secs(5);
        crate::presence::read_until(&mut observer, "the victim's state", wait, victoria).await?;
    }
    Ok((victim, observer))
}

/// (a) The attacker connects with the victim's present session (read from `/presence`).
async fn present(ctx: Ctx) -> R {
    let room = support::room("att-sess-present");
    let vic = support::session("vic");
    let (mut victim, mut observer) = victim_and_observer(&ctx, &room, &vic).await?;
    let seen_before = observer.history.len();

    // The attacker finds the victim's session where anyone with a token can read it.
    let mallory = token(&room, "mallory");
    let listed = presence_of(ctx.port, &room, &mallory).await?;
    check!(listed["members"].get(&vic).is_some(), "the victim is listed: {listed}");
    let attack = Dial::new(ctx.port, &room, &vic).token(&mallory).via_sydney();
    refused(&attack, None, 4409, "session_taken").await?;

    // The victim's socket is untouched: a ping, and a fresh write acked and delivered.
    victim.ping().await?;
    let s2 = victim.publish_acked("m-fresh", "chat", json!("still me")).await?;
    check!(s2 == 2, "the victim's next write should be seq 2, got {s2}");
    let m = observer.message("m-fresh").await?;
    check!(
        m["user"] == "vic" && m["session"] == vic && m["data"] == "still me" && seq(&m) == 2,
        "the observer's copy of the victim's fresh write: {m}"
    );
    check!(victim.closed.is_none(), "the victim's socket was closed: {:?}", victim.closed);
    check_contiguous("observer", &observer.messages(), 1)?;

    // The presence record is the victim's, with its state and its region.
    let after = presence_of(ctx.port, &room, &token(&room, "obs")).await?;
    let member = &after["members"][&vic];
    check!(
        member["user"] == "vic"
            && member["state"] == json!({"name":"Victoria"})
            && member["region"] == victim.welcome["region"],
        "the victim's presence record after the attack: {after}"
    );
    let members = after["members"].as_object().map_or(0, |m| m.len());
    check!(
        members == 2 && after["summary"]["users"] == 2 && after["summary"]["connections"] == 2,
        "two members (victim and observer), two users, two connections: {after}"
    );
    // Nobody saw the victim leave or join again (or the member list reset).
    let about = presence_about(&observer.history[seen_before..], &vic);
    check!(about.is_empty(), "the observer saw presence changes for the victim: {about:?}");
    Ok(())
}

/// (b) The attacker slips a publish with the victim's next id into its refused connect: the
/// victim's own write with that id is stored and delivered, not answered with someone else's ack.
async fn ids_stay_own(ctx: Ctx) -> R {
    let room = support::room("att-sess-ids");
    let vic = support::session("vic");
    let (mut victim, mut observer) = victim_and_observer(&ctx, &room, &vic).await?;
    let attack = dial(&ctx, &room, &vic, "mallory");
    let forged = json!({"type":"publish","id":"m2","topic":"chat","data":"mallory was here"});
    refused(&attack, Some(forged), 4409, "session_taken").await?;

    let s2 = victim.publish_acked("m2", "chat", json!("vic's m2")).await?;
    check!(s2 == 2, "the victim's m2 should be a new write at seq 2, got {s2}");
    let m = observer.message("m2").await?;
    check!(m["data"] == "vic's m2" && m["user"] == "vic" && seq(&m) == 2, "the observer's m2: {m}");
    let own = victim.message("m2").await?;
    check!(own["data"] == "vic's m2", "the victim's own copy of m2: {own}");
    // Stored once, as the victim's: a fresh client replaying from 0 sees m1 and m2, the victim's.
    let mut fresh = dial(&ctx, &room, &support::session("late"), "late")
        .since(0, &victim.epoch())
        .connect()
        .await?;
    check!(
        fresh.welcome["resumed"] == true && fresh.welcome["missed"] == 2,
        "a replay from 0 should hold exactly m1 and m2: {}",
        fresh.welcome
    );
    fresh.message("m2").await?;
    let replay = fresh.messages();
    check_contiguous("replay", &replay, 1)?;
    let ok = replay.len() == 2
        && replay.iter().all(|m| m["user"] == "vic" && m["session"] == vic)
        && replay[1]["data"] == "vic's m2";
    check!(ok, "the stored log should be the victim's m1 and m2: {replay:?}");
    check!(victim.closed.is_none(), "the victim's socket was closed: {:?}", victim.closed);
    Ok(())
}

/// (c) The attacker walks the presence list of a room of 10 members: each try is refused and
/// nobody was closed.
async fn walking(ctx: Ctx) -> R {
    let room = support::room("att-sess-walk");
    let mut members = Vec::new();
    for i in 0..10 {
        let s = support::session(&format!("m{i}"));
        members.push(dial(&ctx, &room, &s, &format!("user{i}")).connect().await?);
    }
    // Everyone has seen everyone's join: later presence frames are the attack's doing.
    for m in members.iter_mut() {
        m.await_members(10).await?;
    }
    let marks: Vec<usize> = members.iter().map(|m| m.history.len()).collect();
    let mallory = token(&room, "mallory");
    let listed = presence_of(ctx.port, &room, &mallory).await?;
    let sessions: Vec<String> =
        listed["members"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    check!(sessions.len() == 10, "the presence list should show 10 members: {listed}");
    for s in &sessions {
        let attack = Dial::new(ctx.port, &room, s).token(&mallory);
        refused(&attack, None, 4409, "session_taken").await.map_err(|e| format!("{s}: {e}"))?;
    }
    // Every member still holds its socket and sees the others' writes; nobody saw a leave.
    let s = members[0].publish_acked("after", "chat", json!("all here?")).await?;
    for (i, m) in members.iter_mut().enumerate() {
        m.ping().await?;
        let got = m.message("after").await?;
        check!(seq(&got) == s, "member {i} got `after` at {}", seq(&got));
        check!(m.closed.is_none(), "member {i} was closed: {:?}", m.closed);
        let moved: Vec<&Value> =
            m.history[marks[i]..].iter().filter(|f| f["type"] == "presence").collect();
        check!(moved.is_empty(), "member {i} saw presence changes: {moved:?}");
    }
    let after = presence_of(ctx.port, &room, &mallory).await?;
    let still: Vec<String> =
        after["members"].as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default();
    check!(still == sessions, "the member list changed: {sessions:?} -> {still:?}");
    for s in &sessions {
        let user = &after["members"][s]["user"];
        check!(user != "mallory", "mallory wears {s}: {after}");
    }
    Ok(())
}

/// (d) The victim's connection drops (no close frame); the attacker tries its session at once,
/// then the victim comes back, resumes and retries a write.
async fn dropped_victim(ctx: Ctx) -> R {
    let room = support::room("att-sess-drop");
    let vic = support::session("vic");
    let (mut victim, mut observer) = victim_and_observer(&ctx, &room, &vic).await?;
    let s2 = victim.publish_acked("m2", "chat", json!("two")).await?;
    let epoch = victim.epoch();
    observer.message("m2").await?;
    victim.drop_tcp();
    let attack = dial(&ctx, &room, &vic, "mallory");
    refused(&attack, None, 4409, "session_taken").await?;
    // Something happens while the victim is away.
    let s3 = observer.publish_acked("o1", "chat", json!("while you were out")).await?;
    check!(s3 == s2 + 1, "o1 at {s3}, after m2 at {s2}");
    // The attacker tries again, now that the room surely saw the drop.
    // (The room may not have seen the drop yet; either way the session stays its user's.)
    let left = wait_leave(&mut observer, &vic, Duration::from_secs(3)).await.is_ok();
    refused(&attack, None, 4409, "session_taken").await?;

    let mut back = dial(&ctx, &room, &vic, "vic").since(s2, &epoch).connect().await?;
    check!(
        back.welcome["resumed"] == true
            && back.welcome["missed"] == 1
            && back.welcome["user"] == "vic",
        "the victim should resume with the one write it missed: {}",
        back.welcome
    );
    let missed = back.message("o1").await?;
    check!(seq(&missed) == s3, "the replayed o1: {missed}");
    // Its unacked-looking retry of m1 gets the original ack; nobody sees m1 twice.
    let again = back.publish_acked("m1", "chat", json!("hello from vic")).await?;
    check!(again == 1, "the retry of m1 should get its original seq 1, got {again}");
    let s4 = back.publish_acked("m3", "chat", json!("three")).await?;
    check!(s4 == s3 + 1, "m3 at {s4}: the retry must not have taken a seq");
    observer.message("m3").await?;
    check_contiguous("observer", &observer.messages(), 1)?;
    check!(observer.messages().len() as u64 == s4, "observer: {:?}", observer.messages());
    let after = presence_of(ctx.port, &room, &token(&room, "obs")).await?;
    // (Its presence state went with its leave, if the room saw the drop: a member that left
    // starts afresh; while present it would have kept it.)
    let record = &after["members"][&vic];
    check!(
        record["user"] == "vic"
            && (!left || record["state"] == json!({}))
            && (left || record["state"] == json!({"name":"Victoria"})),
        "the victim's presence record after it came back: {after} (it had left: {left})"
    );
    check!(after["members"].as_object().map_or(0, |m| m.len()) == 2, "members: {after}");
    Ok(())
}

/// Reads `c` until a `presence` frame (in its history already, or the next ones) lists
/// `session` among its leaves.
pub(super) async fn wait_leave(c: &mut Client, session: &str, timeout: Duration) -> R {
    let is_leave = |f: &Value| {
        f["type"] == "presence"
            && f["leaves"].as_array().is_some_and(|l| l.iter().any(|s| s == session))
    };
    if c.history.iter().any(is_leave) {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match c.next_event_within(left).await? {
            Event::Frame(f) if is_leave(&f) => return Ok(()),
            Event::Frame(_) => {}
            Event::Closed(code) => {
                return Err(format!("[{}] closed ({code:?}) waiting for a leave", c.session))
            }
        }
    }
}
