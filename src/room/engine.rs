//! [`Room`]: the state machine that turns inputs into ordered, durable effects.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

use serde_json::value::RawValue;

use super::history::History;
use super::io::{Commit, Hello, Input, LogEntry, Output, Peer, Snapshot, StateWrite};
use super::presence::{Member, Presence};
use super::rate::{RateLimiter, Verdict};
use super::state::RoomState;
use super::{CloseCode, Refusal, RoomConfig};
use crate::protocol::server::{PresenceView, ServerFrame};
use crate::protocol::{self, ClientFrame, FrameError};

/// A connection the engine knows: which session it carries and its budget.
#[derive(Debug)]
struct Conn {
    session: String,
    limiter: RateLimiter,
}

/// One room: its log position, state, connections and presence.
#[derive(Debug)]
pub struct Room {
    config: RoomConfig,
    name: String,
    epoch: String,
    seq: u64,
    history: History,
    state: RoomState,
    conns: HashMap<String, Conn>,
    presence: Presence,
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
            seq: snap.seq,
            history,
            state,
            conns: HashMap::new(),
            presence: Presence::default(),
            outputs: VecDeque::new(),
            config,
        };
        // Oldest first, so that for a session seen twice the newest wins.
        let mut peers = snap.peers;
        peers.sort_by_key(|p| p.opened);
        for p in peers {
            if let Some(old) = room.presence.get(&p.session).map(|m| m.conn.clone()) {
                room.conns.remove(&old);
                room.outputs.push_back(Output::Close {
                    conn: old,
                    code: CloseCode::Superseded,
                });
            }
            room.conns.insert(
                p.conn.clone(),
                Conn {
                    session: p.session.clone(),
                    limiter: RateLimiter::new(&room.config, now),
                },
            );
            let member = Member {
                conn: p.conn,
                user: p.user,
                region: p.region,
                state: p.state,
                since: p.since,
                opened: p.opened,
            };
            room.presence.insert(p.session, member);
        }
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
        match input {
            Input::Open(hello) => self.open(now, hello),
            Input::Text { conn, text } => self.text(now, conn, text),
            Input::Binary { conn, len } => {
                if len > self.config.max_frame {
                    self.close(conn, CloseCode::TooLarge);
                } else if self.admit(now, conn) {
                    self.refuse(
                        conn,
                        None,
                        Refusal::BadFrame("binary frames are not accepted".into()),
                    );
                }
            }
            Input::Closed { conn } => self.closed(conn),
        }
    }

    fn open(&mut self, now: u64, hello: Hello) {
        let Hello {
            conn,
            session,
            user,
            region,
            since,
            epoch,
        } = hello;
        let previous = self.presence.remove(&session);
        let changed = match &previous {
            Some(old) => {
                // Newest wins: the old socket goes, the member stays.
                self.conns.remove(&old.conn);
                self.push(Output::Close {
                    conn: old.conn.clone(),
                    code: CloseCode::Superseded,
                });
                old.region != region || old.user != user
            }
            None => true,
        };
        let member = Member {
            conn: conn.clone(),
            user,
            region,
            state: previous
                .as_ref()
                .map_or_else(empty_object, |m| m.state.clone()),
            since: previous.as_ref().map_or(now, |m| m.since),
            opened: now,
        };
        self.conns.insert(
            conn.clone(),
            Conn {
                session: session.clone(),
                limiter: RateLimiter::new(&self.config, now),
            },
        );
        self.remember(&session, &member);
        self.presence.insert(session.clone(), member);
        if changed {
            self.broadcast_join(&session, Some(&conn));
        }

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
        let member = self.presence.get(&session).expect("inserted above");
        let summary = self.presence.summary();
        let welcome = ServerFrame::Welcome {
            room: &self.name,
            session: &session,
            user: &member.user,
            conn: &conn,
            region: &member.region,
            epoch: &self.epoch,
            seq: self.seq,
            resumed: matches!(replay, Ok(Some(_))),
            missed: replay
                .as_ref()
                .map_or(0, |r| r.as_ref().map_or(0, |f| f.len() as u64)),
            presence: PresenceView {
                members: self.presence.view(),
                summary: &summary,
            },
        }
        .to_text();
        self.send(&conn, welcome.into());
        match replay {
            Ok(Some(frames)) => {
                for frame in frames {
                    self.send(&conn, frame);
                }
            }
            Ok(None) => {}
            Err(reason) => {
                let resync = ServerFrame::Resync {
                    reason,
                    seq: self.seq,
                    state: self.state.snapshot(),
                }
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
            return self.close(conn, CloseCode::TooLarge);
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
            ClientFrame::Set {
                id,
                key,
                value,
                if_version,
            } => self.set(now, conn, id, key, value, if_version),
            ClientFrame::Signal { topic, data } => {
                let session = &self.conns[conn].session;
                let frame = ServerFrame::Signal {
                    session,
                    topic: &topic,
                    data: &data,
                }
                .to_text();
                self.push(Output::Broadcast {
                    frame: frame.into(),
                    except: Some(conn.to_owned()),
                });
            }
            ClientFrame::Presence { state } => self.set_presence(conn, state),
            ClientFrame::GetState => {
                let frame = ServerFrame::State {
                    seq: self.seq,
                    state: self.state.snapshot(),
                }
                .to_text();
                self.send(conn, frame.into());
            }
            ClientFrame::Ping => self.send(conn, ServerFrame::Pong.to_text().into()),
        }
    }

    /// Rate-limits one frame; false when it must not be applied.
    fn admit(&mut self, now: u64, conn: &str) -> bool {
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
                self.close(conn, CloseCode::Abuse);
                false
            }
        }
    }

    fn publish(&mut self, now: u64, conn: &str, id: String, topic: String, data: Box<RawValue>) {
        let session = self.conns[conn].session.clone();
        if let Some(seq) = self.history.seq_of(&session, &id) {
            return self.send(conn, ack(&id, seq));
        }
        self.commit(now, conn, &session, id, topic, data, None);
    }

    #[allow(clippy::too_many_arguments)] // the fields of one `set` frame
    fn set(
        &mut self,
        now: u64,
        conn: &str,
        id: String,
        key: String,
        value: Box<RawValue>,
        if_version: Option<u64>,
    ) {
        let session = self.conns[conn].session.clone();
        if let Some(seq) = self.history.seq_of(&session, &id) {
            return self.send(conn, ack(&id, seq));
        }
        let current = self.state.version(&key);
        if if_version.is_some_and(|v| v != current) {
            return self.refuse(conn, Some(&id), Refusal::Conflict { version: current });
        }
        if let Err(refusal) = self.state.check_fits(&self.config, &key, &value) {
            return self.refuse(conn, Some(&id), refusal);
        }
        let data = state_data(&key, &value, self.seq + 1);
        self.commit(
            now,
            conn,
            &session,
            id,
            "$state".into(),
            data,
            Some(StateWrite { key, value }),
        );
    }

    /// Sequences a write: persist, then ack the sender, then tell everyone.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &mut self,
        now: u64,
        conn: &str,
        session: &str,
        id: String,
        topic: String,
        data: Box<RawValue>,
        state: Option<StateWrite>,
    ) {
        let member = self
            .presence
            .get(session)
            .expect("a connection's session is a member");
        self.seq += 1;
        let entry = LogEntry {
            seq: self.seq,
            id,
            session: session.to_owned(),
            user: member.user.clone(),
            region: member.region.clone(),
            topic,
            data,
            ts: now,
        };
        let frame = entry.frame();
        self.history
            .push(entry.seq, session, &entry.id, frame.clone());
        if let Some(w) = &state {
            self.state.set(w.key.clone(), w.value.clone(), entry.seq);
        }
        let trim_through = self
            .seq
            .checked_sub(self.config.log_retain)
            .filter(|s| *s > 0);
        let ack_frame = ack(&entry.id, entry.seq);
        self.push(Output::Persist(Box::new(Commit {
            entry,
            state,
            trim_through,
        })));
        self.send(conn, ack_frame);
        self.push(Output::Broadcast {
            frame,
            except: None,
        });
    }

    fn set_presence(&mut self, conn: &str, state: Box<RawValue>) {
        if state.get().len() > self.config.presence_max {
            let limit = self.config.presence_max;
            return self.refuse(
                conn,
                None,
                Refusal::TooLarge(format!("presence state is over {limit} bytes")),
            );
        }
        let session = self.conns[conn].session.clone();
        let Some(member) = self.presence.get_mut(&session) else {
            return;
        };
        member.state = state;
        let member = member.clone();
        self.remember(&session, &member);
        self.broadcast_join(&session, Some(conn));
    }

    fn closed(&mut self, conn: &str) {
        let Some(c) = self.conns.remove(conn) else {
            return;
        };
        let is_current = self
            .presence
            .get(&c.session)
            .is_some_and(|m| m.conn == conn);
        if is_current {
            self.presence.remove(&c.session);
            let frame = ServerFrame::Presence {
                joins: BTreeMap::new(),
                leaves: vec![&c.session],
            }
            .to_text();
            self.push(Output::Broadcast {
                frame: frame.into(),
                except: None,
            });
        }
    }

    /// The room closes a socket: forget it (a leave for its member) and say so.
    fn close(&mut self, conn: &str, code: CloseCode) {
        self.closed(conn);
        self.push(Output::Close {
            conn: conn.to_owned(),
            code,
        });
    }

    fn broadcast_join(&mut self, session: &str, except: Option<&str>) {
        let Some(member) = self.presence.get(session) else {
            return;
        };
        let joins = BTreeMap::from([(session, member.view())]);
        let frame = ServerFrame::Presence {
            joins,
            leaves: Vec::new(),
        }
        .to_text();
        self.push(Output::Broadcast {
            frame: frame.into(),
            except: except.map(str::to_owned),
        });
    }

    fn remember(&mut self, session: &str, m: &Member) {
        self.push(Output::Remember(Peer {
            conn: m.conn.clone(),
            session: session.to_owned(),
            user: m.user.clone(),
            region: m.region.clone(),
            opened: m.opened,
            since: m.since,
            state: m.state.clone(),
        }));
    }

    fn refuse(&mut self, conn: &str, id: Option<&str>, refusal: Refusal) {
        let version = match refusal {
            Refusal::Conflict { version } => Some(version),
            _ => None,
        };
        let message = refusal.message();
        let frame = ServerFrame::Error {
            code: refusal.code(),
            id,
            message: &message,
            version,
        }
        .to_text();
        self.send(conn, frame.into());
    }

    fn send(&mut self, conn: &str, frame: Rc<str>) {
        self.push(Output::Send {
            conn: conn.to_owned(),
            frame,
        });
    }

    fn push(&mut self, output: Output) {
        self.outputs.push_back(output);
    }
}

fn ack(id: &str, seq: u64) -> Rc<str> {
    ServerFrame::Ack { id, seq }.to_text().into()
}

fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".into()).expect("valid JSON")
}

/// The `data` of a `$state` message: `{"key","value","version"}`.
fn state_data(key: &str, value: &RawValue, version: u64) -> Box<RawValue> {
    #[derive(serde::Serialize)]
    struct Data<'a> {
        key: &'a str,
        value: &'a RawValue,
        version: u64,
    }
    serde_json::value::to_raw_value(&Data {
        key,
        value,
        version,
    })
    .unwrap_or_else(|_| empty_object())
}
