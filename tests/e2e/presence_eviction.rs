//! Presence across object eviction: members with states stay connected (hibernated) while the
//! idle room is evicted (proved by a second `room_loaded` log line); afterwards HTTP presence is
//! exactly what it was, a new member's welcome lists them, and nobody saw a leave or a join.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::check;
use crate::client::{short, Client};
use crate::harness::{shared, Spec};
use crate::presence::{
    await_summary, check_http, dial_from, expected_summary, http_presence, note, one, read_until,
    summary_body, DFW, FRA, GRU, SYD,
};
use crate::support::{self, Ctx, R};

/// workerd evicts an idle object after about 10 s (as in `eviction.rs`).
const IDLE: Duration = Duration::from_secs(13);

pub fn trials() -> Vec<Spec> {
    vec![shared("presence::survives_eviction", survives_eviction)]
}

async fn survives_eviction(ctx: Ctx) -> R {
    let room = support::room("pevict");
    let port = ctx.port;
    let plan = [
        ("a", SYD, json!({"status": "away", "n": 1})),
        ("b", FRA, json!({"status": "here", "tags": ["x", "y"]})),
        ("c", DFW, json!({})), // never sets a state
    ];
    let mut members: BTreeMap<String, String> = BTreeMap::new();
    let mut clients: Vec<(Client, Value)> = Vec::new();
    for (name, place, state) in plan {
        let s = support::session(name);
        let mut c = dial_from(port, &room, &s, place).connect().await?;
        if state != json!({}) {
            c.send(json!({"type":"presence","state":state})).await?;
        }
        members.insert(s, place.2.to_string());
        clients.push((c, state));
    }
    // Settle: everyone has seen every state (the last client sees the others' updates), and
    // the first client has the summary of all three (so no summary is pending in the room).
    let sessions: Vec<String> = clients.iter().map(|(c, _)| c.session.clone()).collect();
    for i in 0..clients.len() {
        for j in 0..clients.len() {
            let (sj, state) = (sessions[j].clone(), clients[j].1.clone());
            if i == j || state == json!({}) {
                continue;
            }
            let c = &mut clients[i].0;
            let seen_in_welcome = c.welcome["presence"]["members"][&sj]["state"] == state;
            let seen = c.history.iter().any(|f| {
                f["type"] == "presence" && f["joins"].get(&sj).is_some_and(|m| m["state"] == state)
            });
            if !seen_in_welcome && !seen {
                read_until(c, &format!("{sj}'s state"), Duration::from_secs(5), |f| {
                    f["type"] == "presence"
                        && f["joins"].get(&sj).is_some_and(|m| m["state"] == state)
                })
                .await?;
            }
        }
    }
    // The summary of all three may already have arrived while the states were read above (on
    // a slow machine it comes before the last state update): only wait if it has not.
    let latest =
        clients[0].0.history.iter().rev().find(|f| f["type"] == "summary").map(summary_body);
    if latest != Some(expected_summary(&members)) {
        await_summary(&mut clients[0].0, &members, "before the idle period").await?;
    }
    // Fence: every frame broadcast so far is read before the idle period starts (and every
    // join: one held in a presence window comes after the `state` answers).
    for (c, _) in clients.iter_mut() {
        c.await_members(members.len()).await?;
        c.get_state().await?;
    }
    let before = check_http(port, &room, &members, false, "before the idle period").await?;
    for (c, state) in &clients {
        check!(
            before["members"][&c.session]["state"] == *state,
            "HTTP state of {} before eviction: {}",
            c.session,
            before["members"][&c.session]
        );
    }
    let loads = ctx.log.wait_room_loaded(&room, 1, Duration::from_secs(5)).await?.len();
    let marks: Vec<usize> = clients.iter().map(|(c, _)| c.history.len()).collect();

    tokio::time::sleep(IDLE).await; // everyone stays connected and silent

    // HTTP wakes the room: it must have been evicted, and come back with the same presence.
    let after = http_presence(port, &room).await?;
    let loaded = ctx
        .log
        .wait_room_loaded(&room, loads + 1, Duration::from_secs(5))
        .await
        .map_err(|e| format!("the room was not reloaded after {IDLE:?} idle: {e}"))?;
    let reload = loaded.last().unwrap();
    check!(
        reload["sockets"] == clients.len(),
        "room_loaded after eviction should find the {} hibernated sockets: {reload}",
        clients.len()
    );
    note(format!("pevict: reloaded {reload}"));
    check!(after == before, "presence changed across eviction:\nbefore {before}\nafter  {after}");

    // A new member's welcome lists them (states, regions, since) and counts them once.
    let obs_s = support::session("obs");
    let obs = dial_from(port, &room, &obs_s, GRU).connect().await?;
    let listed = &obs.welcome["presence"]["members"];
    for (c, _) in &clients {
        check!(
            listed[&c.session] == before["members"][&c.session],
            "welcome after eviction lists {} as {}, before it was {}",
            c.session,
            listed[&c.session],
            before["members"][&c.session]
        );
    }
    members.insert(obs_s.clone(), "SA".into());
    check!(
        obs.welcome["presence"]["summary"] == expected_summary(&members),
        "welcome summary after eviction: {}",
        obs.welcome["presence"]["summary"]
    );
    check_http(port, &room, &members, false, "after the new member").await?;

    // The hibernated members hear the newcomer's join, and nothing else about presence.
    for (i, (c, _)) in clients.iter_mut().enumerate() {
        read_until(c, "the newcomer's join", Duration::from_secs(5), |f| {
            f["type"] == "presence" && f["joins"].get(&obs_s).is_some()
        })
        .await?;
        let window = &c.history[marks[i]..];
        for f in window {
            let ok = match f["type"].as_str() {
                Some("presence") => {
                    f["joins"].as_object().is_some_and(|j| j.len() == 1)
                        && f["joins"].get(&obs_s).is_some()
                        && f["leaves"] == json!([])
                        && f.get("reset").is_none()
                }
                // The newcomer's count, or the settled count of before (sent to all at once,
                // maybe not yet read when the idle period began).
                Some("summary") => {
                    let body = summary_body(f);
                    body == expected_summary(&members) || body == before["summary"]
                }
                _ => false,
            };
            check!(
                ok,
                "{} got a spurious frame across the eviction: {} (all: {:?})",
                c.session,
                short(f),
                window.iter().map(short).collect::<Vec<_>>()
            );
        }
        check!(c.closed.is_none(), "{} was closed", c.session);
    }

    // The restored members are live: a state update still reaches the others.
    let (a, _) = &mut clients[0];
    let sa = a.session.clone();
    a.send(json!({"type":"presence","state":{"status":"back"}})).await?;
    let (b, _) = &mut clients[1];
    let f = read_until(b, "a's new state", Duration::from_secs(5), |f| {
        f["type"] == "presence" && f["joins"].get(&sa).is_some()
    })
    .await?;
    let mut want = before["members"][&sa].clone();
    want["state"] = json!({"status":"back"});
    check!(f["joins"] == one(&sa, want), "a restored member's state update: {f}");
    clients[2].0.ping().await?;
    Ok(())
}
