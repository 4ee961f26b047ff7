//! Why the room refuses a frame or closes a socket, with stable codes.

use crate::protocol::FrameError;

/// A frame the room did not apply. The connection stays open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a JSON object, an unknown `type`, or a binary frame.
    BadFrame(String),
    /// A field is missing, ill-typed or out of bounds.
    Invalid(String),
    /// The payload is over a size limit (presence state, room state).
    TooLarge(String),
    /// The connection sends faster than its token bucket allows.
    RateLimited,
    /// A `set` whose `if_version` is not the key's current version.
    Conflict { version: u64 },
}

impl Refusal {
    /// The stable `code` of the `error` frame.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::BadFrame(_) => "bad_frame",
            Refusal::Invalid(_) => "invalid",
            Refusal::TooLarge(_) => "too_large",
            Refusal::RateLimited => "rate_limited",
            Refusal::Conflict { .. } => "conflict",
        }
    }

    /// The human-readable `message` of the `error` frame.
    pub fn message(&self) -> String {
        match self {
            Refusal::BadFrame(m) | Refusal::Invalid(m) | Refusal::TooLarge(m) => m.clone(),
            Refusal::RateLimited => "too many frames; slow down".into(),
            Refusal::Conflict { version } => {
                format!("version mismatch: the key is at version {version}")
            }
        }
    }
}

impl From<FrameError> for Refusal {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::BadFrame(m) => Refusal::BadFrame(m),
            FrameError::Invalid { message, .. } => Refusal::Invalid(message),
        }
    }
}

/// Why the room closes a socket; each maps to a close code of PROTOCOL.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseCode {
    /// A frame over `max_frame` bytes (1009).
    TooLarge,
    /// A newer connection of the same session replaced this one (4001).
    Superseded,
    /// The connection kept flooding past its rate limit (4029).
    Abuse,
    /// No frame and no answered heartbeat for `presence_ttl` (4008).
    Timeout,
    /// The operator drains the room; reconnect promptly (1001).
    GoingAway,
}

impl CloseCode {
    /// The WebSocket close code.
    pub fn code(self) -> u16 {
        match self {
            CloseCode::TooLarge => 1009,
            CloseCode::Superseded => 4001,
            CloseCode::Abuse => 4029,
            CloseCode::Timeout => 4008,
            CloseCode::GoingAway => 1001,
        }
    }

    /// The close reason text.
    pub fn reason(self) -> &'static str {
        match self {
            CloseCode::TooLarge => "frame too large",
            CloseCode::Superseded => "superseded",
            CloseCode::Abuse => "rate limit abuse",
            CloseCode::Timeout => "heartbeat timeout",
            CloseCode::GoingAway => "room drained",
        }
    }
}
