//! One connection's outbound queue: frames held inside a coalescing window
//! (signals collapse to the latest per sender and topic), or behind a
//! deferred catch-up replay, and packed into `batch` frames when released.

use std::collections::HashMap;
use std::rc::Rc;

#[derive(Debug, Default)]
pub struct Outbox {
    queue: Vec<Rc<str>>,
    /// Bytes of the frames in `queue` (the backlog a slow reader is held to).
    bytes: u64,
    /// Where each (sender, topic) signal sits in `queue`, to replace it.
    signals: HashMap<String, usize>,
    /// A coalescing window is open until then: new frames wait for it.
    pub window_until: Option<u64>,
    /// A deferred replay: nothing leaves before then, so the replay still
    /// comes before every live frame.
    pub hold_until: Option<u64>,
    /// Durable frames are queued for the end of the turn (the connection is
    /// on the room's turn list).
    pub due: bool,
    /// Bytes of a queued catch-up not yet taken: on top of the backlog bound.
    pub allowance: u64,
    /// The turn that last flushed it (the room's count of flushes) and the group of
    /// connections it went with: who is left out of a group that is most of the room.
    pub flushed: (u64, usize),
}

impl Outbox {
    /// Nothing queued, no window, no hold: frames may go out at once.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
            && self.window_until.is_none()
            && self.hold_until.is_none()
            && !self.due
    }

    /// Whether frames must wait at `now`.
    pub fn holding(&self, now: u64) -> bool {
        self.hold_until.is_some_and(|t| t > now) || self.window_until.is_some_and(|t| t > now)
    }

    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether a frame that is not a signal waits (a signal is worth nothing once stale).
    pub fn holds_durable(&self) -> bool {
        self.queue.len() > self.signals.len()
    }

    /// Bytes waiting.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Whether more waits than a reader may have: `max` bytes, plus what is
    /// left of a catch-up queued at once (a resume's replay is bounded by
    /// the replay limit, not the backlog; counting it would close a resume
    /// with a long catch-up on every attempt).
    pub fn over(&self, max: u64) -> bool {
        self.bytes > max.saturating_add(self.allowance)
    }

    /// Queues a frame in order.
    pub fn push(&mut self, frame: Rc<str>) {
        self.bytes += frame.len() as u64;
        self.queue.push(frame);
    }

    /// Queues a signal, replacing a queued one with the same key (the
    /// sender's session and topic): a stale cursor is worth nothing.
    pub fn push_signal(&mut self, key: &str, frame: Rc<str>) -> bool {
        if let Some(&i) = self.signals.get(key) {
            self.bytes = self.bytes - self.queue[i].len() as u64 + frame.len() as u64;
            self.queue[i] = frame;
            return true;
        }
        self.signals.insert(key.to_owned(), self.queue.len());
        self.push(frame);
        false
    }

    /// Takes everything queued, in order.
    pub fn take(&mut self) -> Vec<Rc<str>> {
        self.signals.clear();
        self.bytes = 0;
        self.allowance = 0;
        std::mem::take(&mut self.queue)
    }

    /// Takes frames from the front, in order, while fewer than `budget`
    /// bytes are taken (always at least one): the last one may go past it.
    /// So a window is left either with nothing queued or full, and a full
    /// window has a mark outstanding whose echo opens it again; stopping
    /// short of the budget could leave frames queued with nothing for the
    /// client to echo.
    pub fn take_upto(&mut self, budget: u64) -> Vec<Rc<str>> {
        let mut size = 0u64;
        let n = self
            .queue
            .iter()
            .take_while(|f| {
                let under = size == 0 || size < budget;
                size += f.len() as u64;
                under
            })
            .count();
        if n == self.queue.len() {
            return self.take();
        }
        let rest = self.queue.split_off(n);
        let taken = std::mem::replace(&mut self.queue, rest);
        let bytes = taken.iter().map(|f| f.len() as u64).sum::<u64>();
        self.bytes -= bytes;
        self.allowance = self.allowance.saturating_sub(bytes);
        // Signals still queued moved up by `n`; the ones taken are gone.
        self.signals.retain(|_, i| *i >= n);
        for i in self.signals.values_mut() {
            *i -= n;
        }
        taken
    }
}

/// Packs frames into as few texts as possible: one frame as itself, several
/// as `{"type":"batch","frames":[...]}` of at most `max_bytes` each (a frame
/// larger than that travels alone). A `batch` among them is packed by its
/// frames, never as a frame of another batch: a client reads one level.
pub fn pack(frames: Vec<Rc<str>>, max_bytes: usize) -> Vec<Rc<str>> {
    if frames.len() <= 1 {
        return frames;
    }
    let mut out = Vec::new();
    let mut group: Vec<Rc<str>> = Vec::new();
    let mut size = BATCH_HEAD.len() + 2;
    for frame in frames {
        let len = inner(&frame).len();
        if !group.is_empty() && size + len + 1 > max_bytes {
            out.push(batch(std::mem::take(&mut group)));
            size = BATCH_HEAD.len() + 2;
        }
        size += len + 1;
        group.push(frame);
    }
    if !group.is_empty() {
        out.push(batch(group));
    }
    out
}

const BATCH_HEAD: &str = r#"{"type":"batch","frames":["#;

/// What a frame adds to a batch: a frame's text, or a `batch`'s frames (its
/// text inside the brackets, as [`batch`] made it).
fn inner(frame: &str) -> &str {
    frame.strip_prefix(BATCH_HEAD).and_then(|f| f.strip_suffix("]}")).unwrap_or(frame)
}

/// One frame as itself, several as a `batch` (frames are JSON texts already;
/// a batch's own frames go in its place).
fn batch(mut group: Vec<Rc<str>>) -> Rc<str> {
    if group.len() == 1 {
        return group.pop().expect("one frame");
    }
    let mut text = String::with_capacity(group.iter().map(|f| f.len() + 1).sum::<usize>() + 32);
    text.push_str(BATCH_HEAD);
    // An empty batch's place is nothing (no comma for it).
    for (i, f) in group.iter().map(|f| inner(f)).filter(|f| !f.is_empty()).enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(f);
    }
    text.push_str("]}");
    text.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rc(s: &str) -> Rc<str> {
        s.into()
    }

    #[test]
    fn a_batch_is_packed_by_its_frames_never_inside_another() {
        let inner = pack(vec![rc(r#"{"a":1}"#), rc(r#"{"b":2}"#)], 1024);
        assert_eq!(inner.len(), 1);
        let empty = rc(r#"{"type":"batch","frames":[]}"#);
        let out = pack(vec![rc(r#"{"z":0}"#), inner[0].clone(), empty, rc(r#"{"c":3}"#)], 1024);
        assert_eq!(out.len(), 1);
        assert_eq!(&*out[0], r#"{"type":"batch","frames":[{"z":0},{"a":1},{"b":2},{"c":3}]}"#);
        // A batch that fills a text alone still goes alone, as itself.
        let big = pack(vec![rc(&format!(r#"{{"x":"{}"}}"#, "x".repeat(600))), rc("{}")], 2048);
        let out = pack(vec![big[0].clone(), rc(r#"{"y":1}"#)], 640);
        assert_eq!(out.len(), 2);
        assert!(Rc::ptr_eq(&out[0], &big[0]));
    }

    #[test]
    fn signals_collapse_to_the_latest_per_key_in_place() {
        let mut o = Outbox::default();
        o.push_signal("a\0cursor", rc(r#"{"n":1}"#));
        o.push(rc(r#"{"m":1}"#));
        assert!(o.push_signal("a\0cursor", rc(r#"{"n":2}"#)));
        o.push_signal("b\0cursor", rc(r#"{"n":3}"#));
        let got: Vec<String> = o.take().iter().map(|f| f.to_string()).collect();
        assert_eq!(got, [r#"{"n":2}"#, r#"{"m":1}"#, r#"{"n":3}"#]);
        assert!(o.is_empty());
        assert!(!o.push_signal("a\0cursor", rc("{}")), "a fresh window starts clean");
    }

    #[test]
    fn a_partial_take_keeps_the_rest_in_order_with_their_signal_slots() {
        let mut o = Outbox::default();
        o.push(rc("aaaa"));
        o.push_signal("s\0c", rc("bb"));
        o.push(rc("cccccc"));
        o.push_signal("t\0c", rc("dd"));
        assert_eq!(o.bytes(), 14);
        let got: Vec<String> = o.take_upto(5).iter().map(|f| f.to_string()).collect();
        assert_eq!(got, ["aaaa", "bb"], "the frame that crosses the budget goes too");
        assert_eq!(o.bytes(), 8);
        assert!(o.push_signal("t\0c", rc("ee")), "the queued signal is still replaced in place");
        assert!(!o.push_signal("s\0c", rc("ff")), "the taken one is not");
        let got: Vec<String> = o.take_upto(1).iter().map(|f| f.to_string()).collect();
        assert_eq!(got, ["cccccc"], "at least one frame, even over the budget");
        let got: Vec<String> = o.take().iter().map(|f| f.to_string()).collect();
        assert_eq!(got, ["ee", "ff"]);
        assert_eq!(o.bytes(), 0);
    }

    #[test]
    fn pack_makes_valid_batches_within_the_size_limit() {
        let frames: Vec<Rc<str>> = (0..10).map(|i| rc(&format!(r#"{{"i":{i}}}"#))).collect();
        let packed = pack(frames, 60);
        assert!(packed.len() > 1);
        let mut all = Vec::new();
        for p in &packed {
            assert!(p.len() <= 60 || !p.starts_with(r#"{"type":"batch""#));
            let v: serde_json::Value = serde_json::from_str(p).unwrap();
            match v["type"].as_str() {
                Some("batch") => all.extend(
                    v["frames"].as_array().unwrap().iter().map(|f| f["i"].as_u64().unwrap()),
                ),
                _ => all.push(v["i"].as_u64().unwrap()),
            }
        }
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert_eq!(pack(vec![rc("{}")], 10), [rc("{}")]);
    }
}
