//! A document room's bounds and budgets, and the deployment variable that moves them.

use crate::settings::{DEFAULT_DOC_MAX_BYTES, DOC_MAX_BYTES};

/// A document room's bounds (PROTOCOL-DOCUMENTS.md, "Bounds").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocConfig {
    /// The largest document, as stored (`DOC_MAX_BYTES`).
    pub max_doc_bytes: usize,
    /// The log is folded into a snapshot when it holds more than this many bytes (and more
    /// than the snapshot), and when the room empties.
    pub compact_above: usize,
    /// Largest awareness state (JSON bytes).
    pub max_awareness_bytes: usize,
    /// Most awareness states one socket holds (a tab is one Yjs client).
    pub awareness_per_socket: usize,
    /// A state not renewed for this long goes (y-protocols' `outdatedTimeout`; stock
    /// clients renew every 15 s).
    pub awareness_timeout_ms: u64,
    /// Frames a user may send per second, and at once.
    pub frames_per_sec: u64,
    pub frame_burst: u64,
    /// Bytes a user may send per second (at once: the whole document twice, so an offline
    /// tab's sync fits).
    pub bytes_per_sec: u64,
    /// Bytes the room may send a user in sync replies per second (at once: the whole document
    /// twice, so a late joiner's sync fits).
    pub reply_bytes_per_sec: u64,
    /// Sockets one user may hold in the document (more: 4429 `too_many_connections`), as for
    /// rooms.
    pub sockets_per_user: usize,
    /// Connects a user may make per second, and at once (past it: 4029 `connect_rate`).
    pub connects_per_sec: u64,
    pub connect_burst: u64,
}

impl DocConfig {
    pub const DEFAULT: DocConfig = DocConfig {
        max_doc_bytes: DEFAULT_DOC_MAX_BYTES as usize,
        compact_above: 1024 * 1024,
        max_awareness_bytes: 8 * 1024,
        awareness_per_socket: 4,
        awareness_timeout_ms: 30_000,
        frames_per_sec: 100,
        frame_burst: 400,
        bytes_per_sec: 256 * 1024,
        reply_bytes_per_sec: 256 * 1024,
        sockets_per_user: 10,
        connects_per_sec: 1,
        connect_burst: 20,
    };

    /// The largest frame a document socket takes: a sync step carrying the whole document.
    pub fn max_frame(&self) -> usize {
        self.max_doc_bytes + 64 * 1024
    }

    pub(crate) fn byte_burst(&self) -> u64 {
        2 * self.max_frame() as u64
    }

    pub(crate) fn reply_burst(&self) -> u64 {
        2 * self.max_frame() as u64
    }

    /// The config a deployment's variables give (`read` looks one up), with what was wrong.
    pub fn from_vars(read: impl Fn(&str) -> Option<String>) -> (DocConfig, Vec<String>) {
        let mut config = DocConfig::DEFAULT;
        let mut problems = Vec::new();
        if let Some(text) = read(DOC_MAX_BYTES.name) {
            match text.trim().parse::<usize>() {
                // At least 64 KiB; at most 64 MiB (a Durable Object has 128 MB of memory).
                Ok(n) if (64 * 1024..=64 * 1024 * 1024).contains(&n) => config.max_doc_bytes = n,
                _ => problems
                    .push(format!("{} must be 65536..=67108864, got {text:?}", DOC_MAX_BYTES.name)),
            }
        }
        (config, problems)
    }
}

impl Default for DocConfig {
    fn default() -> Self {
        DocConfig::DEFAULT
    }
}
