//! Sequenced writes: `publish` and compare-and-set `set`, each persisted
//! before its ack and broadcast, and deduplicated by (session, id).

use std::rc::Rc;

use serde_json::value::RawValue;

use super::Room;
use crate::protocol::names;
use crate::protocol::server::ServerFrame;
use crate::room::io::{Commit, LogEntry, Output, StateWrite};
use crate::room::Refusal;

/// The session that server-side publishes (`POST /rooms/{room}/messages`)
/// are deduplicated under; no client session can take it (`$` is not allowed).
pub const SERVER_SESSION: &str = "$server";

/// Who a write comes from, as its `message` frame shows.
struct Author {
    session: String,
    user: String,
    region: String,
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
        self.commit(now, &author, Some(conn), id, topic, data, None);
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
            return self.refuse(conn, Some(&id), Refusal::Conflict { version: current });
        }
        if let Err(refusal) = self.state.check_fits(&self.config, &key, &value) {
            return self.refuse(conn, Some(&id), refusal);
        }
        let data = state_data(&key, &value, self.seq + 1);
        let write = StateWrite { key, value };
        self.commit(now, &author, Some(conn), id, "$state".into(), data, Some(write));
    }

    /// A publish from the operator's server (`POST /rooms/{room}/messages`):
    /// sequenced like any other, idempotent by `id`, from `region`.
    /// Returns its `seq` (the original one for a retry).
    pub fn server_publish(
        &mut self,
        now: u64,
        id: String,
        topic: String,
        data: Box<RawValue>,
        region: String,
    ) -> Result<u64, Refusal> {
        if !names::bounded(&id) {
            return Err(Refusal::Invalid("`id` must be 1-64 characters".into()));
        }
        if !names::valid_topic(&topic) {
            return Err(Refusal::Invalid(
                "`topic` must be 1-64 characters and not start with `$`".into(),
            ));
        }
        if let Some(seq) = self.history.seq_of(SERVER_SESSION, &id) {
            return Ok(seq);
        }
        crate::protocol::client::shallow(&data, "data").map_err(Refusal::Invalid)?;
        self.now = self.now.max(now);
        let author = Author { session: SERVER_SESSION.into(), user: SERVER_SESSION.into(), region };
        let seq = self.commit(now, &author, None, id, topic, data, None);
        if self.conns.is_empty() {
            // A write is activity: an empty room's retention starts again.
            self.emptied(now);
        }
        self.arm();
        Ok(seq)
    }

    fn author(&self, conn: &str) -> Author {
        let session = self.conns[conn].session.clone();
        let member = self.presence.get(&session).expect("a connection's session is a member");
        Author { user: member.user.clone(), region: member.region.clone(), session }
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
            ts: now,
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
        self.stats.cross_region += receivers - self.presence.in_region(&author.region) as u64;
        seq
    }
}

pub(super) fn ack(id: &str, seq: u64) -> Rc<str> {
    ServerFrame::Ack { id, seq }.to_text().into()
}

/// The `data` of a `$state` message: `{"key","value","version"}`.
fn state_data(key: &str, value: &RawValue, version: u64) -> Box<RawValue> {
    #[derive(serde::Serialize)]
    struct Data<'a> {
        key: &'a str,
        value: &'a RawValue,
        version: u64,
    }
    serde_json::value::to_raw_value(&Data { key, value, version })
        .unwrap_or_else(|_| super::empty_object())
}
