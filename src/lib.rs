//! homeroom: ordered, durable, resumable rooms on Cloudflare Durable Objects.
//!
//! The crate has three layers (see README.md, "Architecture"):
//! - [`protocol`]: the wire frames of PROTOCOL.md, parsed and validated;
//! - [`room`]: the room engine, a pure state machine (builds and tests natively);
//! - [`auth`] and [`regions`]: tokens, the admin key and the region table,
//!   pure functions the Worker uses;
//! - `durable` and `edge`: the Durable Object and Worker adapters (wasm32 only).

pub mod auth;
pub mod protocol;
pub mod regions;
pub mod room;

#[cfg(target_arch = "wasm32")]
mod durable;
#[cfg(target_arch = "wasm32")]
mod edge;
#[cfg(target_arch = "wasm32")]
mod forward;
mod logline;
