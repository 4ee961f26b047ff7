//! The edge Worker: validates each request, derives the client's region and
//! routes room traffic to the room's Durable Object. It holds no room state.

pub mod forward;
mod refusal;
mod region;

use worker::{event, Context, Env, Method, Request, Response, Result};

use crate::protocol::names;
use forward::Forwarded;
use refusal::HttpRefusal;

/// The Durable Object namespace binding of the rooms (wrangler.toml).
const ROOMS: &str = "ROOMS";

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    console_error_panic_hook::set_once();
    let path = req.path();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let outcome = match segments.as_slice() {
        ["rooms", room, "ws"] => connect(&req, &env, room).await,
        ["rooms", room, "presence"] => presence(&req, &env, room).await,
        _ => Err(HttpRefusal::NotFound),
    };
    match outcome {
        Ok(resp) => Ok(resp),
        Err(refusal) => refusal.response(),
    }
}

/// `GET /rooms/{room}/ws`: check everything PROTOCOL.md refuses before the
/// upgrade, then hand the request to the room.
async fn connect(
    req: &Request,
    env: &Env,
    room: &str,
) -> std::result::Result<Response, HttpRefusal> {
    if req.method() != Method::Get {
        return Err(HttpRefusal::MethodNotAllowed);
    }
    if !names::valid_room(room) {
        return Err(HttpRefusal::BadRoom);
    }
    let url = req.url().map_err(|_| HttpRefusal::BadParam("url"))?;
    let mut session = None;
    let mut since = None;
    let mut epoch = None;
    for (k, v) in url.query_pairs() {
        match k.as_ref() {
            "session" => session = Some(v.into_owned()),
            "since" => {
                let n: u64 = v.parse().map_err(|_| HttpRefusal::BadParam("since"))?;
                since = Some(n);
            }
            "epoch" if names::valid_epoch(&v) => epoch = Some(v.into_owned()),
            "epoch" => return Err(HttpRefusal::BadParam("epoch")),
            _ => {}
        }
    }
    let session = session
        .filter(|s| names::valid_session(s))
        .ok_or(HttpRefusal::BadSession)?;
    let upgrade = req
        .headers()
        .get("upgrade")
        .ok()
        .flatten()
        .unwrap_or_default();
    if !upgrade.eq_ignore_ascii_case("websocket") {
        return Err(HttpRefusal::UpgradeRequired);
    }
    let fwd = Forwarded {
        room: room.to_owned(),
        // anonymous dev mode: the user is the session
        user: session.clone(),
        session,
        region: region::of(req, env),
        since,
        epoch,
    };
    forward_to_room(req, env, &fwd).await.map_err(|e| {
        worker::console_error!(
            "{}",
            serde_json::json!({"event": "route_error", "room": fwd.room, "error": e.to_string()})
        );
        HttpRefusal::Unavailable
    })
}

async fn forward_to_room(req: &Request, env: &Env, fwd: &Forwarded) -> Result<Response> {
    let stub = env.durable_object(ROOMS)?.get_by_name(&fwd.room)?;
    stub.fetch_with_request(forward::connect_request(req, fwd)?)
        .await
}

/// `GET /rooms/{room}/presence`: every member and the summary, as JSON.
async fn presence(
    req: &Request,
    env: &Env,
    room: &str,
) -> std::result::Result<Response, HttpRefusal> {
    if req.method() != Method::Get {
        return Err(HttpRefusal::MethodNotAllowed);
    }
    if !names::valid_room(room) {
        return Err(HttpRefusal::BadRoom);
    }
    let ask = async {
        let stub = env.durable_object(ROOMS)?.get_by_name(room)?;
        stub.fetch_with_request(forward::presence_request(room)?)
            .await
    };
    ask.await.map_err(|e| {
        worker::console_error!(
            "{}",
            serde_json::json!({"event": "route_error", "room": room, "error": e.to_string()})
        );
        HttpRefusal::Unavailable
    })
}
