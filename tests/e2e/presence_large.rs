//! Large rooms: 200 clients join one room as fast as they can; an observer that was there first
//! gets a handful of throttled `summary` frames, 99 join diffs, then one `reset`+`large` frame
//! and no more diffs. A late joiner's welcome is summary-only while HTTP lists every member.
//! Shrinking back to 90 members brings one `reset` with the full member list, and diffs resume.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{json, Value};

use crate::check;
use crate::client::{short, Client, Event};
use crate::harness::{shared, Spec};
use crate::presence::{
    await_summary, check_http, check_summaries_consistent, dial_from, expected_summary, note,
    read_until, Place, DFW, FRA, SYD,
};
use crate::support::{self, Ctx, R};

const JOINERS: usize = 200;
const BATCH: usize = 20;
/// The default `LARGE_ROOM`: above it, summaries only.
const LARGE_ROOM: usize = 100;
/// Back to small at `LARGE_ROOM - LARGE_ROOM / 10` members or fewer.
const SMALL_AGAIN: usize = LARGE_ROOM - LARGE_ROOM / 10;
/// How long the observer keeps counting after the last join.
const SETTLE: Duration = Duration::from_secs(3);

pub fn trials() -> Vec<Spec> {
    vec![shared("presence::two_hundred_joins_are_summarised", two_hundred_joins)]
}

fn place(i: usize) -> Place {
    [SYD, FRA, DFW][i % 3]
}

/// Joins `JOINERS` clients in concurrent batches; returns them with the time the last welcome
/// arrived.
async fn join_all_clients(port: u16, room: String) -> R<(Vec<Client>, Instant)> {
    let mut clients = Vec::with_capacity(JOINERS);
    for batch in 0..JOINERS / BATCH {
        let dials = (0..BATCH).map(|k| {
            let i = batch * BATCH + k;
            dial_from(port, &room, &support::session(&format!("j{i}")), place(i)).connect()
        });
        for c in join_all(dials).await {
            clients.push(c?);
        }
    }
    Ok((clients, Instant::now()))
}

async fn two_hundred_joins(ctx: Ctx) -> R {
    let room = support::room("large");
    let port = ctx.port;
    let obs_s = support::session("obs");
    let mut obs = dial_from(port, &room, &obs_s, SYD).connect().await?;
    let t0 = Instant::now();
    let mut members: BTreeMap<String, String> = BTreeMap::new();
    members.insert(obs_s.clone(), "OC".into());

    // The joiners run concurrently with the observer's reading.
    let mut joiner = tokio::spawn(join_all_clients(port, room.clone()));
    let mut joined = None;
    let (clients, t_last) = loop {
        tokio::select! {
            r = &mut joiner, if joined.is_none() => {
                joined = Some(r.map_err(|e| e.to_string())??);
            }
            ev = obs.next_event_within(Duration::from_millis(200)) => {
                match ev {
                    Ok(Event::Frame(_)) | Err(_) => {} // kept in history; a quiet 200 ms is fine
                    Ok(Event::Closed(code)) => return Err(format!("observer closed ({code:?}) during the joins")),
                }
            }
        }
        if let Some((_, t_last)) = &joined {
            if t_last.elapsed() >= SETTLE {
                break joined.take().unwrap();
            }
        }
    };
    let join_secs = (t_last - t0).as_secs_f64();
    let elapsed = t0.elapsed().as_secs_f64();
    for (i, c) in clients.iter().enumerate() {
        members.insert(c.session.clone(), place(i).2.to_string());
    }
    let frames = obs.history.clone();

    let summaries: Vec<&Value> = frames.iter().filter(|f| f["type"] == "summary").collect();
    let diffs: Vec<(usize, &Value)> = frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f["type"] == "presence" && f.get("reset").is_none())
        .collect();
    let resets: Vec<(usize, &Value)> = frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f["type"] == "presence" && f.get("reset").is_some())
        .collect();
    note(format!(
        "large: {JOINERS} joins in {join_secs:.2}s; the observer got {} frames in {elapsed:.2}s: \
         {} summaries, {} diffs, {} resets",
        frames.len(),
        summaries.len(),
        diffs.len(),
        resets.len()
    ));
    let max_summaries = (elapsed / 2.0).ceil() as usize + 2;
    check!(
        summaries.len() <= max_summaries,
        "{} summary frames in {elapsed:.2}s (at most {max_summaries}: one per 2 s interval): {:?}",
        summaries.len(),
        summaries.iter().map(|f| f["members"].clone()).collect::<Vec<_>>()
    );
    check!(
        summaries.windows(2).all(|w| w[0]["members"].as_u64() < w[1]["members"].as_u64()),
        "summaries during pure joins should strictly grow (sent only when changed): {:?}",
        summaries.iter().map(|f| f["members"].clone()).collect::<Vec<_>>()
    );
    let last = summaries.last().ok_or("the observer got no summary at all")?;
    let want = expected_summary(&members);
    check!(
        crate::presence::summary_body(last) == want,
        "the last summary should state all {} members: {last}, want {want}",
        members.len()
    );
    check_summaries_consistent("observer", &frames)?;

    // One reset into large mode, after every diff.
    check!(
        resets.len() == 1,
        "expected exactly one reset frame, got {:?}",
        resets.iter().map(|(_, f)| short(f)).collect::<Vec<_>>()
    );
    let (reset_at, reset) = resets[0];
    check!(
        *reset == json!({"type":"presence","joins":{},"leaves":[],"reset":true,"large":true}),
        "the switch to large mode: {reset}"
    );
    check!(
        diffs.iter().all(|(i, _)| *i < reset_at),
        "per-member diffs after the room turned large: {:?}",
        diffs
            .iter()
            .filter(|(i, _)| *i > reset_at)
            .map(|(_, f)| short(f))
            .take(5)
            .collect::<Vec<_>>()
    );
    // Members 2..=100 joined while the room was small: up to 99 joins, coalesced (the first
    // of a quiet spell at once, the rest of each 50 ms window in one diff), no leaves. Joins
    // still held when the room turned large are not owed: the reset said "large".
    let mut diff_sessions = BTreeSet::new();
    let mut carried = 0;
    for (_, f) in &diffs {
        let joins = f["joins"].as_object();
        check!(
            joins.is_some_and(|j| !j.is_empty()) && f["leaves"] == json!([]),
            "a join diff should carry members and no leaves: {f}"
        );
        for (s, m) in joins.unwrap() {
            check!(
                members.get(s).is_some_and(|r| m["region"] == r.as_str()),
                "join diff for an unknown session or wrong region: {f}"
            );
            diff_sessions.insert(s.clone());
            carried += 1;
        }
    }
    check!(diff_sessions.len() == carried, "a session joined twice in the diffs");
    check!(
        carried < LARGE_ROOM && diffs.len() <= carried,
        "expected at most {} joins (those before the room turned large) in as many diffs or fewer, got {carried} in {}",
        LARGE_ROOM - 1,
        diffs.len()
    );
    note(format!("large: {carried} joins in {} diffs before the switch", diffs.len()));

    check_http(port, &room, &members, true, "after 200 joins").await?;

    // A late joiner gets the summary only, HTTP still lists everyone.
    let late_s = support::session("late");
    let late = dial_from(port, &room, &late_s, FRA).connect().await?;
    members.insert(late_s.clone(), "EU".into());
    let p = &late.welcome["presence"];
    check!(
        p["large"] == true && p["members"] == json!({}),
        "a late joiner's welcome in a large room: large and no member list, got {}",
        short(p)
    );
    check!(
        p["summary"] == expected_summary(&members),
        "the late joiner's welcome summary {} is not exact",
        p["summary"]
    );
    check_http(port, &room, &members, true, "after the late join").await?;
    await_summary(&mut obs, &members, "after the late join").await?;

    // Shrink to SMALL_AGAIN members: one reset listing exactly those who stay, then diffs again.
    let mark = obs.history.len();
    let mut clients = clients;
    let leaving = members.len() - SMALL_AGAIN;
    let mut gone: Vec<Client> = clients.drain(..leaving).collect();
    for c in &gone {
        members.remove(&c.session);
    }
    let t_shrink = Instant::now();
    while !gone.is_empty() {
        let batch: Vec<Client> = gone.drain(..BATCH.min(gone.len())).collect();
        join_all(batch.into_iter().map(|c| c.close())).await;
    }
    let reset =
        read_until(&mut obs, "the reset back to a small room", Duration::from_secs(10), |f| {
            f["type"] == "presence" && f.get("reset").is_some()
        })
        .await?;
    note(format!(
        "large: {leaving} closes → small again after {:.2}s",
        t_shrink.elapsed().as_secs_f64()
    ));
    let listed: BTreeMap<String, String> = reset["joins"]
        .as_object()
        .map(|j| {
            j.iter()
                .map(|(s, m)| (s.clone(), m["region"].as_str().unwrap_or("?").to_string()))
                .collect()
        })
        .unwrap_or_default();
    check!(
        reset.get("large").is_none() && reset["leaves"] == json!([]) && listed == members,
        "back at {SMALL_AGAIN} members the reset should list exactly the {} who stayed (got {} members): {}",
        members.len(),
        listed.len(),
        short(&reset)
    );
    let window = &obs.history[mark..];
    let stray: Vec<String> = window
        .iter()
        .filter(|f| f["type"] == "presence" && f.get("reset").is_none())
        .map(short)
        .collect();
    check!(stray.is_empty(), "per-member diffs while the room was still large: {stray:?}");
    check_http(port, &room, &members, false, "back to a small room").await?;

    // Diffs resume: one more close is one leave.
    let last = clients.pop().ok_or("no client left")?;
    let last_s = last.session.clone();
    last.close().await;
    let leave = read_until(&mut obs, "a leave in the small room", Duration::from_secs(5), |f| {
        f["type"] == "presence"
    })
    .await?;
    check!(
        leave == json!({"type":"presence","joins":{},"leaves":[last_s]}),
        "after the room is small again a close is one leave diff: {}",
        short(&leave)
    );
    members.remove(&last_s);
    check_http(port, &room, &members, false, "after one more close").await?;
    await_summary(&mut obs, &members, "after shrinking").await?;
    let shrink_summaries = obs.history[mark..].iter().filter(|f| f["type"] == "summary").count();
    let shrink_secs = t_shrink.elapsed().as_secs_f64();
    check!(
        shrink_summaries <= (shrink_secs / 2.0).ceil() as usize + 2,
        "{shrink_summaries} summaries in the {shrink_secs:.2}s of shrinking"
    );
    check_summaries_consistent("observer", &obs.history)?;
    check!(late.closed.is_none(), "the late joiner was closed");
    Ok(())
}
