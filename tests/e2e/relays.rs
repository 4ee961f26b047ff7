//! Relays on the real runtime (issue 19): a room of a kind with relays, its members spread over
//! four regions by their `cf`, every connect through the relay of its region (`RELAY_ABOVE=0`),
//! and a runtime where a room crosses the threshold and runs mixed (direct and relayed).
//!
//! Locally every object of a Worker runs on one thread, so these show what crosses the links
//! and that every guarantee holds through them, not the parallel speed-up (bench/README.md).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::check;
use crate::client::{Client, Dial};
use crate::edge_support::{self as es, bearer_admin};
use crate::harness::Spec;
use crate::runtime::LazyRuntime;
use crate::support::{self, check_contiguous, id, seq, Ctx, R};

/// Every connect of every kind with relays goes through one (the auction as `rules::RULES`
/// has it, for its trials through relays).
pub static RELAYED: LazyRuntime = LazyRuntime::new("relayed", || {
    let mut args = runtime_args("0");
    args.extend(["--var", "AUCTION_PAUSE_SECONDS:0"].map(str::to_owned));
    args
});

/// A room relays its new connects from its fifth member on (and back below two).
static THRESHOLD: LazyRuntime = LazyRuntime::new("relay-threshold", || runtime_args("4"));

pub fn trials() -> Vec<Spec> {
    vec![
        es::on(
            "relays::four_regions_get_every_message_once_and_exact_presence",
            &RELAYED,
            four_regions,
        ),
        es::on("relays::a_room_over_the_threshold_runs_mixed", &THRESHOLD, mixed),
        es::on("relays::kick_drain_and_delete_reach_every_relay", &RELAYED, operator),
        es::on("relays::a_member_moving_regions_is_never_a_leave", &RELAYED, moving),
        es::on("relays::a_relay_reset_mid_burst_loses_nothing", &RESET, reset_mid_burst),
        es::on("relays::a_hung_relays_members_leave_within_the_lease", &RELAYED, hung_relay),
        es::on(
            "relays::a_relay_coalesces_its_members_cursors_past_batch_above",
            &BATCHING,
            cursors,
        ),
        es::on("relays::below_batch_above_a_relay_sends_every_cursor", &RELAYED, cursors_at_once),
        es::on("relays::a_home_that_forgets_gets_its_sessions_from_its_relays", &RELAYED, forget),
        es::on("relays::a_relay_that_loses_its_link_loses_no_member", &RELAYED, cut_link),
        es::on("relays::a_resume_catches_up_from_its_relays_tail", &RELAYED, tail_resume),
    ]
}

/// Relays from the first member, and coalescing from 20 frames asked for a second (the
/// default, 5,000, is beyond what three members may send).
static BATCHING: LazyRuntime = LazyRuntime::new("relay-batching", || {
    let mut args = runtime_args("0");
    args.extend(["--var", "BATCH_ABOVE:20"].map(str::to_owned));
    args
});

/// Its own runtime: locally a Wasm reset takes every object of the Worker with it.
static RESET: LazyRuntime = LazyRuntime::new("relay-reset", || runtime_args("0"));

/// Tokens, the admin key and `RELAY_ABOVE`.
fn runtime_args(relay_above: &str) -> Vec<String> {
    let vars = [
        format!("AUTH_SECRET:{}", es::SECRET),
        format!("ADMIN_KEY:{}", es::ADMIN_KEY),
        format!("RELAY_ABOVE:{relay_above}"),
    ];
    vars.into_iter().flat_map(|v| ["--var".to_owned(), v]).collect()
}

/// (colo, country, continent) and the region the Worker derives (the continent code).
pub const PLACES: [((&str, &str, &str), &str); 4] = [
    (("SYD", "AU", "OC"), "OC"),
    (("FRA", "DE", "EU"), "EU"),
    (("DFW", "US", "NA"), "NA"),
    (("GRU", "BR", "SA"), "SA"),
];

const PER_REGION: usize = 2;
const PER_MEMBER: usize = 5;

pub async fn dial(port: u16, room: &str, sub: &str, place: (&str, &str, &str)) -> R<Client> {
    Dial::new(port, room, &support::session(sub))
        .token(&es::token(room, sub))
        .via(place.0, place.1, place.2)
        .connect()
        .await
}

/// `GET /rooms/{room}/stats?relay=...` with the admin key.
pub async fn relay_stats(port: u16, room: &str, relay: &str) -> R<Value> {
    let what = format!("stats?relay={relay}");
    let resp = es::admin(port, "GET", room, &what, Some(&bearer_admin()), None, "").await?;
    es::json_200(&format!("GET /rooms/{room}/{what}"), &resp)
}

/// `GET /rooms/{room}/presence` as `observer`.
pub async fn presence(port: u16, room: &str) -> R<Value> {
    let path = format!("/rooms/{room}/presence?token={}", es::token(room, "observer"));
    let resp = es::get(port, &path, &[]).await?;
    es::json_200("presence", &resp)
}

async fn four_regions(ctx: Ctx) -> R {
    let room = support::room("relayed");
    let mut members = Vec::new();
    for (place, region) in PLACES {
        for i in 0..PER_REGION {
            let c = dial(ctx.port, &room, &format!("{region}-{i}"), place).await?;
            check!(c.welcome["region"] == region, "[{}] welcome region: {}", c.session, c.welcome);
            let relay = format!("{region}-0");
            check!(c.welcome["relay"] == relay.as_str(), "[{}] welcome: {}", c.session, c.welcome);
            // Made by the relay (link version 3) from the home's part and the room's parts:
            // all of them there.
            let w = &c.welcome;
            check!(
                w["room"] == room.as_str()
                    && w["limits"]["max_frame"].is_u64()
                    && w["expires"].is_u64()
                    && w["epoch"].is_string()
                    && w["presence"]["summary"]["members"].is_u64(),
                "[{}] welcome: {w}",
                c.session
            );
            members.push((region, c));
        }
    }
    // Every member publishes; each write is acked once and reaches everyone once, gapless.
    let mut acked: BTreeMap<String, u64> = BTreeMap::new();
    for n in 0..PER_MEMBER {
        for (region, c) in members.iter_mut() {
            let id = format!("{}-{n}", c.session);
            let s = c.publish_acked(&id, "chat", json!({"from": *region, "n": n})).await?;
            check!(acked.insert(id.clone(), s).is_none(), "{id} acked twice");
        }
    }
    let total = acked.len();
    for (_, c) in members.iter_mut() {
        for id in acked.keys() {
            c.message(id).await?;
        }
        let got = c.messages();
        let first = got.first().map(seq).unwrap_or(0);
        check_contiguous(&c.session, &got, first)?;
        let ids: std::collections::BTreeSet<&str> = got.iter().map(id).collect();
        check!(ids.len() == got.len(), "[{}] got a message twice: {}", c.session, got.len());
        for m in &got {
            check!(acked.get(id(m)) == Some(&seq(m)), "[{}] {m} is not what was acked", c.session);
        }
    }
    // Presence: every member once, four regions of two each.
    let p = presence(ctx.port, &room).await?;
    let listed = p["members"].as_object().cloned().unwrap_or_default();
    check!(listed.len() == members.len(), "{} members listed: {p}", listed.len());
    for (region, c) in &members {
        check!(listed[&c.session]["region"] == *region, "[{}] listed as {p}", c.session);
    }
    for (_, region) in PLACES {
        check!(
            p["summary"]["regions"][region]["members"] == PER_REGION,
            "summary of {region}: {p}"
        );
    }
    // The topology: one link per region, each carrying that region's members, none direct.
    let stats = es::stats(ctx.port, &room).await?;
    let links = stats["topology"]["links"].as_object().cloned().unwrap_or_default();
    check!(links.len() == PLACES.len(), "one link per region: {stats}");
    for (_, region) in PLACES {
        let (name, n) = links
            .iter()
            .find(|(l, _)| l.starts_with(&format!("{region}-0#")))
            .ok_or_else(|| format!("no link for {region}: {stats}"))?;
        check!(*n == PER_REGION, "link {name} carries {n}: {stats}");
        let r = relay_stats(ctx.port, &room, &format!("{region}-0")).await?;
        check!(r["clients"] == PER_REGION && r["link"] == "open", "relay {region}-0: {r}");
        check!(r["welcomes"] == PER_REGION, "relay {region}-0 made its members' welcomes: {r}");
        // One link message a turn, not one per member frame: fewer downs than frames sent.
        let frames = total * PER_REGION;
        let downs = r["down"].as_u64().unwrap_or(u64::MAX) as usize;
        check!(downs <= frames, "relay {region}-0 took {downs} messages for {frames} frames: {r}");
    }
    check!(stats["topology"]["relayed"] == members.len(), "relayed sessions: {stats}");
    // The home's own counters: nothing to a socket of its own (it holds none), and every
    // member frame it sent went in fewer link messages than frames.
    let io = &stats["io"];
    check!(io["socket_sends"] == 0, "the home sent to sockets of its own: {io}");
    let (out, heard) = (io["link_messages_out"].as_u64(), io["link_messages_in"].as_u64());
    check!(
        out.is_some_and(|n| n > 0 && (n as usize) < total * members.len()),
        "the home's link messages out, against {} frames: {io}",
        total * members.len()
    );
    check!(heard.is_some_and(|n| n > 0), "the home heard its links: {io}");
    // A signal: the member of the same relay gets it, every other member too, the sender not.
    let (_, sender) = &mut members[0];
    let from = sender.session.clone();
    sender.send(json!({"type":"signal","topic":"cursor","data":{"x":1}})).await?;
    for (_, c) in members.iter_mut().skip(1) {
        let s = c.until("the cursor signal", |f| f["type"] == "signal").await?;
        check!(s["session"] == from.as_str() && s["data"]["x"] == 1, "[{}] got {s}", c.session);
    }
    // A state write by a member of another relay, then the state asked for at OC: the OC relay
    // makes the reply from its mirror of the state (link version 3), with the write in it.
    let (_, writer) = &mut members[PER_REGION];
    let version = writer.set_acked("title-1", "title", json!("relayed"), None).await?;
    let (_, sender) = &mut members[0];
    sender.send(json!({"type":"get_state"})).await?;
    let state = sender.until("the state", |f| f["type"] == "state").await?;
    check!(
        state["state"]["title"] == json!({"value": "relayed", "version": version})
            && state["seq"].as_u64() >= Some(version),
        "the state from the OC relay: {state}"
    );
    check!(
        !sender.history.iter().any(|f| f["type"] == "signal"),
        "the sender got its own signal back; then {state}"
    );
    let oc = relay_stats(ctx.port, &room, "OC-0").await?;
    check!(oc["local_signals"] == 1, "the OC relay delivered the signal itself: {oc}");
    // The home sent it to each other relay once, for all of its members (link version 4), and
    // not back to OC.
    check!(oc["home_signals"] == 0, "the signal came back to the OC relay: {oc}");
    for (_, region) in &PLACES[1..] {
        let r = relay_stats(ctx.port, &room, &format!("{region}-0")).await?;
        check!(r["home_signals"] == 1, "relay {region}-0 took the signal once: {r}");
    }
    check!(oc["state_replies"] == 1, "the OC relay made the state reply: {oc}");
    let mirrored = es::stats(ctx.port, &room).await?;
    check!(
        mirrored["mirror_replies"] == 1 && mirrored["relay_welcomes"] == members.len(),
        "the home left the welcomes and the state reply to the relays: {mirrored}"
    );
    Ok(())
}

/// `RELAY_ABOVE=4`: the first four members are the home's own, the rest come through relays,
/// and everyone gets everyone's messages; a resume of a relayed member stays relayed.
async fn mixed(ctx: Ctx) -> R {
    let room = support::room("mixed");
    let mut members = Vec::new();
    for i in 0..7 {
        let (place, region) = PLACES[i % PLACES.len()];
        members.push(dial(ctx.port, &room, &format!("m{i}-{region}"), place).await?);
    }
    let stats = es::stats(ctx.port, &room).await?;
    check!(stats["topology"]["relayed"] == 3, "three of seven relayed: {stats}");
    for (i, c) in members.iter().enumerate() {
        // The first four are the home's own sockets: their welcome names no relay.
        let relayed = c.welcome.get("relay").is_some();
        check!(relayed == (i >= 4), "member {i}'s welcome: {}", c.welcome);
    }
    let mut ids = Vec::new();
    for (i, c) in members.iter_mut().enumerate() {
        let id = format!("x{i}");
        c.publish_acked(&id, "chat", json!(i)).await?;
        ids.push(id);
    }
    for c in members.iter_mut() {
        for id in &ids {
            c.message(id).await?;
        }
        let got = c.messages();
        check_contiguous(&c.session, &got, got.first().map(seq).unwrap_or(0))?;
    }
    // A relayed member drops and resumes: it misses nothing and lands on a relay again.
    let last = members.pop().expect("seven");
    let (session, epoch, at) = (last.session.clone(), last.epoch(), seq(&last.messages()[6]));
    drop(last);
    let after = members[0].publish_acked("while-away", "chat", json!("x")).await?;
    let (place, _) = PLACES[6 % PLACES.len()];
    let mut back = Dial::new(ctx.port, &room, &session)
        .token(&es::token(&room, "m6-NA"))
        .via(place.0, place.1, place.2)
        .since(at, &epoch)
        .connect()
        .await?;
    check!(back.welcome["resumed"] == true, "resumed: {}", back.welcome);
    let m = back.message("while-away").await?;
    check!(seq(&m) == after, "the missed message at its seq: {m}");
    let p = presence(ctx.port, &room).await?;
    check!(p["summary"]["members"] == 7, "seven members, never eight: {p}");
    one_relay_beside_the_homes_sockets(ctx).await
}

/// Four of the home's own sockets and two members at one relay (no other relay): a signal of
/// one relayed member reaches the other once. The home, with no other relay to send it to,
/// made it a plain broadcast, which went back over her relay's link.
async fn one_relay_beside_the_homes_sockets(ctx: Ctx) -> R {
    let room = support::room("mixed-echo");
    let mut direct = Vec::new();
    for i in 0..4 {
        direct.push(dial(ctx.port, &room, &format!("d{i}"), PLACES[1].0).await?);
    }
    let mut ann = dial(ctx.port, &room, "ann", PLACES[0].0).await?;
    let mut bob = dial(ctx.port, &room, "bob", PLACES[0].0).await?;
    check!(bob.welcome.get("relay").is_some(), "bob is relayed: {}", bob.welcome);
    ann.send(json!({"type":"signal","topic":"cursor","data":{"x":1}})).await?;
    // What the home sends after the signal comes after any copy of it.
    ann.publish_acked("after", "chat", json!(1)).await?;
    bob.message("after").await?;
    let signals: Vec<&Value> = bob.history.iter().filter(|f| f["type"] == "signal").collect();
    check!(signals.len() == 1, "bob got ann's one signal as {signals:?}");
    for d in direct.iter_mut() {
        d.message("after").await?;
        let n = d.history.iter().filter(|f| f["type"] == "signal").count();
        check!(n == 1, "[{}] got ann's signal {n} times", d.session);
    }
    Ok(())
}

/// `DELETE /rooms/{room}` with the admin key.
async fn delete_room(port: u16, room: &str) -> R<crate::http::Response> {
    let auth = bearer_admin();
    let h = [("Authorization", auth.as_str()), ("Accept-Encoding", "identity")];
    crate::http::call(port, "DELETE", &format!("/rooms/{room}"), &h, "", es::T).await
}

/// The relay's stats once it has stopped (or the last ones seen, after [`es::T`]).
async fn stopped(port: u16, room: &str, relay: &str) -> R<Value> {
    let until = std::time::Instant::now() + es::T;
    loop {
        let r = relay_stats(port, room, relay).await?;
        if r["running"] == false || std::time::Instant::now() > until {
            return Ok(r);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Connects two members per region; returns them with their regions.
async fn spread(port: u16, room: &str, prefix: &str) -> R<Vec<(&'static str, Client)>> {
    let mut members = Vec::new();
    for (place, region) in PLACES {
        for i in 0..PER_REGION {
            members
                .push((region, dial(port, room, &format!("{prefix}{region}-{i}"), place).await?));
        }
    }
    Ok(members)
}

/// The operator's kick, drain and delete, each reaching members held by relays.
async fn operator(ctx: Ctx) -> R {
    let room = support::room("relay-op");
    let mut members = spread(ctx.port, &room, "op").await?;
    // Kick one user (held by the NA relay): only their socket closes, with 4403.
    let kicked = "opNA-1";
    let body = json!({"user": kicked}).to_string();
    let resp =
        es::admin(ctx.port, "POST", &room, "kick", Some(&bearer_admin()), None, &body).await?;
    let v = es::json_200("kick", &resp)?;
    check!(v["closed"] == 1, "kick closed {v}");
    let at =
        members.iter().position(|(_, c)| c.session.starts_with("s_opNA-1")).ok_or("no NA-1")?;
    let (_, mut victim) = members.remove(at);
    check!(victim.expect_close(es::T).await? == Some(4403), "the kicked member's close");
    // Everyone else is still in: a write reaches them all.
    let (_, writer) = &mut members[0];
    writer.publish_acked("after-kick", "chat", json!(1)).await?;
    for (_, c) in members.iter_mut() {
        c.message("after-kick").await?;
    }
    let p = presence(ctx.port, &room).await?;
    check!(p["summary"]["members"] == members.len(), "the kicked member left: {p}");
    // Drain: every relayed member gets 1001, and their welcomes told them the pace to come
    // back at (the client spreads a reconnect over members / `reconnect_rate` seconds).
    for (_, c) in &members {
        let rate = &c.welcome["limits"]["reconnect_rate"];
        check!(rate == 100, "[{}] the welcome's reconnect_rate: {rate}", c.session);
    }
    let resp = es::admin(ctx.port, "POST", &room, "drain", Some(&bearer_admin()), None, "").await?;
    let v = es::json_200("drain", &resp)?;
    check!(v["closed"] == members.len(), "drain closed {v}");
    for (_, c) in members.iter_mut() {
        check!(c.expect_close(es::T).await? == Some(1001), "[{}] drained", c.session);
    }
    // Delete: members back in, then the room goes, closing them 4404; the relays go idle.
    let mut members = spread(ctx.port, &room, "del").await?;
    let resp = delete_room(ctx.port, &room).await?;
    let v = es::json_200("delete", &resp)?;
    check!(v["deleted"] == true && v["closed"] == members.len(), "delete: {v}");
    for (_, c) in members.iter_mut() {
        check!(c.expect_close(es::T).await? == Some(4404), "[{}] deleted", c.session);
    }
    for (_, region) in PLACES {
        let relay = format!("{region}-0");
        let r = stopped(ctx.port, &room, &relay).await?;
        check!(r["running"] == false, "relay {relay} stopped with its room: {r}");
    }
    // And the room stays gone: a relay's link closing after the delete loaded it again, empty
    // and nameless, for its retention (`/stats` answered 200 about 10 s later).
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let resp = es::admin(ctx.port, "GET", &room, "stats", Some(&bearer_admin()), None, "").await?;
    check!(
        resp.status == 404,
        "the deleted room's stats after its relays stopped: {}",
        resp.status
    );
    Ok(())
}

/// A session that moves from one region to another: the old relay closes its socket (4001),
/// the room counts one member, now in the new region, and an observer sees no leave.
async fn moving(ctx: Ctx) -> R {
    let room = support::room("relay-move");
    let (eu, oc) = (PLACES[1], PLACES[0]);
    let mut watcher = dial(ctx.port, &room, "watcher", eu.0).await?;
    let mut mover = dial(ctx.port, &room, "mover", eu.0).await?;
    let at = mover.publish_acked("before-move", "chat", json!(1)).await?;
    let moved = Dial::new(ctx.port, &room, &mover.session)
        .token(&es::token(&room, "mover"))
        .via(oc.0 .0, oc.0 .1, oc.0 .2)
        .since(at, &mover.epoch())
        .connect()
        .await?;
    check!(moved.welcome["region"] == oc.1, "the new socket is in OC: {}", moved.welcome);
    check!(mover.expect_close(es::T).await? == Some(4001), "the old socket is superseded");
    let p = presence(ctx.port, &room).await?;
    check!(p["summary"]["members"] == 2, "two members, the mover once: {p}");
    check!(p["members"][&mover.session]["region"] == oc.1, "the mover is in OC now: {p}");
    watcher.send(json!({"type":"get_state"})).await?;
    watcher.until("the state", |f| f["type"] == "state").await?;
    let leaves: Vec<&Value> = watcher
        .history
        .iter()
        .filter(|f| f["type"] == "presence")
        .flat_map(|f| f["leaves"].as_array().into_iter().flatten())
        .collect();
    check!(leaves.is_empty(), "a move is not a leave: {leaves:?}");
    Ok(())
}

/// A forced Wasm reset of a relay while every member publishes: the relays' clients are
/// closed (1012) or their sockets break, they resume and resend what was not acked, and the
/// log holds every acked write once, gapless. Locally every object of the Worker shares one
/// Wasm instance, so this resets the home too (the simulator shows a relay-only reset).
async fn reset_mid_burst(ctx: Ctx) -> R {
    let room = support::room("relay-reset");
    let mut writers = Vec::new();
    // Each writer says when it is a quarter into its burst: the reset comes mid-burst, not
    // mid-connect (a connect in flight when the Wasm instance resets hangs until the runtime
    // cancels it with a 500, which is not what this trial is about). Its last write waits
    // for the reset, so that however fast the rest went, at least that one meets it.
    let (welcomed, mut all_in) = tokio::sync::mpsc::channel::<()>(PLACES.len());
    let (reset, after_reset) = tokio::sync::watch::channel(false);
    for (i, (place, region)) in PLACES.iter().enumerate() {
        let sub = format!("w{i}-{region}");
        let gates = (welcomed.clone(), after_reset.clone());
        writers.push(tokio::spawn(burst(ctx.port, room.clone(), sub, *place, gates)));
    }
    drop(welcomed);
    for k in 0..PLACES.len() {
        let got = tokio::time::timeout(es::T, all_in.recv()).await;
        check!(matches!(got, Ok(Some(()))), "only {k} of {} writers were under way", PLACES.len());
    }
    let port = ctx.port;
    let faulty = room.clone();
    tokio::spawn(async move {
        let what = "fault?relay=EU-0";
        es::admin(port, "POST", &faulty, what, Some(&bearer_admin()), None, "").await
    });
    es::wait_log(&ctx.log, "fault_injected", 1, es::T, |v| v["relay"] == "EU-0").await?;
    let _ = reset.send(true);
    let mut acked: BTreeMap<String, u64> = BTreeMap::new();
    let mut resumes = 0;
    for w in writers {
        let (got, resumed) = w.await.map_err(|e| e.to_string())??;
        resumes += resumed;
        for (id, s) in got {
            check!(acked.insert(id.clone(), s).is_none(), "{id} acked by two writers");
        }
    }
    crate::presence::note(format!("relay reset: {} acked, {resumes} resumes", acked.len()));
    check!(resumes >= 1, "nobody had to resume: the reset did not reach the relays");
    // The stored log (the operator's read): every acked write once at its seq, nothing else.
    let what = "log?since=0&limit=1000";
    let resp = es::admin(ctx.port, "GET", &room, what, Some(&bearer_admin()), None, "").await?;
    let log = es::json_200("the log", &resp)?["messages"].as_array().cloned().unwrap_or_default();
    check_contiguous("the log after the reset", &log, 1)?;
    check!(log.len() == acked.len(), "{} in the log, {} acked", log.len(), acked.len());
    for m in &log {
        check!(acked.get(id(m)) == Some(&seq(m)), "{m} is not what was acked");
    }
    Ok(())
}

/// Publishes `BURST` messages, one at a time, resuming and resending whatever was not acked
/// when the socket closes; returns what was acked (id → seq) and how many resumes it took.
async fn burst(
    port: u16,
    room: String,
    sub: String,
    place: (&'static str, &'static str, &'static str),
    (under_way, mut after_reset): (
        tokio::sync::mpsc::Sender<()>,
        tokio::sync::watch::Receiver<bool>,
    ),
) -> R<(BTreeMap<String, u64>, usize)> {
    const BURST: usize = 40;
    let session = support::session(&sub);
    let token = es::token(&room, &sub);
    let dial = |since: Option<(u64, String)>| {
        let mut d = Dial::new(port, &room, &session).token(&token).via(place.0, place.1, place.2);
        if let Some((s, e)) = since {
            d = d.since(s, &e);
        }
        d.connect()
    };
    let mut c = dial(None).await?;
    let (mut epoch, mut applied) = (c.epoch(), c.welcome_seq());
    let mut acked = BTreeMap::new();
    let mut resumes = 0;
    let (mut n, mut told) = (0, false);
    while n < BURST {
        if n == BURST / 4 && !told {
            told = true;
            let _ = under_way.send(()).await;
        }
        if n == BURST - 1 {
            let _ = tokio::time::timeout(es::T, after_reset.wait_for(|r| *r)).await;
        }
        let id = format!("{sub}-{n}");
        match c.publish_acked(&id, "chat", json!(n)).await {
            Ok(s) => {
                acked.insert(id, s);
                n += 1;
            }
            Err(_) if resumes < 10 => {
                // Resume from what was applied; the resend of `id` is deduplicated if it
                // was stored before the reset.
                applied = c.messages().last().map(seq).unwrap_or(applied).max(applied);
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                c = match dial(Some((applied, epoch.clone()))).await {
                    Ok(c) => c,
                    Err(_) => continue,
                };
                epoch = c.epoch();
                resumes += 1;
            }
            Err(e) => return Err(format!("[{sub}] {e} after {resumes} resumes")),
        }
    }
    Ok((acked, resumes))
}

/// A relay that hangs with its link open (test builds: it forwards nothing and stops pinging
/// its link): the home's lease expires its link, and its members, away for what is left of
/// their grace, leave for the others 15 s after its last sign of life, with no ghost left; the home closes the link, the relay closes
/// its clients (1012), and they come back through a new instance.
async fn hung_relay(ctx: Ctx) -> R {
    let room = support::room("relay-hung");
    let (oc, eu) = (PLACES[0].0, PLACES[1].0);
    let mut watcher = dial(ctx.port, &room, "watcher", oc).await?;
    let mut member = dial(ctx.port, &room, "member", eu).await?;
    let gone = member.session.clone();
    let t = std::time::Duration::from_secs(10);
    let joined = |f: &Value| f["type"] == "presence" && f["joins"].get(&gone).is_some();
    presence_frame(&mut watcher, t, joined).await.map_err(|e| format!("the member's join: {e}"))?;
    let what = "mute?relay=EU-0";
    let resp = es::admin(ctx.port, "POST", &room, what, Some(&bearer_admin()), None, "").await?;
    check!(resp.status == 200, "mute: {} {}", resp.status, resp.body);
    let muted = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(25);
    let left = |f: &Value| {
        f["type"] == "presence"
            && f["leaves"].as_array().is_some_and(|l| l.iter().any(|s| s == gone.as_str()))
    };
    presence_frame(&mut watcher, limit, left).await.map_err(|e| format!("the leave: {e}"))?;
    let after = muted.elapsed();
    crate::presence::note(format!("hung relay: its member left {after:?} after the hang"));
    // The lease (10 s, looked at every 5 s) closes the link, and its members' grace counts
    // from its last sign of life, at or before the hang: they leave 15 s after it at the
    // latest (and 2 s for the runtime's timers on a busy machine).
    check!(after <= std::time::Duration::from_secs(17), "the leave came {after:?} after the hang");
    check!(
        !ctx.log.events("link_expired").is_empty(),
        "the home's lease did not expire the link (the leave came another way)"
    );
    let p = presence(ctx.port, &room).await?;
    check!(p["members"].get(&gone).is_none(), "a ghost is listed: {p}");
    check!(member.expect_close(es::T).await? == Some(1012), "the hung relay's client closed 1012");
    let back = Dial::new(ctx.port, &room, &gone)
        .token(&es::token(&room, "member"))
        .via(eu.0, eu.1, eu.2)
        .connect()
        .await?;
    check!(back.welcome["relay"] == "EU-0", "back through EU-0: {}", back.welcome);
    let p = presence(ctx.port, &room).await?;
    check!(p["summary"]["members"] == 2, "the member is back, once: {p}");
    Ok(())
}

/// The next presence frame (which `Client::next` passes over) that `pred` takes, within `limit`.
async fn presence_frame(
    c: &mut Client,
    limit: std::time::Duration,
    pred: impl Fn(&Value) -> bool,
) -> R<Value> {
    let until = std::time::Instant::now() + limit;
    loop {
        let left = until.checked_duration_since(std::time::Instant::now()).ok_or("timed out")?;
        match c.next_event_within(left).await? {
            crate::client::Event::Frame(f) if pred(&f) => return Ok(f),
            crate::client::Event::Frame(_) => {}
            crate::client::Event::Closed(code) => return Err(format!("closed ({code:?})")),
        }
    }
}

/// In a room under `BATCH_ABOVE` (the default), Ann's 10 cursor signals sent back to back
/// reach Bob at her relay every one, in order: nothing waits for a window, nothing coalesces.
async fn cursors_at_once(ctx: Ctx) -> R {
    let room = support::room("relay-cursors-at-once");
    let eu = PLACES[1].0;
    let mut ann = dial(ctx.port, &room, "ann", eu).await?;
    let mut bob = dial(ctx.port, &room, "bob", eu).await?;
    ann.publish_acked("ready", "chat", json!(0)).await?;
    bob.message("ready").await?;
    let sent = 10;
    for i in 0..sent {
        ann.feed(json!({"type":"signal","topic":"cursor","data":{"i": i}})).await?;
    }
    ann.flush().await?;
    let mut is = Vec::new();
    while is.len() < sent as usize {
        let f = bob.until("bob: ann's cursors", |f| f["type"] == "signal").await?;
        is.push(f["data"]["i"].as_u64().ok_or_else(|| format!("a signal without i: {f}"))?);
    }
    check!(is == (0..sent).collect::<Vec<u64>>(), "bob got ann's cursors as {is:?}");
    let stats = relay_stats(ctx.port, &room, "EU-0").await?;
    check!(stats["signals_coalesced"].as_u64() == Some(0), "the relay coalesced: {stats}");
    Ok(())
}

/// Past `BATCH_ABOVE` (20 frames asked for a second in this runtime), Ann moves her cursor as
/// fast as her rate allows, 40 signals sent back to back, with Bob at her relay and Cat at
/// another: the relay delivers the first ones to Bob at once and, once past the threshold,
/// coalesces the rest inside its 50 ms window to her latest (as the home does for its own
/// sockets), so Bob gets fewer signals than she sent, in order, ending with her last; Cat gets
/// her last through the home; Ann gets none of her own.
async fn cursors(ctx: Ctx) -> R {
    let room = support::room("relay-cursors");
    let (eu, na) = (PLACES[1].0, PLACES[2].0);
    let mut ann = dial(ctx.port, &room, "ann", eu).await?;
    let mut bob = dial(ctx.port, &room, "bob", eu).await?;
    let mut cat = dial(ctx.port, &room, "cat", na).await?;
    // Everyone has seen everyone join: what follows is the burst only.
    ann.publish_acked("ready", "chat", json!(0)).await?;
    for c in [&mut bob, &mut cat] {
        c.message("ready").await?;
    }
    let sent = 40;
    for i in 0..sent {
        ann.feed(json!({"type":"signal","topic":"cursor","data":{"i": i}})).await?;
    }
    ann.flush().await?;
    let last = sent - 1;
    let mut seen = Vec::new();
    for (who, c) in [("bob", &mut bob), ("cat", &mut cat)] {
        let mut is = Vec::new();
        while is.last() != Some(&last) {
            let f =
                c.until(&format!("{who}: ann's latest cursor"), |f| f["type"] == "signal").await?;
            is.push(f["data"]["i"].as_u64().ok_or_else(|| format!("a signal without i: {f}"))?);
        }
        check!(is.windows(2).all(|w| w[0] < w[1]), "{who}: ann's signals out of order: {is:?}");
        seen.push(is);
    }
    let stats = relay_stats(ctx.port, &room, "EU-0").await?;
    crate::presence::note(format!(
        "cursor burst of {sent}: bob got {}, cat {}; EU-0 {stats}",
        seen[0].len(),
        seen[1].len()
    ));
    check!(
        (seen[0].len() as u64) < sent,
        "bob got all {sent} of ann's signals: nothing coalesced ({stats})"
    );
    check!(stats["signals_coalesced"].as_u64() > Some(0), "the relay coalesced nothing: {stats}");
    ann.publish_acked("done", "chat", json!(1)).await?;
    check!(!ann.history.iter().any(|f| f["type"] == "signal"), "ann got a signal of her own back");
    Ok(())
}

/// `POST /rooms/{room}/forget` (test builds): the home drops its memory as an eviction would.
pub async fn forget_home(port: u16, room: &str) -> R {
    let resp = es::admin(port, "POST", room, "forget", Some(&bearer_admin()), None, "").await?;
    let body = es::json_200("forget", &resp)?;
    check!(body["forgot"] == true, "the home had nothing in memory to forget: {body}");
    Ok(())
}

/// The home loses its memory while its relays' links stay open (an eviction): it stores none
/// of their sessions, asks the relays, and has them all back, on the same sockets, with no
/// welcome again and no leave; a member whose frame reaches the home before her relay's
/// answer waits for it, is not closed, and her write is stored once.
async fn forget(ctx: Ctx) -> R {
    let room = support::room("relay-forget");
    let mut members = Vec::new();
    for (place, region) in PLACES {
        for i in 0..PER_REGION {
            members.push(dial(ctx.port, &room, &format!("{region}-f{i}"), place).await?);
        }
    }
    let first = members[0].publish_acked("before", "chat", json!(0)).await?;
    forget_home(ctx.port, &room).await?;
    // Any request loads the room again: it asks its four links for their sessions.
    let deadline = std::time::Instant::now() + es::T;
    let stats = loop {
        let stats = es::stats(ctx.port, &room).await?;
        if stats["topology"]["relayed"] == members.len() || std::time::Instant::now() > deadline {
            break stats;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    check!(
        stats["topology"]["relayed"] == members.len(),
        "the relays' sessions came back: {stats}"
    );
    for (_, region) in PLACES {
        let r = relay_stats(ctx.port, &room, &format!("{region}-0")).await?;
        check!(r["recalls"].as_u64() >= Some(1), "relay {region}-0 was asked for them: {r}");
    }
    let p = presence(ctx.port, &room).await?;
    check!(p["summary"]["members"] == members.len(), "every member once: {p}");
    // The same sockets carry on: each member writes and everyone gets every write once.
    let mut acked = BTreeMap::new();
    for (i, c) in members.iter_mut().enumerate() {
        let id = format!("after-{i}");
        acked.insert(id.clone(), c.publish_acked(&id, "chat", json!(i)).await?);
    }
    for c in members.iter_mut() {
        for id in acked.keys() {
            c.message(id).await?;
        }
        let got = c.messages();
        check_contiguous(&c.session, &got, first)?;
        check!(got.len() == acked.len() + 1, "[{}] {} messages: {got:?}", c.session, got.len());
        let leaves = c.history.iter().filter(|f| f["type"] == "presence");
        let leaves: Vec<&Value> =
            leaves.flat_map(|f| f["leaves"].as_array().into_iter().flatten()).collect();
        check!(leaves.is_empty(), "[{}] saw a leave: {leaves:?}", c.session);
    }
    // Forgotten again, and her write is likely the first thing the home hears: it does not
    // know her yet, keeps the frame until her relay has given her back, and acks it on the
    // socket she has (as when her write is what wakes a hibernated home). Stored once.
    forget_home(ctx.port, &room).await?;
    let mut again = members.remove(3);
    let early = again.publish_acked("early", "chat", json!("early")).await?;
    again.message("early").await?;
    for c in members.iter_mut().filter(|c| c.session != again.session) {
        c.message("early").await?;
        let n = c.messages().iter().filter(|m| id(m) == "early").count();
        check!(n == 1 && c.messages().last().map(seq) == Some(early), "[{}] early: {n}", c.session);
    }
    let p = presence(ctx.port, &room).await?;
    check!(p["summary"]["members"] == PLACES.len() * PER_REGION, "every member once, after: {p}");
    Ok(())
}

/// The leaves among the presence frames `c` has had so far.
fn leaves_seen(c: &Client) -> Vec<String> {
    c.history
        .iter()
        .filter(|f| f["type"] == "presence")
        .flat_map(|f| f["leaves"].as_array().into_iter().flatten())
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// A relay's link breaks with both ends alive (test builds: `POST /rooms/{room}/cut?relay=`):
/// the relay closes its clients (1012) and they resume through its next instance. Its members
/// are away at the home meanwhile, not gone: the watcher at another relay hears no leave of the
/// one who comes back, and the one who does not come back leaves when the grace ends (15 s
/// after the link's last sign of life, which was at most 5 s before the cut), not before.
async fn cut_link(ctx: Ctx) -> R {
    let room = support::room("relay-cut");
    let (oc, eu) = (PLACES[0].0, PLACES[1].0);
    let mut watcher = dial(ctx.port, &room, "watcher", eu).await?;
    let mut ann = dial(ctx.port, &room, "ann", oc).await?;
    let mut bob = dial(ctx.port, &room, "bob", oc).await?;
    let at = ann.publish_acked("before", "chat", json!(0)).await?;
    watcher.message("before").await?;
    let gone = bob.session.clone();
    let what = "cut?relay=OC-0";
    let resp = es::admin(ctx.port, "POST", &room, what, Some(&bearer_admin()), None, "").await?;
    let body = es::json_200("cut", &resp)?;
    check!(body["cut"] == true, "the relay had a link to cut: {body}");
    let cut = std::time::Instant::now();
    check!(ann.expect_close(es::T).await? == Some(1012), "ann's relay closed her to resume");
    check!(bob.expect_close(es::T).await? == Some(1012), "bob's too");
    let mut back = Dial::new(ctx.port, &room, &ann.session)
        .token(&es::token(&room, "ann"))
        .via(oc.0, oc.1, oc.2)
        .since(at, &ann.epoch())
        .connect()
        .await?;
    check!(back.welcome["resumed"] == true, "ann resumed: {}", back.welcome);
    // Bob has not come back: he is away, still a member, within the grace.
    let stats = es::stats(ctx.port, &room).await?;
    let p = presence(ctx.port, &room).await?;
    check!(cut.elapsed() < std::time::Duration::from_secs(8), "too slow to see the grace");
    check!(stats["topology"]["away"] == 1, "bob is away: {stats}");
    check!(p["summary"]["members"] == 3 && p["members"].get(&gone).is_some(), "bob is listed: {p}");
    let id = back.publish_acked("after", "chat", json!(1)).await?;
    check!(id == at + 1, "ann's write follows hers before the cut: {id}");
    watcher.message("after").await?;
    // Bob's leave comes when his grace ends, and it is the only leave the watcher ever hears.
    let left = |f: &Value| {
        f["type"] == "presence"
            && f["leaves"].as_array().is_some_and(|l| l.iter().any(|s| s == gone.as_str()))
    };
    let limit = std::time::Duration::from_secs(25);
    presence_frame(&mut watcher, limit, left).await.map_err(|e| format!("bob's leave: {e}"))?;
    let after = cut.elapsed();
    crate::presence::note(format!("cut link: the member who stayed away left {after:?} after"));
    check!(after >= std::time::Duration::from_secs(9), "bob left {after:?} after the cut");
    check!(after <= std::time::Duration::from_secs(17), "bob left {after:?} after the cut");
    check!(leaves_seen(&watcher) == [gone.clone()], "leaves: {:?}", leaves_seen(&watcher));
    let p = presence(ctx.port, &room).await?;
    check!(p["summary"]["members"] == 2, "the watcher and ann: {p}");
    Ok(())
}

/// A member who drops and comes back through her relay catches up from the relay's own tail of
/// the log: the home names the entries (`tail_replays`), the relay sends them, and none of them
/// crosses the link as a frame for her (the home's `catch_up_frames` does not move). A member
/// whose relay lacked what she missed (nobody there heard it) gets it the same way, once the
/// home has filled that relay's tail (`tail_fills`), and a second such member costs no fill.
async fn tail_resume(ctx: Ctx) -> R {
    let room = support::room("relay-tail");
    let (oc, eu, na) = (PLACES[0].0, PLACES[1].0, PLACES[2].0);
    let mut keeper = dial(ctx.port, &room, "keeper", oc).await?;
    let mut writer = dial(ctx.port, &room, "writer", eu).await?;
    let mut ann = dial(ctx.port, &room, "ann", oc).await?;
    let mut bob = dial(ctx.port, &room, "bob", na).await?;
    let mut cat = dial(ctx.port, &room, "cat", na).await?;
    let at = writer.publish_acked("first", "chat", json!(0)).await?;
    for c in [&mut keeper, &mut ann, &mut bob, &mut cat] {
        c.message("first").await?;
    }
    let epoch = writer.epoch();
    let away: Vec<(String, (&str, &str, &str), &str)> = vec![
        (ann.session.clone(), oc, "ann"),
        (bob.session.clone(), na, "bob"),
        (cat.session.clone(), na, "cat"),
    ];
    ann.close().await;
    bob.close().await;
    cat.close().await;
    // Ten messages while they are away: the keeper's relay (OC-0) hears them; NA-0 has nobody.
    let ids: Vec<String> = (0..10).map(|n| format!("m-{n}")).collect();
    for (n, id) in ids.iter().enumerate() {
        writer.publish_acked(id, "chat", json!(n)).await?;
    }
    for id in &ids {
        keeper.message(id).await?;
    }
    let before = es::stats(ctx.port, &room).await?;
    // Each stays connected to the end: a relay with no client stops, and its stats with it.
    let mut returned = Vec::new();
    for (session, place, sub) in &away {
        let mut back = Dial::new(ctx.port, &room, session)
            .token(&es::token(&room, sub))
            .via(place.0, place.1, place.2)
            .since(at, &epoch)
            .connect()
            .await?;
        check!(back.welcome["resumed"] == true, "[{sub}] resumed: {}", back.welcome);
        check!(back.welcome["missed"] == 10, "[{sub}] missed ten: {}", back.welcome);
        for id in &ids {
            back.message(id).await?;
        }
        check_contiguous(sub, &back.messages(), at + 1)?;
        check!(back.messages().len() == 10, "[{sub}] each once: {}", back.messages().len());
        returned.push(back);
    }
    let after = es::stats(ctx.port, &room).await?;
    let moved = |key: &str| after[key].as_u64().unwrap_or(0) - before[key].as_u64().unwrap_or(0);
    check!(moved("tail_replays") == 3, "three catch-ups from tails: {after}");
    check!(moved("tail_frames") == 30, "of ten frames each: {after}");
    check!(moved("catch_up_frames") == 0, "the home sent none of them itself: {after}");
    check!(moved("tail_fills") == 1, "NA-0's tail was filled once, for bob and cat: {after}");
    let oc_relay = relay_stats(ctx.port, &room, "OC-0").await?;
    check!(oc_relay["tail_replays"] == 1 && oc_relay["tail_frames"] == 10, "OC-0: {oc_relay}");
    let na_relay = relay_stats(ctx.port, &room, "NA-0").await?;
    check!(na_relay["tail_replays"] == 2 && na_relay["tail_lost"] == 0, "NA-0: {na_relay}");
    drop(returned);
    Ok(())
}
