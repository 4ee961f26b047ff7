//! Requests the Worker turns away before any upgrade, with stable codes.

use worker::{Response, Result};

/// Why the Worker refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpRefusal {
    /// The room name breaks PROTOCOL.md's naming rule.
    BadRoom,
    /// The session is missing or breaks the naming rule.
    BadSession,
    /// Another query parameter is malformed (`since`, `epoch`).
    BadParam(&'static str),
    /// A WebSocket route was requested without `Upgrade: websocket`.
    UpgradeRequired,
    /// No route matches.
    NotFound,
    /// The route exists but not for this method.
    MethodNotAllowed,
    /// The room object could not be reached.
    Unavailable,
}

impl HttpRefusal {
    pub fn status(&self) -> u16 {
        match self {
            HttpRefusal::BadRoom | HttpRefusal::BadSession | HttpRefusal::BadParam(_) => 400,
            HttpRefusal::UpgradeRequired => 426,
            HttpRefusal::NotFound => 404,
            HttpRefusal::MethodNotAllowed => 405,
            HttpRefusal::Unavailable => 503,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            HttpRefusal::BadRoom => "bad_room",
            HttpRefusal::BadSession => "bad_session",
            HttpRefusal::BadParam(_) => "bad_param",
            HttpRefusal::UpgradeRequired => "upgrade_required",
            HttpRefusal::NotFound => "not_found",
            HttpRefusal::MethodNotAllowed => "method_not_allowed",
            HttpRefusal::Unavailable => "room_unavailable",
        }
    }

    pub fn message(&self) -> String {
        match self {
            HttpRefusal::BadRoom => "room must be 1-64 characters of A-Z a-z 0-9 . _ : -".into(),
            HttpRefusal::BadSession => "session must be 8-64 characters of A-Z a-z 0-9 _ -".into(),
            HttpRefusal::BadParam(p) => format!("malformed query parameter `{p}`"),
            HttpRefusal::UpgradeRequired => "this route accepts WebSocket upgrades only".into(),
            HttpRefusal::NotFound => "no such route".into(),
            HttpRefusal::MethodNotAllowed => "method not allowed on this route".into(),
            HttpRefusal::Unavailable => "the room could not be reached; retry with backoff".into(),
        }
    }

    /// The JSON error response `{"error": code, "message": text}`.
    pub fn response(&self) -> Result<Response> {
        let body = serde_json::json!({"error": self.code(), "message": self.message()});
        Ok(Response::from_json(&body)?.with_status(self.status()))
    }
}
