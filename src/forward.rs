//! The contract between the Worker and the room object: which room, where the
//! Worker would place it, and what it is asked to do with what the Worker
//! checked about the caller, as one typed value. Both sides use these
//! functions, so they cannot disagree; it belongs to neither.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use worker::{Headers, Method, Request, RequestInit};

/// The header that carries the [`Ask`] (base64url of its JSON: header
/// values must be plain ASCII, and keys and paths need not be).
const ASK: &str = "x-homeroom-ask";

/// A connection the Worker has validated and is handing to the room.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Forwarded {
    pub session: String,
    pub user: String,
    pub region: String,
    pub since: Option<u64>,
    pub epoch: Option<String>,
    /// When the token that admitted it expires (ms); `None` without a token.
    pub expires: Option<u64>,
    /// The token's `info` claim (JSON), if any.
    pub info: Option<String>,
    /// The Worker's own health canary (see `room::Hello::canary`).
    #[serde(default)]
    pub canary: bool,
    /// The kind has relays and the Worker sent this connect to the home
    /// directly: at this many members the home answers "use a relay"
    /// ([`USE_RELAY`]) instead of taking the socket (`RELAY_ABOVE`).
    #[serde(default)]
    pub relay_above: Option<u64>,
}

impl Forwarded {
    /// The engine's [`Hello`](crate::room::Hello) for this connection: `conn` on the object
    /// that took its socket (the home, or a relay), with the object's random `rand` and
    /// `secret`; a socket an object holds itself is on no link.
    pub fn into_hello(self, conn: String, rand: u64, secret: u64) -> crate::room::Hello {
        crate::room::Hello {
            conn,
            session: self.session,
            user: self.user,
            region: self.region,
            since: self.since,
            epoch: self.epoch,
            rand,
            secret,
            expires: self.expires.map(crate::room::Time::from_ms),
            info: self.info.and_then(|i| serde_json::value::RawValue::from_string(i).ok()),
            canary: self.canary,
            link: None,
            tail: None,
            relay_flow: false,
            relay_mirror: false,
            relay_signals: false,
        }
    }
}

/// The header of the home's answer to a direct connect that should have
/// gone through a relay (status 307): the room is relayed now.
pub const USE_RELAY: &str = "x-homeroom-use-relay";

/// A request for one of a room's relays rather than its home: which relay,
/// and the binding of the home it speaks to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Via {
    /// The relay's name in the room, e.g. `EU-0` (region and shard).
    pub relay: String,
    /// The binding of the kind's rooms, whose object named after the room
    /// is the relay's home.
    pub home_binding: String,
}

/// A request under a room's path that no built-in route takes: the room's
/// rules may answer it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Custom {
    pub method: String,
    /// The path after `/{kind}/{room}/`.
    pub path: String,
    pub query: String,
    /// The caller gave the admin key.
    pub admin: bool,
    /// The user of a valid room token the caller gave.
    pub user: Option<String>,
    /// That token's `info` claim (JSON), if any.
    #[serde(default)]
    pub info: Option<String>,
    /// Where the caller is.
    #[serde(default)]
    pub region: String,
}

impl Custom {
    /// The request as the rules see it (a room's or a document's), with its body.
    pub fn with_body(self, body: String) -> crate::room::rules::Request {
        let Custom { method, path, query, admin, user, info, region } = self;
        let info = info.and_then(|i| serde_json::value::RawValue::from_string(i).ok());
        crate::room::rules::Request { method, path, query, body, admin, user, info, region }
    }
}

/// What the room object is asked to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Inbound {
    /// Accept a WebSocket (the request carries the client's upgrade).
    Connect(Forwarded),
    /// Answer with the member list and summary, to the token's user
    /// (`None` in anonymous dev mode), who pays for it and whom the rules
    /// may keep out ([`Rules::read`](crate::room::rules::Rules::read)): with
    /// the token's `info` and where the reader is.
    Presence {
        reader: Option<String>,
        #[serde(default)]
        info: Option<String>,
        #[serde(default)]
        region: String,
    },
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
    /// The whole state (admin).
    State,
    /// One key of the state (admin).
    Key(String),
    /// Write a key: the JSON body `{"value","if_version"?,"id"?}` (admin).
    PutKey { key: String, region: String },
    /// The retained log after `since`, at most `limit` entries (admin).
    Log { since: u64, limit: u64 },
    /// A path the room's rules may answer (the body is the request's).
    Custom(Custom),
    /// A relay's link (the request carries its upgrade): instance `epoch`
    /// of relay `relay` speaks for its clients over the WebSocket it gets.
    /// Only a relay object makes this request: the Worker never forwards
    /// one (it builds every [`Routed`] itself and strips any header that
    /// could pose as one).
    /// `version`: the link the relay speaks ([`crate::protocol::link::LINK_VERSION`]; 1 when
    /// it names none, as relays before versions did).
    Link {
        relay: String,
        epoch: u64,
        #[serde(default = "link_v1")]
        version: u32,
    },
    /// A request for a document kind's room ([`DocAsk`]).
    #[cfg(feature = "documents")]
    Doc(DocAsk),
    /// Panic inside the object: a forced Wasm reset (test builds only).
    #[cfg(feature = "fault-injection")]
    Fault,
    /// A relay goes silent with its link open, as a relay that hangs would: it forwards
    /// nothing more and stops pinging its link (test builds only).
    #[cfg(feature = "fault-injection")]
    Mute,
    /// A relay's link breaks, both ends alive: the relay lets it go as if the connection
    /// had dropped (its clients are closed 1012 and resume through its next instance), and
    /// the home hears it close (test builds only).
    #[cfg(feature = "fault-injection")]
    Cut,
    /// The home drops its memory as an eviction would (its sockets and links stay open); the
    /// next event rebuilds it from storage (test builds only).
    #[cfg(feature = "fault-injection")]
    Forget,
    /// The home waits `ms` (at most 5,000) on a timer (workers-rs's `Delay`, which keeps the
    /// waker of its first poll) before it answers: a handler that waits from its first poll
    /// still answers (`host::settle`; test builds only).
    #[cfg(feature = "fault-injection")]
    Nap { ms: u64 },
    /// From now on the home takes each relay's link request only `ms` (at most 60,000) after
    /// it came, 0 at once again: a home whose links hang, so that a relay's dial does not
    /// settle (test builds only).
    #[cfg(feature = "fault-injection")]
    Stall { ms: u64 },
}

/// What a document kind's room is asked (PROTOCOL-DOCUMENTS.md).
#[cfg(feature = "documents")]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum DocAsk {
    /// Accept a document socket (the request carries the client's upgrade).
    Connect {
        /// The token's user; `None` in anonymous dev mode (the room names the socket).
        user: Option<String>,
        /// May read but not change the document.
        read_only: bool,
        /// Asked for homeroom's extension messages (`homeroom=1`).
        extensions: bool,
        /// When the token that admitted it expires (ms); `None` without a token.
        #[serde(default)]
        expires: Option<u64>,
    },
    /// The whole document as one Yjs update (admin).
    Read,
    /// Shared types of the document as JSON: `(name, type)` pairs, the type one of `text`,
    /// `map`, `array`, `xml` (admin).
    Json { roots: Vec<(String, String)> },
    /// Apply the body, a Yjs update, as the room: stored and sent like a member's (admin).
    Apply,
    /// Counts: sockets, stored bytes (admin).
    Stats,
    /// Keep the document as it is now as version `name` (admin).
    SaveVersion { name: String },
    /// The versions kept: names, when, sizes (admin).
    Versions,
    /// Version `name` as one Yjs update (admin).
    Version { name: String },
    /// Make the shared types `roots` read as in version `name`, as a forward transaction (admin).
    RestoreVersion { name: String, roots: Vec<(String, String)> },
    /// Forget version `name` (admin).
    DropVersion { name: String },
}

/// The link version of a relay that names none (see [`Inbound::Link`]).
fn link_v1() -> u32 {
    1
}

/// A request for a room, as the object reads it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Routed {
    pub room: String,
    /// The location hint the Worker created the room's stub with.
    pub home: Option<String>,
    pub what: Inbound,
    /// For a relay of the room, not its home.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<Via>,
}

/// The request that hands `routed` to the room. A connect keeps the client's
/// headers (so the upgrade goes through), minus anything that could pose as
/// the contract.
pub fn request(
    routed: &Routed,
    client: Option<&Request>,
    method: Method,
    body: Option<Vec<u8>>,
) -> worker::Result<Request> {
    // The client's headers in one call (a header at a time is two crossings of the Wasm
    // boundary each, the biggest share of building this request); a contract header the client
    // sent is replaced below, and no other `x-homeroom-` header of a request is read.
    let headers = client.map_or_else(Headers::new, |client| client.headers().clone());
    if matches!(routed.what, Inbound::Link { .. }) {
        headers.set("upgrade", "websocket")?;
    }
    let json = serde_json::to_vec(routed).map_err(|e| worker::Error::RustError(e.to_string()))?;
    headers.set(ASK, &URL_SAFE_NO_PAD.encode(json))?;
    let mut init = RequestInit::new();
    init.with_method(method).with_headers(headers);
    if let Some(body) = body {
        init.with_body(Some(worker::js_sys::Uint8Array::from(&body[..]).into()));
    }
    Request::new_with_init(&format!("https://room/{}", routed.room), &init)
}

/// Reads what the Worker forwarded, from the request as the runtime delivered it (an object's
/// connect never makes workers-rs's `Request`: `host::upgrade`); `None` for a request that did
/// not come through it (the object is reachable only through the Worker anyway).
pub fn read_raw(req: &worker::worker_sys::web_sys::Request) -> Option<Routed> {
    // One call out of the Wasm, not three (the headers, the name, the value): every connect
    // reads it.
    let ask = homeroom_ask(req)?;
    let json = URL_SAFE_NO_PAD.decode(ask).ok()?;
    serde_json::from_slice(&json).ok()
}

// The header's name is written here as [`ASK`] is.
#[worker::wasm_bindgen::prelude::wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, inline_js = r#"
export function homeroom_ask(req) {
  return req.headers.get("x-homeroom-ask") ?? undefined;
}
"#)]
extern "C" {
    fn homeroom_ask(req: &worker::worker_sys::web_sys::Request) -> Option<String>;
}
