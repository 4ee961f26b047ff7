//! The link between a relay and its room's home: what crosses it, both ways.
//! Both the relay ([`crate::relay`]) and the home's adapter speak it, so it
//! belongs to neither.
//!
//! One message per turn each way, a JSON object holding the turn's operations
//! in order. Up (relay to home) carries the relay's name and epoch, and its
//! clients' opens, frames and closes, untouched: the home parses and decides
//! every one as if the client were its own. Down (home to relay) carries the
//! home's frames, each serialized once and addressed to the relay's
//! connections that should have it, its closes, and its record of each of the
//! relay's sessions, which the relay keeps and gives back when a home rebuilt
//! without them asks (`recall`: the home stores none). Nothing per socket
//! crosses that the room did not mean for that socket: no pings, no
//! heartbeats (the relay watches its own clients), no acks but the writer's.
//!
//! ```
//! use homeroom::protocol::link::{Down, DownOp};
//!
//! let down = Down { ops: vec![DownOp::All { skip: vec![], frame: r#"{"type":"pong"}"#.into() }] };
//! let text = down.to_text();
//! assert_eq!(Down::parse(&text).unwrap(), down);
//! ```

use serde::{Deserialize, Serialize};

/// The version of the link this code speaks, named by a relay when it dials its home
/// (the `Link` it asks its home for). A home and its relays need not run the same deployment:
/// an active Durable Object keeps its code for up to five minutes after a deploy, and in a
/// gradual deployment each object keeps the version it was given for as long as that lasts.
/// So a home serves each link in the version its relay speaks:
///
/// - 1 (a relay that names none): the home keeps its sessions' flow windows (its `mark`s
///   cross the link, their echoes come back), sends no [`DownOp::CatchUp`], and holds the link
///   to no window (the relay says nothing of what it took).
/// - 2: the relay keeps its clients' flow windows itself, takes [`DownOp::CatchUp`], and says
///   what it took of the home's messages ([`Up::heard`]), which the home holds to
///   [`LINK_WINDOW`].
/// - 3: the relay makes its clients' welcomes and state replies: the home tells it the room's
///   parts and state once per link ([`DownOp::Room`], [`DownOp::Snapshot`]) and every state
///   write after ([`DownOp::Set`]), and sends each session's part of a welcome
///   ([`DownOp::Welcome`]) and the word for a `state` or `resync` frame ([`DownOp::State`]),
///   not the frames.
/// - 4: the relay takes a signal for its clients from another relay or the home's own sockets
///   once ([`DownOp::Signal`], with its sender's session and topic) and coalesces and sheds it
///   as it does its own members' signals: the home keeps no coalescing window, queue or skip
///   list per session of such a link, and counts the signal once per link against its
///   outbound budget.
///
/// An operation either end does not know is skipped (`Unknown`), not a reason to drop the
/// message it came in.
pub const LINK_VERSION: u32 = 4;

/// The most a link message is made to hold, in bytes: a turn's operations are split over as
/// many messages as it takes, in order. The runtime closes a WebSocket whose peer sends a
/// message over its limit (1009; 32 MiB since October 2025, 1 MiB before), and a link that
/// closes takes every member of its relay with it, so no turn may be that big, however many
/// members acted in it or resumed in it. One operation is never split: each is bounded well
/// under this by what the room makes (a `batch` is at most 512 KiB, the whole state 1 MiB plus
/// its keys) and what a relay forwards ([`FRAME_MAX`]), even quoted once more as link text.
pub const MESSAGE_MAX: usize = 8 << 20;

/// How long a link may go without a sign of life (a message, or a ping of the relay's that the
/// runtime answered) before either end takes the other for dead: the home closes the link and
/// the relay's sessions leave; a relay closes its clients (1012). A relay pings its link at
/// least every 5 s.
pub const LEASE_MS: u64 = 10_000;

/// The most of the home's messages that may be in flight on one link (sent and not yet taken
/// by the relay, [`Up::heard`]), in bytes: a relay that falls further behind has its link
/// closed by the home (1013 `relay_behind`), rather than the runtime buffering without end
/// what the home sends it; its clients resume through its next instance (their catch-ups are
/// range reads of the log). Four messages of the largest size.
pub const LINK_WINDOW: u64 = 4 * MESSAGE_MAX as u64;

/// A relay tells the home what it has taken at least every this many bytes of the home's
/// messages, with an empty message if it has nothing else to send.
pub const HEARD_EVERY: u64 = LINK_WINDOW / 4;

/// The largest client frame a relay forwards, in bytes: one that would not fit in a link
/// message once quoted (at most twice its size) is closed with 1009 at the relay, whatever
/// `MAX_FRAME_BYTES` allows a socket of the home's own.
pub const FRAME_MAX: usize = MESSAGE_MAX / 2 - 4096;

/// A relay's turn for the home: who it is, and what its clients did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Up {
    /// The relay's name, the same across its instances (e.g. `oc-0`).
    pub relay: String,
    /// Which instance of the relay: it grows each time the relay starts.
    /// The home refuses an instance older than one it has heard from.
    pub epoch: u64,
    /// Bytes of the home's messages on this link the relay has taken so far: what is not
    /// taken yet is in flight, and the home holds each link to [`LINK_WINDOW`] of it.
    #[serde(default)]
    pub heard: u64,
    pub ops: Vec<UpOp>,
}

/// One thing a relay's client did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum UpOp {
    /// A client connected to the relay, as the Worker vouched for it.
    Open(Open),
    /// A text frame from the client, as it came (a signal the relay has
    /// already delivered to its own members too: the home sends it to the
    /// others only).
    Text { conn: String, text: String },
    /// The client's socket closed, or the relay closed it.
    Closed { conn: String },
    /// The answer to [`DownOp::Recall`] `recall`: the last record the home sent of each of the
    /// relay's clients it addressed ([`DownOp::Peer`]), for a home that lost its memory to take
    /// them back as they were (no welcome, no join), and the opens of the clients it had not
    /// addressed yet, again. A home takes only the answer to its own recall: an older one may
    /// name a client the relay closed since.
    Peers { recall: u64, peers: Vec<Back>, opens: Vec<Open> },
    /// An operation of a later version of the link: skipped.
    #[serde(other)]
    Unknown,
}

/// One session a relay gives back on a recall: the home's record of it, and the `seq` after
/// which it has had nothing from the home (the `since` of the earliest recall it was given back
/// on that no home took).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Back {
    /// The home's record of the session ([`DownOp::Peer`]), as the relay kept it.
    pub peer: String,
    /// The `seq` after which the session has had nothing from any home.
    pub from: u64,
}

/// A client the relay accepted: the fields of [`crate::room::Hello`] that
/// cross the link. `conn` is unique in the room: the relay's adapter puts
/// the relay's name in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Open {
    pub conn: String,
    pub session: String,
    pub user: String,
    pub region: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
    pub rand: u64,
    pub secret: u64,
    /// When the token expires, in ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// The token's verified `info`, as JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<String>,
    /// The last `seq` the relay's tail of the log holds, when it holds every entry after
    /// `since` up to it, of the log `epoch` (it may be `since` itself: the tail holds none of
    /// what the client missed yet, or is empty): the home then fills the tail with what it
    /// lacks ([`DownOp::Entries`], once per relay) and sends [`DownOp::Replay`] instead of the
    /// frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<u64>,
}

/// The home's turn for one relay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Down {
    pub ops: Vec<DownOp>,
}

/// One thing the home asks a relay to do, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum DownOp {
    /// Send `frame` to each of these connections.
    Send { to: Vec<String>, frame: String },
    /// Send `frame` to every connection of the relay the home has addressed
    /// before (its welcome comes first), but those in `skip`.
    All { skip: Vec<String>, frame: String },
    /// Close a connection with this code and reason; the home has forgotten it.
    Close { conn: String, code: u16, reason: String },
    /// This instance of the relay is stale: a newer one (`epoch`) speaks for
    /// the relay now. The relay closes its clients (1012), who reconnect.
    Stale { epoch: u64 },
    /// The home's record of one of the relay's sessions (its presence, its keys, what its
    /// token said), opaque to the relay, which keeps the latest of each client: the relay,
    /// not the home's storage, holds its sessions, and gives them back on a [`DownOp::Recall`].
    Peer { conn: String, peer: String },
    /// The home was rebuilt without its memory (an eviction, a reset) at `since` (its `seq`
    /// then) while this link stayed open: the relay answers with [`UpOp::Peers`], naming the
    /// recall's `id`. The home sends the relay's sessions nothing until it has them back.
    Recall { id: u64, since: u64 },
    /// The home took the answer to recall `id`: what the relay's clients missed since is
    /// on its way to them, and a later recall counts from its own `since`.
    Recalled { id: u64 },
    /// The epoch of the room's log, the first thing the home says on a link it accepts: the
    /// entries the relay learns from the home's frames are entries of this log, and a tail of
    /// another log is dropped.
    Epoch { epoch: String },
    /// Send `conn` the log's entries `after + 1 ..= upto` from the relay's own tail (it said it
    /// held them, [`Open::tail`]): its catch-up, in its place among the home's frames for it.
    /// A relay that no longer holds them all closes the client (1012), which resumes.
    Replay { conn: String, after: u64, upto: u64 },
    /// A catch-up of `bytes` for `conn` follows, sent by the home itself (a resync, a replay
    /// the tail could not serve): the relay lets it wait for the client's window beyond the
    /// backlog bound, as the home lets its own (the replay limit bounds a catch-up).
    CatchUp { conn: String, bytes: u64 },
    /// Entries of the log for the relay's tail, which lacked them (a `message` frame, or a
    /// `batch` of them): sent to no client. The home sends a range once per link, however
    /// many of the relay's clients resume past the tail.
    Entries { frame: String },
    /// [`DownOp::Send`], and the relay keeps `frame` under `id` until the end of this message,
    /// for the [`DownOp::Again`]s that follow: a big frame the home addressed to several of the
    /// relay's sessions one by one in a turn (a resync storm's state, the same catch-up)
    /// crosses once per message, not once per session.
    Keep { id: u64, to: Vec<String>, frame: String },
    /// Send the frame kept under `id` earlier in this message to these connections.
    Again { id: u64, to: Vec<String> },
    /// The room's parts of every welcome, the first thing after [`DownOp::Epoch`] on a link of
    /// version 3 on: its name, where it lives and its limits (JSON), which the relay puts in the
    /// welcomes it makes ([`DownOp::Welcome`]).
    Room {
        room: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        home: Option<String>,
        limits: String,
    },
    /// The home admitted a client: the relay makes its welcome (its first frame) from this
    /// session's part, its open and the room's parts ([`DownOp::Room`]); the same bytes the
    /// home would have sent.
    Welcome(Welcome),
    /// The room's state, whole (JSON, as a `state` frame carries it): the relay's mirror of it
    /// starts again from this (on a link the home accepts, and after a recall: a home rebuilt
    /// may hold a write the home before it stored and never told). Link version 3 on.
    Snapshot { state: String },
    /// A write to the room's state, stored by the home (`value` JSON; its version is the
    /// write's `seq`), for the relay's mirror: sent to no client.
    Set { key: String, value: String, version: u64 },
    /// Send `conn` the room's state from the relay's mirror at `seq` (the home's latest, and
    /// every write up to it came before this): a `state` frame, or with `reason` a `resync`
    /// frame (a catch-up: it may wait beyond the backlog bound, as [`DownOp::CatchUp`]). In its
    /// place among the home's frames for `conn`.
    State {
        conn: String,
        seq: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A signal for every client of the relay the home has addressed, sent by a session of
    /// another relay or of the home's own sockets; `key` is its sender's session and topic,
    /// by which the relay coalesces it with that sender's earlier ones in a window (as its own
    /// members' signals), and sheds it past its outbound budget. Link version 4 on.
    Signal { key: String, frame: String },
    /// An operation of a later version of the link: skipped.
    #[serde(other)]
    Unknown,
}

/// A session's part of its welcome ([`DownOp::Welcome`]): what the home decided about it, and
/// the room's presence as the welcome shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    pub conn: String,
    /// The room's latest `seq`.
    pub seq: u64,
    /// Whether exactly the missed messages follow (else a resync does, or nothing).
    pub resumed: bool,
    pub missed: u64,
    /// When the room closes the connection because its token expires (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<u64>,
    /// The welcome's `presence` (JSON): the member list below the large-room line, and the
    /// summary with the newcomer counted.
    pub presence: String,
}

/// Why a link message was not understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkError(pub String);

impl Up {
    /// The message as it crosses the link.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }

    /// A relay's turn as the link messages that carry it: each at most `max` bytes (see
    /// [`MESSAGE_MAX`]) unless one operation alone is bigger, the operations in order; none
    /// for no operation.
    ///
    /// ```
    /// use homeroom::protocol::link::{Up, UpOp};
    ///
    /// let op = |i: usize| UpOp::Text { conn: format!("oc-0.c{i}"), text: "x".repeat(100) };
    /// let texts = Up::pack("oc-0", 7, 0, (0..10).map(op).collect(), 400);
    /// assert!(texts.len() > 1 && texts.iter().all(|t| t.len() <= 400));
    /// let ops: Vec<UpOp> = texts.iter().flat_map(|t| Up::parse(t).unwrap().ops).collect();
    /// assert_eq!(ops, (0..10).map(op).collect::<Vec<_>>());
    /// ```
    pub fn pack(relay: &str, epoch: u64, heard: u64, ops: Vec<UpOp>, max: usize) -> Vec<String> {
        let relay = serde_json::to_string(relay).expect("a string serializes");
        let head = format!(r#"{{"relay":{relay},"epoch":{epoch},"heard":{heard},"ops":["#);
        pack_by(&head, ops.len(), max, |i, _| to_json(&ops[i]))
    }

    /// A message from a relay; anything but the shape above is an error.
    pub fn parse(text: &str) -> Result<Up, LinkError> {
        serde_json::from_str(text).map_err(|e| LinkError(e.to_string()))
    }
}

impl Down {
    /// The message as it crosses the link.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).expect("plain data serializes")
    }

    /// The home's turn for one relay as the link messages that carry it, as [`Up::pack`].
    /// Each message stands alone: an [`DownOp::Again`] whose [`DownOp::Keep`] went in an
    /// earlier message goes as a `Keep` of its own (the relay keeps frames for one message).
    ///
    /// ```
    /// use homeroom::protocol::link::{Down, DownOp};
    ///
    /// let frame = "x".repeat(300);
    /// let keep = DownOp::Keep { id: 1, to: vec!["a".into()], frame: frame.clone() };
    /// let again = DownOp::Again { id: 1, to: vec!["b".into()] };
    /// let texts = Down::pack(vec![keep, again], 360);
    /// assert_eq!(texts.len(), 2);
    /// let second = Down::parse(&texts[1]).unwrap().ops;
    /// assert_eq!(second, [DownOp::Keep { id: 1, to: vec!["b".into()], frame }]);
    /// ```
    pub fn pack(ops: Vec<DownOp>, max: usize) -> Vec<String> {
        // Where each kept frame is, for an `Again` that lands in a later message.
        let kept: std::collections::HashMap<u64, usize> = (ops.iter().enumerate())
            .filter_map(|(i, op)| match op {
                DownOp::Keep { id, .. } => Some((*id, i)),
                _ => None,
            })
            .collect();
        let mut here = std::collections::HashSet::new();
        pack_by(r#"{"ops":["#, ops.len(), max, |i, fresh| {
            if fresh {
                here.clear();
            }
            match &ops[i] {
                DownOp::Keep { id, .. } => {
                    here.insert(*id);
                }
                DownOp::Again { id, to } if !here.contains(id) => {
                    // Its frame went in an earlier message: this one carries it again.
                    if let Some(DownOp::Keep { frame, .. }) = kept.get(id).map(|&k| &ops[k]) {
                        here.insert(*id);
                        let (id, to, frame) = (*id, to.clone(), frame.clone());
                        return to_json(&DownOp::Keep { id, to, frame });
                    }
                }
                _ => {}
            }
            to_json(&ops[i])
        })
    }

    /// A message from the home; anything but the shape above is an error.
    pub fn parse(text: &str) -> Result<Down, LinkError> {
        serde_json::from_str(text).map_err(|e| LinkError(e.to_string()))
    }
}

fn to_json<T: Serialize>(op: &T) -> String {
    serde_json::to_string(op).expect("plain data serializes")
}

/// `n` operations as JSON messages `{head}op,op,...]}`, a new one begun before an operation
/// that would take the current one past `max` (a message holds at least one): the text
/// `serde_json` makes of the whole struct, cut between operations. `text_of(i, fresh)` is
/// operation `i`'s text, `fresh` when it is the first of a message (it is asked again, fresh,
/// when it begins one).
fn pack_by(
    head: &str,
    n: usize,
    max: usize,
    mut text_of: impl FnMut(usize, bool) -> String,
) -> Vec<String> {
    const TAIL: &str = "]}";
    let mut out = Vec::new();
    let mut text = String::new();
    for i in 0..n {
        let mut op = text_of(i, text.is_empty());
        if !text.is_empty() && text.len() + 1 + op.len() + TAIL.len() > max {
            text.push_str(TAIL);
            out.push(std::mem::take(&mut text));
            op = text_of(i, true);
        }
        if text.is_empty() {
            text.push_str(head);
        } else {
            text.push(',');
        }
        text.push_str(&op);
    }
    if !text.is_empty() {
        text.push_str(TAIL);
        out.push(text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(i: usize, bytes: usize) -> DownOp {
        DownOp::Send { to: vec![format!("eu-0.c{i}")], frame: "\"".repeat(bytes) }
    }

    #[test]
    fn a_turn_is_the_message_serde_makes_when_it_fits() {
        let ops: Vec<DownOp> = (0..5).map(|i| send(i, 10)).collect();
        let texts = Down::pack(ops.clone(), MESSAGE_MAX);
        assert_eq!(texts, vec![Down { ops: ops.clone() }.to_text()]);
        let up = vec![UpOp::Closed { conn: "a\"b".into() }];
        let text = Up { relay: "eu-0".into(), epoch: 3, heard: 9, ops: up.clone() }.to_text();
        assert_eq!(Up::pack("eu-0", 3, 9, up, MESSAGE_MAX), vec![text]);
        assert!(Down::pack(Vec::new(), MESSAGE_MAX).is_empty());
    }

    #[test]
    fn a_big_turn_is_cut_between_operations_in_order() {
        // Quotes are quoted again on the link: each op is twice its frame.
        let ops: Vec<DownOp> = (0..40).map(|i| send(i, 1000 + i * 37)).collect();
        let max = 8 * 1024;
        let texts = Down::pack(ops.clone(), max);
        assert!(texts.len() >= 10, "{} messages", texts.len());
        for t in &texts {
            assert!(t.len() <= max, "{} bytes", t.len());
        }
        let back: Vec<DownOp> = texts.iter().flat_map(|t| Down::parse(t).unwrap().ops).collect();
        assert_eq!(back, ops);
    }

    #[test]
    fn an_operation_bigger_than_a_message_goes_alone() {
        let ops = vec![send(0, 10), send(1, 5000), send(2, 10)];
        let texts = Down::pack(ops.clone(), 1000);
        assert_eq!(texts.len(), 3);
        assert!(texts[1].len() > 1000);
        let back: Vec<DownOp> = texts.iter().flat_map(|t| Down::parse(t).unwrap().ops).collect();
        assert_eq!(back, ops);
    }
}
