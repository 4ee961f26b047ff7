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
pub use engine::{Block, Room, READER_SESSION, RULES_SESSION, SERVER_SESSION};
pub use error::{CloseCode, Error, ReadRefusal};
pub use ids::{conn_id, epoch_id};
pub use io::{Commit, Hello, Input, LogEntry, LogId, Output, Peer, Snapshot, StateWrite};
pub use time::Time;

/// What an answer over HTTP (the member list, a rules' route, a document's rules' route) costs
/// its reader at least, from their reply budget: each is a turn of the object's one thread,
/// however short the answer. At the default `REPLY_BYTES_PER_SEC` (256 KiB) a reader gets 64 a
/// second, about what one socket may send.
pub(crate) const READ_FLOOR_BYTES: u64 = 4096;

/// The simulated adapter, for tests of the engine and of rules (feature
/// `sim`): outputs applied in order to an in-memory disk and sockets.
#[cfg(any(test, feature = "sim"))]
pub mod sim;
#[cfg(test)]
mod tests;
