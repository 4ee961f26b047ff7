//! The edge Worker: every request passes here first. It keeps strangers out
//! (tokens, admin key), derives the client's region, routes room traffic to
//! the room's Durable Object (by the kind of room the path names), and
//! answers the operator's probes. It holds no room state.
//!
//! A crate's Worker calls `fetch` and `scheduled` (wasm32) from its event
//! handlers with the kinds of room it serves ([`crate::worker!`] writes them).
//! The pure parts (the region table, the CORS origins, [`Kind`]) build and
//! test natively; the adapter (`serve.rs` and what it uses) is wasm32 only.

pub mod origins;
pub mod regions;

#[cfg(target_arch = "wasm32")]
mod body;
#[cfg(target_arch = "wasm32")]
pub(crate) mod config;
#[cfg(target_arch = "wasm32")]
mod cors;
#[cfg(all(target_arch = "wasm32", feature = "documents"))]
mod docs;
#[cfg(target_arch = "wasm32")]
mod health;
#[cfg(target_arch = "wasm32")]
mod home;
#[cfg(target_arch = "wasm32")]
mod probe;
#[cfg(target_arch = "wasm32")]
mod refusal;
#[cfg(target_arch = "wasm32")]
mod region;
#[cfg(target_arch = "wasm32")]
mod relays;
#[cfg(target_arch = "wasm32")]
mod rooms;
#[cfg(target_arch = "wasm32")]
mod serve;

#[cfg(target_arch = "wasm32")]
pub(crate) use crate::logline::log;
#[cfg(target_arch = "wasm32")]
pub use serve::{fetch, scheduled};

/// A kind of room a Worker serves: the first path segment it is reached at
/// (`/{path}/{room}/ws`), the binding of its Durable Object class
/// (`wrangler.toml`), and the rules' routes anyone may call without a
/// token. The first kind is the one the health canary uses.
#[derive(Debug)]
pub struct Kind {
    pub path: &'static str,
    pub binding: &'static str,
    /// The binding of the kind's second kind of object, if it declares one
    /// (`, companion Class(Type), binding "B"` in [`crate::worker!`]): what
    /// the edge will route a big room's regional sockets to.
    pub companion: Option<&'static str>,
    /// Routes of the kind's rules open to callers with neither a token nor
    /// the admin key, as `"METHOD path"` (`"GET lot"` is
    /// `GET /{kind}/{room}/lot`). Every other rules route stops such a
    /// caller at the edge, before any object is reached.
    pub public: &'static [&'static str],
    /// A document kind (`documents { .. }` in [`crate::worker!`]): its rooms hold a Yjs
    /// document and speak the y-protocols messages at `/{path}/{room}`
    /// (PROTOCOL-DOCUMENTS.md).
    pub document: bool,
}

impl Kind {
    /// Whether `method path` (the path after the room) is a public route.
    pub fn is_public(&self, method: &str, path: &str) -> bool {
        self.public.iter().any(|route| {
            route.split_once(' ').is_some_and(|(m, p)| m.eq_ignore_ascii_case(method) && p == path)
        })
    }
}
