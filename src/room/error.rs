//! Why the room refuses a frame or closes a socket, with stable codes.

use crate::protocol::FrameError;

/// Why the room did not apply a frame (or an operator's write): the `code`
/// and `message` of the `error` frame it answers with, or of the HTTP answer.
/// The connection stays open. (A rule's own refusal is
/// [`rules::Refusal`](super::rules::Refusal), carried as [`Error::Rule`].)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not a JSON object, an unknown `type`, or a binary frame.
    BadFrame(String),
    /// A field is missing, ill-typed or out of bounds.
    Invalid(String),
    /// The payload is over a size limit (presence state, room state).
    TooLarge(String),
    /// The connection (or its user, over all their connections) sends
    /// faster than its token bucket allows.
    RateLimited,
    /// The user sends more bytes, over all their connections, than their byte budget allows
    /// (`per_sec` a second).
    BytesLimited { per_sec: u64 },
    /// A `get_state` while the user's reply budget (bytes per second) is
    /// spent: the answer would cost `bytes`.
    ReplyBudget { bytes: u64, per_sec: u64 },
    /// An echoed `mark` that the room never sent to this connection.
    UnknownMark,
    /// A `set` whose `if_version` is not the key's current version.
    Conflict { version: u64 },
    /// The room's rules refused the write, with their own code and message.
    Rule(super::rules::Refusal),
}

impl Error {
    /// The stable `code` of the `error` frame.
    pub fn code(&self) -> &str {
        match self {
            Error::BadFrame(_) => "bad_frame",
            Error::Invalid(_) => "invalid",
            Error::TooLarge(_) => "too_large",
            Error::RateLimited | Error::BytesLimited { .. } | Error::ReplyBudget { .. } => {
                "rate_limited"
            }
            Error::UnknownMark => "invalid",
            Error::Rule(r) => r.code(),
            Error::Conflict { .. } => "conflict",
        }
    }

    /// The human-readable `message` of the `error` frame.
    pub fn message(&self) -> String {
        match self {
            Error::BadFrame(m) | Error::Invalid(m) | Error::TooLarge(m) => m.clone(),
            Error::RateLimited => "too many frames; slow down".into(),
            Error::BytesLimited { per_sec } => {
                format!("too many bytes (at most {per_sec} a second per user); slow down")
            }
            Error::ReplyBudget { bytes, per_sec } => format!(
                "the state is {bytes} bytes and state replies are limited to {per_sec} bytes/s per user; ask again later"
            ),
            Error::UnknownMark => "no such mark was sent to this connection".into(),
            Error::Rule(r) => r.message().to_owned(),
            Error::Conflict { version } => {
                format!("version mismatch: the key is at version {version}")
            }
        }
    }
}

impl From<FrameError> for Error {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::BadFrame(m) => Error::BadFrame(m),
            FrameError::Invalid { message, .. } => Error::Invalid(message),
        }
    }
}

/// Why the room refused an HTTP read of a member (`GET /presence`, a rules
/// route), which the adapter answers with a status and a stable code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadRefusal {
    /// The operator blocked the reader in this room: 403 `blocked`.
    Blocked,
    /// The reader's reply budget cannot pay for the answer's `bytes` now:
    /// 429 `rate_limited`, to be asked again after `retry_ms`.
    Budget { bytes: u64, retry_ms: u64 },
    /// The room's rules keep the reader out ([`Rules::read`]): 403 with the
    /// refusal's code.
    ///
    /// [`Rules::read`]: crate::room::rules::Rules::read
    Rules(crate::room::rules::Refusal),
}

impl ReadRefusal {
    /// The HTTP status of the refusal.
    pub fn status(&self) -> u16 {
        match self {
            ReadRefusal::Blocked | ReadRefusal::Rules(_) => 403,
            ReadRefusal::Budget { .. } => 429,
        }
    }

    /// The stable code of the refusal body.
    pub fn code(&self) -> &str {
        match self {
            ReadRefusal::Blocked => "blocked",
            ReadRefusal::Budget { .. } => "rate_limited",
            ReadRefusal::Rules(refusal) => refusal.code(),
        }
    }

    /// The human-readable message of the refusal body.
    pub fn message(&self) -> String {
        match self {
            ReadRefusal::Blocked => "the operator blocked this user in this room".into(),
            ReadRefusal::Budget { bytes, retry_ms } => format!(
                "the answer is {bytes} bytes and this user's reply budget is spent; ask again in {retry_ms} ms"
            ),
            ReadRefusal::Rules(refusal) => refusal.message().to_owned(),
        }
    }
}

/// Why the room closes a socket; each maps to a close code of PROTOCOL.md
/// or one homeroom adds (README, "Protocol decisions").
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// The client did not confirm what it was sent and too much waits for
    /// it (4013): reconnect and resume.
    Backlog,
    /// The token's `exp` passed while connected (4401): get a new token.
    TokenExpired,
    /// The operator kicked this user (4403): do not reconnect.
    Kicked,
    /// The operator blocked this user from the room for a while (4403).
    Blocked,
    /// The session belongs to another user (4409): use a new session.
    SessionTaken,
    /// The user already holds as many connections as the room allows (4429).
    TooManyConnections,
    /// The user connects faster than their connect budget allows (4429).
    ConnectRate,
    /// The operator deleted the room (4404): do not reconnect.
    Deleted,
    /// The room's rules refused the member (4403), with the rule's code as
    /// the reason: do not reconnect.
    Rule(String),
    /// The room's memory was reset (a Wasm reset) while frames waited in it for this
    /// connection (1012): reconnect and resume, and the log sends them again.
    Reset,
}

impl CloseCode {
    /// The WebSocket close code.
    pub fn code(&self) -> u16 {
        match self {
            CloseCode::TooLarge => 1009,
            CloseCode::Superseded => 4001,
            CloseCode::Abuse => 4029,
            CloseCode::Timeout => 4008,
            CloseCode::GoingAway => 1001,
            CloseCode::Reset => 1012,
            CloseCode::Backlog => 4013,
            CloseCode::TokenExpired => 4401,
            CloseCode::Kicked | CloseCode::Blocked | CloseCode::Rule(_) => 4403,
            CloseCode::Deleted => 4404,
            CloseCode::SessionTaken => 4409,
            CloseCode::TooManyConnections | CloseCode::ConnectRate => 4429,
        }
    }

    /// The close reason text: for the codes homeroom adds, a stable code a
    /// client can act on.
    pub fn reason(&self) -> &str {
        match self {
            CloseCode::TooLarge => "frame too large",
            CloseCode::Superseded => "superseded",
            CloseCode::Abuse => "rate limit abuse",
            CloseCode::Timeout => "heartbeat timeout",
            CloseCode::GoingAway => "room drained",
            CloseCode::Reset => "room_reset",
            CloseCode::Backlog => "backlog",
            CloseCode::TokenExpired => "token_expired",
            CloseCode::Kicked => "kicked",
            CloseCode::Blocked => "blocked",
            CloseCode::SessionTaken => "session_taken",
            CloseCode::TooManyConnections => "too_many_connections",
            CloseCode::ConnectRate => "connect_rate",
            CloseCode::Deleted => "room_deleted",
            CloseCode::Rule(code) => code,
        }
    }
}
