//! The room engine: a pure state machine that orders, stores and replays a
//! room's writes and tracks who is present.
//!
//! Nothing here touches the runtime. The adapter feeds [`Input`]s with the
//! current time to [`Room::handle`] and applies the [`Output`]s it drains from
//! [`Room::poll_output`] in order: `Persist` before the `Send`/`Broadcast` that
//! reveal it, which is how "stored before seen" holds.

mod config;
mod engine;
mod error;
pub(crate) mod flow;
mod history;
mod ids;
mod io;
pub(crate) mod outbox;
mod presence;
pub(crate) mod rate;
pub mod rules;
pub(crate) mod state;
mod time;
mod timer;
mod users;

pub use config::{Limits, RoomConfig, ROOM_VARIABLES};
pub use engine::{Block, Room, RULES_SESSION, SERVER_SESSION};
pub use error::{CloseCode, Error, ReadRefusal};
pub use ids::{conn_id, epoch_id};
pub use io::{Commit, Hello, Input, LogEntry, LogId, Output, Peer, Snapshot, StateWrite};
pub use time::Time;

/// The simulated adapter, for tests of the engine and of rules (feature
/// `sim`): outputs applied in order to an in-memory disk and sockets.
#[cfg(any(test, feature = "sim"))]
pub mod sim;
#[cfg(test)]
mod tests;
