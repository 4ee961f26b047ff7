//! The document room: one Yjs document, the sockets editing it, their awareness and their
//! budgets, as a pure state machine. Time and ids come in; effects come out as data
//! ([`Effect`]), in the order the adapter must apply them: an update's `Store` always comes
//! before the frames that show it to anyone (stored before seen).

use std::cell::{Cell, OnceCell};
use std::collections::{BTreeMap, HashMap};

use yrs::updates::decoder::Decode;
use yrs::{ClientID, Doc, ReadTxn, StateVector, Transact, TransactionMut, Update};

use super::awareness::{Awareness, Bounds, Claimant};
use super::census::{self, Census, MAX_BLOCKS};
use super::clocks::{clock_of, Clocks};
use super::config::DocConfig;
use super::error::{Consequence, DocError};
use super::flow::{Answer, Flow, Verdict as FlowVerdict};
use super::guard::{check_update, sort_ranges, Shape};
use super::nesting::{Placement, MAX_NESTING};
use super::rules::{self, Access, Change, DocCtx, DocRules, Edit, Editor, Verdict};
use super::tails::Ask;
use super::wire::{self, Entry, Message};
use super::writers::{Writers, ROOM_WRITER};
use super::ConnId;
use crate::room::rate::Bucket;

/// Who holds a socket of the document, as the Worker admitted them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Member {
    /// The token's user (anonymous dev mode: the socket's own id).
    pub user: String,
    /// May read the document but not change it.
    pub read_only: bool,
    /// Asked for homeroom's extension messages (`saved`, `refused`) with `homeroom=1`.
    pub extensions: bool,
    /// When the token that admitted it expires (ms): the socket is closed then (4401
    /// `token_expired`). `None` without a token (anonymous dev mode).
    #[serde(default)]
    pub expires: Option<u64>,
    /// Admitted without a token (anonymous dev mode): `user` names this socket only, so the
    /// Yjs clients it writes for are not bound to it ([`Effect::Bind`]); a reconnect is
    /// another user.
    #[serde(default)]
    pub anonymous: bool,
}

/// What the adapter does, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Append this update to the stored log.
    Store(Vec<u8>),
    /// Store that these Yjs clients write for `user` (no other user may write for them). Comes
    /// before the `Store` of the update that brought their first blocks, or as the user's
    /// awareness first shows them.
    Bind { clients: Vec<u64>, user: String },
    /// Forget these clients' bindings: clients a user showed in awareness and never wrote for,
    /// making way for the user's newer ones (`writers::SHOWN_PER_USER`).
    Unbind { clients: Vec<u64> },
    /// Replace the stored snapshot with this encoding of the whole document and empty the
    /// log (everything in the log is in it).
    Compact(Vec<u8>),
    /// A frame to one socket.
    Send(ConnId, Vec<u8>),
    /// A frame to every socket but `except`.
    Broadcast { except: Option<ConnId>, frame: Vec<u8> },
    /// Write the socket's record (its member and awareness, [`DocRoom::record`]) into the
    /// socket, where it survives hibernation.
    Remember(ConnId),
    /// A refusal, for the log (the frames it causes are separate effects).
    Refused(ConnId, DocError),
    /// Close the socket with this code and reason.
    Close(ConnId, u16, String),
}

/// A socket of the document.
#[derive(Debug)]
struct Socket {
    member: Member,
    /// Update messages received on it (each one is answered saved or refused, in order).
    updates: u64,
    /// What it was handed and has shown it read ([`Flow`]).
    flow: Flow,
    /// The sync step 1 it was sent at open has been answered (the answers to later marks are
    /// not counted as its updates: its client does not count them).
    opened: bool,
    /// Closed for reading too slowly; the adapter has yet to say it is gone.
    closing: bool,
    /// Its awareness bound a Yjs client to its user ([`DocRoom::bind_shown`]): one a socket,
    /// as a tab is one Yjs client (a member showing a new client in every frame would make the
    /// room write rows at her frame rate; a new socket is paced by her connects).
    bound_one: bool,
}

/// A user's budgets, shared by their sockets, and kept after their last socket closes until
/// they are full again: a member closed 4029 who reconnects at once finds what they left.
#[derive(Debug)]
struct Budget {
    frames: Bucket,
    bytes: Bucket,
    replies: Bucket,
    connects: Bucket,
    /// Sockets the user holds in the room.
    sockets: usize,
}

impl Budget {
    fn full(limits: &DocConfig, now: u64) -> Budget {
        Budget {
            frames: Bucket::full(limits.frame_burst, now),
            bytes: Bucket::full(limits.byte_burst(), now),
            replies: Bucket::full(limits.reply_burst(), now),
            connects: Bucket::full(limits.connect_burst, now),
            sockets: 0,
        }
    }

    /// When all three are full again (ms).
    fn full_at(&self, limits: &DocConfig) -> u64 {
        let frames = self.frames.full_at(limits.frames_per_sec, limits.frame_burst);
        let bytes = self.bytes.full_at(limits.bytes_per_sec, limits.byte_burst());
        let replies = self.replies.full_at(limits.reply_bytes_per_sec, limits.reply_burst());
        let connects = self.connects.full_at(limits.connects_per_sec, limits.connect_burst);
        frames.max(bytes).max(replies).max(connects)
    }
}

/// What one socket keeps of itself across hibernation (its attachment).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Record {
    /// Who holds the socket, as admitted (read-only by the token or the rules' `join`).
    pub member: Member,
    /// Update messages received on it, refused ones included (`saved` goes on from it).
    pub updates: u64,
    /// Its awareness states (dropped when they do not fit, see [`DocRoom::attachment`]).
    pub awareness: Vec<Entry>,
}

/// The largest attachment written (bytes): the runtime keeps at most 16 KiB a socket.
pub const MAX_ATTACHMENT: usize = 16_000;

/// The socket an attachment ([`DocRoom::attachment`]) names, read without the rest: every
/// frame's event needs it, and only a wake needs the record.
pub fn attachment_conn(text: &str) -> Option<ConnId> {
    text.split_once(' ')?.0.parse().ok()
}

/// The socket and the record an attachment holds.
pub fn read_attachment(text: &str) -> Option<(ConnId, Record)> {
    let (conn, record) = text.split_once(' ')?;
    Some((conn.parse().ok()?, serde_json::from_str(record).ok()?))
}

/// One document room.
pub struct DocRoom {
    config: DocConfig,
    doc: Doc,
    /// Boxed, as the awareness's states are: one map of `u64` to a box is one copy of the map's
    /// code in the Wasm for both (each map of its own was 1.3-1.7 KB).
    sockets: BTreeMap<ConnId, Box<Socket>>,
    /// (A hash map: nothing walks it in order, and a `BTreeMap` of its own was 1.6 KB of Wasm.)
    budgets: HashMap<String, Budget>,
    /// Budgets past this many are looked at for the full ones ([`Self::forget_full_budgets`]).
    budgets_checked_above: usize,
    awareness: Awareness,
    /// The user each Yjs client that has written writes for.
    writers: Writers,
    rules: Box<dyn DocRules>,
    /// A copy of the document kept in step with it, once the rules asked what an update
    /// would make of it ([`Change::after`]).
    shadow: Option<Doc>,
    /// Edits the rules asked for in the hook being handled, applied after it.
    edits: Vec<Edit>,
    /// Bytes of the stored snapshot and of the log after it: the document's stored size.
    snapshot_bytes: usize,
    log_bytes: usize,
    /// How many blocks the document holds and how deeply its types nest; built from the
    /// document when first needed (a wake that only serves reads never builds it).
    census: Option<Census>,
    /// The document's deleted ranges `(client, start, end)`, sorted, once a check at a bound
    /// asked for them, until the document changes ([`Self::fresh_deletes`]).
    deleted: Option<Vec<(u64, u64, u64)>>,
    /// How many times it walked the document for them.
    walks: usize,
    /// What measuring the document at a bound (a fold, a walk for the deleted ranges) cost
    /// while the member's update being handled was checked: the document's size for each. Its
    /// sender pays it once the update is handled ([`Self::member_update`]).
    owed: u64,
    /// Changes stored since the room was made (an update that changed the document or not).
    changes: u64,
    /// What the marks ask readers for is drawn from it ([`DocRoom::with_seed`]).
    rng: fastrand::Rng,
    out: Vec<Effect>,
}

/// A member's or a backend's update, checked against the document before anything runs it:
/// it integrates whole and nests no deeper than allowed.
struct Checked<'a> {
    now: u64,
    shape: &'a Shape,
    placement: Placement,
    /// The document's clocks for the clients it names, before it.
    before: Clocks,
    /// The Yjs clients it brings the first blocks of, to bind to `writer` when it is stored.
    claims: Vec<u64>,
    writer: String,
    /// How many of the ranges it deletes the document does not hold deleted yet, once asked
    /// ([`DocRoom::fresh_deletes`]: at a bound only).
    fresh: Cell<Option<usize>>,
}

impl DocRoom {
    /// An empty document whose own edits (the server's) carry the Yjs client id `client`
    /// (the adapter draws it at random each load, as a Yjs editor does).
    pub fn new(config: DocConfig, client: u64) -> DocRoom {
        // The room's own client is the room's from the start: a member writing for it would
        // have the room's next edit taken for one already known, or push its clock to wrap.
        // Not stored: each load draws another, and nobody writes for an old one again.
        let mut writers = Writers::default();
        writers.bind(client, ROOM_WRITER);
        DocRoom {
            config,
            doc: rules::blank(client),
            sockets: BTreeMap::new(),
            budgets: HashMap::new(),
            budgets_checked_above: 0,
            awareness: Awareness::default(),
            writers,
            rules: Box::new(rules::Open),
            shadow: None,
            edits: Vec::new(),
            snapshot_bytes: 0,
            log_bytes: 0,
            census: None,
            deleted: None,
            walks: 0,
            owed: 0,
            changes: 0,
            rng: fastrand::Rng::with_seed(client ^ 0x9e37_79b9_7f4a_7c15),
            out: Vec::new(),
        }
    }

    /// The same room drawing what its marks ask readers for from `seed`. The adapter draws it
    /// at random: a member who could foretell the marks could answer them without reading
    /// (without it the seed comes from the room's Yjs client id, which every update shows).
    pub fn with_seed(mut self, seed: u64) -> DocRoom {
        self.rng = fastrand::Rng::with_seed(seed);
        self
    }

    /// The same room under the kind's rules.
    pub fn with_rules(mut self, rules: Box<dyn DocRules>) -> DocRoom {
        self.rules = rules;
        self
    }

    /// Loads what storage holds: the snapshot, then the log after it, in order. A stored
    /// update that no longer decodes is skipped and counted (it cannot have been saved by
    /// this room: everything stored was applied first).
    pub fn restore<'a>(
        &mut self,
        snapshot: &[u8],
        log: impl IntoIterator<Item = &'a [u8]>,
    ) -> usize {
        // One transaction each, as they were applied live: a transaction's end (its clean-up,
        // its garbage collection) is part of what an update did.
        let mut skipped = 0;
        if !snapshot.is_empty() {
            skipped += usize::from(apply(&mut self.doc.transact_mut(), snapshot).is_err());
        }
        self.snapshot_bytes = snapshot.len();
        for update in log {
            skipped += usize::from(apply(&mut self.doc.transact_mut(), update).is_err());
            self.log_bytes += update.len();
        }
        self.census = None;
        self.deleted = None;
        skipped
    }

    /// Loads which user each Yjs client writes for, as [`Effect::Bind`] stored it.
    pub fn restore_writers(&mut self, rows: impl IntoIterator<Item = (u64, String)>) {
        let txn = self.doc.transact();
        let store = txn.store();
        for (client, user) in rows {
            self.writers.bind(client, &user);
            if clock_of(store, client) == 0 {
                self.writers.restore_shown(client); // bound from its user's awareness
            }
        }
    }

    /// The effects to apply, in order.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.out)
    }

    /// A socket joins, if the rules let it: it is sent the room's state vector (it answers
    /// with what the room lacks) and everyone's awareness.
    pub fn open(&mut self, now: u64, conn: ConnId, mut member: Member) {
        if let Err(why) = self.admit(now, &member.user) {
            if let Consequence::Close(code) = why.consequence() {
                self.out.push(Effect::Close(conn, code, why.code().to_owned()));
            }
            self.out.push(Effect::Refused(conn, why));
            return;
        }
        let who = Editor { user: &member.user, read_only: member.read_only };
        let sockets = &self.sockets;
        let editors = || sockets.values().map(|s| s.member.user.as_str()).collect();
        let mut ctx = DocCtx::new(now, &self.doc, &editors);
        let access = self.rules.join(&mut ctx, &who);
        self.edits.append(&mut ctx.edits);
        match access {
            Access::Write => {}
            Access::ReadOnly => member.read_only = true,
            Access::Refuse(refusal) => {
                let why = DocError::Rules(refusal.code().to_owned());
                self.out.push(Effect::Close(conn, 4403, refusal.code().to_owned()));
                self.out.push(Effect::Refused(conn, why));
                self.run_edits();
                return;
            }
        }
        self.open_quietly(now, conn, member, 0);
        self.mark(conn, true);
        let states = self.awareness.all();
        if !states.is_empty() {
            self.send(conn, wire::awareness(states.iter()));
        }
        self.out.push(Effect::Remember(conn));
        self.run_edits();
    }

    /// A socket that stayed connected while the object hibernated, as its record says.
    pub fn rejoin(&mut self, now: u64, conn: ConnId, record: Record) {
        let Record { member, updates, awareness } = record;
        let (user, anonymous) = (member.user.clone(), member.anonymous);
        self.open_quietly(now, conn, member, updates);
        if let Some(socket) = self.sockets.get_mut(&conn) {
            socket.opened = true; // long ago, before the object slept
        }
        // Its own states, as it last set them; renewed now (its tab is still there).
        let who = Claimant { user: &user, anonymous, may_claim: &|_| true };
        let _ = self.awareness.apply(conn, who, awareness, now, self.bounds());
    }

    /// A user's caps, as for rooms: connects come out of a bucket (a refused one too), and a
    /// user holds at most `sockets_per_user` sockets. Each socket holds up to 32 KiB of
    /// awareness and its share of every broadcast, so sockets without end were memory without
    /// end.
    fn admit(&mut self, now: u64, user: &str) -> Result<(), DocError> {
        let limits = self.config;
        let budget =
            self.budgets.entry(user.to_owned()).or_insert_with(|| Budget::full(&limits, now));
        if !budget.connects.take(limits.connects_per_sec, limits.connect_burst, 1, now) {
            return Err(DocError::ConnectRate);
        }
        if budget.sockets >= limits.sockets_per_user {
            return Err(DocError::TooManyConnections);
        }
        Ok(())
    }

    fn open_quietly(&mut self, now: u64, conn: ConnId, member: Member, updates: u64) {
        let limits = self.config;
        let budget =
            self.budgets.entry(member.user.clone()).or_insert_with(|| Budget::full(&limits, now));
        budget.sockets += 1;
        let socket = Socket {
            member,
            updates,
            flow: Flow::default(),
            opened: false,
            closing: false,
            bound_one: false,
        };
        self.sockets.insert(conn, Box::new(socket));
    }

    /// What socket `conn` keeps across hibernation.
    pub fn record(&self, conn: ConnId) -> Option<Record> {
        let socket = self.sockets.get(&conn)?;
        Some(Record {
            member: socket.member.clone(),
            updates: socket.updates,
            awareness: self.awareness.of_socket(conn),
        })
    }

    /// The attachment socket `conn` keeps across hibernation: its id, a space, its record as
    /// JSON; at most [`MAX_ATTACHMENT`] bytes. When its awareness states do not fit (four
    /// states of 8 KiB, or JSON that escapes badly), it keeps the rest without them: its count
    /// of updates must survive (`saved` goes on from it), its states come back with the tab's
    /// next renewal (every 15 s for a stock client) after a wake.
    pub fn attachment(&self, conn: ConnId) -> Option<String> {
        let mut record = self.record(conn)?;
        let text = format!("{conn} {}", serde_json::to_string(&record).ok()?);
        if text.len() <= MAX_ATTACHMENT {
            return Some(text);
        }
        record.awareness.clear();
        let text = format!("{conn} {}", serde_json::to_string(&record).ok()?);
        (text.len() <= MAX_ATTACHMENT).then_some(text)
    }

    /// A frame arrived on socket `conn`.
    pub fn message(&mut self, now: u64, conn: ConnId, frame: &[u8]) {
        let counted = self.sockets.get(&conn).map(|s| s.updates);
        if let Err(refused) = self.handle(now, conn, frame) {
            // The `refused` extension names the update refused (0: not an update).
            let now_counted = self.sockets.get(&conn).map(|s| s.updates);
            let index = if now_counted != counted { now_counted.unwrap_or(0) } else { 0 };
            self.refuse(conn, refused, index);
        }
        self.run_edits();
    }

    /// A request to a path of the room no built-in route takes, for the rules to answer.
    ///
    /// A member's call (a token, not the admin key) is paid for as rooms' are: it is let in
    /// while the user's reply budget holds anything (else 429 `rate_limited` with `retry_ms`),
    /// and its answer's bytes, at least 4 KiB, come out of that budget once
    /// made. Without it a member rebuilt a large document's text
    /// for a rules' route as often as they liked, and every editor waited behind them.
    pub fn request(&mut self, now: u64, req: &rules::Request) -> Option<rules::Response> {
        let member = req.user.clone().filter(|_| !req.admin);
        if let Some(user) = &member {
            let limits = self.config;
            let budget =
                self.budgets.entry(user.clone()).or_insert_with(|| Budget::full(&limits, now));
            let (rate, burst) = (limits.reply_bytes_per_sec, limits.reply_burst());
            let retry_ms = budget.replies.wait_for(rate, burst, 1, now);
            if retry_ms > 0 {
                let body = serde_json::json!({
                    "error": "rate_limited",
                    "message": "too many requests: wait retry_ms",
                    "retry_ms": retry_ms,
                });
                return Some(rules::Response::json(429, &body));
            }
        }
        let answer = self.answer_request(now, req);
        if let Some(user) = &member {
            let bytes = answer.as_ref().map_or(0, |a| a.body.len() as u64);
            let (limits, cost) = (self.config, bytes.max(crate::room::READ_FLOOR_BYTES));
            if let Some(budget) = self.budgets.get_mut(user) {
                budget.replies.charge(limits.reply_bytes_per_sec, limits.reply_burst(), cost, now);
            }
            // A caller without a socket leaves a budget behind: let the full ones go.
            self.forget_full_budgets(now);
        }
        answer
    }

    fn answer_request(&mut self, now: u64, req: &rules::Request) -> Option<rules::Response> {
        let sockets = &self.sockets;
        let editors = || sockets.values().map(|s| s.member.user.as_str()).collect();
        let caller = req.user.as_deref().filter(|_| !req.admin);
        if let Some(user) = caller.filter(|u| !sockets.values().any(|s| s.member.user == *u)) {
            // As for rooms: whom the kind's `join` keeps out calls none of its routes (asked
            // without consequence: its edits are dropped). An editor connected now is not asked.
            let mut scratch = DocCtx::new(now, &self.doc, &editors);
            if let Access::Refuse(refusal) =
                self.rules.join(&mut scratch, &Editor { user, read_only: false })
            {
                let body =
                    serde_json::json!({"error": refusal.code(), "message": refusal.message()});
                return Some(rules::Response::json(403, &body));
            }
        }
        let mut ctx = DocCtx::new(now, &self.doc, &editors);
        let answer = self.rules.request(&mut ctx, req);
        self.edits.append(&mut ctx.edits);
        self.run_edits();
        answer
    }

    /// Applies the edits the rules asked for, each as a transaction of the room's own.
    fn run_edits(&mut self) {
        for edit in std::mem::take(&mut self.edits) {
            // The rules' own edits are not refused for size (see `server_edit`).
            let _ = self.server_edit(edit);
        }
    }

    fn handle(&mut self, now: u64, conn: ConnId, frame: &[u8]) -> Result<(), DocError> {
        let Some(socket) = self.sockets.get(&conn) else { return Ok(()) };
        // A socket whose token expired is closed at its next frame, whether or not the alarm
        // (`tick`) has run yet: until then an editor past `exp` still changed the document.
        if socket.member.expires.is_some_and(|at| at <= now) {
            self.expire(now, conn);
            return Ok(());
        }
        if frame.len() > self.config.max_frame() {
            return Err(DocError::FrameTooLarge);
        }
        let limits = self.config;
        let budget =
            self.budgets.get_mut(&socket.member.user).expect("every socket's user has a budget");
        if !budget.frames.take(limits.frames_per_sec, limits.frame_burst, 1, now)
            || !budget.bytes.take(
                limits.bytes_per_sec,
                limits.byte_burst(),
                frame.len() as u64,
                now,
            )
        {
            return Err(DocError::RateLimited);
        }
        match wire::decode(frame)? {
            Message::SyncStep1(sv) => {
                let diff = self.doc.transact().encode_diff_v1(&sv);
                let budget = self.budget_of(conn);
                if !budget.replies.take(
                    limits.reply_bytes_per_sec,
                    limits.reply_burst(),
                    diff.len() as u64,
                    now,
                ) {
                    return Err(DocError::RateLimited);
                }
                self.send(conn, wire::sync_step2(&diff));
            }
            Message::Update { bytes, shape, step2 } => {
                // The answer to a mark after the opening one is not one of the socket's
                // updates: its client counts only its own.
                let counted = !(step2 && self.answers_a_later_mark(conn, &shape)?);
                self.member_update(now, conn, bytes, &shape, counted)?;
            }
            Message::Awareness(entries) => self.awareness_frame(now, conn, entries)?,
            Message::QueryAwareness => {
                // Paid for like a sync step 1's answer: a one-byte ask answered with every
                // cursor (up to 32 KiB a socket's worth) was 32 MB a second for 100 asks.
                let states = self.awareness.all();
                let answer = wire::awareness(states.iter());
                let budget = self.budget_of(conn);
                let (rate, burst) = (limits.reply_bytes_per_sec, limits.reply_burst());
                if !budget.replies.take(rate, burst, answer.len() as u64, now) {
                    return Err(DocError::RateLimited);
                }
                self.send(conn, answer);
            }
            Message::Ignored(_) => {}
        }
        Ok(())
    }

    /// Awareness states from socket `conn`: applied, bound if it is the first new client the
    /// socket shows ([`Self::bind_shown`]), and shown to every socket.
    fn awareness_frame(
        &mut self,
        now: u64,
        conn: ConnId,
        entries: Vec<Entry>,
    ) -> Result<(), DocError> {
        let bounds = self.bounds();
        let member = &self.sockets[&conn].member;
        let writers = &self.writers;
        let may_claim = |client: u64| writers.owner(client).is_none_or(|o| o == member.user);
        let who =
            Claimant { user: &member.user, anonymous: member.anonymous, may_claim: &may_claim };
        // The first new client this socket shows, if no other socket set its state
        // (an anonymous tab's removed state is anyone's, but not to bind).
        let shown = (!member.anonymous && !member.read_only && !self.sockets[&conn].bound_one)
            .then(|| {
                entries.iter().find(|e| {
                    !e.is_removal()
                        && self.writers.owner(e.client).is_none()
                        && !self.awareness.set_by_another(e.client, conn)
                })
            })
            .flatten()
            .map(|e| e.client);
        let changed = self.awareness.apply(conn, who, entries, now, bounds)?;
        if let Some(client) = shown.filter(|c| changed.iter().any(|e| e.client == *c)) {
            self.bind_shown(conn, client);
        }
        if !changed.is_empty() {
            // To the sender too, as y-websocket's own server does: a stock client
            // alone in the room hears its own renewals, or it takes the silence for a
            // dead socket after 30 s and reconnects.
            self.broadcast(None, wire::awareness(changed.iter()));
            self.out.push(Effect::Remember(conn));
        }
        Ok(())
    }

    /// An update from a member: counted, checked, applied, stored, then shown.
    fn member_update(
        &mut self,
        now: u64,
        conn: ConnId,
        bytes: Vec<u8>,
        shape: &Shape,
        counted: bool,
    ) -> Result<(), DocError> {
        let changes = self.changes;
        self.owed = 0;
        let result = self.take_member_update(now, conn, bytes, shape, counted);
        // Measuring the document at a bound is paid by the sender, its size for each fold or
        // walk: an update taken and one past the bound by turns, or a deletion repeated at the
        // bound, cannot make the room measure the whole document for each. An editor's answer
        // to a mark (the room asked for it; it repeats the editor's whole delete set) pays only
        // if it changed the document: each measure then follows a change someone paid for.
        let owed = std::mem::take(&mut self.owed);
        if owed > 0 && (counted || self.changes != changes) && self.sockets.contains_key(&conn) {
            self.charge(conn, owed, now);
        }
        result
    }

    /// [`Self::member_update`] without the settling of what measuring cost.
    fn take_member_update(
        &mut self,
        now: u64,
        conn: ConnId,
        bytes: Vec<u8>,
        shape: &Shape,
        counted: bool,
    ) -> Result<(), DocError> {
        let socket = self.sockets.get_mut(&conn).expect("checked by the caller");
        if !counted && socket.member.read_only {
            return Ok(()); // a reader's answer to a mark: nothing of theirs is taken anyway
        }
        socket.updates += u64::from(counted);
        let (index, extensions, read_only) =
            (socket.updates, socket.member.extensions && counted, socket.member.read_only);
        // An empty update (the sync step 2 of an editor with nothing new) changes nothing,
        // whoever sends it, and is not the rules' to decide; it is answered saved like any
        // other, in order.
        if !shape.is_empty() {
            if read_only {
                return Err(DocError::ReadOnly);
            }
            // Checked before `yrs` decodes it (its blocks cost memory) and before the rules
            // see it (their copy of the document must not take what the room refuses).
            let checked = self.check(now, Some(conn), shape)?;
            let update = Update::decode_v1(&bytes).map_err(|_| DocError::BadUpdate)?;
            self.ruled_update(now, conn, update, &bytes, checked)?;
        } else if !self.fits(shape) {
            return Err(DocError::MissingDependencies);
        }
        if extensions {
            self.send(conn, wire::saved(index));
            // Its count of updates must survive hibernation for `saved` to go on from it; a
            // socket without the extensions has no count to keep (and no write per update).
            self.out.push(Effect::Remember(conn));
        }
        Ok(())
    }

    /// Asks the rules about a member's update, then applies, stores and shows it if they
    /// accept. The copy of the document the rules may have asked for stays in step.
    fn ruled_update(
        &mut self,
        now: u64,
        conn: ConnId,
        update: Update,
        bytes: &[u8],
        checked: Checked<'_>,
    ) -> Result<(), DocError> {
        // Past the bound the update is refused before the rules try it: a refusal that is
        // nobody's doing must not cost the room its copy, nor its sender the copy's price.
        self.fits_the_bound(&checked, bytes.len())?;
        let trial = OnceCell::new();
        let kept = Cell::new(self.shadow.take());
        let member = &self.sockets[&conn].member;
        let who = Editor { user: &member.user, read_only: member.read_only };
        let sockets = &self.sockets;
        let editors = || sockets.values().map(|s| s.member.user.as_str()).collect();
        let mut ctx = DocCtx::new(now, &self.doc, &editors);
        let change = Change { before: &self.doc, update: bytes, trial: &trial, kept: &kept };
        let verdict = self.rules.update(&mut ctx, &who, &change);
        self.edits.append(&mut ctx.edits);
        if let Verdict::Refuse(refusal) = verdict {
            // A trial copy holds the refused update: let it go (its sender pays for the next
            // one); an untouched one stays.
            self.shadow = kept.take();
            if trial.get().is_some() {
                self.copy_lost_by(conn, now);
            }
            return Err(DocError::Rules(refusal.code().to_owned()));
        }
        let result = self.apply_and_store(update, bytes, Some(conn), checked);
        let (trial, kept) = (trial.into_inner(), kept.take());
        let had_copy = trial.is_some() || kept.is_some();
        self.shadow = match (&result, trial, kept) {
            (Ok(()), Some(copy), _) => Some(copy),
            (Ok(()), None, Some(copy)) => rules::apply(&copy, bytes).then_some(copy),
            (Err(DocError::TooLarge), None, copy) => copy, // nothing was applied
            _ => None,
        };
        if had_copy && self.shadow.is_none() {
            self.copy_lost_by(conn, now);
        }
        result
    }

    /// Socket `conn`'s update cost the room the copy its rules decide on: the next update
    /// that asks makes a new one, and `conn`'s user pays for it now, from what they may send
    /// (as if they had sent the document). So updates the rules refuse cannot make the room
    /// copy without end (past the budget, 4029), nor make another editor pay for the copy.
    fn copy_lost_by(&mut self, conn: ConnId, now: u64) {
        self.charge(conn, self.stored_bytes() as u64, now);
    }

    /// Takes `cost` bytes from what socket `conn`'s user may send (into debt: their next
    /// frames wait for it).
    fn charge(&mut self, conn: ConnId, cost: u64, now: u64) {
        let limits = self.config;
        let budget = self.budget_of(conn);
        budget.bytes.charge(limits.bytes_per_sec, limits.byte_burst(), cost, now);
    }

    /// An update made by the room itself (a backend route or the kind's rules): stored and
    /// shown to every socket like a member's.
    pub fn server_update(&mut self, bytes: &[u8]) -> Result<(), DocError> {
        let shape = check_update(bytes)?;
        let checked = self.check(0, None, &shape)?; // no sender to charge: `now` goes unused
        let update = Update::decode_v1(bytes).map_err(|_| DocError::BadUpdate)?;
        self.apply_and_store(update, bytes, None, checked)
    }

    /// Whether an update of this shape integrates whole (see [`Shape::fits`]).
    fn fits(&self, shape: &Shape) -> bool {
        let txn = self.doc.transact();
        let store = txn.store();
        shape.fits(|client| clock_of(store, client))
    }

    /// Checks an update of this shape against the document: it must integrate whole
    /// ([`Shape::fits`]), nest types no deeper than [`MAX_NESTING`] and keep the document
    /// within [`MAX_BLOCKS`] (recounted once if the document changed since the last count;
    /// `payer`, the sender, pays for the recount as for the document's size).
    fn check<'a>(
        &mut self,
        now: u64,
        payer: Option<ConnId>,
        shape: &'a Shape,
    ) -> Result<Checked<'a>, DocError> {
        let before = Clocks::of(&self.doc, shape);
        let known = before.known();
        if !shape.fits(&known) {
            return Err(DocError::MissingDependencies);
        }
        let (claims, writer) = self.claims(shape, &known, payer)?;
        let census = self.census();
        let placement = census.nesting.place(shape, &known)?;
        if placement.deepest > MAX_NESTING {
            return Err(DocError::TooDeep);
        }
        let mut blocks = census::added(shape, &known);
        let fresh = Cell::new(None);
        if census.blocks.saturating_add(blocks) > MAX_BLOCKS {
            if census.grown {
                self.fold_to_measure();
            }
            if self.census().blocks.saturating_add(blocks) > MAX_BLOCKS && !shape.over {
                // Counted again with only the deletions that are new (see `fresh_deletes`).
                let fresh_deletes = self.fresh_deletes(shape, &fresh);
                blocks = census::new_blocks(shape, &known) + 2 * fresh_deletes;
            }
            if self.census().blocks.saturating_add(blocks) > MAX_BLOCKS {
                return Err(DocError::TooLarge);
            }
        }
        drop(known);
        Ok(Checked { now, shape, placement, before, claims, writer, fresh })
    }

    /// How many of the ranges an update of `shape` deletes the document does not hold deleted
    /// yet (kept in `fresh` once counted). The document's deleted ranges are a walk over all of
    /// it: kept until the document changes, and owed by the sender as for a fold (see
    /// [`Self::member_update`]), so that updates repeating a deletion at a bound cannot make the
    /// room walk the document for each.
    fn fresh_deletes(&mut self, shape: &Shape, fresh: &Cell<Option<usize>>) -> usize {
        if let Some(n) = fresh.get() {
            return n;
        }
        if self.deleted.is_none() {
            // A fold lists them (the encoding's delete set), and measures the document too.
            self.fold(true);
            self.walks += 1;
            self.owed = self.owed.saturating_add(self.stored_bytes() as u64);
        }
        // Unlisted (more ranges than a document may hold blocks): all of them count.
        let n = self
            .deleted
            .as_ref()
            .map_or(shape.deletes.len(), |deleted| census::fresh_deletes(shape, deleted));
        fresh.set(Some(n));
        n
    }

    /// Who writes an update of `shape` (the member of socket `payer`, or the room itself), and
    /// the Yjs clients it brings the first blocks of, to bind to them once it is stored. A
    /// member may not bring new blocks of a client another user writes for (`not_your_client`);
    /// the room's own updates and the backend's (`payer` `None`) may.
    fn claims(
        &self,
        shape: &Shape,
        known: &impl Fn(u64) -> u64,
        payer: Option<ConnId>,
    ) -> Result<(Vec<u64>, String), DocError> {
        let member = payer.and_then(|conn| self.sockets.get(&conn)).map(|s| &s.member);
        let writer = member.map_or(ROOM_WRITER, |m| m.user.as_str());
        let mut claims = Vec::new();
        for &(client, _, end) in &shape.blocks {
            if end <= known(client) {
                continue; // nothing new of it: `yrs` trims it away
            }
            match self.writers.owner(client) {
                Some(owner) if member.is_some() && owner != writer => {
                    return Err(DocError::NotYourClient)
                }
                Some(_) => {}
                // An editor shows its client in its awareness before its first edit: another
                // user's state (live, or removed and not yet forgotten) holds it for them.
                None if member.is_some()
                    && self.awareness.named_holder(client).is_some_and(|u| u != writer) =>
                {
                    return Err(DocError::NotYourClient)
                }
                // A socket without a token names only itself: binding would refuse its own
                // editor once it reconnects.
                None if member.is_some_and(|m| m.anonymous) => {}
                None => claims.push(client),
            }
        }
        Ok((claims, writer.to_owned()))
    }

    /// Binds the clients `checked` brings the first blocks of to its writer (the document's
    /// clocks are `after` now): in memory, and in storage before the update that brings them.
    fn bind_claims(&mut self, checked: &Checked<'_>, after: &Clocks) {
        if checked.claims.is_empty() {
            return; // the common update: its client is bound already
        }
        // Only the clients the document took blocks of: `yrs` may stop partway through.
        let (now, before) = (after.known(), checked.before.known());
        let writers = &mut self.writers;
        let clients: Vec<u64> = checked
            .claims
            .iter()
            .copied()
            .filter(|&c| now(c) > before(c) && writers.bind(c, &checked.writer))
            .collect();
        if !clients.is_empty() {
            self.out.push(Effect::Bind { clients, user: checked.writer.clone() });
        }
    }

    /// Binds `client`, which socket `conn`'s awareness shows first, to its user, and stores it
    /// ([`Writers::bind_shown`]): a client is its editor's from its first cursor, not only from
    /// its first edit, across reloads too. Not a client that has written (unbound, it wrote
    /// without a token or before bindings were stored: its first writer since binds it).
    fn bind_shown(&mut self, conn: ConnId, client: u64) {
        let Some(socket) = self.sockets.get_mut(&conn) else { return };
        let user = socket.member.user.clone();
        let txn = self.doc.transact();
        let store = txn.store();
        if clock_of(store, client) > 0 {
            return;
        }
        let written = |client: u64| clock_of(store, client) > 0;
        let (new, unbound) = self.writers.bind_shown(client, &user, written);
        drop(txn);
        socket.bound_one |= new;
        if !unbound.is_empty() {
            self.out.push(Effect::Unbind { clients: unbound });
        }
        if new {
            self.out.push(Effect::Bind { clients: vec![client], user });
        }
    }

    /// The census, built from the document if it is not there yet or its nesting index has
    /// grown stale.
    fn census(&mut self) -> &mut Census {
        if self.census.as_ref().is_none_or(|c| c.nesting.stale()) {
            self.census = Some(Census::of_document(&self.encoded()));
        }
        self.census.get_or_insert_with(|| Census::of_document(&[]))
    }

    /// Notes in the census what an update integrated (all of it, or what came before `yrs`
    /// stopped: the document's clocks are `after` now), and the `deleted` ranges it really
    /// deleted.
    fn placed(&mut self, checked: &Checked<'_>, after: &Clocks, deleted: usize) {
        let before = checked.before.known();
        let added = census::new_blocks(checked.shape, &before) + 2 * deleted;
        if let Some(census) = self.census.as_mut() {
            census.nesting.record(checked.shape, &checked.placement, &before, after.known());
            census.grow(added);
            census.tails.record(checked.shape, &before, after.known());
        }
    }

    /// A change made by the room itself in a transaction: `edit` changes the document; what
    /// it changed is stored and shown to every socket like a member's update.
    pub fn server_edit<R>(
        &mut self,
        edit: impl FnOnce(&mut TransactionMut<'_>) -> R,
    ) -> Result<R, DocError> {
        let (result, update, shape, before) = {
            let mut txn = self.doc.transact_mut();
            let result = edit(&mut txn);
            let update = txn.encode_update_v1();
            // The clocks before, of the clients it names (the encoding built the state vector
            // before the transaction already: no walk more).
            let shape = check_update(&update);
            let before = shape.as_ref().map(|s| Clocks::in_sv(txn.before_state(), s)).ok();
            (result, update, shape, before)
        };
        // The room's own edits are not refused for depth or blocks (the kind's code chose
        // them), but what they add counts for the members' updates after them.
        if let (Some(census), Ok(shape), Some(before)) = (self.census.as_mut(), shape, before) {
            let after = Clocks::of(&self.doc, &shape);
            match census.nesting.place(&shape, before.known()) {
                Ok(placement) => {
                    census.nesting.record(&shape, &placement, before.known(), after.known());
                    census.grow(census::added(&shape, before.known()));
                    census.tails.record(&shape, before.known(), after.known());
                }
                Err(_) => self.census = None,
            }
        }
        if self.stored_bytes() + update.len() > self.config.max_doc_bytes {
            // Already applied in memory: keep storage the truth by storing it anyway, then
            // compacting; the bound is checked before member updates, which can be refused.
            self.stored(update, None);
            self.compact();
            return Ok(result);
        }
        self.stored(update, None);
        Ok(result)
    }

    /// Applies `update` (decoded from `bytes`), then stores and shows it.
    fn apply_and_store(
        &mut self,
        update: Update,
        bytes: &[u8],
        from: Option<ConnId>,
        checked: Checked<'_>,
    ) -> Result<(), DocError> {
        if update.is_empty() {
            return Ok(()); // a sync step 2 of a client with nothing new
        }
        self.fits_the_bound(&checked, bytes.len())?;
        let (applied, deleted) = {
            let mut txn = self.doc.transact_mut();
            let applied = txn.apply_update(update);
            (applied, txn.delete_set().iter().map(|(_, ranges)| ranges.len()).sum::<usize>())
        };
        // The clocks after, once: for the census, the claims and whether anything moved.
        let after = Clocks::of(&self.doc, checked.shape);
        self.placed(&checked, &after, deleted);
        let moved = after != checked.before;
        if applied.is_ok() && deleted == 0 && !moved {
            // Nothing new (a sync step 2 that repeats what the room holds, its delete set
            // included): nothing to store or show.
            return Ok(());
        }
        if applied.is_err() {
            // `yrs` integrates block by block: what came before the error (an item naming a
            // parent that is not a type) stays in memory. What memory gained is stored and shown
            // to the others, so storage and every editor hold what the room holds; the sender,
            // who has it all, is told the update was refused.
            self.shadow = None; // it may not hold the same part
            if moved {
                let sv = checked.before.in_place_of(self.doc.transact().state_vector());
                let gained = self.doc.transact().encode_diff_v1(&sv);
                if let Some(conn) = from {
                    // Its sender pays for what the room stores and sends (the diff carries the
                    // document's whole delete set), from what they may send, and at least the
                    // document's size (the diff is a walk over every client).
                    let cost = gained.len().max(self.stored_bytes()) as u64;
                    self.charge(conn, cost, checked.now);
                }
                self.bind_claims(&checked, &after);
                self.stored(gained, from);
            }
            return Err(DocError::BadUpdate);
        }
        self.bind_claims(&checked, &after);
        self.stored(bytes.to_vec(), from);
        Ok(())
    }

    /// Whether `len` more bytes keep the document within its bound. The log overstates the
    /// document (it repeats what merges away), so a log is folded to measure; an empty log is
    /// not folded again (a snapshot is already the document: a member sending small updates
    /// at the bound must not make the room re-encode the whole document for each). An update
    /// whose deletions the document holds already (a sync step 2 repeats its sender's whole
    /// delete set) adds only its blocks' bytes.
    fn fits_the_bound(&mut self, checked: &Checked<'_>, len: usize) -> Result<(), DocError> {
        let max = self.config.max_doc_bytes;
        if self.stored_bytes() + len > max && self.log_bytes > 0 {
            self.fold_to_measure();
        }
        if self.stored_bytes() + len > max {
            let shape = checked.shape;
            if shape.over {
                return Err(DocError::TooLarge); // (`check` refused it already)
            }
            // Its deletions' bytes count in proportion to the deletions that are new.
            let fresh = self.fresh_deletes(shape, &checked.fresh);
            let ranges = shape.deletes.len().max(1) as u64;
            // In u64: a delete set of 500 KB times 50,000 new ranges passes a u32 (Wasm's usize).
            let counted = shape.delete_bytes as u64 * (fresh as u64).min(ranges) / ranges;
            let len = len - shape.delete_bytes + counted as usize;
            if self.stored_bytes() + len > max {
                return Err(DocError::TooLarge);
            }
        }
        Ok(())
    }

    /// Folds the log to measure the document at a bound, which recounts its blocks too. The
    /// member whose update asked for it owes the document's size (see
    /// [`Self::member_update`]).
    fn fold_to_measure(&mut self) {
        self.fold(true); // and lists the deleted ranges, which a check at the bound may ask for
        self.owed = self.owed.saturating_add(self.stored_bytes() as u64);
    }

    /// Stores `update` (already applied), then shows it to every socket but its sender's.
    fn stored(&mut self, update: Vec<u8>, from: Option<ConnId>) {
        self.deleted = None; // the document changed
        self.changes += 1;
        if self.shadow.as_ref().is_some_and(|copy| !rules::apply(copy, &update)) {
            self.shadow = None;
        }
        self.log_bytes += update.len();
        let frame = wire::update(&update);
        self.out.push(Effect::Store(update));
        self.broadcast(from, frame);
        if self.log_bytes > self.config.compact_above.max(self.snapshot_bytes) {
            self.compact();
        }
    }

    /// Folds the log into a snapshot of the whole document.
    pub fn compact(&mut self) {
        self.fold(false);
    }

    /// Folds the log into a snapshot, recounting the census from it, and keeping the
    /// document's deleted ranges it lists if `list_deleted`.
    fn fold(&mut self, list_deleted: bool) {
        let snapshot = self.doc.transact().encode_state_as_update_v1(&StateVector::default());
        if self.census.is_some() || list_deleted {
            let shape = check_update(&snapshot).ok();
            if let (Some(census), Some(shape)) = (self.census.as_mut(), shape.as_ref()) {
                census.recount(shape);
            }
            if list_deleted {
                self.deleted = shape.filter(|s| !s.over).map(|s| {
                    let mut deleted = s.deletes;
                    sort_ranges(&mut deleted);
                    deleted
                });
            }
        }
        if list_deleted && self.log_bytes == 0 {
            return; // the stored snapshot is this already: nothing to store
        }
        self.snapshot_bytes = snapshot.len();
        self.log_bytes = 0;
        self.out.push(Effect::Compact(snapshot));
    }

    /// A socket closed (or failed): its awareness states go, for the others; the last one out
    /// folds the log into the snapshot.
    pub fn close(&mut self, now: u64, conn: ConnId) {
        let Some(socket) = self.sockets.remove(&conn) else { return };
        if let Some(budget) = self.budgets.get_mut(&socket.member.user) {
            budget.sockets = budget.sockets.saturating_sub(1);
        }
        let removed = self.awareness.drop_socket(conn, now, self.config.awareness_timeout_ms);
        if !removed.is_empty() {
            self.broadcast(None, wire::awareness(removed.iter()));
        }
        self.forget_full_budgets(now);
        if self.sockets.is_empty() && self.log_bytes > 0 {
            self.compact();
        }
    }

    /// Closes socket `conn`, whose token expired (4401 `token_expired`).
    fn expire(&mut self, now: u64, conn: ConnId) {
        self.out.push(Effect::Close(conn, 4401, "token_expired".into()));
        self.close(now, conn);
    }

    /// Time passed: sockets whose token expired are closed, awareness states not renewed in
    /// time go. Returns when to call again.
    pub fn tick(&mut self, now: u64) -> Option<u64> {
        let expired: Vec<ConnId> = self
            .sockets
            .iter()
            .filter(|(_, s)| s.member.expires.is_some_and(|at| at <= now))
            .map(|(c, _)| *c)
            .collect();
        for conn in expired {
            self.expire(now, conn);
        }
        let removed = self.awareness.expire(now, self.config.awareness_timeout_ms);
        if !removed.is_empty() {
            self.broadcast(None, wire::awareness(removed.iter()));
            let owners: Vec<ConnId> = self.sockets.keys().copied().collect();
            self.out.extend(owners.into_iter().map(Effect::Remember));
        }
        let tokens = self.sockets.values().filter_map(|s| s.member.expires).min();
        match (self.awareness.next_expiry(), tokens) {
            (Some(a), Some(t)) => Some(a.min(t)),
            (a, t) => a.or(t),
        }
    }

    /// The whole document as one Yjs update (what a backend reads).
    pub fn encoded(&self) -> Vec<u8> {
        self.doc.transact().encode_state_as_update_v1(&StateVector::default())
    }

    /// The document, for reading (the backend's JSON view, the kind's rules).
    pub fn doc(&self) -> &Doc {
        &self.doc
    }

    /// The stored size: the snapshot and the log after it (bytes).
    pub fn stored_bytes(&self) -> usize {
        self.snapshot_bytes + self.log_bytes
    }

    /// Whether the copy the rules try updates on (if any) holds what the document holds.
    #[cfg(test)]
    pub(crate) fn copy_in_step(&self) -> bool {
        use yrs::GetString;
        self.shadow.as_ref().is_none_or(|copy| {
            let (ours, theirs) = (self.doc.transact(), copy.transact());
            let text = |t: &yrs::Transaction<'_>| t.get_text("text").map(|x| x.get_string(t));
            ours.state_vector() == theirs.state_vector() && text(&ours) == text(&theirs)
        })
    }

    /// Entries of the nesting index, if it is built.
    #[cfg(test)]
    pub(crate) fn nesting_entries(&self) -> Option<usize> {
        self.census.as_ref().map(|c| c.nesting.entries())
    }

    /// Whether the room holds the document's deleted ranges from a walk, and how many walks it
    /// made for them (see [`Self::fresh_deletes`]).
    #[cfg(test)]
    pub(crate) fn deleted_ranges(&self) -> (bool, usize) {
        (self.deleted.is_some(), self.walks)
    }

    /// Blocks the census holds, if it is built.
    #[cfg(test)]
    pub(crate) fn census_blocks(&self) -> Option<usize> {
        self.census.as_ref().map(|c| c.blocks)
    }

    /// Sockets open.
    pub fn sockets(&self) -> usize {
        self.sockets.len()
    }

    fn bounds(&self) -> Bounds {
        Bounds {
            max_state: self.config.max_awareness_bytes,
            per_socket: self.config.awareness_per_socket,
            timeout: self.config.awareness_timeout_ms,
        }
    }

    /// Drops the budgets of users with no socket left that are full again (a full budget is
    /// what a newcomer gets). Looked at only when they outnumber the sockets twice over (plus
    /// 16) and twice what the last look kept, so closes cost a scan only now and then: kept are
    /// the users present, and those who left (or were refused) within the time their budgets
    /// take to fill (seconds; longer for one in debt).
    fn forget_full_budgets(&mut self, now: u64) {
        let floor = 2 * self.sockets.len() + 16;
        if self.budgets.len() <= floor.max(self.budgets_checked_above) {
            return;
        }
        let limits = self.config;
        self.budgets.retain(|_, b| b.sockets > 0 || b.full_at(&limits) > now);
        self.budgets_checked_above = 2 * self.budgets.len();
    }

    /// A frame to socket `conn`, through its flow.
    fn send(&mut self, conn: ConnId, frame: Vec<u8>) {
        let Some(socket) = self.sockets.get_mut(&conn).filter(|s| !s.closing) else { return };
        match socket.flow.frame(frame.len()) {
            FlowVerdict::Close => self.too_slow(conn),
            verdict => {
                self.out.push(Effect::Send(conn, frame));
                if verdict == FlowVerdict::SendAndMark {
                    self.mark(conn, false);
                }
            }
        }
    }

    /// A frame to every socket but `except`, through each one's flow: a socket that reads too
    /// slowly is closed first (so the adapter no longer sends to it).
    fn broadcast(&mut self, except: Option<ConnId>, frame: Vec<u8>) {
        let (mut slow, mut marks) = (Vec::new(), Vec::new());
        for (&conn, socket) in &mut self.sockets {
            if Some(conn) == except || socket.closing {
                continue;
            }
            match socket.flow.frame(frame.len()) {
                FlowVerdict::Close => slow.push(conn),
                FlowVerdict::SendAndMark => marks.push(conn),
                FlowVerdict::Send => {}
            }
        }
        for conn in slow {
            self.too_slow(conn);
        }
        self.out.push(Effect::Broadcast { except, frame });
        for conn in marks {
            self.mark(conn, false);
        }
    }

    /// A mark to socket `conn`: a sync step 1 its client answers in order ([`super::flow`]).
    /// The one at open is the room's state vector (the client answers with what the room
    /// lacks); the others ask for what only a reader has ([`super::tails`]).
    fn mark(&mut self, conn: ConnId, opening: bool) {
        if !self.sockets.contains_key(&conn) {
            return;
        }
        let sv = self.doc.transact().state_vector();
        let (asked, ask) = if opening {
            (encode_sv(&sv), Ask::Anything)
        } else {
            let drawn = self.rng.u64(..);
            let ask = self.census().tails.ask(clock_in(&sv), drawn);
            (asking(&sv, ask), ask)
        };
        let frame = wire::sync_step1(&asked);
        if let Some(socket) = self.sockets.get_mut(&conn) {
            socket.flow.marked(frame.len(), ask);
            self.out.push(Effect::Send(conn, frame));
        }
    }

    /// Socket `conn` sent a sync step 2 of this shape: whether it answered a mark after the
    /// opening one. An answer without what the mark asked for is refused `mark_unread`.
    fn answers_a_later_mark(&mut self, conn: ConnId, answer: &Shape) -> Result<bool, DocError> {
        let Some(socket) = self.sockets.get_mut(&conn) else { return Ok(false) };
        match socket.flow.answered(answer) {
            Answer::Read => Ok(std::mem::replace(&mut socket.opened, true)),
            Answer::Unread => Err(DocError::MarkUnread),
            Answer::NoMark => Ok(false), // a sync step 2 of the client's own
        }
    }

    /// Socket `conn` would be handed past its window while it owes an answer: closed 4013
    /// (the adapter closes it and says so with [`DocRoom::close`]).
    fn too_slow(&mut self, conn: ConnId) {
        if let Some(socket) = self.sockets.get_mut(&conn) {
            socket.closing = true;
            self.out.push(Effect::Close(conn, 4013, DocError::SlowReader.code().to_owned()));
            self.out.push(Effect::Refused(conn, DocError::SlowReader));
        }
    }

    fn budget_of(&mut self, conn: ConnId) -> &mut Budget {
        let user = &self.sockets[&conn].member.user;
        self.budgets.get_mut(user).expect("every socket's user has a budget")
    }

    /// A refusal: logged, told to a socket that asked for refusals, and closed if it must be.
    fn refuse(&mut self, conn: ConnId, refused: DocError, index: u64) {
        let Some(socket) = self.sockets.get(&conn) else { return };
        if socket.member.extensions {
            self.send(conn, wire::refused(index, refused.code()));
            if index > 0 {
                // A refused update counts too: the count `saved` goes on from must survive
                // hibernation.
                self.out.push(Effect::Remember(conn));
            }
        }
        if let Consequence::Close(code) = refused.consequence() {
            self.out.push(Effect::Close(conn, code, refused.code().to_owned()));
        }
        self.out.push(Effect::Refused(conn, refused));
    }
}

/// Applies one stored or sent update.
fn apply(txn: &mut TransactionMut<'_>, bytes: &[u8]) -> Result<(), DocError> {
    let update = Update::decode_v1(bytes).map_err(|_| DocError::BadUpdate)?;
    txn.apply_update(update).map_err(|_| DocError::BadUpdate)
}

/// A state vector as a function from a client to its clock.
fn clock_in(sv: &StateVector) -> impl Fn(u64) -> u64 + '_ {
    |client| u64::from(sv.get(&ClientID::new(client)))
}

/// The state vector a mark sends for `ask`, encoded: every client the document has at the
/// highest clock (their blocks are not sent back), but the one asked for, at the clock asked.
/// Written out here rather than built as a `yrs` state vector and encoded by [`encode_sv`]:
/// the same bytes, one map the fewer per mark (and 64 bytes less Wasm).
fn asking(sv: &StateVector, ask: Ask) -> Vec<u8> {
    use yrs::encoding::write::Write;
    let mut out = Vec::with_capacity(1 + 16 * sv.len());
    out.write_var(sv.len() as u64);
    for (client, _) in sv.iter() {
        let clock = match ask {
            Ask::From { client: asked, clock } if asked == client.get() => clock,
            _ => u64::from(u32::MAX),
        };
        out.write_var(client.get());
        out.write_var(clock);
    }
    out
}

fn encode_sv(sv: &StateVector) -> Vec<u8> {
    use yrs::updates::encoder::Encode;
    sv.encode_v1()
}
