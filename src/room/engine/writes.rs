//! Sequenced writes: `publish` and compare-and-set `set`, each persisted
//! before its ack and broadcast, and deduplicated by (session, id).

use std::rc::Rc;

use serde_json::value::RawValue;

use super::Room;
use crate::protocol::server::ServerFrame;
use crate::room::io::{Commit, LogEntry, Output, StateWrite};
use crate::room::Refusal;

impl Room {
    pub(super) fn publish(
        &mut self,
        now: u64,
        conn: &str,
        id: String,
        topic: String,
        data: Box<RawValue>,
    ) {
        let session = self.conns[conn].session.clone();
        if let Some(seq) = self.history.seq_of(&session, &id) {
            return self.send(conn, ack(&id, seq));
        }
        self.commit(now, conn, &session, id, topic, data, None);
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
    serde_json::value::to_raw_value(&Data {
        key,
        value,
        version,
    })
    .unwrap_or_else(|_| super::empty_object())
}
