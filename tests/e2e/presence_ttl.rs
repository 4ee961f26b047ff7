//! Heartbeat TTL, on a runtime of its own started with `--var PRESENCE_TTL_MS:3000`: a client
//! that only sends the exact `{"type":"ping"}` (answered by the runtime without waking the room)
//! and one that sends real frames stay present; a silent one is closed with 4008 and leaves.
//!
//! The same runtime has a `REGIONS` table, so the clients' regions also show its precedence
//! (colo, then country, then continent, then the continent code), and `LOG_CONNECTIONS=off`
//! (no `connect`/`close` lines).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::check;
use crate::client::{short, Client, Event};
use crate::harness::{alone, Spec};
use crate::http;
use crate::presence::{await_summary, check_http, dial_from, note, Place, DFW, FRA, GRU, SYD};
use crate::runtime::Runtime;
use crate::support::{self, R};

const TTL: Duration = Duration::from_millis(3000);
/// How long the talking clients keep going; the silent one must be gone well before.
const RUN: Duration = Duration::from_secs(10);
const EVERY: Duration = Duration::from_millis(500);
/// colo beats country beats continent; anything else is its continent code.
const REGIONS: &str = r#"{"colo":{"SYD":"oc-syd","AKL":"oc-akl"},"country":{"NZ":"oc-nz","DE":"de"},"continent":{"EU":"eu-central"}}"#;
/// Amsterdam: no colo or country rule, so the EU continent rule.
const AMS: Place = ("AMS", "NL", "EU");

/// `GET /region` as seen from `place` (the Worker's view of cf and the region it derives).
/// (Without an `Accept-Encoding`, local dev answers this route brotli-compressed.)
async fn region_of(port: u16, place: Place) -> R<Value> {
    let blob = json!({"colo": place.0, "country": place.1, "continent": place.2}).to_string();
    let resp = http::get(
        port,
        "/region",
        &[("MF-CF-Blob", blob.as_str()), ("Accept-Encoding", "identity")],
        Duration::from_secs(10),
    )
    .await?;
    check!(resp.status == 200, "GET /region from {place:?}: {} {}", resp.status, resp.body);
    resp.json().ok_or_else(|| format!("GET /region: not JSON: {}", resp.body))
}

pub fn trials() -> Vec<Spec> {
    vec![alone("presence::ttl_expires_silent_clients", ttl_expires_silent_clients)]
}

#[derive(Clone, Copy)]
enum Talk {
    /// The exact ping text the runtime answers by itself.
    Ping,
    /// A frame the room itself answers.
    GetState,
}

/// Sends `talk` every `EVERY` until `until`, reading everything; a close is an error.
/// Returns the client and how many answers (pong / state) it got.
async fn keep_talking(
    mut c: Client,
    talk: Talk,
    until: tokio::time::Instant,
) -> R<(Client, usize)> {
    let mut ticker = tokio::time::interval(EVERY);
    let mut answers = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep_until(until) => return Ok((c, answers)),
            _ = ticker.tick() => match talk {
                Talk::Ping => c.send_text(r#"{"type":"ping"}"#.to_string()).await?,
                Talk::GetState => c.send(json!({"type":"get_state"})).await?,
            },
            ev = c.next_event_within(RUN * 2) => match ev? {
                Event::Frame(f) if f["type"] == "pong" || f["type"] == "state" => answers += 1,
                Event::Frame(f) if f["type"] == "error" => {
                    return Err(format!("[{}] error: {f}", c.session))
                }
                Event::Frame(_) => {}
                Event::Closed(code) => {
                    return Err(format!(
                        "[{}] was closed ({code:?}) although it kept talking ({answers} answers so far)",
                        c.session
                    ))
                }
            },
        }
    }
}

async fn ttl_expires_silent_clients() -> R {
    let dir = tempfile::Builder::new()
        .prefix("homeroom-e2e-ttl-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let ttl_var = format!("PRESENCE_TTL_MS:{}", TTL.as_millis());
    let regions_var = format!("REGIONS:{REGIONS}");
    // This runtime also runs with the per-connection log lines turned off.
    let args = ["--var", &ttl_var, "--var", &regions_var, "--var", "LOG_CONNECTIONS:off"];
    let mut rt = Runtime::start_with("ttl", dir.path(), &args).await?;
    let r = run(&rt)
        .await
        .map_err(|e| format!("{e}\n--- {} runtime log (tail) ---\n{}", rt.label, rt.log.tail(60)));
    rt.stop().await;
    r
}

async fn run(rt: &Runtime) -> R {
    let port = rt.port;
    let room = support::room("ttl");
    let (so, sa, sb, sc) = (
        support::session("obs"),
        support::session("pinger"),
        support::session("silent"),
        support::session("talker"),
    );
    // The table: colo before country (AKL/NZ), country alone (CHC/NZ), nothing (GRU).
    for (place, want) in
        [(("AKL", "NZ", "OC"), "oc-akl"), (("CHC", "NZ", "OC"), "oc-nz"), (GRU, "SA")]
    {
        let r = region_of(port, place).await?;
        check!(
            r["region"] == want && r["colo"] == place.0 && r["country"] == place.1,
            "GET /region from {place:?} should say region {want}: {r}"
        );
    }
    let obs = dial_from(port, &room, &so, SYD).connect().await?; // colo rule
    let a = dial_from(port, &room, &sa, FRA).connect().await?; // country DE before continent EU
    let b_dialed = Instant::now();
    let mut b = dial_from(port, &room, &sb, DFW).connect().await?; // no rule: NA
    let c = dial_from(port, &room, &sc, AMS).connect().await?; // continent rule
    let mut members: BTreeMap<String, String> =
        [(&so, "oc-syd"), (&sa, "de"), (&sb, "NA"), (&sc, "eu-central")]
            .into_iter()
            .map(|(s, r)| (s.clone(), r.to_string()))
            .collect();
    check_http(port, &room, &members, false, "after the joins").await?;

    let until = tokio::time::Instant::now() + RUN;
    let obs_task = tokio::spawn(keep_talking(obs, Talk::Ping, until));
    let a_task = tokio::spawn(keep_talking(a, Talk::Ping, until));
    let c_task = tokio::spawn(keep_talking(c, Talk::GetState, until));
    // B says nothing; it only reads until the room closes it.
    let b_code = b.expect_close(RUN).await.map_err(|e| {
        format!("the silent client was not closed within {RUN:?} (TTL {TTL:?}): {e}")
    })?;
    let b_after = b_dialed.elapsed();
    check!(b_code == Some(4008), "the silent client should be closed with 4008, got {b_code:?}");
    check!(
        b_after >= TTL - Duration::from_millis(100),
        "the silent client was closed after {b_after:?}, before its TTL of {TTL:?}"
    );
    note(format!("ttl: silent client closed with 4008 after {b_after:?}"));

    let (mut obs, obs_pongs) = obs_task.await.map_err(|e| e.to_string())??;
    let (a, a_pongs) = a_task.await.map_err(|e| e.to_string())??;
    let (c, c_states) = c_task.await.map_err(|e| e.to_string())??;
    let min = (RUN.as_millis() / EVERY.as_millis()) as usize / 2;
    check!(
        obs_pongs >= min && a_pongs >= min && c_states >= min,
        "too few answers to keep the clients alive: observer {obs_pongs} pongs, pinger {a_pongs} pongs, talker {c_states} states (want ≥ {min})"
    );
    note(format!(
        "ttl: after {RUN:?} the observer had {obs_pongs} pongs, the pinger {a_pongs}, the talker {c_states} states"
    ));

    // Exactly one leave, B's; nobody else left.
    members.remove(&sb);
    let leaves: Vec<&Value> = obs
        .history
        .iter()
        .filter(|f| f["type"] == "presence" && f["leaves"] != json!([]))
        .collect();
    check!(
        leaves.len() == 1 && leaves[0]["leaves"] == json!([sb]),
        "the observer should see exactly one leave, the silent client's: {:?}",
        leaves.iter().map(|f| short(f)).collect::<Vec<_>>()
    );
    check_http(port, &room, &members, false, &format!("after {RUN:?}")).await?;
    // The observer's latest summary (or the next one) states the three who stayed.
    let want = crate::presence::expected_summary(&members);
    let latest = obs.history.iter().rev().find(|f| f["type"] == "summary");
    if latest.map(crate::presence::summary_body) != Some(want) {
        await_summary(&mut obs, &members, "after the expiry").await?;
    }
    check!(
        a.closed.is_none() && c.closed.is_none() && obs.closed.is_none(),
        "a talking client was closed"
    );
    // Four connects and a close by the room, and not one per-connection line
    // (the token runtime, with the default, writes them: edge_logs).
    let lines: Vec<Value> = ["connect", "close"].iter().flat_map(|e| rt.log.events(e)).collect();
    check!(lines.is_empty(), "LOG_CONNECTIONS=off, yet per-connection lines: {lines:?}");
    let closed = rt.log.events("closed_by_room");
    check!(closed.len() == 1, "the room's own close is still logged: {closed:?}");
    let problems = rt.log.events("config_error");
    check!(problems.is_empty(), "the runtime reported config errors: {problems:?}");
    Ok(())
}
