//! What goes into a relay ([`Input`]) and what comes out ([`Output`]).

use std::rc::Rc;

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
    /// The short timer the relay asked for fired: the end of the turn.
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
    /// Close a client's socket. The relay has already forgotten it.
    Close { conn: String, code: u16, reason: String },
    /// Call back with [`Input::Alarm`] at this time.
    SetAlarm(Time),
    /// Call back with [`Input::Wake`] at this time (the end of the turn).
    SetWake(Time),
}
