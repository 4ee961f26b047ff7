//! The in-memory side of the log: the replay window and the (session, id)
//! index that makes retries idempotent for the whole retained log.

use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// Recent frames for replay, and ids for deduplication.
#[derive(Debug, Default)]
pub struct History {
    /// (seq, message frame) of the newest `replay_limit` entries.
    window: VecDeque<(u64, Rc<str>)>,
    window_cap: usize,
    /// (session, id) -> seq for every retained entry.
    ids: HashMap<(String, String), u64>,
    /// The same keys in seq order, to forget the oldest.
    order: VecDeque<(u64, (String, String))>,
    retain: usize,
}

impl History {
    pub fn new(replay_limit: u64, retain: u64) -> Self {
        History {
            window_cap: replay_limit as usize,
            retain: retain.max(replay_limit) as usize,
            ..Default::default()
        }
    }

    /// Records a sequenced entry.
    pub fn push(&mut self, seq: u64, session: &str, id: &str, frame: Rc<str>) {
        if self.window_cap > 0 {
            if self.window.len() == self.window_cap {
                self.window.pop_front();
            }
            self.window.push_back((seq, frame));
        }
        self.remember_id(seq, session, id);
    }

    /// Records an id without a frame (restore of entries outside the window).
    pub fn remember_id(&mut self, seq: u64, session: &str, id: &str) {
        let key = (session.to_owned(), id.to_owned());
        self.ids.insert(key.clone(), seq);
        self.order.push_back((seq, key));
        while self.order.len() > self.retain {
            if let Some((old_seq, old)) = self.order.pop_front() {
                // only forget if a later write of the same key did not replace it
                if self.ids.get(&old) == Some(&old_seq) {
                    self.ids.remove(&old);
                }
            }
        }
    }

    /// The seq an earlier write with this (session, id) got, if retained.
    pub fn seq_of(&self, session: &str, id: &str) -> Option<u64> {
        // a borrowed tuple key would need a custom Borrow impl; ids are short
        self.ids.get(&(session.to_owned(), id.to_owned())).copied()
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
        let mut h = History::new(limit, retain);
        for s in 1..=n {
            h.push(s, "s", &format!("m{s}"), format!("f{s}").into());
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
}
