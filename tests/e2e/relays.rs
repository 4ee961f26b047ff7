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

/// Every connect of every kind with relays goes through one.
static RELAYED: LazyRuntime = LazyRuntime::new("relayed", || {
    [
        "--var",
        &format!("AUTH_SECRET:{}", es::SECRET),
        "--var",
        &format!("ADMIN_KEY:{}", es::ADMIN_KEY),
        "--var",
        "RELAY_ABOVE:0",
    ]
    .map(str::to_owned)
    .to_vec()
});

/// A room relays its new connects from its fifth member on (and back below two).
static THRESHOLD: LazyRuntime = LazyRuntime::new("relay-threshold", || {
    [
        "--var",
        &format!("AUTH_SECRET:{}", es::SECRET),
        "--var",
        &format!("ADMIN_KEY:{}", es::ADMIN_KEY),
        "--var",
        "RELAY_ABOVE:4",
    ]
    .map(str::to_owned)
    .to_vec()
});

pub fn trials() -> Vec<Spec> {
    vec![
        es::on(
            "relays::four_regions_get_every_message_once_and_exact_presence",
            &RELAYED,
            four_regions,
        ),
        es::on("relays::a_room_over_the_threshold_runs_mixed", &THRESHOLD, mixed),
    ]
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
        // One link message a turn, not one per member frame: fewer downs than frames sent.
        let frames = total * PER_REGION;
        let downs = r["down"].as_u64().unwrap_or(u64::MAX) as usize;
        check!(downs <= frames, "relay {region}-0 took {downs} messages for {frames} frames: {r}");
    }
    check!(stats["topology"]["relayed"] == members.len(), "relayed sessions: {stats}");
    // A signal: the member of the same relay gets it, every other member too, the sender not.
    let (_, sender) = &mut members[0];
    let from = sender.session.clone();
    sender.send(json!({"type":"signal","topic":"cursor","data":{"x":1}})).await?;
    for (_, c) in members.iter_mut().skip(1) {
        let s = c.until("the cursor signal", |f| f["type"] == "signal").await?;
        check!(s["session"] == from.as_str() && s["data"]["x"] == 1, "[{}] got {s}", c.session);
    }
    let (_, sender) = &mut members[0];
    sender.send(json!({"type":"get_state"})).await?;
    let state = sender.expect_type("state").await?;
    check!(
        !sender.history.iter().any(|f| f["type"] == "signal"),
        "the sender got its own signal back; then {state}"
    );
    let oc = relay_stats(ctx.port, &room, "OC-0").await?;
    check!(oc["local_signals"] == 1, "the OC relay delivered the signal itself: {oc}");
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
    Ok(())
}
