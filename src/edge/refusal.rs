//! Requests the Worker turns away, with stable codes: before any upgrade for
//! WebSocket routes, as `{"error": code, "message": text}`.

use worker::{Response, Result};

use crate::auth::AuthError;

/// Why the Worker refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpRefusal {
    /// The room name breaks PROTOCOL.md's naming rule.
    BadRoom,
    /// The session is missing or breaks the naming rule.
    BadSession,
    /// Another query parameter is malformed (`since`, `epoch`) or the query
    /// is too long.
    BadParam(&'static str),
    /// The token is missing, malformed, forged, expired or for another room.
    Auth(AuthError),
    /// No `AUTH_SECRET` and no `ANONYMOUS_DEV`: rooms are closed.
    AuthNotConfigured,
    /// `AUTH_SECRET` is too short to trust: rooms are closed.
    WeakSecret,
    /// `ADMIN_KEY` is too short to trust: the admin routes are closed.
    WeakAdminKey,
    /// Anonymous dev mode serves local requests only.
    AnonymousNotLocal,
    /// The health canary's room: no client may join or read it.
    ReservedRoom,
    /// An admin route without `Authorization: Bearer <ADMIN_KEY>`.
    BadAdminKey,
    /// The deployment has no `ADMIN_KEY`: admin routes are off.
    AdminDisabled,
    /// A request body over the limit.
    TooLarge,
    /// A WebSocket route was requested without `Upgrade: websocket`.
    UpgradeRequired,
    /// No route matches.
    NotFound,
    /// The first path segment names no kind of room this Worker serves (an
    /// upgrade gets a socket closed with 4404 and this code).
    NoSuchKind,
    /// The route exists but not for this method.
    MethodNotAllowed,
    /// The room object could not be reached.
    Unavailable,
}

impl HttpRefusal {
    pub fn status(&self) -> u16 {
        match self {
            HttpRefusal::BadRoom | HttpRefusal::BadSession | HttpRefusal::BadParam(_) => 400,
            HttpRefusal::Auth(e) => e.status(),
            HttpRefusal::BadAdminKey => 401,
            HttpRefusal::AdminDisabled
            | HttpRefusal::AnonymousNotLocal
            | HttpRefusal::ReservedRoom => 403,
            HttpRefusal::NotFound | HttpRefusal::NoSuchKind => 404,
            HttpRefusal::MethodNotAllowed => 405,
            HttpRefusal::TooLarge => 413,
            HttpRefusal::UpgradeRequired => 426,
            HttpRefusal::AuthNotConfigured
            | HttpRefusal::WeakSecret
            | HttpRefusal::WeakAdminKey
            | HttpRefusal::Unavailable => 503,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            HttpRefusal::BadRoom => "bad_room",
            HttpRefusal::BadSession => "bad_session",
            HttpRefusal::BadParam(_) => "bad_param",
            HttpRefusal::Auth(e) => e.code(),
            HttpRefusal::AuthNotConfigured => "auth_not_configured",
            HttpRefusal::WeakSecret => "auth_secret_weak",
            HttpRefusal::WeakAdminKey => "admin_key_weak",
            HttpRefusal::AnonymousNotLocal => "anonymous_dev_local_only",
            HttpRefusal::ReservedRoom => "reserved_room",
            HttpRefusal::BadAdminKey => "bad_admin_key",
            HttpRefusal::AdminDisabled => "admin_disabled",
            HttpRefusal::TooLarge => "too_large",
            HttpRefusal::UpgradeRequired => "upgrade_required",
            HttpRefusal::NotFound => "not_found",
            HttpRefusal::NoSuchKind => "no_such_kind",
            HttpRefusal::MethodNotAllowed => "method_not_allowed",
            HttpRefusal::Unavailable => "room_unavailable",
        }
    }

    pub fn message(&self) -> String {
        match self {
            HttpRefusal::BadRoom => "room must be 1-64 characters of A-Z a-z 0-9 . _ : -".into(),
            HttpRefusal::BadSession => "session must be 8-64 characters of A-Z a-z 0-9 _ -".into(),
            HttpRefusal::BadParam(p) => format!("malformed query: {p}"),
            HttpRefusal::Auth(e) => e.message(),
            HttpRefusal::AuthNotConfigured => {
                "this deployment has no AUTH_SECRET; set one with `wrangler secret put AUTH_SECRET`"
                    .into()
            }
            HttpRefusal::WeakAdminKey => format!(
                "this deployment's ADMIN_KEY is shorter than {} bytes; set a long random one \
                 with `wrangler secret put ADMIN_KEY`",
                crate::auth::MIN_SECRET_BYTES
            ),
            HttpRefusal::WeakSecret => format!(
                "this deployment's AUTH_SECRET is shorter than {} bytes; set a long random one \
                 with `wrangler secret put AUTH_SECRET`",
                crate::auth::MIN_SECRET_BYTES
            ),
            HttpRefusal::AnonymousNotLocal => "anonymous dev mode (ANONYMOUS_DEV) serves local \
                 requests only; set AUTH_SECRET, or ANONYMOUS_DEV_ALLOW_REMOTE=true to accept the risk"
                .into(),
            HttpRefusal::ReservedRoom => "this room is the health canary's".into(),
            HttpRefusal::BadAdminKey => {
                "admin routes need `Authorization: Bearer <ADMIN_KEY>`".into()
            }
            HttpRefusal::AdminDisabled => {
                "admin routes are off: set ADMIN_KEY with `wrangler secret put ADMIN_KEY`".into()
            }
            HttpRefusal::TooLarge => "request body too large".into(),
            HttpRefusal::UpgradeRequired => "this route accepts WebSocket upgrades only".into(),
            HttpRefusal::NotFound => "no such route".into(),
            HttpRefusal::NoSuchKind => "this Worker serves no such kind of room (the path segment \
                before the room: connect({ kind }) and worker! must name the same)"
                .into(),
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
