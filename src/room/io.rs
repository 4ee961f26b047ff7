//! What goes into the engine ([`Input`], [`Snapshot`]) and what comes out ([`Output`]).

use std::rc::Rc;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{CloseCode, Time};
use crate::protocol::server;

/// A connection the adapter has accepted, as the Worker vouched for it.
#[derive(Debug, Clone)]
pub struct Hello {
    /// The connection id the adapter chose (unique in the room).
    pub conn: String,
    pub session: String,
    pub user: String,
    pub region: String,
    /// The highest `seq` the client has applied, when it resumes.
    pub since: Option<u64>,
    /// The epoch of the log that `since` counts in.
    pub epoch: Option<String>,
    /// A random number from the adapter, for this connection's jitter (the
    /// engine has no randomness of its own).
    pub rand: u64,
    /// Another, kept secret: the key of this connection's flow-control marks.
    pub secret: u64,
    /// When the token that admitted it expires; the room closes the
    /// socket then (4401). `None` in anonymous dev mode.
    pub expires: Option<Time>,
    /// Verified information about the user that came with the token, if any
    /// (the room's rules see it, and may replace it, when the member joins).
    pub info: Option<Box<RawValue>>,
    /// The Worker's own health canary, not a member: the room's rules are
    /// not asked about it (a `join` that refuses strangers must not turn
    /// `/health` red), and hear nothing of its leave.
    pub canary: bool,
    /// The link this session came over, when it is not a socket of its own:
    /// one connection to another object (a relay) that carries many
    /// sessions. `None`: the adapter holds the client's socket itself.
    /// See [`Input::LinkClosed`] and [`Output`] for what a link changes.
    pub link: Option<String>,
    /// Over a link: the last `seq` the far end (a relay) can replay to this client itself, from
    /// `since` on, in the log `epoch` ([`crate::relay::Tail`]). The room then sends
    /// [`Output::Replay`] for those entries rather than their frames.
    pub tail: Option<u64>,
    /// Over a link: its far end (a relay of link version 2 on,
    /// [`crate::protocol::link::LINK_VERSION`]) keeps this connection's flow window, so the
    /// room sends it everything at once, marks nothing, and names a catch-up it sends
    /// ([`Output::CatchUp`]). False: the room keeps the window, as for a socket of its own.
    pub relay_flow: bool,
    /// Over a link: its far end (a relay of link version 3 on) holds the room's parts and a
    /// mirror of its state (told once per link, and every write after): the room sends the
    /// session's part of its welcome ([`Output::Welcome`]) and the word for a state reply
    /// ([`Output::State`]), not the frames. False: the room sends the frames.
    pub relay_mirror: bool,
    /// Over a link: its far end (a relay of link version 4 on) coalesces and sheds the signals
    /// it is sent for its clients itself: the room sends a signal once per such link
    /// ([`Output::Signal`]) and keeps no window or queue of signals for the connection.
    pub relay_signals: bool,
}

/// One event for the engine. Time comes with it, in [`Room::handle`](super::Room::handle).
#[derive(Debug)]
pub enum Input<'a> {
    /// A socket was accepted: welcome it, replay or resync.
    Open(Hello),
    /// A text frame arrived.
    Text { conn: &'a str, text: &'a str },
    /// A binary frame of `len` bytes arrived (always refused).
    Binary { conn: &'a str, len: usize },
    /// A socket closed or errored.
    Closed { conn: &'a str },
    /// A link closed (see [`Hello::link`]), or the adapter closed it when its lease ran out:
    /// every connection it carried is gone, and nothing is sent over it. Its members stay,
    /// "away", until [`RoomConfig::link_grace_ms`](crate::room::RoomConfig::link_grace_ms)
    /// after `heard`, the link's last sign of life: a session that comes back by then (through
    /// its relay's next instance, or anywhere) takes its place as a reconnect does, and
    /// observers see no leave; one that does not leaves then.
    LinkClosed { link: &'a str, heard: Time },
    /// The sessions an open link carries, given back by its far end after the room was
    /// rebuilt without them (the adapter keeps no record of a link's sessions: the far end
    /// does), each with the `seq` it has had nothing after (the adapter sends a link's
    /// sessions nothing while it does not know them). Each comes back as it was, with no
    /// welcome and no join told, and catches up from there; one the room has since seen newer
    /// of (its session reconnected) is closed instead.
    Recalled { link: &'a str, peers: Vec<(Peer, u64)> },
    /// The runtime answered a heartbeat ping on `conn` at `at` without
    /// waking the room; reported when the alarm fires.
    Heartbeat { conn: &'a str, at: Time },
    /// The storage alarm the engine asked for ([`Output::SetAlarm`]) fired.
    Alarm,
    /// The short in-memory timer the engine asked for ([`Output::SetWake`])
    /// fired: the turn ended; release what waited for it and the windows and
    /// holds that ended.
    Wake,
}

/// What the engine asks the adapter to do, in order.
///
/// A connection that came over a link ([`Hello::link`]) is addressed like any
/// other; the adapter sends its frames, and its close, over its link. A frame
/// to several connections (`Multicast`, `Broadcast`) crosses each link once,
/// with the link's sessions it is for, and the link's far end hands it to
/// them: a link costs the room one send per frame, not one per session.
#[derive(Debug)]
pub enum Output {
    /// Make a write durable. Comes before the frames that reveal it.
    Persist(Box<Commit>),
    /// Send one frame to one connection.
    Send { conn: String, frame: Rc<str> },
    /// Send one frame to each of these connections.
    Multicast { conns: Vec<String>, frame: Rc<str> },
    /// Send one frame to every open connection but those in `skip`.
    Broadcast { frame: Rc<str>, skip: Vec<String> },
    /// A signal: [`Output::Broadcast`] for the connections of the adapter's own sockets and of
    /// links whose far ends take signals one by one, and besides, the signal once to each of
    /// `links` (whose relays coalesce signals themselves, [`Hello::relay_signals`]) with its
    /// `key` (its sender's session and topic). No session of a listed link is in `skip`; the
    /// sender's own link (`origin`, whose far end delivered it) gets nothing if its relay
    /// coalesces signals, and any other link as a broadcast says.
    Signal {
        frame: Rc<str>,
        key: String,
        skip: Vec<String>,
        links: Vec<String>,
        origin: Option<String>,
    },
    /// Close a connection. The engine has already forgotten it.
    Close { conn: String, code: CloseCode },
    /// Store what the room must know about a connection to rebuild it after
    /// eviction (the socket attachment).
    Remember(Peer),
    /// Call back with [`Input::Alarm`] at this time; replaces an alarm set
    /// before. The storage alarm: durable, it survives eviction.
    SetAlarm(Time),
    /// Call back with [`Input::Wake`] at this time: a short in-memory timer
    /// for coalescing windows (tens of milliseconds), or for the end of the
    /// turn (the time is now: after the events already waiting).
    SetWake(Time),
    /// Store that `user` may not connect until `until`, or, with `None`,
    /// that they may again.
    Block { user: String, until: Option<Time> },
    /// Record that the room has had no connection since this time, for its
    /// retention.
    Idle(Time),
    /// Delete the room's storage: the operator asked, or the room sat empty
    /// past its retention. The engine is spent; drop it.
    Delete,
    /// Store the rules' timers (all of them: name, when due).
    Timers(Vec<(String, Time)>),
    /// Tell the far end of `conn`'s link to send it the log's entries `after + 1 ..= upto`
    /// from its own tail ([`Hello::tail`]): its catch-up, in order among its frames. Only for a
    /// connection over a link.
    Replay { conn: String, after: u64, upto: u64 },
    /// A catch-up of `bytes` for `conn` (over a link) follows in its frames: the link's far
    /// end, which keeps the socket's flow window, lets it wait beyond the backlog bound, as the
    /// room lets its own connections' catch-ups. Only for a connection over a link.
    CatchUp { conn: String, bytes: u64 },
    /// The far end of `conn`'s link sends it the room's state from its mirror ([`Hello::relay_mirror`]),
    /// as of `seq` (every state write up to it was persisted before): a `state` frame, or with
    /// `reason` a `resync` (its catch-up). In its place among its frames.
    State { conn: String, seq: u64, reason: Option<&'static str> },
    /// The session's part of `conn`'s welcome, for the far end of its link to make the frame
    /// from ([`Hello::relay_mirror`]): in the place of the welcome among its frames. Only for
    /// a connection over a link.
    Welcome(Box<crate::protocol::link::Welcome>),
    /// Entries of the log (a `message` frame, or a `batch` of them) for the tail at the far
    /// end of `conn`'s link, which lacks them: sent to no client. A [`Output::Replay`] that
    /// needs them follows.
    Entries { conn: String, frame: Rc<str> },
}

impl Output {
    /// The connection an output is for when only the far end of its link can do it (a catch-up
    /// from its tail, entries for the tail, a catch-up's bytes, a welcome or a state reply it
    /// makes): what the adapter sends over that connection's link. `None` for every other.
    pub fn link_conn(&self) -> Option<&str> {
        match self {
            Output::Replay { conn, .. }
            | Output::Entries { conn, .. }
            | Output::CatchUp { conn, .. }
            | Output::State { conn, .. } => Some(conn),
            Output::Welcome(part) => Some(&part.conn),
            _ => None,
        }
    }
}

/// One durable, sequenced write.
#[derive(Debug, Clone)]
pub struct Commit {
    pub entry: LogEntry,
    /// For a `set`: the new value of the key.
    pub state: Option<StateWrite>,
    /// Log rows with `seq` at or below this fall out of the retained log.
    pub trim_through: Option<u64>,
}

/// A room state key's new value; its version is the commit's `seq`.
#[derive(Debug, Clone)]
pub struct StateWrite {
    pub key: String,
    pub value: Box<RawValue>,
}

/// A sequenced message as stored in the log.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub seq: u64,
    pub id: String,
    pub session: String,
    pub user: String,
    pub region: String,
    pub topic: String,
    pub data: Box<RawValue>,
    /// When the room sequenced it (the frame's `ts`).
    pub ts: Time,
}

impl LogEntry {
    /// The `message` frame that delivers this entry.
    pub fn frame(&self) -> Rc<str> {
        server::Message {
            kind: "message",
            seq: self.seq,
            id: &self.id,
            session: &self.session,
            user: &self.user,
            region: &self.region,
            topic: &self.topic,
            data: &self.data,
            ts: self.ts.ms(),
        }
        .to_text()
        .into()
    }
}

/// A connection as the room remembers it across eviction (socket attachment).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Peer {
    pub conn: String,
    pub session: String,
    pub user: String,
    pub region: String,
    /// When the connection opened; the newest wins a session.
    pub opened: Time,
    /// When the session became a member.
    pub since: Time,
    /// The last sign of life the attachment knows of; at most half a
    /// presence TTL old while the client is active.
    #[serde(default)]
    pub seen: Time,
    /// The session's presence state.
    pub state: Box<RawValue>,
    /// When the connection's token expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exp: Option<Time>,
    /// The key of the connection's flow-control marks.
    #[serde(default)]
    pub key: u64,
    /// What the room's rules attached when the member joined.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<Box<RawValue>>,
    /// The health canary's connection (see [`Hello::canary`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub canary: bool,
    /// The link the session came over (see [`Hello::link`]). A link's
    /// sessions are not socket attachments: the adapter keeps them where it
    /// keeps the link, and gives them back in [`Snapshot::peers`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// Its link's far end keeps its flow window (see [`Hello::relay_flow`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relay_flow: bool,
    /// Its link's far end mirrors the room's state (see [`Hello::relay_mirror`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relay_mirror: bool,
    /// Its link's far end coalesces its signals (see [`Hello::relay_signals`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub relay_signals: bool,
}

/// Everything needed to rebuild a room: storage plus the live sockets.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub room: String,
    pub epoch: String,
    /// Where the room was placed when it was created (a location hint).
    pub home: Option<String>,
    pub seq: u64,
    /// Every state key with its value and version.
    pub state: Vec<(String, Box<RawValue>, u64)>,
    /// The newest log entries (at least `replay_limit` of them when the log
    /// has that many), in `seq` order.
    pub recent: Vec<LogEntry>,
    /// Every retained log entry without its data, in `seq` order.
    pub ids: Vec<LogId>,
    /// The connections still open.
    pub peers: Vec<Peer>,
    /// Users blocked from the room, with when the block ends.
    pub blocks: Vec<(String, Time)>,
    /// Since when the room has had no connection, if it was recorded.
    pub idle_since: Option<Time>,
    /// The rules' timers: name and when due.
    pub timers: Vec<(String, Time)>,
    /// Fresh randomness of this load (the adapter's): the marks of a
    /// connection that stayed open are made from its key mixed with it, so
    /// no mark of this load repeats one of a load before. Otherwise a
    /// client echoing a mark it read before an eviction would confirm bytes
    /// sent after it, which it never read (the fuzzer's finding 11).
    pub nonce: u64,
    /// The room before this load owed its readers presence changes it had not sent yet
    /// ([`Room::presence_owed`](crate::room::Room::presence_owed)) and lost them with its memory
    /// (a Wasm reset): the adapter keeps that fact where a reset does not reach. Every
    /// connection then gets the whole member list at once.
    pub presence_owed: bool,
    /// Likewise for frames ([`Room::frames_owed`](crate::room::Room::frames_owed)): every
    /// socket of the room's own is closed 1012 `room_reset` at once, and each client resumes
    /// from what it applied.
    pub frames_owed: bool,
}

/// A retained log entry as the deduplication index and session ownership
/// need it.
#[derive(Debug, Clone)]
pub struct LogId {
    pub seq: u64,
    pub session: String,
    pub id: String,
    pub user: String,
    /// Bytes of the entry's data (for the log's byte bound).
    pub bytes: u64,
}
