//! Flow control for one connection: how many bytes the room has handed the
//! runtime for it, and how many the client has confirmed reading.
//!
//! The runtime buffers whatever a socket cannot take yet, without limit and
//! without telling anyone (workerd has no `bufferedAmount`). So the room
//! counts the bytes itself and, about every `mark_every` bytes, appends a
//! `mark` frame with a token nobody can guess. A client echoes each mark;
//! since a socket delivers in order, an echo proves everything before that
//! mark was read. A connection whose unconfirmed bytes reach the window gets
//! nothing more until an echo comes back: its frames wait in the room, where
//! they are shared `Rc`s and bounded ([`RoomConfig::max_backlog`]).
//!
//! [`RoomConfig::max_backlog`]: super::RoomConfig::max_backlog

use std::collections::VecDeque;

use sha2::{Digest, Sha256};

/// What a connection was sent and what it confirmed.
#[derive(Debug)]
pub struct Flow {
    /// Bytes handed to the runtime for this connection.
    sent: u64,
    /// Bytes the client confirmed (the offset of the last mark it echoed).
    confirmed: u64,
    /// Outstanding marks: (token, offset just after the mark), oldest first.
    marks: VecDeque<(String, u64)>,
    /// `sent` at the last mark.
    marked_at: u64,
    /// Marks issued so far (with `key`, what the next token is made of).
    issued: u64,
    /// The connection's secret (from the adapter's randomness).
    key: u64,
    /// False for a connection over a link: its far end (a relay) holds the socket and keeps
    /// the socket's flow window itself, so the room sends it everything at once and marks
    /// nothing (the link has a window of its own).
    metered: bool,
}

/// What an echoed mark says.
#[derive(Debug, PartialEq, Eq)]
pub enum Echo {
    /// It confirmed bytes not confirmed before: the only echo that is free.
    Advanced,
    /// No outstanding mark has this token: an echo of a mark already
    /// confirmed (a duplicate, or one older than a mark echoed since), or a
    /// forged one. [`Flow::was_issued`] tells them apart, at a cost the
    /// caller charges first.
    Spent,
}

impl Flow {
    pub fn new(key: u64) -> Flow {
        let marks = VecDeque::new();
        Flow { sent: 0, confirmed: 0, marks, marked_at: 0, issued: 0, key, metered: true }
    }

    /// The flow of a connection over a link: always open, never marked. The link's far end
    /// (a relay) keeps the socket's window with marks of its own and absorbs their echoes.
    pub fn unmetered(key: u64) -> Flow {
        Flow { metered: false, ..Flow::new(key) }
    }

    /// Whether the room keeps this connection's window ([`Flow::unmetered`] when not).
    pub fn metered(&self) -> bool {
        self.metered
    }

    /// [`Flow::new`] for a connection whose window the room keeps, [`Flow::unmetered`] for one
    /// whose link's far end keeps it (`relay_flow`).
    pub fn for_conn(key: u64, relay_flow: bool) -> Flow {
        if relay_flow {
            Flow::unmetered(key)
        } else {
            Flow::new(key)
        }
    }

    /// The connection's secret (kept in its socket attachment).
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The secret a connection's marks are made with after a load of the
    /// room: its `key` mixed with the load's `nonce`, so that no mark of one
    /// load has the token of a mark of another (the counter starts again).
    pub fn key_of_load(key: u64, nonce: u64) -> u64 {
        let mut h = Sha256::new();
        h.update(b"homeroom mark key");
        h.update(key.to_le_bytes());
        h.update(nonce.to_le_bytes());
        let d = h.finalize();
        u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
    }

    /// Bytes sent and not confirmed.
    pub fn unconfirmed(&self) -> u64 {
        if !self.metered {
            return 0;
        }
        self.sent - self.confirmed
    }

    /// Whether more may be sent now under `window`.
    pub fn open(&self, window: u64) -> bool {
        self.unconfirmed() < window
    }

    /// Room left in `window`: frames go while less than this has gone, so
    /// the last may overshoot it by up to one frame.
    pub fn room_left(&self, window: u64) -> u64 {
        if !self.metered {
            return u64::MAX;
        }
        window.saturating_sub(self.unconfirmed())
    }

    /// Counts `bytes` handed to the runtime. Returns the token of a mark to
    /// send right after them when `every` bytes have gone out since the last.
    pub fn sent(&mut self, bytes: u64, every: u64) -> Option<String> {
        self.sent += bytes;
        if !self.metered || self.sent - self.marked_at < every {
            return None;
        }
        self.issued += 1;
        let token = token(self.key, self.issued);
        // The mark frame itself counts: the echo confirms it too.
        self.sent += mark_frame_len(&token) as u64;
        self.marked_at = self.sent;
        self.marks.push_back((token.clone(), self.sent));
        Some(token)
    }

    /// An echo of `token` arrived: it advances what the client confirmed
    /// if it names an outstanding mark. A lookup in the few outstanding
    /// marks, no hashing: a flood of spent echoes costs nothing here before
    /// the rate limit sees it.
    pub fn echo(&mut self, token: &str) -> Echo {
        match self.marks.iter().position(|(t, _)| t == token) {
            Some(i) => {
                let (_, offset) = self.marks.drain(..=i).next_back().expect("drained one at least");
                self.confirmed = offset;
                Echo::Advanced
            }
            None => Echo::Spent,
        }
    }

    /// Whether `token` is one of this connection's earlier marks (a few
    /// hashes: echoes of old marks are rare, and only the last ones matter).
    pub fn was_issued(&self, token: &str) -> bool {
        if self.issued == 0 {
            return false;
        }
        let oldest = self.issued.saturating_sub(16).max(1);
        (oldest..=self.issued).any(|n| self::token(self.key, n) == token)
    }
}

/// The `mark` frame that carries `token`.
pub fn mark_frame(token: &str) -> String {
    format!(r#"{{"type":"mark","mark":"{token}"}}"#)
}

fn mark_frame_len(token: &str) -> usize {
    r#"{"type":"mark","mark":""}"#.len() + token.len()
}

/// Mark `n` of the connection with secret `key`: 16 hex digits of a hash
/// only the room can compute.
fn token(key: u64, n: u64) -> String {
    let mut h = Sha256::new();
    h.update(b"homeroom mark");
    h.update(key.to_le_bytes());
    h.update(n.to_le_bytes());
    h.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_every_so_often_and_echoes_confirm_up_to_them() {
        let mut f = Flow::new(42);
        assert_eq!(f.sent(100, 1000), None);
        let m1 = f.sent(950, 1000).expect("a mark after 1050 bytes");
        assert_eq!(mark_frame(&m1).len(), mark_frame_len(&m1));
        let after_m1 = f.unconfirmed();
        assert_eq!(after_m1, 1050 + mark_frame_len(&m1) as u64);
        assert!(f.open(after_m1 + 1) && !f.open(after_m1));
        let m2 = f.sent(2000, 1000).expect("a second mark");
        assert_ne!(m1, m2, "each mark has its own token");
        assert_eq!(f.echo(&m1), Echo::Advanced);
        assert_eq!(f.unconfirmed(), 2000 + mark_frame_len(&m2) as u64);
        assert_eq!(f.echo(&m2), Echo::Advanced);
        assert_eq!(f.unconfirmed(), 0);
        assert_eq!(f.echo(&m1), Echo::Spent, "an old mark echoed again confirms nothing");
        assert!(f.was_issued(&m1), "but it was one of this connection's");
        assert_eq!(f.echo("0123456789abcdef"), Echo::Spent);
        assert!(!f.was_issued("0123456789abcdef"));
        // Another connection's token is not one of this connection's.
        let mut g = Flow::new(43);
        let other = g.sent(5000, 1000).unwrap();
        assert_eq!(f.echo(&other), Echo::Spent);
        assert!(!f.was_issued(&other));
    }

    #[test]
    fn echoing_a_later_mark_confirms_the_earlier_ones() {
        let mut f = Flow::new(7);
        let marks: Vec<String> = (0..4).map(|_| f.sent(1000, 1000).unwrap()).collect();
        assert_eq!(f.echo(&marks[2]), Echo::Advanced);
        assert_eq!(f.unconfirmed(), 1000 + mark_frame_len(&marks[3]) as u64);
        assert_eq!(f.echo(&marks[1]), Echo::Spent);
        assert_eq!(f.echo(&marks[3]), Echo::Advanced);
        assert_eq!(f.unconfirmed(), 0);
    }

    #[test]
    fn a_connection_over_a_link_is_never_held_nor_marked() {
        let mut f = Flow::for_conn(9, true);
        assert!(!f.metered());
        assert!((0..100).all(|_| f.sent(1 << 20, 1000).is_none()), "no mark over a link");
        assert!(f.open(1) && f.room_left(1) == u64::MAX && f.unconfirmed() == 0);
        let mut g = Flow::new(9);
        let token = g.sent(5000, 1000).expect("the same key marks a socket of the room's own");
        assert_eq!(f.echo(&token), Echo::Spent);
        assert!(!f.was_issued(&token), "an echo over a link is never one of the room's");
    }
}
