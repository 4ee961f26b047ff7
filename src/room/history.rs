//! The in-memory side of the log: the replay window, the (session, id)
//! index that makes retries idempotent for the whole retained log, who owns
//! each session that has entries in it, and the log's bounds (entries and
//! bytes) that decide what falls out.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// One retained entry as the index keeps it.
#[derive(Debug)]
struct Kept {
    seq: u64,
    key: (String, String),
    bytes: u64,
}

/// Recent frames for replay, and ids for deduplication.
#[derive(Debug, Default)]
pub struct History {
    /// (seq, message frame) of the newest `replay_limit` entries.
    window: VecDeque<(u64, Rc<str>)>,
    window_cap: usize,
    /// (session, id) -> seq for every retained entry.
    ids: HashMap<(String, String), u64>,
    /// The same keys in seq order, to forget the oldest.
    order: VecDeque<Kept>,
    /// Session -> (its user, its retained entries): a session that wrote to
    /// the retained log belongs to that user, so no other user can take it
    /// and collide with its ids.
    owners: HashMap<String, (String, usize)>,
    /// Most entries kept, and most bytes of data (never fewer entries than
    /// the replay window).
    retain: usize,
    retain_bytes: u64,
    bytes: u64,
    /// The highest seq forgotten so far, and the one last reported for
    /// deletion from storage.
    forgotten: u64,
    reported: u64,
}

impl History {
    pub fn new(replay_limit: u64, retain: u64, retain_bytes: u64) -> Self {
        History {
            window_cap: replay_limit as usize,
            retain: retain.max(replay_limit) as usize,
            retain_bytes,
            ..Default::default()
        }
    }

    /// Records a sequenced entry whose data is `bytes` long.
    pub fn push(
        &mut self,
        seq: u64,
        session: &str,
        id: &str,
        user: &str,
        bytes: u64,
        frame: Rc<str>,
    ) {
        if self.window_cap > 0 {
            if self.window.len() == self.window_cap {
                self.window.pop_front();
            }
            self.window.push_back((seq, frame));
        }
        self.remember_id(seq, session, id, user, bytes);
    }

    /// Records an id without a frame (restore of entries outside the window).
    pub fn remember_id(&mut self, seq: u64, session: &str, id: &str, user: &str, bytes: u64) {
        let key = (session.to_owned(), id.to_owned());
        self.ids.insert(key.clone(), seq);
        match self.owners.get_mut(session) {
            Some((_, n)) => *n += 1,
            None => {
                self.owners.insert(session.to_owned(), (user.to_owned(), 1));
            }
        }
        self.bytes += bytes;
        self.order.push_back(Kept { seq, key, bytes });
        let floor = self.window_cap.max(1);
        while self.order.len() > self.retain
            || (self.bytes > self.retain_bytes && self.order.len() > floor)
        {
            let Some(old) = self.order.pop_front() else { break };
            self.bytes -= old.bytes;
            self.forgotten = self.forgotten.max(old.seq);
            // only forget if a later write of the same key did not replace it
            if self.ids.get(&old.key) == Some(&old.seq) {
                self.ids.remove(&old.key);
            }
            if let Some((_, n)) = self.owners.get_mut(&old.key.0) {
                *n -= 1;
                if *n == 0 {
                    self.owners.remove(&old.key.0);
                }
            }
        }
    }

    /// Log rows at or below this seq fell out of the retained log since
    /// the last call: storage should delete them.
    pub fn take_trim(&mut self) -> Option<u64> {
        (self.forgotten > self.reported).then(|| {
            self.reported = self.forgotten;
            self.forgotten
        })
    }

    /// The seq an earlier write with this (session, id) got, if retained.
    pub fn seq_of(&self, session: &str, id: &str) -> Option<u64> {
        // a borrowed tuple key would need a custom Borrow impl; ids are short
        self.ids.get(&(session.to_owned(), id.to_owned())).copied()
    }

    /// The user whose entries under `session` are in the retained log.
    pub fn owner(&self, session: &str) -> Option<&str> {
        self.owners.get(session).map(|(user, _)| user.as_str())
    }

    /// Frames with seq > `since`, if the window holds all of them.
    pub fn replay_after(&self, since: u64, latest: u64) -> Option<impl Iterator<Item = &Rc<str>>> {
        let skip = if since >= latest {
            self.window.len()
        } else {
            let first = self.window.front()?.0;
            if since + 1 < first {
                return None;
            }
            (since + 1 - first) as usize
        };
        Some(self.window.range(skip..).map(|(_, f)| f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filled(n: u64, limit: u64, retain: u64) -> History {
        let mut h = History::new(limit, retain, u64::MAX);
        for s in 1..=n {
            h.push(s, "s", &format!("m{s}"), "u", 10, format!("f{s}").into());
        }
        h
    }

    #[test]
    fn replays_exactly_the_missed_frames() {
        let h = filled(250, 100, 1000);
        let got: Vec<_> = h.replay_after(247, 250).unwrap().map(|f| f.to_string()).collect();
        assert_eq!(got, ["f248", "f249", "f250"]);
        assert_eq!(h.replay_after(150, 250).unwrap().count(), 100);
        assert!(h.replay_after(149, 250).is_none());
        assert_eq!(h.replay_after(250, 250).unwrap().count(), 0);
    }

    #[test]
    fn ids_are_kept_for_the_retained_log_only() {
        let h = filled(1500, 100, 1000);
        assert_eq!(h.seq_of("s", "m1500"), Some(1500));
        assert_eq!(h.seq_of("s", "m501"), Some(501));
        assert_eq!(h.seq_of("s", "m500"), None);
        assert_eq!(h.seq_of("other", "m1500"), None);
    }

    #[test]
    fn the_log_stays_under_its_byte_bound_but_keeps_the_replay_window() {
        let mut h = History::new(10, 1000, 1000);
        for s in 1..=30 {
            h.push(s, "s", &format!("m{s}"), "u", 100, format!("f{s}").into());
        }
        assert_eq!(h.take_trim(), Some(20), "1,000 bytes hold the newest 10 entries");
        assert_eq!(h.take_trim(), None, "reported once");
        assert_eq!(h.seq_of("s", "m20"), None);
        assert_eq!(h.seq_of("s", "m21"), Some(21));
        // Entries bigger than the bound: the replay window is still kept.
        for s in 31..=50 {
            h.push(s, "s", &format!("m{s}"), "u", 5_000, format!("f{s}").into());
        }
        assert_eq!(h.take_trim(), Some(40));
        assert_eq!(h.replay_after(40, 50).unwrap().count(), 10);
    }

    #[test]
    fn a_session_is_owned_while_it_has_retained_entries() {
        let mut h = History::new(2, 3, u64::MAX);
        h.push(1, "s-ann", "m1", "ann", 1, "f".into());
        h.push(2, "s-bob", "m1", "bob", 1, "f".into());
        assert_eq!(h.owner("s-ann"), Some("ann"));
        assert_eq!(h.owner("s-bob"), Some("bob"));
        assert_eq!(h.owner("s-eve"), None);
        h.push(3, "s-bob", "m2", "bob", 1, "f".into());
        h.push(4, "s-bob", "m3", "bob", 1, "f".into());
        assert_eq!(h.owner("s-ann"), None, "its only entry fell out of the log");
        assert_eq!(h.owner("s-bob"), Some("bob"));
    }
}
