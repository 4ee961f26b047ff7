//! Why a document room refuses something a member sent, as a stable code, and what the
//! refusal does to the member's socket (PROTOCOL-DOCUMENTS.md, "Refusals").

/// A refusal. Nothing of a refused message is applied, stored or sent on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocError {
    /// Not a y-protocols message, or one whose counts exceed its bytes.
    Malformed,
    /// An update `yrs` cannot decode or apply.
    BadUpdate,
    /// The member may read the document but not change it.
    ReadOnly,
    /// The update would take the document past its bound (`DOC_MAX_BYTES`).
    TooLarge,
    /// The update would nest shared types deeper than [`super::MAX_NESTING`].
    TooDeep,
    /// The frame is larger than a document socket takes.
    FrameTooLarge,
    /// The update needs blocks the room does not have (it came from elsewhere than the room).
    /// The socket is closed to reconnect: the editor's next sync sends what was missing.
    MissingDependencies,
    /// The member sent more than its budget allows.
    RateLimited,
    /// The user already holds as many sockets of the document as one may.
    TooManyConnections,
    /// The user connects faster than one may.
    ConnectRate,
    /// The socket was handed its window and has not shown it read it.
    SlowReader,
    /// The socket answered a mark without what the mark asked for: its client did not read it.
    MarkUnread,
    /// An awareness state larger than allowed, or more Yjs clients on one socket than allowed.
    AwarenessTooLarge,
    /// An awareness entry for a Yjs client another user's socket holds.
    NotYourClient,
    /// The kind's rules refused the update (their code).
    Rules(String),
}

/// What a refusal does to the socket that sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consequence {
    /// The socket stays open: the message is dropped (and reported to a client that asked
    /// for refusals). A stock client that resends it on every reconnect would loop if we
    /// closed it.
    Drop,
    /// The socket is closed with this code: the client reconnects and resyncs, which carries
    /// the dropped edit again once it is allowed (a rate limit), or the client is broken.
    Close(u16),
}

impl DocError {
    /// The stable code, as the `refused` extension message and the close reason carry it.
    pub fn code(&self) -> &str {
        match self {
            DocError::Malformed => "malformed",
            DocError::BadUpdate => "bad_update",
            DocError::ReadOnly => "read_only",
            DocError::TooLarge => "document_too_large",
            DocError::TooDeep => "too_deep",
            DocError::FrameTooLarge => "frame_too_large",
            DocError::MissingDependencies => "missing_dependencies",
            DocError::RateLimited => "rate_limited",
            DocError::TooManyConnections => "too_many_connections",
            DocError::ConnectRate => "connect_rate",
            DocError::SlowReader => "slow_reader",
            DocError::MarkUnread => "mark_unread",
            DocError::AwarenessTooLarge => "awareness_too_large",
            DocError::NotYourClient => "not_your_client",
            DocError::Rules(code) => code,
        }
    }

    /// What the refusal does to the socket.
    pub fn consequence(&self) -> Consequence {
        match self {
            DocError::Malformed => Consequence::Close(4400),
            // The stock provider (y-websocket 3.1) stops reconnecting after a close in 4400-4499
            // and reconnects after any other: closes it cannot cure stop it, the others heal.
            DocError::FrameTooLarge => Consequence::Close(4413),
            DocError::MissingDependencies => Consequence::Close(4500),
            DocError::RateLimited => Consequence::Close(4029),
            // Final for the stock client (4400-4499): an eleventh tab does not knock every
            // 2.5 s; it is told (our provider's `refused`) and stays off.
            DocError::TooManyConnections => Consequence::Close(4429),
            // Cured by waiting: the stock client reconnects after its backoff (rooms say 4429,
            // which would stop it for good).
            DocError::ConnectRate => Consequence::Close(4029),
            // As for rooms: the client reconnects, and its sync brings what it missed.
            DocError::SlowReader | DocError::MarkUnread => Consequence::Close(4013),
            DocError::BadUpdate
            | DocError::ReadOnly
            | DocError::TooLarge
            | DocError::TooDeep
            | DocError::AwarenessTooLarge
            | DocError::NotYourClient
            | DocError::Rules(_) => Consequence::Drop,
        }
    }
}

impl std::fmt::Display for DocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.code())
    }
}

impl std::error::Error for DocError {}
