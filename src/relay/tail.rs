//! [`Tail`]: a relay's copy of the newest entries of its room's log, learned from the frames the
//! home sends it, so that a resuming client's catch-up comes from the relay and not over the
//! link (a reconnect storm's replays are then one relay's work, not the home's per member).
//!
//! Entries of a log are facts: entry `seq` of the log `epoch` is the same frame whoever holds
//! it. So the tail only has to be contiguous and labelled with the right epoch: the home names
//! its epoch to every link it accepts ([`crate::protocol::link::DownOp::Epoch`]), and a tail
//! labelled with another epoch is emptied first. A tail never claims an entry it does not hold.

use std::collections::VecDeque;
use std::rc::Rc;

/// The most bytes of frames a tail keeps, whatever `REPLAY_LIMIT` allows: a relay's memory for
/// its room's log is bounded by this as well as by the entry count.
pub const TAIL_MAX_BYTES: usize = 16 << 20;

/// What a message frame begins with: the home makes every log entry's frame this way
/// ([`crate::room::LogEntry::frame`]), and nothing else starts so.
const MESSAGE: &str = r#"{"type":"message","seq":"#;
const BATCH: &str = r#"{"type":"batch","frames":["#;

/// The newest entries of a room's log, contiguous by `seq`.
///
/// ```
/// use homeroom::relay::Tail;
///
/// let mut tail = Tail::new(100);
/// tail.label("e-1");
/// tail.learn(r#"{"type":"message","seq":7,"id":"m7"}"#);
/// tail.learn(r#"{"type":"batch","frames":[{"type":"pong"},{"type":"message","seq":8,"id":"m8"}]}"#);
/// assert_eq!(tail.claim(Some(6), Some("e-1")), Some(8));
/// assert_eq!(tail.claim(Some(8), Some("e-1")), Some(8), "none missed, none lacking");
/// assert_eq!(tail.claim(Some(5), Some("e-1")), None, "seq 6 is not held");
/// assert_eq!(tail.claim(Some(6), Some("e-2")), None, "another log");
/// assert_eq!(tail.replay(6, 8).unwrap().len(), 2);
/// ```
#[derive(Debug, Default)]
pub struct Tail {
    /// The epoch of the log the entries are of; none until the home names it.
    epoch: Option<String>,
    entries: VecDeque<(u64, Rc<str>)>,
    bytes: usize,
    cap: usize,
}

impl Tail {
    /// An empty tail of at most `cap` entries (the room's `REPLAY_LIMIT`).
    pub fn new(cap: u64) -> Tail {
        Tail { cap: cap as usize, ..Tail::default() }
    }

    /// The home says its log is `epoch`: entries of another log are dropped.
    pub fn label(&mut self, epoch: &str) {
        if self.epoch.as_deref() != Some(epoch) {
            self.entries.clear();
            self.bytes = 0;
            self.epoch = Some(epoch.to_owned());
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Takes the log entries in a frame the home sent (a `message`, or a `batch` holding some).
    /// Anything else is ignored; so is a frame that is not JSON the home made.
    pub fn learn(&mut self, frame: &str) {
        self.learn_holding(frame, || false);
    }

    /// [`Tail::learn`], but an entry past a gap is not taken while `hold()` says a claim made
    /// from the tail as it is still waits for the home's word: the home's fill for that claim
    /// (on its way, behind this frame) joins the tail where it is, and a tail started again at
    /// the newer entry could not send what it claimed. `hold` is asked only at a gap.
    pub fn learn_holding(&mut self, frame: &str, hold: impl Fn() -> bool) {
        if self.cap == 0 || self.epoch.is_none() {
            return;
        }
        if frame.starts_with(MESSAGE) {
            if let Some(seq) = seq_of(frame) {
                self.push(seq, frame.into(), &hold);
            }
        } else if frame.starts_with(BATCH) && frame.contains(MESSAGE) {
            #[derive(serde::Deserialize)]
            struct Batch<'a> {
                #[serde(borrow)]
                frames: Vec<&'a serde_json::value::RawValue>,
            }
            let Ok(batch) = serde_json::from_str::<Batch>(frame) else {
                return;
            };
            for f in batch.frames {
                let f = f.get();
                if f.starts_with(MESSAGE) {
                    if let Some(seq) = seq_of(f) {
                        self.push(seq, f.into(), &hold);
                    }
                }
            }
        }
    }

    fn push(&mut self, seq: u64, frame: Rc<str>, hold: &impl Fn() -> bool) {
        match self.entries.back() {
            Some((last, _)) if seq <= *last => return, // held already
            Some((last, _)) if seq > last + 1 && hold() => return, // a claim counts on it
            Some((last, _)) if seq > last + 1 => {
                // Something between was never sent here: what is held is no longer the newest.
                self.entries.clear();
                self.bytes = 0;
            }
            _ => {}
        }
        self.bytes += frame.len();
        self.entries.push_back((seq, frame));
        while self.entries.len() > self.cap || self.bytes > TAIL_MAX_BYTES {
            let Some((_, old)) = self.entries.pop_front() else { break };
            self.bytes -= old.len();
        }
    }

    /// What the tail says of a client resuming after `since` in `epoch`: the last `seq` it
    /// holds, when it holds every entry from `since + 1` to it (`since` itself when it holds
    /// none of them yet but nothing is missing in between, or it is empty): what the home
    /// fills it from, and then has it replay.
    pub fn claim(&self, since: Option<u64>, epoch: Option<&str>) -> Option<u64> {
        let since = since?;
        if epoch.is_none() || epoch != self.epoch.as_deref() {
            return None;
        }
        let (Some((first, _)), Some((last, _))) = (self.entries.front(), self.entries.back())
        else {
            return Some(since);
        };
        (*first <= since + 1 && *last >= since).then_some(*last)
    }

    /// The frames of entries `after + 1 ..= upto`, if every one is held.
    pub fn replay(&self, after: u64, upto: u64) -> Option<Vec<Rc<str>>> {
        let first = self.entries.front()?.0;
        let last = self.entries.back()?.0;
        if upto <= after || after + 1 < first || upto > last {
            return None;
        }
        let from = (after + 1 - first) as usize;
        let to = (upto - first) as usize;
        Some(self.entries.range(from..=to).map(|(_, f)| f.clone()).collect())
    }
}

/// The `seq` of a message frame (the digits after [`MESSAGE`]).
fn seq_of(frame: &str) -> Option<u64> {
    let rest = &frame[MESSAGE.len()..];
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    rest[..end].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(seq: u64) -> String {
        format!(r#"{{"type":"message","seq":{seq},"id":"m{seq}","data":{{"n":{seq}}}}}"#)
    }

    fn labelled(cap: u64) -> Tail {
        let mut t = Tail::new(cap);
        t.label("e-1");
        t
    }

    #[test]
    fn holds_the_newest_contiguous_entries_within_its_cap() {
        let mut t = labelled(3);
        for s in 1..=5 {
            t.learn(&message(s));
        }
        t.learn(&message(4)); // a second copy (another member's catch-up) changes nothing
        assert_eq!(t.len(), 3);
        assert_eq!(t.claim(Some(2), Some("e-1")), Some(5));
        assert_eq!(t.claim(Some(1), Some("e-1")), None, "seq 2 fell out");
        assert_eq!(t.claim(Some(5), Some("e-1")), Some(5), "it can be filled from 6 on");
        assert_eq!(t.claim(Some(6), Some("e-1")), None, "6 never came here");
        assert_eq!(t.claim(None, Some("e-1")), None, "a first connect replays nothing");
        let got = t.replay(3, 5).unwrap();
        assert_eq!(got.iter().map(|f| f.to_string()).collect::<Vec<_>>(), [message(4), message(5)]);
        assert!(t.replay(1, 5).is_none());
        assert!(t.replay(3, 6).is_none());
    }

    #[test]
    fn a_gap_starts_it_again_and_another_epoch_empties_it() {
        let mut t = labelled(10);
        t.learn(&message(1));
        t.learn(&message(2));
        t.learn(&message(9));
        assert_eq!(t.claim(Some(0), Some("e-1")), None);
        assert_eq!(t.claim(Some(8), Some("e-1")), Some(9));
        t.label("e-1");
        assert_eq!(t.len(), 1, "the same log keeps its entries");
        t.label("e-2");
        assert!(t.is_empty());
        assert_eq!(t.claim(Some(8), Some("e-1")), None);
        assert_eq!(t.claim(Some(8), Some("e-2")), Some(8), "an empty tail can be filled");
    }

    #[test]
    fn a_gap_keeps_the_tail_while_a_claim_on_it_waits() {
        let mut t = labelled(10);
        t.learn(&message(1));
        t.learn(&message(2));
        assert_eq!(t.claim(Some(1), Some("e-1")), Some(2));
        t.learn_holding(&message(7), || true);
        assert_eq!(t.len(), 2, "7 is not taken: the fill of 3..=7 is on its way");
        t.learn_holding(&message(3), || true);
        assert_eq!(t.replay(1, 3).map(|f| f.len()), Some(2));
        t.learn_holding(&message(9), || false);
        assert_eq!(t.len(), 1, "with no claim waiting, a gap starts it again");
    }

    #[test]
    fn nothing_is_learned_before_the_home_names_its_log() {
        let mut t = Tail::new(10);
        t.learn(&message(1));
        assert!(t.is_empty());
    }

    #[test]
    fn a_message_inside_a_members_data_is_not_an_entry() {
        let mut t = labelled(10);
        t.learn(&message(1));
        // A member published data shaped like a message frame: it is data, not entry 99.
        let forged = r#"{"type":"message","seq":2,"id":"m2","data":{"type":"message","seq":99}}"#;
        let batch = format!(r#"{{"type":"batch","frames":[{forged},{}]}}"#, message(3));
        t.learn(&batch);
        assert_eq!(t.claim(Some(0), Some("e-1")), Some(3));
        assert_eq!(t.replay(1, 2).unwrap()[0].as_ref(), forged);
        // Bytes that are not JSON the home made teach nothing.
        t.learn(r#"{"type":"batch","frames":[{"type":"message","seq":4"#);
        assert_eq!(t.claim(Some(0), Some("e-1")), Some(3));
    }

    #[test]
    fn its_bytes_are_bounded() {
        let mut t = labelled(1000);
        let big = "x".repeat(1 << 20);
        for s in 1..=20 {
            t.learn(&format!(r#"{{"type":"message","seq":{s},"data":"{big}"}}"#));
        }
        assert!(t.bytes <= TAIL_MAX_BYTES);
        assert!(t.len() < 20 && t.len() >= 15, "{}", t.len());
    }
}
