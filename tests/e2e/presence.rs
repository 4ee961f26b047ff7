//! Presence (PROTOCOL.md "Presence", "Regions"): clients "in" several regions (the `MF-CF-Blob`
//! header), a session hopping region before its old socket closes (4001, one join, never a
//! leave, never a double count), exact counts over HTTP at every step and throttled `summary`
//! frames that reach the exact counts; presence state updates and their size limit.
//!
//! Anonymous dev mode (no `AUTH_SECRET`): the user is the session, so `users` == `members` in
//! every count here; one user in two tabs (users < members) needs tokens and is not covered.
//!
//! The other presence trials live in `presence_large.rs` (200 joins, large-room mode),
//! `presence_eviction.rs` (presence across object eviction) and `presence_ttl.rs` (heartbeat
//! TTL on a runtime of its own); the helpers they share are here.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::check;
use crate::client::{short, Client, Dial, Event};
use crate::harness::{shared, Spec};
use crate::http;
use crate::support::{self, Ctx, R};

/// A place a client connects "from": (colo, country, continent). With no `REGIONS` table the
/// region is the continent code.
pub type Place = (&'static str, &'static str, &'static str);
pub const SYD: Place = ("SYD", "AU", "OC");
pub const FRA: Place = ("FRA", "DE", "EU");
pub const DFW: Place = ("DFW", "US", "NA");
pub const GRU: Place = ("GRU", "BR", "SA");

/// How long an observer may wait for the `summary` that states a change: the interval (2 s)
/// plus scheduling slack.
pub const SUMMARY_WAIT: Duration = Duration::from_millis(3500);

pub fn trials() -> Vec<Spec> {
    vec![
        shared("presence::regions_and_a_hopping_session", regions_and_a_hopping_session),
        shared("presence::state_updates", state_updates),
    ]
}

/// `{key: value}`.
pub fn one(key: &str, value: Value) -> Value {
    let mut m = serde_json::Map::new();
    m.insert(key.to_string(), value);
    Value::Object(m)
}

/// Prints a timing note when `E2E_VERBOSE` is set.
pub fn note(msg: String) {
    if std::env::var_os("E2E_VERBOSE").is_some() {
        eprintln!("e2e: {msg}");
    }
}

pub fn dial_from(port: u16, room: &str, session: &str, place: Place) -> Dial {
    Dial::new(port, room, session).via(place.0, place.1, place.2)
}

/// `GET /rooms/{room}/presence` → its JSON (must be 200).
pub async fn http_presence(port: u16, room: &str) -> R<Value> {
    let resp =
        http::get(port, &format!("/rooms/{room}/presence"), &[], Duration::from_secs(10)).await?;
    check!(resp.status == 200, "GET /rooms/{room}/presence: HTTP {} {}", resp.status, resp.body);
    resp.json().ok_or_else(|| format!("GET /rooms/{room}/presence: not JSON: {}", resp.body))
}

/// The exact summary (without `type`) for members given as session → region. Anonymous dev mode:
/// the user is the session, so users == members, and one connection per member.
pub fn expected_summary(members: &BTreeMap<String, String>) -> Value {
    let mut per: BTreeMap<&str, u64> = BTreeMap::new();
    for region in members.values() {
        *per.entry(region.as_str()).or_default() += 1;
    }
    let regions: serde_json::Map<String, Value> =
        per.into_iter().map(|(r, n)| (r.to_string(), json!({"members": n, "users": n}))).collect();
    let n = members.len();
    json!({"members": n, "users": n, "connections": n, "regions": regions})
}

/// A `summary` frame without its `type`, to compare with [`expected_summary`].
pub fn summary_body(f: &Value) -> Value {
    let mut f = f.clone();
    if let Some(o) = f.as_object_mut() {
        o.remove("type");
    }
    f
}

/// Checks the HTTP presence of `room` against members (session → region) exactly: the same
/// sessions, each with its region and user (= session), and the exact summary.
pub async fn check_http(
    port: u16,
    room: &str,
    members: &BTreeMap<String, String>,
    large: bool,
    when: &str,
) -> R<Value> {
    let p = http_presence(port, room).await?;
    let got = p["members"]
        .as_object()
        .ok_or_else(|| format!("{when}: HTTP presence without a members object: {p}"))?;
    let got_regions: BTreeMap<String, String> = got
        .iter()
        .map(|(s, m)| (s.clone(), m["region"].as_str().unwrap_or("?").to_string()))
        .collect();
    if got_regions != *members {
        let missing: Vec<_> = members.keys().filter(|s| !got_regions.contains_key(*s)).collect();
        let extra: Vec<_> = got_regions.keys().filter(|s| !members.contains_key(*s)).collect();
        let moved: Vec<_> = members
            .iter()
            .filter(|(s, r)| got_regions.get(*s).is_some_and(|g| g != *r))
            .map(|(s, r)| format!("{s}: {} (expected {r})", got_regions[s]))
            .collect();
        return Err(format!(
            "{when}: HTTP members differ: missing {missing:?}, extra {extra:?}, wrong region {moved:?}"
        ));
    }
    for (s, m) in got {
        check!(
            m["user"] == s.as_str() && m["since"].is_u64() && m["state"].is_object(),
            "{when}: HTTP member {s} malformed: {m}"
        );
    }
    let want = expected_summary(members);
    check!(
        p["summary"] == want,
        "{when}: HTTP summary {} but the members are {want}",
        p["summary"]
    );
    check!(p["large"] == large, "{when}: HTTP `large` should be {large}: {}", short(&p));
    Ok(p)
}

/// Reads every frame (presence and summary included) until one satisfies `pred`; a close or
/// the deadline is an error.
pub async fn read_until(
    c: &mut Client,
    what: &str,
    timeout: Duration,
    pred: impl Fn(&Value) -> bool,
) -> R<Value> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match c.next_event_within(left).await.map_err(|e| format!("waiting for {what}: {e}"))? {
            Event::Frame(f) if pred(&f) => return Ok(f),
            Event::Frame(_) => {}
            Event::Closed(code) => {
                return Err(format!("[{}] closed ({code:?}) while waiting for {what}", c.session))
            }
        }
    }
}

/// Waits (≤ [`SUMMARY_WAIT`]) for a `summary` frame stating exactly these members; returns how
/// long it took.
pub async fn await_summary(
    c: &mut Client,
    members: &BTreeMap<String, String>,
    when: &str,
) -> R<Duration> {
    let want = expected_summary(members);
    let start = Instant::now();
    let mark = c.history.len();
    read_until(c, &format!("the summary {want} ({when})"), SUMMARY_WAIT, |f| {
        f["type"] == "summary" && summary_body(f) == want
    })
    .await
    .map_err(|e| {
        let seen: Vec<String> =
            c.history[mark..].iter().filter(|f| f["type"] == "summary").map(short).collect();
        format!("{e}; summaries received meanwhile: {seen:?}")
    })?;
    Ok(start.elapsed())
}

/// The `presence` frames (not resets) in `frames` that mention `session`.
pub fn presence_about<'a>(frames: &'a [Value], session: &str) -> Vec<&'a Value> {
    frames
        .iter()
        .filter(|f| f["type"] == "presence")
        .filter(|f| {
            f["joins"].get(session).is_some()
                || f["leaves"].as_array().is_some_and(|l| l.iter().any(|s| s == session))
        })
        .collect()
}

/// Checks every `summary` frame in `frames` is internally consistent: users == members (anonymous
/// mode), connections == members, region counts add up.
pub fn check_summaries_consistent(who: &str, frames: &[Value]) -> R {
    for f in frames.iter().filter(|f| f["type"] == "summary") {
        let n = f["members"].as_u64();
        let sum: u64 = f["regions"]
            .as_object()
            .map(|r| r.values().filter_map(|c| c["members"].as_u64()).sum())
            .unwrap_or(u64::MAX);
        check!(
            n.is_some() && f["users"].as_u64() == n && f["connections"].as_u64() == n,
            "{who}: summary counts disagree (anonymous mode: users == connections == members): {f}"
        );
        check!(Some(sum) == n, "{who}: region counts do not add up to members: {f}");
    }
    Ok(())
}

/// Polls `GET /rooms/{room}/presence` until stopped; every answer must list `want` members.
/// Returns how many answers it checked.
fn poll_member_count(
    port: u16,
    room: String,
    want: usize,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<R<usize>> {
    tokio::spawn(async move {
        let mut polls = 0;
        while !stop.load(Ordering::Relaxed) {
            let p = http_presence(port, &room).await?;
            let n = p["members"].as_object().map_or(0, |m| m.len());
            check!(
                n == want && p["summary"]["members"] == want,
                "while a session hopped region, HTTP presence listed {n} members (summary {}), not {want}",
                p["summary"]
            );
            polls += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(polls)
    })
}

async fn regions_and_a_hopping_session(ctx: Ctx) -> R {
    let room = support::room("regions");
    let port = ctx.port;
    let mut members: BTreeMap<String, String> = BTreeMap::new();

    // The observer is the only member in South America.
    let obs_s = support::session("obs");
    let mut obs = dial_from(port, &room, &obs_s, GRU).connect().await?;
    members.insert(obs_s.clone(), "SA".into());
    check!(
        obs.welcome["region"] == "SA"
            && obs.welcome["presence"]["summary"] == expected_summary(&members),
        "observer welcome: {}",
        obs.welcome
    );

    // Step 1: 4 clients in OC, 3 in EU, 3 in NA join at once.
    let plan: Vec<(Place, usize)> = vec![(SYD, 4), (FRA, 3), (DFW, 3)];
    let mut dials = Vec::new();
    for (place, n) in &plan {
        for i in 0..*n {
            let s = support::session(&format!("{}{i}", place.2.to_lowercase()));
            dials.push((s.clone(), place.2, dial_from(port, &room, &s, *place).connect()));
        }
    }
    let mut clients: BTreeMap<String, Client> = BTreeMap::new();
    let mut order = Vec::new();
    let joined = futures_util::future::join_all(
        dials.into_iter().map(|(s, r, d)| async move { d.await.map(|c| (s, r, c)) }),
    )
    .await;
    for j in joined {
        let (s, region, c) = j?;
        check!(
            c.welcome["region"] == region,
            "{s} connected via {region} but its welcome says {}",
            c.welcome
        );
        members.insert(s.clone(), region.to_string());
        order.push(s.clone());
        clients.insert(s, c);
    }
    check_http(port, &room, &members, false, "after 10 joins").await?;
    let waited = await_summary(&mut obs, &members, "after 10 joins").await?;
    note(format!("regions: summary after the joins arrived in {waited:?}"));
    // The summary goes at once; the last joins' diff may follow it by a presence window.
    obs.await_members(order.len() + 1).await?;
    for s in &order {
        let about = presence_about(&obs.history, s);
        check!(
            about.len() == 1 && about[0]["joins"][s]["region"] == members[s].as_str(),
            "observer should have seen exactly one join for {s} in {}: {about:?}",
            members[s]
        );
    }

    // Step 2: an OC session sets a state, then reconnects via Frankfurt before its old socket
    // closes.
    let hopper = order.iter().find(|s| members[*s] == "OC").cloned().ok_or("no OC client")?;
    let mut old = clients.remove(&hopper).unwrap();
    old.send(json!({"type":"presence","state":{"where":"syd"}})).await?;
    read_until(&mut obs, "the hopper's state", Duration::from_secs(5), |f| {
        f["type"] == "presence" && f["joins"][&hopper]["state"] == json!({"where":"syd"})
    })
    .await?;
    let before = http_presence(port, &room).await?;
    let since = before["members"][&hopper]["since"].clone();
    check!(since.is_u64(), "hopper's since: {before}");
    let obs_mark = obs.history.len();

    let stop = Arc::new(AtomicBool::new(false));
    let poller = poll_member_count(port, room.clone(), members.len(), stop.clone());
    let mut new = dial_from(port, &room, &hopper, FRA).connect().await?;
    members.insert(hopper.clone(), "EU".into());
    let me = &new.welcome["presence"]["members"][&hopper];
    check!(
        new.welcome["region"] == "EU"
            && me["region"] == "EU"
            && me["state"] == json!({"where":"syd"})
            && me["since"] == since,
        "the reconnected session keeps its state and since, with the new region: {}",
        new.welcome
    );
    check!(
        new.welcome["presence"]["summary"] == expected_summary(&members),
        "the reconnected session's welcome counts it once, in EU: {}",
        new.welcome["presence"]["summary"]
    );
    check_http(port, &room, &members, false, "right after the hop").await?;
    let code = old.expect_close(Duration::from_secs(5)).await?;
    check!(code == Some(4001), "the superseded socket should be closed with 4001, got {code:?}");
    drop(old); // its close reply went out when the Close was read; the TCP goes now
    check_http(port, &room, &members, false, "after the old socket closed").await?;
    let waited = await_summary(&mut obs, &members, "after the hop").await?;
    let hop_summary_at = Instant::now();
    note(format!("regions: summary after the hop arrived in {waited:?}"));
    // The hop's join may follow the summary by a presence window (`PRESENCE_WINDOW_MS`).
    if presence_about(&obs.history[obs_mark..], &hopper).is_empty() {
        read_until(&mut obs, "the hop's join", Duration::from_secs(5), |f| {
            f["type"] == "presence" && f["joins"][&hopper]["region"] == "EU"
        })
        .await?;
    }
    // The superseded socket's close must change nothing: give the room time to hear it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let polls = poller.await.map_err(|e| e.to_string())??;
    check!(polls > 0, "the HTTP poller never ran");
    note(format!("regions: {polls} HTTP polls during the hop, all with {} members", members.len()));
    check_http(port, &room, &members, false, "500 ms after the old socket closed").await?;
    let about = presence_about(&obs.history[obs_mark..], &hopper);
    check!(
        about.len() == 1,
        "observer should see exactly one presence frame for the hop, got {about:?}"
    );
    let j = about[0];
    check!(
        j["leaves"] == json!([])
            && j["joins"].as_object().map(|o| o.len()) == Some(1)
            && j["joins"][&hopper]
                == json!({"user": hopper, "region": "EU", "state": {"where":"syd"}, "since": since}),
        "the hop should be one join with the new region and the kept state: {j}"
    );

    // Step 3: the same session reconnects from the same region: nobody hears a thing.
    let obs_mark = obs.history.len();
    let newer = dial_from(port, &room, &hopper, FRA).connect().await?;
    let code = new.expect_close(Duration::from_secs(5)).await?;
    check!(code == Some(4001), "second supersede: {code:?}");
    drop(new);
    check_http(port, &room, &members, false, "after a same-region reconnect").await?;
    // Fence: another member's state update is broadcast after the reconnect was handled.
    let eu = order
        .iter()
        .find(|s| members[*s] == "EU" && **s != hopper)
        .cloned()
        .ok_or("no EU client")?;
    clients.get_mut(&eu).unwrap().send(json!({"type":"presence","state":{"fence":1}})).await?;
    read_until(&mut obs, "the fence state", Duration::from_secs(5), |f| {
        f["type"] == "presence" && f["joins"][&eu]["state"] == json!({"fence":1})
    })
    .await?;
    let fence_seen_at = Instant::now();
    let window = &obs.history[obs_mark..];
    check!(
        presence_about(window, &hopper).is_empty(),
        "a same-region reconnect must not produce a presence frame: {window:?}"
    );
    check!(
        window.iter().all(|f| f["type"] != "summary"),
        "a same-region reconnect changes no count, yet a summary went out: {window:?}"
    );
    clients.insert(hopper.clone(), newer);

    // Step 4: after a quiet summary interval, an NA client closes normally → a leave, counts
    // drop, and the summary goes out at once (leading edge): in the leave's own turn, so it is the
    // observer's next frame after the leave. Meanwhile another member publishes every 100 ms; a
    // summary held for the interval's timer would have those messages before it. (Messages, not
    // presence states: a state change would open a presence window that holds the leave for up
    // to `PRESENCE_WINDOW_MS` while the summary goes at once. No clock in the check: on a loaded
    // machine the close alone can take over a second.) Quiet means both: a summary interval
    // since the last summary, and the fence state's presence window (`PRESENCE_WINDOW_MS`, 50 ms)
    // over, or the leave is held in that window and the summary goes before it. On a loaded
    // machine steps 2 and 3 can outlast the interval, so the second wait is not implied by the
    // first.
    let quiet = (hop_summary_at + Duration::from_millis(2200))
        .max(fence_seen_at + Duration::from_millis(300));
    tokio::time::sleep_until(quiet.into()).await;
    let na = order.iter().find(|s| members[*s] == "NA").cloned().ok_or("no NA client")?;
    let mut fencer = clients.remove(&eu).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let fences = tokio::spawn({
        let stop = stop.clone();
        async move {
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let id = format!("fence-{n}");
                fencer.send(json!({"type":"publish","id":id,"topic":"fence","data":n})).await?;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok::<_, String>((fencer, n))
        }
    });
    let obs_mark = obs.history.len();
    let t_close = Instant::now();
    clients.remove(&na).unwrap().close().await;
    let leave = read_until(&mut obs, "the NA leave", Duration::from_secs(5), |f| {
        f["type"] == "presence" && !presence_about(std::slice::from_ref(f), &na).is_empty()
    })
    .await?;
    check!(
        leave["leaves"] == json!([na]) && leave["joins"] == json!({}),
        "a close should be one leave: {leave}"
    );
    members.remove(&na);
    let before_leave = &obs.history[obs_mark..obs.history.len() - 1];
    check!(
        before_leave.iter().all(|f| f["type"] != "summary"),
        "a summary went out before the leave (was a presence window still open?): {before_leave:?}"
    );
    // (The summary is read first, so that its arrival time is known, then HTTP.)
    await_summary(&mut obs, &members, "after a close").await?;
    let close_summary_at = Instant::now();
    let leading = close_summary_at - t_close;
    stop.store(true, Ordering::Relaxed);
    let (fencer, sent) = fences.await.map_err(|e| e.to_string())??;
    clients.insert(eu.clone(), fencer);
    check_http(port, &room, &members, false, "after a close").await?;
    let window = &obs.history[obs_mark..];
    let at = window.iter().position(|f| f == &leave).ok_or("the leave is not in the history")?;
    check!(
        window.get(at + 1).is_some_and(|f| f["type"] == "summary"),
        "after a quiet interval the summary should follow the leave at once, in its turn \
         ({sent} state changes sent meanwhile); the frames after the close: {:?}",
        window.iter().map(|f| f["type"].as_str().unwrap_or("?")).collect::<Vec<_>>()
    );
    let obs_mark = obs.history.len();

    // Step 5: an OC client's TCP drops (no close frame) → a leave too.
    let oc = order
        .iter()
        .find(|s| members.get(*s).is_some_and(|r| r == "OC"))
        .cloned()
        .ok_or("no OC client left")?;
    clients.remove(&oc).unwrap().drop_tcp();
    let leave = read_until(&mut obs, "the OC leave", Duration::from_secs(10), |f| {
        f["type"] == "presence" && !presence_about(std::slice::from_ref(f), &oc).is_empty()
    })
    .await?;
    check!(
        leave["leaves"] == json!([oc]) && leave["joins"] == json!({}),
        "a dropped connection should be one leave: {leave}"
    );
    members.remove(&oc);
    await_summary(&mut obs, &members, "after a TCP drop").await?;
    let gap = close_summary_at.elapsed();
    check_http(port, &room, &members, false, "after a TCP drop").await?;
    let between = obs.history[obs_mark..].iter().filter(|f| f["type"] == "summary").count();
    check!(
        gap >= Duration::from_millis(1200) && between == 1,
        "the next change within the interval must wait for its end: {between} summaries, \
         the last {gap:?} after the previous one"
    );
    note(format!(
        "regions: leading-edge summary {leading:?} after a close; the next one {gap:?} later"
    ));

    // Over the whole run: the hopper never left, and every summary was consistent.
    let hopper_leaves: Vec<_> = presence_about(&obs.history, &hopper)
        .into_iter()
        .filter(|f| f["leaves"].as_array().is_some_and(|l| !l.is_empty()))
        .collect();
    check!(hopper_leaves.is_empty(), "the hopping session was seen leaving: {hopper_leaves:?}");
    check_summaries_consistent("observer", &obs.history)?;
    check!(obs.closed.is_none(), "observer closed: {:?}", obs.closed);
    Ok(())
}

async fn state_updates(ctx: Ctx) -> R {
    let room = support::room("pstate");
    let port = ctx.port;
    let (sa, sb, so) = (support::session("a"), support::session("b"), support::session("obs"));
    let mut obs = dial_from(port, &room, &so, SYD).connect().await?;
    let mut a = dial_from(port, &room, &sa, FRA).connect().await?;
    let mut b = dial_from(port, &room, &sb, DFW).connect().await?;
    read_until(&mut obs, "b's join", Duration::from_secs(5), |f| {
        f["type"] == "presence" && f["joins"].get(&sb).is_some()
    })
    .await?;
    let a_since = obs.history.iter().find_map(|f| {
        (f["type"] == "presence" && f["joins"].get(&sa).is_some())
            .then(|| f["joins"][&sa]["since"].clone())
    });
    let a_since = a_since.ok_or("observer never saw a's join")?;

    // A state update reaches the others as a join carrying it, and not the sender.
    let state = json!({"typing": true, "cursor": {"x": 3, "y": 4}});
    a.send(json!({"type":"presence","state":state})).await?;
    let want = json!({"user": sa, "region": "EU", "state": state, "since": a_since});
    for c in [&mut obs, &mut b] {
        let f = read_until(c, "a's state", Duration::from_secs(5), |f| {
            f["type"] == "presence" && f["joins"].get(&sa).is_some()
        })
        .await?;
        check!(
            f["joins"] == one(&sa, want.clone()) && f["leaves"] == json!([]),
            "a's state update as seen by {}: {f}",
            c.session
        );
    }
    // Fence for the sender: get_state is answered after the update was handled.
    let mark = a.history.len();
    a.get_state().await?;
    check!(
        presence_about(&a.history[mark..], &sa).is_empty(),
        "the sender got its own state update back: {:?}",
        &a.history[mark..]
    );
    let p = http_presence(port, &room).await?;
    check!(p["members"][&sa]["state"] == state, "HTTP presence after a state update: {p}");

    // Exactly 1 KiB of JSON is accepted; one byte more is `too_large` and changes nothing.
    let fill = |len: usize| {
        let base = r#"{"p":""}"#.len();
        format!(r#"{{"p":"{}"}}"#, "x".repeat(len - base))
    };
    let exact = fill(1024);
    let over = fill(1025);
    check!(exact.len() == 1024 && over.len() == 1025, "fill helper");
    a.send_text(format!(r#"{{"type":"presence","state":{over}}}"#)).await?;
    let e =
        read_until(&mut a, "too_large", Duration::from_secs(5), |f| f["type"] == "error").await?;
    check!(e["code"] == "too_large", "a 1025-byte presence state should get too_large: {e}");
    let p = http_presence(port, &room).await?;
    check!(
        p["members"][&sa]["state"] == state,
        "a refused state must change nothing, HTTP says {}",
        p["members"][&sa]
    );
    // Not an object → invalid, changes nothing.
    a.send(json!({"type":"presence","state":[1,2]})).await?;
    let e = read_until(&mut a, "invalid", Duration::from_secs(5), |f| f["type"] == "error").await?;
    check!(e["code"] == "invalid", "a non-object presence state should be invalid: {e}");
    // Fence for the others: the next update they see must be the 1 KiB one.
    let obs_mark = obs.history.len();
    a.send_text(format!(r#"{{"type":"presence","state":{exact}}}"#)).await?;
    let exact_v: Value = serde_json::from_str(&exact).unwrap();
    let f = read_until(&mut obs, "a's 1 KiB state", Duration::from_secs(5), |f| {
        f["type"] == "presence" && f["joins"].get(&sa).is_some()
    })
    .await?;
    check!(
        f["joins"][&sa]["state"] == exact_v,
        "after refused updates the observer should see the 1 KiB one next: {}",
        short(&f)
    );
    let about = presence_about(&obs.history[obs_mark..], &sa);
    check!(about.len() == 1, "observer saw something for the refused updates: {about:?}");
    let mark = a.history.len();
    a.get_state().await?;
    check!(
        a.history[mark..].iter().all(|f| f["type"] != "error"),
        "a 1024-byte state should be accepted: {:?}",
        &a.history[mark..]
    );

    // A new member's welcome lists the states; a reconnect of `a` keeps its state (and is
    // silent: same region, same user).
    let mut late = dial_from(port, &room, &support::session("late"), GRU).connect().await?;
    check!(
        late.welcome["presence"]["members"][&sa]["state"] == exact_v
            && late.welcome["presence"]["members"][&sb]["state"] == json!({}),
        "the welcome should list the current states: {}",
        short(&late.welcome)
    );
    let obs_mark = obs.history.len();
    let mut a2 = dial_from(port, &room, &sa, FRA).connect().await?;
    check!(
        a2.welcome["presence"]["members"][&sa]["state"] == exact_v
            && a2.welcome["presence"]["members"][&sa]["since"] == a_since,
        "a reconnect keeps the session's state and since: {}",
        short(&a2.welcome["presence"]["members"][&sa])
    );
    let code = a.expect_close(Duration::from_secs(5)).await?;
    check!(code == Some(4001), "old socket of a: {code:?}");
    b.send(json!({"type":"presence","state":{"fence":true}})).await?;
    read_until(&mut obs, "b's fence", Duration::from_secs(5), |f| {
        f["type"] == "presence" && f["joins"].get(&sb).is_some()
    })
    .await?;
    check!(
        presence_about(&obs.history[obs_mark..], &sa).is_empty(),
        "a same-region reconnect should be silent: {:?}",
        &obs.history[obs_mark..]
    );
    read_until(&mut late, "b's fence", Duration::from_secs(5), |f| {
        f["type"] == "presence" && f["joins"].get(&sb).is_some()
    })
    .await?;
    // The superseded socket's close, whenever the room hears it, takes nobody with it.
    drop(a);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let p = http_presence(port, &room).await?;
    check!(
        p["members"][&sa]["state"] == exact_v && p["summary"]["members"] == 4,
        "after the superseded socket closed, a must still be present with its state: {}",
        short(&p)
    );
    a2.get_state().await.map(drop)?; // a2 still works
    b.send(json!({"type":"presence","state":{"fence":2}})).await?;
    read_until(&mut obs, "b's second fence", Duration::from_secs(5), |f| {
        f["type"] == "presence" && f["joins"].get(&sb).is_some()
    })
    .await?;
    let about = presence_about(&obs.history[obs_mark..], &sa);
    check!(
        about.is_empty(),
        "the superseded socket's close was heard as a presence change: {about:?}"
    );
    Ok(())
}
