//! Home placement (issue 4, README "Protocol decisions": Home): a new room's `welcome.home` is
//! the location hint of the request that created it (its continent, on the main runtime), and
//! later requests from elsewhere do not move it; on a runtime with `HOME=weur` and
//! `ROOM_HOMES={"vip":"apac"}` every new room is `weur` and `vip` is `apac`, whoever creates it.

use serde_json::{json, Value};

use crate::check;
use crate::edge_support::{self as es, PLACED, VIP_ROOM};
use crate::harness::{shared, Spec};
use crate::presence::{dial_from, Place, DFW, FRA, GRU, SYD};
use crate::support::{self, Ctx, R};

pub fn trials() -> Vec<Spec> {
    vec![
        shared("edge_home::the_creating_request_decides", creating_request_decides),
        es::on("edge_home::operator_homes_win", &PLACED, operator_homes),
    ]
}

const NRT: Place = ("NRT", "JP", "AS");
const JNB: Place = ("JNB", "ZA", "AF");
/// McMurdo: a continent with no location hint.
const MCM: Place = ("MCM", "AQ", "AN");

/// Connects from `place` and returns the welcome's `home` (`Value::Null` when absent).
async fn home_from(port: u16, room: &str, place: Place) -> R<Value> {
    let c = dial_from(port, room, &support::session("home"), place).connect().await?;
    let home = c.welcome.get("home").cloned().unwrap_or(Value::Null);
    c.close().await;
    Ok(home)
}

async fn creating_request_decides(ctx: Ctx) -> R {
    let port = ctx.port;
    // Each continent's hint, for a room that continent creates.
    let cases = [
        (SYD, json!("oc")),
        (FRA, json!("weur")),
        (DFW, json!("enam")),
        (GRU, json!("sam")),
        (NRT, json!("apac")),
        (JNB, json!("afr")),
        // No hint for Antarctica: the room has no home and the welcome no `home` field.
        (MCM, Value::Null),
    ];
    for (place, want) in &cases {
        let room = support::room("home");
        let got = home_from(port, &room, *place).await?;
        check!(&got == want, "a room created from {place:?} should have home {want}, got {got}");
    }

    // Created from OC; connections from EU and NA afterwards (one still open) do not move it.
    let room = support::room("home-oc");
    let first = dial_from(port, &room, &support::session("first"), SYD).connect().await?;
    check!(first.welcome["home"] == "oc", "created from OC: {}", first.welcome);
    for place in [FRA, DFW, FRA] {
        let got = home_from(port, &room, place).await?;
        check!(
            got == "oc",
            "a later connection from {place:?} should still see home oc, got {got}"
        );
    }
    first.close().await;
    let got = home_from(port, &room, FRA).await?;
    check!(
        got == "oc",
        "after everyone left, a connection from EU should still see home oc, got {got}"
    );

    // A read creates nothing: a presence read from OC of a room nobody created is a 404, and
    // the connect from EU that comes next is the one that creates it, in EU.
    let room = support::room("home-presence");
    let blob = es::cf_blob(SYD);
    let resp = es::get(port, &format!("/rooms/{room}/presence"), &[("MF-CF-Blob", &blob)]).await?;
    check!(
        resp.status == 404 && resp.body.contains("room_not_found"),
        "GET /presence of a room nobody created: {} {}",
        resp.status,
        resp.body
    );
    let got = home_from(port, &room, FRA).await?;
    check!(got == "weur", "a room first read from OC, then created from EU: home {got}");
    Ok(())
}

async fn operator_homes(ctx: Ctx) -> R {
    let port = ctx.port;
    for place in [SYD, DFW] {
        let room = support::room("placed");
        let got = home_from(port, &room, place).await?;
        check!(
            got == "weur",
            "with HOME=weur a room created from {place:?} should be weur, got {got}"
        );
    }
    // ROOM_HOMES wins over HOME, and the first caller's place does not matter.
    let got = home_from(port, VIP_ROOM, FRA).await?;
    check!(got == "apac", "ROOM_HOMES says {VIP_ROOM} is apac; got {got}");
    let got = home_from(port, VIP_ROOM, SYD).await?;
    check!(got == "apac", "{VIP_ROOM} stays apac for a later connection; got {got}");
    let problems = ctx.log.events("config_error");
    check!(problems.is_empty(), "the runtime reported config errors: {problems:?}");
    Ok(())
}
