//! What the operator does to a room through the Worker's admin routes,
//! besides publishing, setting and draining: read the state, kick a user
//! (and block them for a while) and delete the room.

use super::Room;
use crate::room::io::Output;
use crate::room::CloseCode;
use crate::room::Time;

/// What a kick does to the user's block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// Leave it as it is.
    Keep,
    /// Refuse the user's connects until this time.
    Until(Time),
    /// Lift it: the user may connect again.
    Lift,
}

impl Room {
    /// The whole state as `{"seq": n, "state": {key: {"value","version"}}}`
    /// (`GET /{kind}/{room}/state`).
    pub fn state_json(&mut self) -> String {
        format!(r#"{{"seq":{},"state":{}}}"#, self.seq, self.state.json())
    }

    /// One key as `{"key","value","version"}`, if the state has it.
    pub fn key_json(&self, key: &str) -> Option<String> {
        let (value, version) = self.state.get(key)?;
        let v = serde_json::json!({ "key": key, "value": value, "version": version });
        Some(v.to_string())
    }

    /// Closes every connection of `user` with 4403 `kicked` (a client does
    /// not reconnect after it) and sets or lifts their block. Returns how
    /// many connections were closed.
    ///
    /// ```
    /// use homeroom::room::{Block, Room, RoomConfig, Snapshot, Time};
    /// let mut room = Room::restore(RoomConfig::default(), Snapshot::default(), Time::EPOCH);
    /// let (now, a_minute_on) = (Time::from_ms(1_000), Time::from_ms(61_000));
    /// assert_eq!(room.kick(now, "mallory", Block::Until(a_minute_on)), 0);
    /// ```
    pub fn kick(&mut self, now: Time, user: &str, block: Block) -> usize {
        let now = now.ms();
        self.now = self.now.max(now);
        let until = match block {
            Block::Keep => None,
            Block::Until(t) => Some(Some(t.ms())),
            Block::Lift => Some(None),
        };
        if let Some(until) = until {
            self.users.block(user, until);
            self.push(Output::Block { user: user.to_owned(), until: until.map(Time::from_ms) });
        }
        let mut conns: Vec<String> =
            self.conns.iter().filter(|(_, c)| c.user == user).map(|(id, _)| id.clone()).collect();
        conns.sort();
        for conn in &conns {
            self.close(now, conn, CloseCode::Kicked);
        }
        self.expel_away(now, user);
        self.arm();
        conns.len()
    }

    /// Closes every connection with 4404 `room_deleted` and asks the
    /// adapter to delete the room's storage. The engine is spent after it.
    /// Returns how many connections were closed.
    pub fn delete(&mut self, now: Time) -> usize {
        let now = now.ms();
        self.now = self.now.max(now);
        let mut conns: Vec<String> = self.conns.keys().cloned().collect();
        conns.sort();
        for conn in &conns {
            self.drop_conn(conn);
            self.push(Output::Close { conn: conn.clone(), code: CloseCode::Deleted });
        }
        self.presence.clear();
        self.away.clear();
        self.turn.clear();
        self.deadlines.clear();
        self.retain_at = None;
        self.push(Output::Delete);
        conns.len()
    }
}
