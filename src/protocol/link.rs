//! The link between a relay and its room's home: what crosses it, both ways.
//! Both the relay ([`crate::relay`]) and the home's adapter speak it, so it
//! belongs to neither.
//!
//! One message per turn each way, a JSON object holding the turn's operations
//! in order. Up (relay to home) carries the relay's name and epoch, and its
//! clients' opens, frames and closes, untouched: the home parses and decides
//! every one as if the client were its own. Down (home to relay) carries the
//! home's frames, each serialized once and addressed to the relay's
//! connections that should have it, and its closes. Nothing per socket
//! crosses that the room did not mean for that socket: no pings, no
//! heartbeats (the relay watches its own clients), no acks but the writer's.
//!
//! ```
//! use homeroom::protocol::link::{Down, DownOp};
//!
//! let down = Down { ops: vec![DownOp::All { skip: vec![], frame: r#"{"type":"pong"}"#.into() }] };
//! let text = down.to_text();
//! assert_eq!(Down::parse(&text).unwrap(), down);
//! ```

use serde::{Deserialize, Serialize};

/// A relay's turn for the home: who it is, and what its clients did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Up {
    /// The relay's name, the same across its instances (e.g. `oc-0`).
    pub relay: String,
    /// Which instance of the relay: it grows each time the relay starts.
    /// The home refuses an instance older than one it has heard from.
    pub epoch: u64,
    pub ops: Vec<UpOp>,
}

/// One thing a relay's client did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum UpOp {
    /// A client connected to the relay, as the Worker vouched for it.
    Open(Open),
    /// A text frame from the client, as it came (a signal the relay has
    /// already delivered to its own members too: the home sends it to the
    /// others only).
    Text { conn: String, text: String },
    /// The client's socket closed, or the relay closed it.
    Closed { conn: String },
}

/// A client the relay accepted: the fields of [`crate::room::Hello`] that
/// cross the link. `conn` is unique in the room: the relay's adapter puts
/// the relay's name in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Open {
    pub conn: String,
    pub session: String,
    pub user: String,
    pub region: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
    pub rand: u64,
    pub secret: u64,
    /// When the token expires, in ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// The token's verified `info`, as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<String>,
}

/// The home's turn for one relay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Down {
    pub ops: Vec<DownOp>,
}

/// One thing the home asks a relay to do, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum DownOp {
    /// Send `frame` to each of these connections.
    Send { to: Vec<String>, frame: String },
    /// Send `frame` to every connection of the relay the home has addressed
    /// before (its welcome comes first), but those in `skip`.
    All { skip: Vec<String>, frame: String },
    /// Close a connection with this code and reason; the home has forgotten it.
    Close { conn: String, code: u16, reason: String },
    /// This instance of the relay is stale: a newer one (`epoch`) speaks for
    /// the relay now. The relay closes its clients (1012), who reconnect.
    Stale { epoch: u64 },
}

/// Why a link message was not understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkError(pub String);

impl Up {
    /// The message as it crosses the link.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }

    /// A message from a relay; anything but the shape above is an error.
    pub fn parse(text: &str) -> Result<Up, LinkError> {
        serde_json::from_str(text).map_err(|e| LinkError(e.to_string()))
    }
}

impl Down {
    /// The message as it crosses the link.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }

    /// A message from the home; anything but the shape above is an error.
    pub fn parse(text: &str) -> Result<Down, LinkError> {
        serde_json::from_str(text).map_err(|e| LinkError(e.to_string()))
    }
}
