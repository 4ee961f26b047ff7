//! Sequenced writes: `publish` and compare-and-set `set`, each decided by the
//! room's rules, persisted before its ack and broadcast, and deduplicated by
//! (session, id); the same for the operator's backend and for the rules'
//! own writes.

use std::rc::Rc;

use serde_json::value::RawValue;

use super::Room;
use crate::protocol::names;
use crate::protocol::server::ServerFrame;
use crate::room::ids::{self, Cause};
use crate::room::io::{Commit, LogEntry, Output, StateWrite};
use crate::room::Error;
use crate::room::Time;

/// The session that server-side publishes (`POST /rooms/{room}/messages`)
/// are deduplicated under; no client session can take it (`$` is not allowed).
pub const SERVER_SESSION: &str = "$server";

/// The session (and user) the rules' own writes come from.
pub const RULES_SESSION: &str = "$rules";

/// The session [`Rules::read`](crate::room::rules::Rules::read) sees for a reader over HTTP,
/// who has none.
pub const READER_SESSION: &str = "$reader";

/// Who a write comes from, as its `message` frame shows.
pub(super) struct Author {
    pub session: String,
    pub user: String,
    pub region: String,
    /// What the rules attached to the member when it joined.
    pub info: Option<Box<RawValue>>,
    /// The operator's backend, not a member.
    pub server: bool,
}

impl Author {
    /// Who pays for what the rules send because of this write: the member
    /// (the operator's backend pays nothing).
    fn payer(&self) -> Option<&str> {
        (!self.server).then_some(self.user.as_str())
    }
}

impl Room {
    pub(super) fn publish(
        &mut self,
        now: u64,
        conn: &str,
        id: String,
        topic: String,
        data: Box<RawValue>,
    ) {
        let author = self.author(conn);
        if let Some(seq) = self.history.seq_of(&author.session, &id) {
            return self.send(conn, ack(&id, seq));
        }
        let refused_ids = Cause::Write { session: &author.session, id: &id }.ids();
        let (verdict, mut effects) = self.rules_publish(now, &author, &topic, &data);
        let decided = self.decided(verdict, data);
        let rule_ids =
            match decided.and_then(|data| self.writes_fit(None, &mut effects).map(|()| data)) {
                Ok(data) => {
                    let seq = self.commit(now, &author, Some(conn), id, topic, data, None);
                    Cause::Stored { seq }.ids()
                }
                Err(refusal) => {
                    self.refuse(conn, Some(&id), refusal);
                    refused_ids
                }
            };
        self.apply_effects(now, rule_ids, author.payer(), effects);
    }

    #[allow(clippy::too_many_arguments)] // the fields of one `set` frame
    pub(super) fn set(
        &mut self,
        now: u64,
        conn: &str,
        id: String,
        key: String,
        value: Box<RawValue>,
        if_version: Option<u64>,
    ) {
        let author = self.author(conn);
        if let Some(seq) = self.history.seq_of(&author.session, &id) {
            return self.send(conn, ack(&id, seq));
        }
        let current = self.state.version(&key);
        if if_version.is_some_and(|v| v != current) {
            return self.refuse(conn, Some(&id), Error::Conflict { version: current });
        }
        let refused_ids = Cause::Write { session: &author.session, id: &id }.ids();
        let (verdict, mut effects) = self.rules_set(now, &author, &key, &value);
        let decided = self.decided(verdict, value).and_then(|value| {
            self.state.check_fits(&self.config, &key, &value)?;
            self.writes_fit(Some((&key, &value)), &mut effects)?;
            Ok(value)
        });
        let rule_ids = match decided {
            Ok(value) => {
                let data = state_data(&key, &value, self.seq + 1);
                let write = StateWrite { key, value };
                let topic = "$state".into();
                let seq = self.commit(now, &author, Some(conn), id, topic, data, Some(write));
                Cause::Stored { seq }.ids()
            }
            Err(refusal) => {
                self.refuse(conn, Some(&id), refusal);
                refused_ids
            }
        };
        self.apply_effects(now, rule_ids, author.payer(), effects);
    }

    /// A state write from the operator's backend (`PUT /rooms/{room}/state/{key}`):
    /// decided by the rules like a member's, compare-and-set with
    /// `if_version`, idempotent by `id` (one is made up when none is given).
    /// Returns the key's new version (the original one for a retry).
    pub fn server_set(
        &mut self,
        now: Time,
        id: Option<String>,
        key: String,
        value: Box<RawValue>,
        if_version: Option<u64>,
        region: String,
    ) -> Result<u64, Error> {
        let now = now.ms();
        if !names::bounded(&key) || key.starts_with('$') {
            return Err(Error::Invalid(
                "`key` must be 1-64 characters, not starting with `$`".into(),
            ));
        }
        crate::protocol::client::check_value(&value, "value").map_err(Error::Invalid)?;
        let id = match id {
            Some(id) if names::bounded(&id) => id,
            Some(_) => return Err(Error::Invalid("`id` must be 1-64 characters".into())),
            None => {
                self.requests += 1;
                ids::server_set_id(Time::from_ms(now), self.requests)
            }
        };
        if let Some(seq) = self.history.seq_of(SERVER_SESSION, &id) {
            return Ok(seq);
        }
        self.now = self.now.max(now);
        let current = self.state.version(&key);
        if if_version.is_some_and(|v| v != current) {
            return Err(Error::Conflict { version: current });
        }
        let author = Author::server(region);
        let refused_ids = Cause::Write { session: SERVER_SESSION, id: &id }.ids();
        let (verdict, mut effects) = self.rules_set(now, &author, &key, &value);
        let decided = self.decided(verdict, value).and_then(|value| {
            self.state.check_fits(&self.config, &key, &value)?;
            self.writes_fit(Some((&key, &value)), &mut effects)?;
            Ok(value)
        });
        let result = decided.map(|value| {
            let data = state_data(&key, &value, self.seq + 1);
            let write = StateWrite { key, value };
            self.commit(now, &author, None, id, "$state".into(), data, Some(write))
        });
        let rule_ids = result.as_ref().map_or(refused_ids, |&seq| Cause::Stored { seq }.ids());
        self.apply_effects(now, rule_ids, author.payer(), effects);
        self.touched(now);
        self.arm();
        result
    }

    /// A publish from the operator's server (`POST /rooms/{room}/messages`):
    /// sequenced like any other, idempotent by `id`, from `region`.
    /// Returns its `seq` (the original one for a retry).
    pub fn server_publish(
        &mut self,
        now: Time,
        id: String,
        topic: String,
        data: Box<RawValue>,
        region: String,
    ) -> Result<u64, Error> {
        let now = now.ms();
        if !names::bounded(&id) {
            return Err(Error::Invalid("`id` must be 1-64 characters".into()));
        }
        if !names::valid_topic(&topic) {
            return Err(Error::Invalid(
                "`topic` must be 1-64 characters and not start with `$`".into(),
            ));
        }
        if let Some(seq) = self.history.seq_of(SERVER_SESSION, &id) {
            return Ok(seq);
        }
        crate::protocol::client::check_value(&data, "data").map_err(Error::Invalid)?;
        self.now = self.now.max(now);
        let author = Author::server(region);
        let refused_ids = Cause::Write { session: SERVER_SESSION, id: &id }.ids();
        let (verdict, mut effects) = self.rules_publish(now, &author, &topic, &data);
        let result = self
            .decided(verdict, data)
            .and_then(|data| self.writes_fit(None, &mut effects).map(|()| data))
            .map(|data| self.commit(now, &author, None, id, topic, data, None));
        let rule_ids = result.as_ref().map_or(refused_ids, |&seq| Cause::Stored { seq }.ids());
        self.apply_effects(now, rule_ids, author.payer(), effects);
        self.touched(now);
        self.arm();
        result
    }

    /// A write of the rules' own (from a hook's [`crate::room::rules::Ctx`]):
    /// sequenced like any other, deduplicated by `id` (derived from what
    /// triggered it, so a hook that runs again writes nothing twice).
    pub(super) fn rule_write(
        &mut self,
        now: u64,
        id: String,
        topic: String,
        data: Box<RawValue>,
        state: Option<StateWrite>,
    ) {
        if self.history.seq_of(RULES_SESSION, &id).is_some() {
            return;
        }
        let author = Author {
            session: RULES_SESSION.into(),
            user: RULES_SESSION.into(),
            region: String::new(),
            info: None,
            server: true,
        };
        self.commit(now, &author, None, id, topic, data, state);
    }

    /// A write is activity: an empty room's retention starts again.
    fn touched(&mut self, now: u64) {
        if self.conns.is_empty() {
            self.emptied(now);
        }
    }

    pub(super) fn author(&self, conn: &str) -> Author {
        let session = self.conns[conn].session.clone();
        let member = self.presence.get(&session).expect("a connection's session is a member");
        Author {
            user: member.user.clone(),
            region: member.region.clone(),
            info: member.info.clone(),
            server: false,
            session,
        }
    }

    /// Sequences a write: persist, then ack the sender, then tell everyone.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &mut self,
        now: u64,
        author: &Author,
        ack_to: Option<&str>,
        id: String,
        topic: String,
        data: Box<RawValue>,
        state: Option<StateWrite>,
    ) -> u64 {
        self.seq += 1;
        let entry = LogEntry {
            seq: self.seq,
            id,
            session: author.session.clone(),
            user: author.user.clone(),
            region: author.region.clone(),
            topic,
            data,
            ts: Time::from_ms(now),
        };
        let frame = entry.frame();
        let bytes = entry.data.get().len() as u64;
        self.history.push(
            entry.seq,
            &author.session,
            &entry.id,
            &author.user,
            bytes,
            frame.clone(),
        );
        if let Some(w) = &state {
            self.state.set(w.key.clone(), w.value.clone(), entry.seq);
        }
        let trim_through = self.history.take_trim();
        let ack_frame = ack(&entry.id, entry.seq);
        let seq = entry.seq;
        self.push(Output::Persist(Box::new(Commit { entry, state, trim_through })));
        if let Some(conn) = ack_to {
            self.send(conn, ack_frame);
        }
        self.broadcast(frame, None);
        let receivers = self.conns.len() as u64;
        self.stats.messages += 1;
        self.stats.deliveries += receivers;
        // While members are away (no connection) the author's region counts them too: this
        // undercounts by at most them, for their grace, and never goes below 0.
        let here = self.presence.in_region(&author.region) as u64;
        self.stats.cross_region += receivers.saturating_sub(here);
        seq
    }
}

impl Author {
    fn server(region: String) -> Author {
        Author {
            session: SERVER_SESSION.into(),
            user: SERVER_SESSION.into(),
            region,
            info: None,
            server: true,
        }
    }
}

pub(super) fn ack(id: &str, seq: u64) -> Rc<str> {
    ServerFrame::Ack { id, seq }.to_text().into()
}

/// The `data` of a `$state` message: `{"key","value","version"}`.
pub(super) fn state_data(key: &str, value: &RawValue, version: u64) -> Box<RawValue> {
    #[derive(serde::Serialize)]
    struct Data<'a> {
        key: &'a str,
        value: &'a RawValue,
        version: u64,
    }
    serde_json::value::to_raw_value(&Data { key, value, version })
        .unwrap_or_else(|_| super::empty_object())
}
