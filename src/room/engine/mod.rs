//! [`Room`]: the state machine that turns inputs into ordered, durable effects.
//!
//! This file holds the room's fields, restore, the input dispatch and the
//! welcome; [`writes`] sequences publishes and sets; [`membership`] keeps
//! presence, summaries, the heartbeat sweep and the alarm; [`admission`]
//! decides who may connect and what each frame costs; [`operator`] is what
//! the admin routes do.

mod admission;
mod delivery;
mod diffs;
mod hosting;
mod membership;
use membership::Joining;
mod operator;
mod stats;
mod writes;

pub use operator::Block;

pub use writes::{READER_SESSION, RULES_SESSION, SERVER_SESSION};

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::rc::Rc;

use serde_json::value::RawValue;

use super::flow::Flow;
use super::history::History;
use super::io::{Hello, Input, Output, Snapshot};
use super::outbox::Outbox;
use super::presence::{Presence, SummaryThrottle};
use super::rate::{Meter, RateLimiter};
use super::rules::{Open, Rules};
use super::state::RoomState;
use super::timer::Alarm;
use super::users::Users;
use super::{CloseCode, Error, RoomConfig};
use crate::protocol::link::Welcome as WelcomePart;
use crate::protocol::server::{Limits, PresenceView, ServerFrame, Welcome};
use crate::protocol::{self, ClientFrame, FrameError};
use crate::room::ids::Cause;
use crate::room::Time;

/// A connection the engine knows: which session and user it carries, its
/// rate budget, what it was sent and confirmed, and when it last showed
/// signs of life.
#[derive(Debug)]
struct Conn {
    session: String,
    user: String,
    limiter: RateLimiter,
    /// Last frame or answered heartbeat (ms).
    last_seen: u64,
    /// The `seen` last written to the socket attachment (ms).
    seen_saved: u64,
    /// Frames waiting for its coalescing window, replay hold or flow window.
    out: Outbox,
    /// Bytes handed to the runtime and confirmed by the client.
    flow: Flow,
    /// When its token expires (ms).
    expires: Option<u64>,
    /// Since when frames have waited behind its full flow window with no
    /// echo confirming anything (ms), as seen by the keep-alive.
    stalled_since: Option<u64>,
    /// The link it came over, if not a socket of its own: it lives as long
    /// as the link does (the link's far end watches its client).
    link: Option<String>,
    /// Its link's far end mirrors the room's parts and state ([`Hello::relay_mirror`]).
    mirror: bool,
    /// Its link's far end coalesces and sheds the signals it is sent ([`Hello::relay_signals`]):
    /// a signal goes to its link once, never through this connection's outbox.
    signals_at_link: bool,
    /// The presence changes its welcome showed: those up to this number
    /// ([`diffs::Window::seen`]).
    presence_seen: u64,
}

/// The users a room's storage knows blocked, as of `now`.
fn users_of(snap: &Snapshot, now: u64) -> Users {
    let mut users = Users::default();
    for (user, until) in &snap.blocks {
        users.block(user, Some(until.ms()));
    }
    users.prune_blocks(now);
    users
}

/// The room's sessions over links whose far ends (relays of link version 2 on) keep their flow
/// windows, counted as they come and go: the adapter sends such a link one message a turn
/// whatever its sessions are sent, so a frame for all of them is one send per link, not per
/// session (the room's batching and outbound budget count sends).
#[derive(Debug, Default)]
struct Relayed {
    members: usize,
    /// Each link with its sessions here.
    links: HashMap<String, usize>,
}

impl Relayed {
    fn link(c: &Conn) -> Option<&str> {
        c.link.as_deref().filter(|_| !c.flow.metered())
    }

    fn add(&mut self, c: &Conn) {
        if let Some(link) = Self::link(c) {
            self.members += 1;
            *self.links.entry(link.to_owned()).or_default() += 1;
        }
    }

    fn remove(&mut self, c: &Conn) {
        let Some(link) = Self::link(c) else {
            return;
        };
        self.members -= 1;
        if let Some(n) = self.links.get_mut(link) {
            *n -= 1;
            if *n == 0 {
                self.links.remove(link);
            }
        }
    }
}

impl Conn {
    /// Nothing waits for it and its flow window is open: a frame may go
    /// out at once (and with a broadcast shared by every such connection).
    fn idle(&self, window: u64) -> bool {
        self.out.is_idle() && self.flow.open(window)
    }
}

/// One room: its log position, state, connections and presence.
pub struct Room {
    config: RoomConfig,
    name: String,
    epoch: String,
    home: Option<String>,
    seq: u64,
    history: History,
    state: RoomState,
    conns: HashMap<String, Conn>,
    /// How many of `conns` are sessions over links whose far ends keep their windows, and over
    /// how many links: what a frame for all of them costs the adapter ([`Relayed`]).
    relayed: Relayed,
    presence: Presence,
    summary: SummaryThrottle,
    /// Above `large_room` members: summaries only, no per-member diffs.
    large: bool,
    /// Presence diffs were held back under load; the next summary sends
    /// the whole member list.
    presence_stale: bool,
    /// A small room's presence changes held for the end of their window.
    window: diffs::Window,
    /// Connections over their backlog, closed (4013) once the operation that
    /// took them over is done: a close in the middle of a broadcast would
    /// run the whole leave path inside it (a leave reaching a socket before
    /// its welcome, a summary recorded out of order, a socket closed twice).
    doomed: BTreeSet<String>,
    /// Set while [`Room::close_doomed`] runs (its closes may doom others).
    closing_doomed: bool,
    /// Some connection may have frames waiting for its client's echo
    /// (checked, and cleared, when the wake-up timer is set).
    echo_wait: bool,
    /// When to look for connections that stopped answering heartbeats.
    sweep_at: Option<u64>,
    /// Members whose link closed (a relay that died), kept until then (ms) unless their
    /// session comes back: session -> until. Their connections are gone; at most one entry
    /// per session, each for [`RoomConfig::link_grace_ms`].
    away: BTreeMap<String, u64>,
    alarm: Alarm,
    stats: stats::Counters,
    /// The time of the input being handled (ms).
    now: u64,
    /// Frames asked for per second (before batching), against the
    /// batching threshold.
    asked: Meter,
    /// Frames sent per second (a batch counts once), against the outbound
    /// budget.
    outbound: Meter,
    /// Resumes per second, to tell a reconnect storm.
    resumes: Meter,
    /// Connections with durable frames waiting for the end of the turn.
    turn: Vec<String>,
    /// Turns flushed so far: tells a connection flushed in this turn from one that was not.
    flushes: u64,
    /// When coalescing windows and replay holds end, by connection.
    deadlines: BTreeSet<(u64, String)>,
    /// The short wake-up timer requested for the next deadline.
    wake: Alarm,
    /// Connections per user, the users' budgets, and blocks.
    users: Users,
    /// Sessions whose member left lately: session -> (user, when), so a
    /// member that drops for a moment finds its session still its own.
    departed: HashMap<String, (String, u64)>,
    /// When each connection's token expires, earliest first.
    expiries: BTreeSet<(u64, String)>,
    /// An empty room deletes its storage then (retention).
    retain_at: Option<u64>,
    /// The `state` / `resync` frames of the current `seq`, made once.
    replies: Vec<(&'static str, Rc<str>)>,
    replies_seq: u64,
    /// The limits every welcome announces, serialized once.
    limits: Box<RawValue>,
    /// The application's rules, and their timers (name -> due, ms).
    rules: Box<dyn Rules>,
    timers: BTreeMap<String, Time>,
    /// Requests under the room's path the rules answered (unique ids for
    /// the writes they make).
    requests: u64,
    outputs: VecDeque<Output>,
    /// This load's randomness: the flow keys of the connections it restores come from it.
    nonce: u64,
    /// Per link: the entries its relay's tail holds for sure once what this room sent it
    /// arrives (first, last: the ranges it had replayed and filled, [`Output::Entries`]), so
    /// that a range the tail lacks crosses a link once, not once per member who resumes.
    tails: HashMap<String, (u64, u64)>,
}

/// The log a snapshot holds: the ids of the oldest entries, the recent entries whole.
fn history_of(config: &RoomConfig, snap: &Snapshot) -> History {
    let mut history = History::new(config.replay_limit, config.log_retain, config.log_retain_bytes);
    let first_framed = snap.recent.first().map_or(u64::MAX, |e| e.seq);
    for e in snap.ids.iter().filter(|e| e.seq < first_framed) {
        history.remember_id(e.seq, &e.session, &e.id, &e.user, e.bytes);
    }
    for e in &snap.recent {
        let bytes = e.data.get().len() as u64;
        history.push(e.seq, &e.session, &e.id, &e.user, bytes, e.frame());
    }
    history
}

impl std::fmt::Debug for Room {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Room")
            .field("name", &self.name)
            .field("epoch", &self.epoch)
            .field("seq", &self.seq)
            .field("connections", &self.conns.len())
            .field("members", &self.presence.len())
            .finish_non_exhaustive()
    }
}

impl Room {
    /// Rebuilds a room with the open rules (everything accepted) from
    /// storage and the sockets still open. A new room is a snapshot with
    /// `seq` 0 and a fresh epoch.
    pub fn restore(config: RoomConfig, snap: Snapshot, now: Time) -> Room {
        let now = now.ms();
        Room::restore_with(config, Box::new(Open), snap, Time::from_ms(now))
    }

    /// Rebuilds a room that runs `rules` (see [`crate::room::rules`]).
    pub fn restore_with(
        config: RoomConfig,
        rules: Box<dyn Rules>,
        snap: Snapshot,
        now: Time,
    ) -> Room {
        let now = now.ms();
        let (owed, frames_owed) = (snap.presence_owed, snap.frames_owed);
        let history = history_of(&config, &snap);
        let users = users_of(&snap, now);
        let mut state = RoomState::default();
        for (key, value, version) in snap.state {
            state.set(key, value, version);
        }
        let mut room = Room {
            name: snap.room,
            epoch: snap.epoch,
            home: snap.home,
            seq: snap.seq,
            history,
            state,
            conns: HashMap::new(),
            relayed: Relayed::default(),
            presence: Presence::default(),
            summary: SummaryThrottle::default(),
            large: false,
            presence_stale: false,
            window: diffs::Window::default(),
            doomed: BTreeSet::new(),
            closing_doomed: false,
            echo_wait: false,
            sweep_at: None,
            away: BTreeMap::new(),
            // The storage alarm may be late by a loaded room's backlog;
            // asking again costs a storage write, so only when long overdue.
            alarm: Alarm::new(10_000),
            stats: stats::Counters::since(now),
            now,
            asked: Meter::default(),
            outbound: Meter::default(),
            resumes: Meter::default(),
            turn: Vec::new(),
            flushes: 0,
            deadlines: BTreeSet::new(),
            // Asking again for the in-memory timer costs the adapter nothing
            // when one is pending (it keeps the earliest).
            wake: Alarm::new(0),
            users,
            departed: HashMap::new(),
            expiries: BTreeSet::new(),
            retain_at: None,
            replies: Vec::new(),
            replies_seq: 0,
            limits: serde_json::value::to_raw_value(&Limits::of(&config))
                .unwrap_or_else(|_| empty_object()),
            rules,
            timers: snap.timers.into_iter().collect(),
            requests: 0,
            outputs: VecDeque::new(),
            nonce: snap.nonce,
            tails: HashMap::new(),
            config,
        };
        room.restore_peers(snap.peers, snap.nonce, now);
        if frames_owed {
            room.frames_lost(now);
        }
        if owed {
            room.presence_lost(now);
        }
        if room.conns.is_empty() {
            room.retain_from(snap.idle_since.map_or(now, Time::ms));
        }
        room.rules_loaded(now, &snap.recent);
        room.arm();
        room
    }

    /// The next effect to apply, in order.
    ///
    /// ```
    /// use homeroom::room::{Room, RoomConfig, Snapshot, Time};
    /// let mut room = Room::restore(RoomConfig::default(), Snapshot::default(), Time::EPOCH);
    /// while let Some(output) = room.poll_output() {
    ///     println!("{output:?}"); // applied in order by the adapter
    /// }
    /// ```
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn epoch(&self) -> &str {
        &self.epoch
    }

    /// Where the room lives (the location hint it was created with), as its welcomes say.
    pub fn home(&self) -> Option<&str> {
        self.home.as_deref()
    }

    /// The room's limits as its welcomes announce them (JSON): what a relay that makes its
    /// clients' welcomes itself ([`Hello::relay_mirror`]) is told once per link.
    pub fn limits(&self) -> &str {
        self.limits.get()
    }

    /// The latest sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Open connections the engine tracks.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Whether an [`Input::Alarm`] at `now` would look for members gone silent: the only
    /// use of [`Input::Heartbeat`]s, so an adapter need not collect them (a read of every
    /// socket) for an alarm due for something else, such as a summary. A heartbeat not given
    /// only makes the sweep come early; the sweep then has them all.
    pub fn sweep_due(&self, now: Time) -> bool {
        self.sweep_at.is_some_and(|at| at <= now.ms())
    }

    /// Whether the engine tracks connection `conn`.
    pub fn knows(&self, conn: &str) -> bool {
        self.conns.contains_key(conn)
    }

    /// Whether the room holds presence changes some connection has not been sent yet: a
    /// presence window's, or the whole list a room shedding load owes. They live in memory
    /// only, and the runtime hibernates no object that owes them (a timer is pending), but a
    /// Wasm reset drops them: an adapter keeps this fact outside the Wasm's memory after each
    /// turn and gives it to the next load ([`Snapshot::presence_owed`]), which sends every
    /// connection the whole member list.
    pub fn presence_owed(&self) -> bool {
        !self.large && (self.presence_stale || self.window.holds())
    }

    /// Whether the room holds frames that are not signals for some socket of its own, not
    /// handed to the runtime yet: a turn's batch before its end, frames behind a reader's
    /// flow window, a held catch-up. Memory only, as [`Room::presence_owed`]; the load after a
    /// reset that dropped them ([`Snapshot::frames_owed`]) closes every socket of its own 1012
    /// `room_reset` (which ones missed what went with the memory), and each client resumes
    /// from the `seq` it applied: the log holds everything. A relay's sessions need nothing:
    /// the home asks their relays where each one is (a recall) on every load.
    pub fn frames_owed(&self) -> bool {
        let owes = |c: &Conn| c.link.is_none() && c.out.holds_durable();
        if self.echo_wait {
            // Some reader's window is full: it may be anyone.
            return self.conns.values().any(owes);
        }
        // Otherwise a frame waits only for the turn's end, a hold or a signal window: the
        // connections those name, not every one (a turn of a big room must not pass them all).
        let named = |conn: &String| self.conns.get(conn).is_some_and(owes);
        self.turn.iter().any(named) || self.deadlines.iter().any(|(_, conn)| named(conn))
    }

    /// Present members (sessions).
    pub fn members(&self) -> usize {
        self.presence.len()
    }

    /// Members whose link closed and who have not come back yet: they are still members, and
    /// each leaves when its grace ends ([`Input::LinkClosed`]).
    pub fn away(&self) -> usize {
        self.away.len()
    }

    /// Feeds one input at time `now` (ms since the Unix epoch).
    pub fn handle(&mut self, now: Time, input: Input<'_>) {
        let now = now.ms();
        self.now = self.now.max(now);
        match input {
            Input::Open(hello) => self.open(now, hello),
            Input::Text { conn, text } => self.text(now, conn, text),
            Input::Binary { conn, len } => {
                if len > self.config.max_frame {
                    self.close(now, conn, CloseCode::TooLarge);
                } else if self.admit(now, conn, len as u64) {
                    let refusal = Error::BadFrame("binary frames are not accepted".into());
                    self.refuse(conn, None, refusal);
                }
            }
            Input::Closed { conn } => self.closed(now, conn),
            Input::LinkClosed { link, heard } => self.link_closed(now, link, heard.ms()),
            Input::Recalled { link, peers } => self.recalled(now, link, peers),
            Input::Heartbeat { conn, at } => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.last_seen = c.last_seen.max(at.ms());
                }
            }
            Input::Alarm => self.timer(now),
            Input::Wake => {
                self.wake.fired();
                self.expire_away(now);
                self.flush_turn();
                self.flush_due();
                self.check_stalled(now);
                // A summary due at the end of its interval goes on this
                // timer too (the storage alarm alone lets the object
                // hibernate, and the summary with it).
                if self.summary.due.is_some_and(|due| due <= now) {
                    self.flush_summary(now, None);
                }
                if self.window.due().is_some_and(|due| due <= now) {
                    self.flush_presence(now);
                }
            }
        }
        self.arm();
    }

    fn open(&mut self, now: u64, hello: Hello) {
        let Hello {
            conn,
            session,
            user,
            region,
            since,
            epoch,
            rand,
            secret,
            expires,
            info,
            canary,
            link,
            tail,
            relay_flow,
            relay_mirror,
            relay_signals,
        } = hello;
        let expires = expires.map(Time::ms);
        // What the far end of a link says it can replay itself (a relay's tail), from `since`.
        let tail = since.zip(tail.filter(|_| link.is_some()));
        if let Some(code) = self.refuse_open(now, &session, &user, expires, canary) {
            self.stats.refused_opens += 1;
            self.push(Output::Close { conn, code });
            return;
        }
        // The rules decide last, about someone the room would let in (the
        // Worker's own canary is nobody they need to know about).
        let joined = match canary {
            true => Ok((info, Vec::new())),
            false => self.rules_join(now, &conn, &session, &user, &region, info),
        };
        let (info, effects) = match joined {
            Ok(admitted) => admitted,
            Err(code) => {
                self.stats.refused_opens += 1;
                self.push(Output::Close { conn, code });
                return;
            }
        };
        let joining = Joining {
            conn: &conn,
            session: &session,
            user: user.clone(),
            region,
            key: secret,
            expires,
            info,
            canary,
            link,
            relay_flow,
            relay_mirror,
            relay_signals,
        };
        self.join(now, joining);
        let replay = self.replay_for(since, epoch.as_deref());
        let relayed = self.conns.get(&conn).is_some_and(|c| c.mirror);
        self.welcome(now, (&conn, relayed), &session, &user, &replay, expires);
        // A relay's tail only ever stands in for a replay's messages, never for a resync.
        let (catch_up, tail, resync) = match replay {
            Ok(Some(frames)) => {
                self.resumes.add(now, 1);
                (frames, tail, None)
            }
            Ok(None) => (Vec::new(), None, None),
            Err(reason) => (vec![self.state_reply(reason)], None, Some(reason)),
        };
        if !catch_up.is_empty() {
            let storm =
                since.is_some() && self.resumes.rate(now) > self.config.storm_resumes_per_sec;
            let from = CatchUpFrom { tail, resync };
            self.catch_up(now, &conn, &user, catch_up, storm.then_some(rand), from);
        }
        // What the rules asked for when the member joined comes after its
        // welcome and catch-up (a `send` to the newcomer, writes of their own).
        self.apply_effects(now, Cause::Join { conn: &conn }.ids(), Some(&user), effects);
    }

    /// What a connect resuming from `since` in `epoch` is owed: nothing (a
    /// first connect), the messages it missed, or a resync and why.
    fn replay_for(
        &self,
        since: Option<u64>,
        epoch: Option<&str>,
    ) -> Result<Option<Vec<Rc<str>>>, &'static str> {
        match (since, epoch) {
            (None, _) => Ok(None),
            (Some(_), e) if e != Some(self.epoch.as_str()) => Err("epoch"),
            (Some(s), _) if s > self.seq => Err("epoch"),
            (Some(s), _) if self.seq - s > self.config.replay_limit => Err("gap"),
            (Some(s), _) => match self.history.replay_after(s, self.seq) {
                Some(frames) => Ok(Some(frames.cloned().collect::<Vec<_>>())),
                None => Err("gap"),
            },
        }
    }

    /// Sends a joined connection its welcome; to a relay that makes its clients' welcomes
    /// itself (`relayed`, see [`Hello::relay_mirror`]), the session's part of it.
    fn welcome(
        &mut self,
        now: u64,
        (conn, relayed): (&str, bool),
        session: &str,
        user: &str,
        replay: &Result<Option<Vec<Rc<str>>>, &'static str>,
        expires: Option<u64>,
    ) {
        let member = self.presence.get(session).expect("joined");
        let summary = self.presence.summary(self.conns.len());
        let presence = PresenceView {
            members: if self.large { Default::default() } else { self.presence.view() },
            summary: &summary,
            large: self.large,
        };
        let presence =
            serde_json::value::to_raw_value(&presence).unwrap_or_else(|_| empty_object());
        let resumed = matches!(replay, Ok(Some(_)));
        let missed = replay.as_ref().map_or(0, |r| r.as_ref().map_or(0, |f| f.len() as u64));
        if relayed {
            // Its relay holds the room's parts (name, log, home, limits) and makes the frame;
            // the user's reply budget pays for the frame all the same.
            let bytes = presence.get().len() + self.limits.get().len() + WELCOME_FIELDS;
            self.users.reply_after(&self.config, user, bytes as u64, now);
            let part = WelcomePart {
                conn: conn.to_owned(),
                seq: self.seq,
                resumed,
                missed,
                expires,
                presence: presence.get().to_owned(),
            };
            self.stats.relay_welcomes += 1;
            self.push(Output::Welcome(Box::new(part)));
        } else {
            // A link is `relay#epoch`: the client is told the relay, not the instance.
            let relay = self.conns.get(conn).and_then(|c| c.link.as_deref());
            let relay = relay.map(|l| l.split_once('#').map_or(l, |(name, _)| name));
            let welcome = Welcome {
                kind: "welcome",
                room: &self.name,
                session,
                user: &member.user,
                conn,
                region: &member.region,
                epoch: &self.epoch,
                home: self.home.as_deref(),
                seq: self.seq,
                resumed,
                missed,
                presence: &presence,
                limits: &self.limits,
                expires,
                relay,
            }
            .to_text();
            // The welcome is the connection's first frame and leaves at once,
            // even when the room batches or a storm defers the replay. It costs
            // its bytes from the user's reply budget all the same (a member list
            // is not free to pull by reconnecting): what follows it waits for them.
            self.users.reply_after(&self.config, user, welcome.len() as u64, now);
            self.stats.welcomes += 1;
            self.emit(conn, vec![welcome.into()]);
        }
        // Its counts are the newcomer's until the next summary: if they are
        // not the last ones broadcast, the next summary must reach it even
        // if it equals that last one.
        if self.summary.sent.as_ref() != Some(&summary) {
            self.summary.behind.push(conn.to_owned());
        }
    }

    /// Sends a new connection its catch-up (a replay or a resync) right
    /// after its welcome: at once if `user`'s reply budget has its bytes and
    /// no storm is on (`storm`: the connect's randomness to spread it by),
    /// else held, with everything after it, until then.
    ///
    /// `tail`: the replay starts after this `seq`, and the far end of the connection's link
    /// (a relay) holds every entry from there up to the second. Then, when the budget has the
    /// bytes now, the whole catch-up goes from there ([`Output::Replay`]) and not over the
    /// link; the entries the tail lacks cross once per relay ([`Output::Entries`]). The room's
    /// work is a few outputs, and a storm has no reason to spread it (the relay sends it).
    fn catch_up(
        &mut self,
        now: u64,
        conn: &str,
        user: &str,
        frames: Vec<Rc<str>>,
        storm: Option<u64>,
        from: CatchUpFrom,
    ) {
        let bytes = frames.iter().map(|f| f.len() as u64).sum();
        let mut wait = self.users.reply_after(&self.config, user, bytes, now);
        if wait > 0 {
            self.stats.held_replies += 1;
        }
        if let Some((after, claim)) = from.tail.filter(|_| wait == 0) {
            if self.replay_from_tail(conn, after, claim, &frames) {
                return;
            }
        }
        if wait == 0 && from.resync.is_some() && self.state_from_mirror(conn, from.resync) {
            return;
        }
        self.stats.catch_up_frames += frames.len() as u64;
        if self.conns.get(conn).is_some_and(|c| !c.flow.metered()) {
            // Its far end keeps its window, and must let the catch-up wait as this room would.
            self.push(Output::CatchUp { conn: conn.to_owned(), bytes });
        }
        if let Some(rand) = storm {
            let (lo, hi) = self.config.storm_jitter_ms;
            wait = wait.max(lo + rand % (hi.saturating_sub(lo) + 1));
            self.stats.deferred_replays += 1;
        }
        if wait == 0 {
            // The whole catch-up travels as one batch, right after the
            // welcome: nothing can be queued for a new connection (its own
            // join is broadcast to everyone else).
            return self.emit(conn, frames);
        }
        // The catch-up and everything after it wait, in order. The catch-up
        // is the replay limit's to bound, not the backlog's.
        self.hold(conn, now + wait);
        if let Some(c) = self.conns.get_mut(conn) {
            c.out.allowance = bytes;
        }
        for frame in frames {
            self.send(conn, frame);
        }
    }

    /// Has `conn`'s link's far end send it entries `after + 1 ..= seq` (`frames`) from its
    /// tail, which holds them up to `claim` (or, by what this room sent it since, further):
    /// the rest goes to the tail first, once per link (the far end keeps the connection's flow
    /// window, and counts them in it as it sends them). False when
    /// the tail cannot have them by then (this room filled it from past `claim + 1` since the
    /// claim was made: a tail takes entries only after its last), and the room sends them.
    fn replay_from_tail(&mut self, conn: &str, after: u64, claim: u64, frames: &[Rc<str>]) -> bool {
        let Some(link) = self.conns.get(conn).and_then(|c| c.link.clone()) else {
            return false;
        };
        let upto = after + frames.len() as u64;
        // What the tail holds for sure once this room's fills reach it: `first ..= last`.
        let filled = self.tails.get(&link).copied();
        let held = match filled {
            Some((first, _)) if first > claim.saturating_add(1) => return false,
            Some((_, last)) => last.max(claim),
            None => claim,
        }
        .clamp(after, upto);
        if held < upto {
            let lacking = frames[(held - after) as usize..].to_vec();
            self.stats.tail_fills += 1;
            for frame in crate::room::outbox::pack(lacking, self.config.batch_max_bytes) {
                self.push(Output::Entries { conn: conn.to_owned(), frame });
            }
        }
        // The tail holds `after + 1 ..= upto` now, and what was filled before if it joins.
        let first =
            filled.filter(|(f, l)| *f <= after + 1 && *l >= after).map_or(after + 1, |f| f.0);
        self.tails.insert(link, (first, upto));
        self.stats.tail_replays += 1;
        self.stats.tail_frames += frames.len() as u64;
        self.push(Output::Replay { conn: conn.to_owned(), after, upto });
        true
    }

    /// Has the far end of `conn`'s link send it the room's state from its mirror (a `state`
    /// frame, or with `resync` a `resync` frame), when it mirrors the room
    /// ([`Hello::relay_mirror`]): what waits for `conn` here goes first, so the frame keeps
    /// its place. False when it does not mirror the room, or frames for it are held (a hold or
    /// a signal window): the room sends the frame itself, in its place.
    fn state_from_mirror(&mut self, conn: &str, resync: Option<&'static str>) -> bool {
        let now = self.now;
        let Some(c) = self.conns.get_mut(conn) else {
            return false;
        };
        if !c.mirror || c.flow.metered() || c.out.holding(now) {
            return false;
        }
        let frames = c.out.take_upto(u64::MAX);
        self.emit(conn, frames);
        let (conn, seq) = (conn.to_owned(), self.seq);
        self.stats.mirror_replies += 1;
        self.push(Output::State { conn, seq, reason: resync });
        true
    }

    /// The state as JSON (`{key: {"value","version"}}`), as `state` frames carry it: what a
    /// relay that mirrors the room ([`Hello::relay_mirror`]) starts its mirror from.
    pub fn state_text(&mut self) -> Rc<str> {
        self.state.json()
    }

    /// The `state` frame (`reason` "state") or a `resync` frame with the
    /// whole state at the current `seq`, made once per `seq` and kind.
    fn state_reply(&mut self, reason: &'static str) -> Rc<str> {
        if self.replies_seq != self.seq {
            self.replies.clear();
            self.replies_seq = self.seq;
        }
        if let Some((_, frame)) = self.replies.iter().find(|(r, _)| *r == reason) {
            return frame.clone();
        }
        let state = self.state.json();
        let kind = Some(reason).filter(|r| *r != "state");
        let frame: Rc<str> = crate::protocol::server::state_frame(kind, self.seq, &state).into();
        self.replies.push((reason, frame.clone()));
        frame
    }

    fn text(&mut self, now: u64, conn: &str, text: &str) {
        if !self.conns.contains_key(conn) {
            return; // a socket the room already closed; its late frames are moot
        }
        if text.len() > self.config.max_frame {
            return self.close(now, conn, CloseCode::TooLarge);
        }
        // A mark echo that confirms something new costs nothing: it is how a
        // client keeps reading, however fast the room sends. Every other
        // frame costs, an echo of a mark already confirmed included: it
        // proves nothing new, and a flood of free ones would stall the room
        // for everyone else. Short frames are parsed before the rate check to find
        // an echo; long ones are not.
        let parsed = (text.len() <= 256).then(|| protocol::parse(text));
        if let Some(Ok(ClientFrame::Mark { mark })) = &parsed {
            self.seen(now, conn);
            if self.confirm(conn, mark) {
                return;
            }
        }
        if !self.admit(now, conn, text.len() as u64) {
            return;
        }
        let frame = match parsed.unwrap_or_else(|| protocol::parse(text)) {
            Ok(frame) => frame,
            Err(e) => {
                let id = match &e {
                    FrameError::Invalid { id, .. } => id.clone(),
                    FrameError::BadFrame(_) => None,
                };
                return self.refuse(conn, id.as_deref(), e.into());
            }
        };
        match frame {
            ClientFrame::Publish { id, topic, data } => self.publish(now, conn, id, topic, data),
            ClientFrame::Set { id, key, value, if_version } => {
                self.set(now, conn, id, key, value, if_version)
            }
            ClientFrame::Signal { topic, data } => {
                let session = &self.conns[conn].session;
                let frame = ServerFrame::Signal { session, topic: &topic, data: &data }.to_text();
                let key = format!("{session}\0{topic}");
                self.broadcast_signal(conn, &key, frame.into());
            }
            ClientFrame::Presence { state } => self.set_presence(now, conn, state),
            ClientFrame::GetState => self.get_state(now, conn),
            ClientFrame::Ping => self.send(conn, ServerFrame::Pong.to_text().into()),
            // Paid for: a spent echo of one of its own marks is dropped
            // quietly (a client may echo twice); any other is refused.
            ClientFrame::Mark { mark } => {
                if !self.confirm(conn, &mark) && !self.issued(conn, &mark) {
                    self.refuse(conn, None, Error::UnknownMark);
                }
            }
        }
    }

    /// `get_state`: the state frame, if the user's reply budget holds its bytes.
    fn get_state(&mut self, now: u64, conn: &str) {
        let frame = self.state_reply("state");
        let bytes = frame.len() as u64;
        let user = &self.conns[conn].user;
        if self.users.reply(&self.config, user, bytes, now) {
            if !self.state_from_mirror(conn, None) {
                self.send(conn, frame);
            }
        } else {
            self.stats.rate_limited += 1;
            let per_sec = self.config.reply_bytes_per_sec;
            self.refuse(conn, None, Error::ReplyBudget { bytes, per_sec });
        }
    }

    fn refuse(&mut self, conn: &str, id: Option<&str>, refusal: Error) {
        let version = match refusal {
            Error::Conflict { version } => Some(version),
            _ => None,
        };
        let message = refusal.message();
        let frame =
            ServerFrame::Error { code: refusal.code(), id, message: &message, version }.to_text();
        self.send(conn, frame.into());
    }

    fn push(&mut self, output: Output) {
        self.outputs.push_back(output);
    }
}

/// Where a new connection's catch-up may come from other than this room: the tail of its
/// link's far end (`after`, the far end's claim: [`Hello::tail`]), or for a resync (its
/// reason) the far end's mirror of the state ([`Hello::relay_mirror`]).
pub(super) struct CatchUpFrom {
    pub tail: Option<(u64, u64)>,
    pub resync: Option<&'static str>,
}

/// What a welcome's fields but its presence and limits take at most, in bytes (the names in
/// it are bounded, `crate::protocol::names`): what a welcome a relay makes is charged for them.
const WELCOME_FIELDS: usize = 768;

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".into()).expect("valid JSON")
}
