//! [`Downlinks`]: the home's side of its relays' links in one turn. The room
//! engine addresses a relay's sessions like any connection; the home's
//! adapter gathers what it sends them here, per link, and sends each link one
//! message at the end of the turn.

use std::collections::BTreeMap;

use crate::protocol::link::{Down, DownOp, LINK_WINDOW, MESSAGE_MAX};
use crate::room::CloseCode;

/// The smallest frame worth keeping at a relay for the sessions it goes to next in the turn
/// ([`DownOp::Keep`]): below it, sending the frame again costs less than comparing it.
pub const KEEP_MIN: usize = 4096;

/// What the home owes each link this turn, in order.
///
/// ```
/// use homeroom::relay::Downlinks;
///
/// let mut down = Downlinks::default();
/// // A frame for a direct socket and two sessions of one relay.
/// let to = [("c1", None), ("oc-0.c2", Some("oc-0#1")), ("oc-0.c3", Some("oc-0#1"))];
/// let direct = down.send(to, r#"{"type":"pong"}"#);
/// assert_eq!(direct, ["c1"]);
/// let messages = down.take();
/// assert_eq!(messages.len(), 1);
/// assert_eq!(messages[0].0, "oc-0#1");
/// assert!(messages[0].1.contains(r#""to":["oc-0.c2","oc-0.c3"]"#));
/// ```
#[derive(Debug, Default)]
pub struct Downlinks {
    ops: BTreeMap<String, Vec<DownOp>>,
    /// Per link, the big frames of the turn kept at its relay: (id, where its `Keep` is).
    kept: BTreeMap<String, Vec<(u64, usize)>>,
    /// The next id of a kept frame.
    next_id: u64,
    /// Per link held to the window ([`Downlinks::hold`]: its relay says what it took,
    /// [`crate::protocol::link::Up::heard`], link version 2 on), bytes of messages sent over
    /// it and bytes it said it took: the difference is in flight. A relay of version 1 says
    /// nothing, and its link is held to no window.
    flight: BTreeMap<String, (u64, u64)>,
    /// The links whose relays mirror the room's state (link version 3 on, told it whole by
    /// [`Downlinks::mirror`]): every state write goes to each ([`Downlinks::state_write`]).
    mirrored: std::collections::BTreeSet<String>,
}

impl Downlinks {
    /// A frame for these connections, each with the link it is on (`None`:
    /// a socket of the home's own): one operation per link. Returns the
    /// connections the adapter sends to itself.
    pub fn send<'a>(
        &mut self,
        to: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
        frame: &str,
    ) -> Vec<&'a str> {
        let mut per_link: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut direct = Vec::new();
        for (conn, link) in to {
            match link {
                Some(link) => per_link.entry(link).or_default().push(conn.to_owned()),
                None => direct.push(conn),
            }
        }
        for (link, to) in per_link {
            self.send_over(link, to, frame);
        }
        direct
    }

    /// A frame for `to`, sessions of `link`: a big one the link carried already this turn
    /// goes as [`DownOp::Again`] (the relay kept it), else as itself, kept when big.
    fn send_over(&mut self, link: &str, to: Vec<String>, frame: &str) {
        if frame.len() < KEEP_MIN {
            return self.push(link, DownOp::Send { to, frame: frame.to_owned() });
        }
        let ops = self.ops.get(link).map_or(&[][..], Vec::as_slice);
        let kept = self.kept.get(link).map_or(&[][..], Vec::as_slice);
        let same = kept.iter().find(|(_, at)| {
            matches!(&ops[*at], DownOp::Keep { frame: f, .. } if f.len() == frame.len() && f == frame)
        });
        if let Some(&(id, _)) = same {
            return self.push(link, DownOp::Again { id, to });
        }
        let at = ops.len();
        self.next_id += 1;
        let id = self.next_id;
        let kept = self.kept.entry(link.to_owned()).or_default();
        // A few kinds of big frame a turn (the state, a catch-up): the newest few are kept.
        if kept.len() == 8 {
            kept.remove(0);
        }
        kept.push((id, at));
        self.push(link, DownOp::Keep { id, to, frame: frame.to_owned() });
    }

    /// A frame for every session of `link` but those in `skip` (the
    /// engine's broadcast, for one link).
    pub fn all(&mut self, link: &str, skip: Vec<String>, frame: &str) {
        self.push(link, DownOp::All { skip, frame: frame.to_owned() });
    }

    /// A signal for every session of `link`, which its relay coalesces by `key` (its sender's
    /// session and topic) and sheds itself (link version 4 on).
    pub fn signal(&mut self, link: &str, key: &str, frame: &str) {
        self.push(link, DownOp::Signal { key: key.to_owned(), frame: frame.to_owned() });
    }

    /// The room closed `conn`, a session of `link`.
    pub fn close(&mut self, link: &str, conn: &str, code: &CloseCode) {
        let (code, reason) = (code.code(), code.reason().to_owned());
        self.push(link, DownOp::Close { conn: conn.to_owned(), code, reason });
    }

    /// Closes `conn`, a client of `link`'s relay the room does not know, with
    /// [`RESTART`](super::RESTART): it reconnects and resumes.
    pub fn restart(&mut self, link: &str, conn: &str, reason: &str) {
        let (conn, reason) = (conn.to_owned(), reason.to_owned());
        self.push(link, DownOp::Close { conn, code: super::RESTART, reason });
    }

    /// Tells `link`'s instance it is stale: `epoch` speaks for its relay.
    pub fn stale(&mut self, link: &str, epoch: u64) {
        self.push(link, DownOp::Stale { epoch });
    }

    /// The record of `conn`, a session of `link`, for its relay to keep (see
    /// [`DownOp::Peer`]).
    pub fn peer(&mut self, link: &str, conn: &str, peer: String) {
        self.push(link, DownOp::Peer { conn: conn.to_owned(), peer });
    }

    /// Asks `link`'s relay for its sessions' records as recall `id` (the home lost its memory;
    /// it was loaded at `since`).
    pub fn recall(&mut self, link: &str, id: u64, since: u64) {
        self.push(link, DownOp::Recall { id, since });
    }

    /// Tells `link`'s relay the home took its answer to recall `id`.
    pub fn recalled(&mut self, link: &str, id: u64) {
        self.push(link, DownOp::Recalled { id });
    }

    /// Names the room's log (`epoch`) to `link`, which the home has just accepted: the entries
    /// its relay learns from here on are of this log (see [`crate::relay::Tail`]).
    fn epoch(&mut self, link: &str, epoch: &str) {
        self.push(link, DownOp::Epoch { epoch: epoch.to_owned() });
    }

    /// Has `link`'s relay send `conn` the log's entries `after + 1 ..= upto` from its tail
    /// (the engine's [`crate::room::Output::Replay`]).
    pub fn replay(&mut self, link: &str, conn: &str, after: u64, upto: u64) {
        self.push(link, DownOp::Replay { conn: conn.to_owned(), after, upto });
    }

    /// A catch-up of `bytes` for `conn` follows (the engine's [`crate::room::Output::CatchUp`]).
    pub fn catch_up(&mut self, link: &str, conn: &str, bytes: u64) {
        self.push(link, DownOp::CatchUp { conn: conn.to_owned(), bytes });
    }

    /// What the home says first on a link it has just accepted, whose relay speaks link
    /// `version`: the link is held to the window (2 on), the room's log is named, then the
    /// room's parts of a welcome and its state follow (3 on).
    pub fn accepted(&mut self, link: &str, version: u32, room: &mut crate::room::Room) {
        if version >= 2 {
            self.hold(link); // its relay says what it took
        }
        self.epoch(link, room.epoch());
        if version >= 3 {
            self.room(link, room.name(), room.home(), room.limits());
            self.mirror(link, &room.state_text());
        }
    }

    /// The room's parts of every welcome, for `link`'s relay (version 3 on), which makes its
    /// clients' welcomes: said once, after [`Downlinks::epoch`], on a link the home accepts.
    fn room(&mut self, link: &str, room: &str, home: Option<&str>, limits: &str) {
        let (room, home, limits) = (room.to_owned(), home.map(str::to_owned), limits.to_owned());
        self.push(link, DownOp::Room { room, home, limits });
    }

    /// The session's part of a welcome `link`'s relay makes (the engine's
    /// [`crate::room::Output::Welcome`]).
    pub fn welcome(&mut self, link: &str, part: crate::protocol::link::Welcome) {
        self.push(link, DownOp::Welcome(part));
    }

    /// The room's state, whole (JSON), for `link`'s relay to mirror from here on (version 3
    /// on): said on a link the home accepts, and again after a recall (a home rebuilt may hold
    /// a write the one before it stored and never told). Every state write after goes to it.
    pub fn mirror(&mut self, link: &str, state: &str) {
        self.mirrored.insert(link.to_owned());
        self.push(link, DownOp::Snapshot { state: state.to_owned() });
    }

    /// A write to the room's state the home stored (`value` JSON, its version the write's
    /// `seq`): for every relay that mirrors the state, sent to no client.
    pub fn state_write(&mut self, key: &str, value: &str, version: u64) {
        for link in &self.mirrored {
            let (key, value) = (key.to_owned(), value.to_owned());
            self.ops.entry(link.clone()).or_default().push(DownOp::Set { key, value, version });
        }
    }

    /// Has `link`'s relay send `conn` the state from its mirror, as of `seq` (the engine's
    /// [`crate::room::Output::State`]).
    pub fn state(&mut self, link: &str, conn: &str, seq: u64, reason: Option<&str>) {
        let (conn, reason) = (conn.to_owned(), reason.map(str::to_owned));
        self.push(link, DownOp::State { conn, seq, reason });
    }

    /// Entries of the log (`frame`: a message, or a batch of them) for `link`'s relay's tail.
    pub fn entries(&mut self, link: &str, frame: &str) {
        self.push(link, DownOp::Entries { frame: frame.to_owned() });
    }

    /// Forgets what was owed to a link that closed.
    pub fn forget(&mut self, link: &str) {
        self.ops.remove(link);
        self.kept.remove(link);
        self.flight.remove(link);
        self.mirrored.remove(link);
    }

    /// `link`'s relay says it took `heard` bytes of the messages sent over it so far (since
    /// the message with this home's recall, if this home was rebuilt while the link stayed
    /// open: the relay counts from there). The latest word stands: one the relay sent before
    /// it took the recall counts what an earlier home sent.
    pub fn heard(&mut self, link: &str, heard: u64) {
        if let Some((_, taken)) = self.flight.get_mut(link) {
            *taken = heard;
        }
    }

    /// Holds `link`, just accepted, to [`LINK_WINDOW`]: its relay says what it took (link
    /// version 2 on). What is sent over it from here counts.
    pub fn hold(&mut self, link: &str) {
        self.flight.insert(link.to_owned(), (0, 0));
    }

    /// Bytes sent over `link` that its relay has not said it took.
    pub fn in_flight(&self, link: &str) -> u64 {
        self.flight.get(link).map_or(0, |(sent, taken)| sent.saturating_sub(*taken))
    }

    /// The links with more than [`LINK_WINDOW`] in flight: their relays fell behind, and the
    /// home closes them (see [`LINK_WINDOW`]) rather than buffer more for them.
    pub fn behind(&self) -> Vec<String> {
        let over = |(sent, taken): &(u64, u64)| sent.saturating_sub(*taken) > LINK_WINDOW;
        self.flight.iter().filter(|(_, f)| over(f)).map(|(link, _)| link.clone()).collect()
    }

    /// The turn's messages: each link that is owed something, with its
    /// [`Down`] message's text; a link owed more than a message holds
    /// ([`MESSAGE_MAX`]) gets several, in order.
    pub fn take(&mut self) -> Vec<(String, String)> {
        self.kept.clear();
        let messages: Vec<(String, String)> = std::mem::take(&mut self.ops)
            .into_iter()
            .flat_map(|(link, ops)| {
                Down::pack(ops, MESSAGE_MAX).into_iter().map(move |text| (link.clone(), text))
            })
            .collect();
        for (link, text) in &messages {
            if let Some((sent, _)) = self.flight.get_mut(link) {
                *sent += text.len() as u64;
            }
        }
        messages
    }

    /// Whether no link is owed anything this turn.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    fn push(&mut self, link: &str, op: DownOp) {
        match self.ops.get_mut(link) {
            Some(ops) => ops.push(op),
            None => {
                self.ops.insert(link.to_owned(), vec![op]);
            }
        }
    }
}
