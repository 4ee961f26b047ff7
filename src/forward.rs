//! The contract between the Worker and the room object: which request it is
//! (the path) and what the Worker has checked about it (headers). Both sides
//! use these functions, so they cannot disagree; it belongs to neither.

use worker::{Headers, Method, Request, RequestInit};

const ROOM: &str = "x-homeroom-room";
const HOME: &str = "x-homeroom-home";
const SESSION: &str = "x-homeroom-session";
const USER: &str = "x-homeroom-user";
const REGION: &str = "x-homeroom-region";
const SINCE: &str = "x-homeroom-since";
const EPOCH: &str = "x-homeroom-epoch";
const EXPIRES: &str = "x-homeroom-expires";

/// A connection the Worker has validated and is handing to the room.
#[derive(Debug, Clone)]
pub struct Forwarded {
    pub session: String,
    pub user: String,
    pub region: String,
    pub since: Option<u64>,
    pub epoch: Option<String>,
    /// When the token that admitted it expires (ms); `None` without a token.
    pub expires: Option<u64>,
}

/// What the room object is asked to do.
#[derive(Debug)]
pub enum Inbound {
    /// Accept a WebSocket (the request carries the client's upgrade).
    Connect(Forwarded),
    /// Answer with the member list and summary.
    Presence,
    /// Answer with the room's stats (admin).
    Stats,
    /// Close every socket with 1001 (admin).
    Drain,
    /// Sequence the JSON body `{"id","topic","data"}` as a server message
    /// from `region` (admin).
    Publish { region: String },
    /// Close a user's connections and set or lift their block: the JSON
    /// body `{"user","block_secs"?}` (admin).
    Kick,
    /// Close every connection and delete the room's storage (admin).
    Delete,
    /// Panic inside the object: a forced Wasm reset (test builds only).
    #[cfg(feature = "fault-injection")]
    Fault,
}

/// A request for a room, as the object reads it.
#[derive(Debug)]
pub struct Routed {
    pub room: String,
    /// The location hint the Worker created the room's stub with.
    pub home: Option<String>,
    pub what: Inbound,
}

/// The request that hands a client's upgrade to the room: the client's
/// headers (so the upgrade goes through) plus what the Worker checked.
pub fn connect_request(
    client: &Request,
    room: &str,
    home: Option<&str>,
    fwd: &Forwarded,
) -> worker::Result<Request> {
    let headers = Headers::new();
    for (k, v) in client.headers().entries() {
        if !k.starts_with("x-homeroom-") {
            headers.set(&k, &v)?;
        }
    }
    headers.set(SESSION, &fwd.session)?;
    headers.set(USER, &fwd.user)?;
    headers.set(REGION, &fwd.region)?;
    if let Some(since) = fwd.since {
        headers.set(SINCE, &since.to_string())?;
    }
    if let Some(epoch) = &fwd.epoch {
        headers.set(EPOCH, epoch)?;
    }
    if let Some(expires) = fwd.expires {
        headers.set(EXPIRES, &expires.to_string())?;
    }
    inner(room, home, "connect", Method::Get, headers, None)
}

/// A request without a client socket: `what` is `presence`, `stats`,
/// `drain`, `delete`, `kick` (with `body`) or `publish` (with `body` and the
/// caller's region).
pub fn room_request(
    room: &str,
    home: Option<&str>,
    what: &str,
    region: Option<&str>,
    body: Option<String>,
) -> worker::Result<Request> {
    let headers = Headers::new();
    if let Some(region) = region {
        headers.set(REGION, region)?;
    }
    let method = match what {
        "delete" => Method::Delete,
        "drain" | "fault" => Method::Post,
        _ if body.is_some() => Method::Post,
        _ => Method::Get,
    };
    inner(room, home, what, method, headers, body)
}

fn inner(
    room: &str,
    home: Option<&str>,
    what: &str,
    method: Method,
    headers: Headers,
    body: Option<String>,
) -> worker::Result<Request> {
    headers.set(ROOM, room)?;
    if let Some(home) = home {
        headers.set(HOME, home)?;
    }
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers);
    if let Some(body) = body {
        init.with_body(Some(body.into()));
    }
    Request::new_with_init(&format!("https://room/{room}/{what}"), &init)
}

/// Reads what the Worker forwarded; `None` for a request that did not come
/// through it (the object is reachable only through the Worker anyway).
pub fn read(req: &Request) -> Option<Routed> {
    let h = req.headers();
    let get = |name: &str| h.get(name).ok().flatten();
    let room = get(ROOM)?;
    let home = get(HOME);
    let path = req.path();
    let what = match path.rsplit('/').next()? {
        "presence" => Inbound::Presence,
        "stats" => Inbound::Stats,
        "drain" => Inbound::Drain,
        "kick" => Inbound::Kick,
        "delete" => Inbound::Delete,
        #[cfg(feature = "fault-injection")]
        "fault" => Inbound::Fault,
        "publish" => Inbound::Publish { region: get(REGION)? },
        "connect" => Inbound::Connect(Forwarded {
            session: get(SESSION)?,
            user: get(USER)?,
            region: get(REGION)?,
            since: get(SINCE).and_then(|s| s.parse().ok()),
            epoch: get(EPOCH),
            expires: get(EXPIRES).and_then(|s| s.parse().ok()),
        }),
        _ => return None,
    };
    Some(Routed { room, home, what })
}
