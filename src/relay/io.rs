//! What goes into a relay ([`Input`]) and what comes out ([`Output`]).

use std::rc::Rc;

use serde_json::value::RawValue;

use crate::protocol::link::{LinkError, Open};
use crate::room::{Hello, Time};

/// One event for the relay. Time comes with it, in [`Relay::handle`](super::Relay::handle).
#[derive(Debug)]
pub enum Input<'a> {
    /// The relay accepted a client's socket, as the Worker vouched for it.
    /// `conn` must be unique in the room (the adapter puts the relay's name
    /// in it); `link` is ignored (the relay is the link's far end).
    Open(Hello),
    /// A text frame from a client.
    Text { conn: &'a str, text: &'a str },
    /// A binary frame from a client, of `len` bytes: no kind of room takes one (PROTOCOL.md:
    /// refused, `bad_frame`), so the relay refuses it itself and it never crosses the link.
    Binary { conn: &'a str, len: usize },
    /// A client's socket closed or errored.
    Closed { conn: &'a str },
    /// The runtime answered a client's heartbeat ping at `at` without waking
    /// the relay; reported when the alarm fires.
    Heartbeat { conn: &'a str, at: Time },
    /// A message from the home over the link (a [`crate::protocol::link::Down`]).
    Down(&'a str),
    /// The link to the home broke. The relay's clients are cut off from
    /// the room; they are closed (1012) and reconnect, resuming where they
    /// were. The adapter opens the next link as instance `epoch` (stored,
    /// and higher than any before).
    LinkClosed { epoch: u64 },
    /// The storage alarm the relay asked for fired (its liveness sweep).
    Alarm,
    /// The short timer the relay asked for fired: the end of the turn, or of a coalescing
    /// window of local signals. A spurious one does no harm.
    Wake,
}

/// What the relay asks its adapter to do, in order.
#[derive(Debug)]
pub enum Output {
    /// Send this message to the home over the link (a [`crate::protocol::link::Up`]).
    Up(String),
    /// Send one frame to one client.
    Send { conn: String, frame: Rc<str> },
    /// Send one frame to each of these clients.
    Multicast { conns: Vec<String>, frame: Rc<str> },
    /// Send one frame to every client but these (in order of name): the usual frame for all,
    /// which the adapter sends in one loop over its sockets.
    AllBut { skip: Vec<String>, frame: Rc<str> },
    /// Close a client's socket. The relay has already forgotten it.
    Close { conn: String, code: u16, reason: String },
    /// Call back with [`Input::Alarm`] at this time.
    SetAlarm(Time),
    /// Call back with [`Input::Wake`] at this time (the end of the turn, or of a coalescing
    /// window); an earlier request may stand in for a later one.
    SetWake(Time),
}

impl From<Hello> for Open {
    /// What crosses the link of a client the relay accepted.
    fn from(h: Hello) -> Open {
        Open {
            conn: h.conn,
            session: h.session,
            user: h.user,
            region: h.region,
            since: h.since,
            epoch: h.epoch,
            rand: h.rand,
            secret: h.secret,
            expires: h.expires.map(Time::ms),
            info: h.info.map(|i| i.get().to_owned()),
            tail: h.tail,
        }
    }
}

impl Open {
    /// The engine's [`Hello`] for this client, a session over `link`, whose relay speaks
    /// link `version` ([`crate::protocol::link::LINK_VERSION`]). A relay's `info` that is not
    /// JSON is refused (the home does not guess at what a relay meant).
    pub fn into_hello(self, link: &str, version: u32) -> Result<Hello, LinkError> {
        let info = match self.info {
            Some(text) => Some(RawValue::from_string(text).map_err(|e| LinkError(e.to_string()))?),
            None => None,
        };
        Ok(Hello {
            conn: self.conn,
            session: self.session,
            user: self.user,
            region: self.region,
            since: self.since,
            epoch: self.epoch,
            rand: self.rand,
            secret: self.secret,
            expires: self.expires.map(Time::from_ms),
            info,
            canary: false,
            link: Some(link.to_owned()),
            tail: self.tail,
            relay_flow: version >= 2,
            relay_mirror: version >= 3,
            relay_signals: version >= 4,
        })
    }
}
