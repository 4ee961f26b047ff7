//! The wire contract of PROTOCOL.md: names, client frames in, server frames out.
//!
//! Parsing is kept apart from applying: [`client::parse`] turns text into a
//! [`client::ClientFrame`] or a [`client::FrameError`]; the room engine decides
//! what a valid frame does.

pub mod client;
pub mod json;
pub mod link;
pub mod names;
pub mod server;

pub use client::{parse, ClientFrame, FrameError};
