//! The document kind: a room holding one Yjs document (`yrs`), spoken to with the
//! y-protocols sync and awareness messages that every Yjs editor binding speaks
//! (PROTOCOL-DOCUMENTS.md). Built with the crate feature `documents` only.
//!
//! - [`wire`]: the messages, decoded with every count bounded;
//! - [`DocRoom`]: the room, a pure state machine like [`crate::room`]'s engine: every
//!   update is stored before any socket sees it, awareness is kept in memory per socket;
//! - [`DocConfig`]: its bounds and budgets;
//! - [`DocError`]: why something a member sent was refused, and what that does to its socket;
//! - [`rules`]: a kind's own rules: who may write, which updates the room takes, and the
//!   room's own edits.
//!
//! ```
//! use homeroom::doc::{DocConfig, DocRoom, Effect, Member};
//!
//! // The Yjs client id of the room's own edits, and the seed its flow marks are drawn from:
//! // an adapter draws both at random each time it loads the room.
//! let mut room = DocRoom::new(DocConfig::default(), 1).with_seed(0x5eed);
//! let ann = Member {
//!     user: "ann".into(),
//!     read_only: false,
//!     extensions: false,
//!     expires: None,
//!     anonymous: false,
//! };
//! room.open(0, 7, ann);
//! // Ann is sent the room's state vector (sync step 1), and her socket's record is kept.
//! assert!(matches!(room.take_effects()[..], [Effect::Send(7, _), Effect::Remember(7)]));
//! ```

mod awareness;
mod census;
mod clocks;
mod config;
mod engine;
mod error;
pub(crate) mod flow;
pub mod guard;
pub(crate) mod nesting;
pub mod rules;
pub(crate) mod tails;
#[cfg(test)]
mod tests;
mod versions;
mod view;
pub mod wire;
mod writers;

pub use census::MAX_BLOCKS;
pub use config::DocConfig;
pub use engine::{
    attachment_conn, read_attachment, DocRoom, Effect, Member, Record, MAX_ATTACHMENT,
};
pub use error::{Consequence, DocError};
pub use nesting::MAX_NESTING;
pub use versions::MAX_VERSIONS;
pub use view::TYPES;
pub use wire::Entry;
/// The `yrs` this crate builds with, for rules that read and edit documents.
pub use yrs;

/// A socket of a document room, as its adapter numbers them.
pub type ConnId = u64;
