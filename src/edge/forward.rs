//! The contract between the Worker and the room object: which request it is
//! (path) and what the Worker has checked about it (headers).

use worker::{Headers, Method, Request, RequestInit};

const ROOM: &str = "x-homeroom-room";
const SESSION: &str = "x-homeroom-session";
const USER: &str = "x-homeroom-user";
const REGION: &str = "x-homeroom-region";
const SINCE: &str = "x-homeroom-since";
const EPOCH: &str = "x-homeroom-epoch";

/// A connection the Worker has validated and is handing to the room.
#[derive(Debug, Clone)]
pub struct Forwarded {
    pub room: String,
    pub session: String,
    pub user: String,
    pub region: String,
    pub since: Option<u64>,
    pub epoch: Option<String>,
}

/// What the room object is asked to do.
#[derive(Debug)]
pub enum Inbound {
    /// Accept a WebSocket (the request carries the client's upgrade).
    Connect(Forwarded),
    /// Answer with the member list and summary.
    Presence { room: String },
}

/// The request that hands a client's upgrade to the room: the client's
/// headers (so the upgrade goes through) plus what the Worker checked.
pub fn connect_request(client: &Request, fwd: &Forwarded) -> worker::Result<Request> {
    let headers = Headers::new();
    for (k, v) in client.headers().entries() {
        if !k.starts_with("x-homeroom-") {
            headers.set(&k, &v)?;
        }
    }
    headers.set(ROOM, &fwd.room)?;
    headers.set(SESSION, &fwd.session)?;
    headers.set(USER, &fwd.user)?;
    headers.set(REGION, &fwd.region)?;
    if let Some(since) = fwd.since {
        headers.set(SINCE, &since.to_string())?;
    }
    if let Some(epoch) = &fwd.epoch {
        headers.set(EPOCH, epoch)?;
    }
    inner(&fwd.room, "connect", headers)
}

/// The request for a room's presence.
pub fn presence_request(room: &str) -> worker::Result<Request> {
    let headers = Headers::new();
    headers.set(ROOM, room)?;
    inner(room, "presence", headers)
}

fn inner(room: &str, what: &str, headers: Headers) -> worker::Result<Request> {
    let mut init = RequestInit::new();
    init.with_method(Method::Get).with_headers(headers);
    Request::new_with_init(&format!("https://room/{room}/{what}"), &init)
}

/// Reads what the Worker forwarded; `None` for a request that did not come
/// through it (the object is reachable only through the Worker anyway).
pub fn read(req: &Request) -> Option<Inbound> {
    let h = req.headers();
    let get = |name: &str| h.get(name).ok().flatten();
    let room = get(ROOM)?;
    if req.path().ends_with("/presence") {
        return Some(Inbound::Presence { room });
    }
    Some(Inbound::Connect(Forwarded {
        room,
        session: get(SESSION)?,
        user: get(USER)?,
        region: get(REGION)?,
        since: get(SINCE).and_then(|s| s.parse().ok()),
        epoch: get(EPOCH),
    }))
}
