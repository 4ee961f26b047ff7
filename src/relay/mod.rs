//! The relay: a pure state machine, beside the room engine, that holds one
//! region's sockets of a big room and speaks for them to the room's home over
//! one link ([`crate::protocol::link`]).
//!
//! The home stays the only authority: it sequences, stores, runs the rules,
//! decides joins and keeps the log. A relay never assigns a `seq` and never
//! decides a write. It forwards its clients' opens, frames and closes to the
//! home in one message per turn; it receives the home's frames once per relay
//! (each serialized once, addressed to the relay's connections) and hands
//! them to its clients; it watches its own clients' liveness (heartbeats
//! never cross the link); and it delivers a signal between two of its own
//! members at once, without the round trip to the home (the home sends it to
//! everyone else, never back).
//!
//! As with [`crate::room::Room`], the adapter feeds [`Input`]s with the
//! current time to [`Relay::handle`] and applies the [`Output`]s it drains
//! from [`Relay::poll_output`] in order. The home's side is [`Relays`] (which
//! instance of each relay it listens to) and [`Downlinks`] (what it owes each
//! link in a turn, one message per link).
//!
//! ```
//! use homeroom::relay::{Input, Output, Relay};
//! use homeroom::room::{Hello, RoomConfig, Time};
//!
//! let mut relay = Relay::new("oc-0", 1, RoomConfig::default());
//! let now = Time::from_ms(1_000);
//! relay.handle(now, Input::Open(Hello {
//!     conn: "oc-0.c1".into(), session: "s-ann1".into(), user: "ann".into(),
//!     region: "OC".into(), since: None, epoch: None, rand: 7, secret: 9,
//!     expires: None, info: None, canary: false, link: None, tail: None, relay_flow: false,
//!     relay_mirror: false,
//!     relay_signals: false,
//! }));
//! relay.handle(now, Input::Wake); // the end of the turn: one message up
//! let up: Vec<String> = std::iter::from_fn(|| relay.poll_output())
//!     .filter_map(|out| match out { Output::Up(text) => Some(text), _ => None })
//!     .collect();
//! assert_eq!(up.len(), 1);
//! assert!(up[0].contains(r#""op":"open""#));
//! ```

mod downlinks;
mod engine;
mod io;
mod policy;
mod recall;
mod registry;
mod tail;

pub use downlinks::Downlinks;
pub use engine::{Relay, RelayStats, OPEN_HOLD_MS, RESTART};
pub use io::{Input, Output};
pub use policy::{relay_for, valid_relay, Policy};
pub use recall::{Answer, Held, Recalls, HELD_BYTES, PARKED_BYTES};
pub use registry::{Admit, Relays};
pub use tail::{Tail, TAIL_MAX_BYTES};

/// The simulated topology: a home and its relays over links with a delay,
/// for tests of whole rooms across objects (feature `sim`).
#[cfg(any(test, feature = "sim"))]
pub mod sim;
#[cfg(test)]
mod tests;
