//! [`Room`]: the state machine that turns inputs into ordered, durable effects.
//!
//! This file holds the room's fields, restore, the input dispatch and the
//! welcome; [`writes`] sequences publishes and sets; [`membership`] keeps
//! presence, summaries, the heartbeat sweep and the alarm.

mod delivery;
mod membership;
mod stats;
mod writes;

pub use writes::SERVER_SESSION;

use std::collections::{BTreeSet, HashMap, VecDeque};

use serde_json::value::RawValue;

use super::history::History;
use super::io::{Hello, Input, Output, Snapshot};
use super::outbox::Outbox;
use super::presence::{Presence, SummaryThrottle};
use super::rate::{RateLimiter, Verdict};
use super::state::RoomState;
use super::timer::Alarm;
use super::{CloseCode, Refusal, RoomConfig};
use crate::protocol::server::{PresenceView, ServerFrame};
use crate::protocol::{self, ClientFrame, FrameError};

/// A connection the engine knows: which session it carries, its rate budget
/// and when it last showed signs of life.
#[derive(Debug)]
struct Conn {
    session: String,
    limiter: RateLimiter,
    /// Last frame or answered heartbeat (ms).
    last_seen: u64,
    /// The `seen` last written to the socket attachment (ms).
    seen_saved: u64,
    /// Frames waiting for its coalescing window or replay hold.
    out: Outbox,
}

/// One room: its log position, state, connections and presence.
#[derive(Debug)]
pub struct Room {
    config: RoomConfig,
    name: String,
    epoch: String,
    home: Option<String>,
    seq: u64,
    history: History,
    state: RoomState,
    conns: HashMap<String, Conn>,
    presence: Presence,
    summary: SummaryThrottle,
    /// Above `large_room` members: summaries only, no per-member diffs.
    large: bool,
    /// Presence diffs were held back under load; the next summary sends
    /// the whole member list.
    presence_stale: bool,
    /// When to look for connections that stopped answering heartbeats.
    sweep_at: Option<u64>,
    alarm: Alarm,
    stats: stats::Counters,
    /// The time of the input being handled (ms).
    now: u64,
    /// Frames asked for per second (before batching), against the
    /// batching threshold.
    asked: delivery::Meter,
    /// Frames sent per second (a batch counts once), against the outbound
    /// budget.
    outbound: delivery::Meter,
    /// Resumes per second, to tell a reconnect storm.
    resumes: delivery::Meter,
    /// Connections with durable frames waiting for the end of the turn.
    turn: Vec<String>,
    /// When coalescing windows and replay holds end, by connection.
    deadlines: BTreeSet<(u64, String)>,
    /// The short wake-up timer requested for the next deadline.
    wake: Alarm,
    outputs: VecDeque<Output>,
}

impl Room {
    /// Rebuilds a room from storage and the sockets still open. A new room is
    /// a snapshot with `seq` 0 and a fresh epoch.
    pub fn restore(config: RoomConfig, snap: Snapshot, now: u64) -> Room {
        let mut history = History::new(config.replay_limit, config.log_retain);
        let first_framed = snap.recent.first().map_or(u64::MAX, |e| e.seq);
        for (session, id, seq) in snap.ids.iter().filter(|(_, _, seq)| *seq < first_framed) {
            history.remember_id(*seq, session, id);
        }
        for e in &snap.recent {
            history.push(e.seq, &e.session, &e.id, e.frame());
        }
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
            presence: Presence::default(),
            summary: SummaryThrottle::default(),
            large: false,
            presence_stale: false,
            sweep_at: None,
            // The storage alarm may be late by a loaded room's backlog;
            // asking again costs a storage write, so only when long overdue.
            alarm: Alarm::new(10_000),
            stats: stats::Counters::since(now),
            now,
            asked: delivery::Meter::default(),
            outbound: delivery::Meter::default(),
            resumes: delivery::Meter::default(),
            turn: Vec::new(),
            deadlines: BTreeSet::new(),
            // Asking again for the in-memory timer costs the adapter nothing
            // when one is pending (it keeps the earliest).
            wake: Alarm::new(0),
            outputs: VecDeque::new(),
            config,
        };
        room.restore_peers(snap.peers, now);
        room.arm();
        room
    }

    /// The next effect to apply, in order.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn epoch(&self) -> &str {
        &self.epoch
    }

    /// The latest sequence number.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Open connections the engine tracks.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Present members (sessions).
    pub fn members(&self) -> usize {
        self.presence.len()
    }

    /// Feeds one input at time `now` (ms since the Unix epoch).
    pub fn handle(&mut self, now: u64, input: Input<'_>) {
        self.now = self.now.max(now);
        match input {
            Input::Open(hello) => self.open(now, hello),
            Input::Text { conn, text } => self.text(now, conn, text),
            Input::Binary { conn, len } => {
                if len > self.config.max_frame {
                    self.close(now, conn, CloseCode::TooLarge);
                } else if self.admit(now, conn) {
                    let refusal = Refusal::BadFrame("binary frames are not accepted".into());
                    self.refuse(conn, None, refusal);
                }
            }
            Input::Closed { conn } => self.closed(now, conn),
            Input::Heartbeat { conn, at } => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.last_seen = c.last_seen.max(at);
                }
            }
            Input::Timer => self.timer(now),
            Input::Flush => {
                self.wake.fired();
                self.flush_turn();
                self.flush_due();
            }
        }
        self.arm();
    }

    fn open(&mut self, now: u64, hello: Hello) {
        let Hello { conn, session, user, region, since, epoch, rand } = hello;
        self.join(now, &conn, &session, user, region);

        let replay = match (since, epoch.as_deref()) {
            (None, _) => Ok(None),
            (Some(_), e) if e != Some(self.epoch.as_str()) => Err("epoch"),
            (Some(s), _) if s > self.seq => Err("epoch"),
            (Some(s), _) if self.seq - s > self.config.replay_limit => Err("gap"),
            (Some(s), _) => match self.history.replay_after(s, self.seq) {
                Some(frames) => Ok(Some(frames.cloned().collect::<Vec<_>>())),
                None => Err("gap"),
            },
        };
        let member = self.presence.get(&session).expect("joined above");
        let summary = self.presence.summary(self.conns.len());
        let welcome = ServerFrame::Welcome {
            room: &self.name,
            session: &session,
            user: &member.user,
            conn: &conn,
            region: &member.region,
            epoch: &self.epoch,
            home: self.home.as_deref(),
            seq: self.seq,
            resumed: matches!(replay, Ok(Some(_))),
            missed: replay.as_ref().map_or(0, |r| r.as_ref().map_or(0, |f| f.len() as u64)),
            presence: PresenceView {
                members: if self.large { Default::default() } else { self.presence.view() },
                summary: &summary,
                large: self.large,
            },
        }
        .to_text();
        // The welcome is the connection's first frame and leaves at once,
        // even when the room batches or a storm defers the replay.
        self.emit(&conn, vec![welcome.into()]);
        match replay {
            Ok(Some(frames)) => {
                // In a reconnect storm, spread the catch-up: the replay and
                // everything after it wait a jittered while, in order.
                self.resumes.add(now, 1);
                if !frames.is_empty() && self.resumes.rate(now) > self.config.storm_resumes_per_sec
                {
                    let (lo, hi) = self.config.storm_jitter_ms;
                    self.hold(&conn, now + lo + rand % (hi.saturating_sub(lo) + 1));
                    self.stats.deferred_replays += 1;
                    for frame in frames {
                        self.send(&conn, frame);
                    }
                } else if !frames.is_empty() {
                    // The whole catch-up travels as one batch, right after
                    // the welcome: nothing can be queued for a new connection
                    // (its own join is broadcast to everyone else).
                    self.emit(&conn, frames);
                }
            }
            Ok(None) => {}
            Err(reason) => {
                let resync =
                    ServerFrame::Resync { reason, seq: self.seq, state: self.state.snapshot() }
                        .to_text();
                self.send(&conn, resync.into());
            }
        }
    }

    fn text(&mut self, now: u64, conn: &str, text: &str) {
        if !self.conns.contains_key(conn) {
            return; // a socket the room already closed; its late frames are moot
        }
        if text.len() > self.config.max_frame {
            return self.close(now, conn, CloseCode::TooLarge);
        }
        if !self.admit(now, conn) {
            return;
        }
        let frame = match protocol::parse(text) {
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
            ClientFrame::GetState => {
                let frame =
                    ServerFrame::State { seq: self.seq, state: self.state.snapshot() }.to_text();
                self.send(conn, frame.into());
            }
            ClientFrame::Ping => self.send(conn, ServerFrame::Pong.to_text().into()),
        }
    }

    /// Rate-limits one frame (any frame is also a sign of life); false when
    /// it must not be applied.
    fn admit(&mut self, now: u64, conn: &str) -> bool {
        self.seen(now, conn);
        let Some(c) = self.conns.get_mut(conn) else {
            return false;
        };
        match c.limiter.check(&self.config, now) {
            Verdict::Allow => true,
            Verdict::Refuse => {
                self.refuse(conn, None, Refusal::RateLimited);
                false
            }
            Verdict::Abuse => {
                self.close(now, conn, CloseCode::Abuse);
                false
            }
        }
    }

    fn refuse(&mut self, conn: &str, id: Option<&str>, refusal: Refusal) {
        let version = match refusal {
            Refusal::Conflict { version } => Some(version),
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

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".into()).expect("valid JSON")
}
