//! Getting frames to connections: at once when a connection is idle,
//! coalesced inside its window when frames come fast (signals collapse to
//! the latest per sender and topic), held behind a deferred replay during a
//! reconnect storm, and shed, signals first, when the room's outbound work
//! exceeds its budget. Durable frames are never dropped or reordered.

use std::rc::Rc;

use super::Room;
use crate::room::io::Output;
use crate::room::outbox::pack;

/// Frames sent per second, counted in whole-second buckets.
#[derive(Debug, Default)]
pub struct Meter {
    second: u64,
    this: u64,
    last: u64,
}

impl Meter {
    pub fn add(&mut self, now: u64, n: u64) {
        self.roll(now);
        self.this += n;
    }

    /// The rate over the last full second or the current one, whichever is higher.
    pub fn rate(&mut self, now: u64) -> u64 {
        self.roll(now);
        self.this.max(self.last)
    }

    fn roll(&mut self, now: u64) {
        let second = now / 1000;
        if second != self.second {
            self.last = if second == self.second + 1 { self.this } else { 0 };
            self.this = 0;
            self.second = second;
        }
    }
}

impl Room {
    /// Over the outbound budget: signals are shed, presence diffs wait for
    /// the summary, durable frames are batched per window.
    pub(super) fn busy(&mut self) -> bool {
        self.outbound.rate(self.now) > self.config.outbound_budget
    }

    /// A durable or control frame for one connection.
    pub(super) fn send(&mut self, conn: &str, frame: Rc<str>) {
        let now = self.now;
        let busy = self.busy();
        let Some(c) = self.conns.get_mut(conn) else {
            return; // a connection the room already let go
        };
        let held = c.out.hold_until.is_some_and(|t| t > now);
        let windowed = c.out.window_until.is_some_and(|t| t > now);
        if held || (busy && windowed) {
            c.out.push(frame);
            return;
        }
        let mut frames = c.out.take();
        frames.push(frame);
        self.emit(conn, frames);
        if busy {
            self.open_window(conn);
        }
    }

    /// A durable or control frame for every connection but `except`.
    pub(super) fn broadcast(&mut self, frame: Rc<str>, except: Option<&str>) {
        let busy = self.busy();
        let slow: Vec<String> = self
            .conns
            .iter()
            .filter(|(id, c)| Some(id.as_str()) != except && (busy || !c.out.is_idle()))
            .map(|(id, _)| id.clone())
            .collect();
        let receivers =
            self.conns.len() - usize::from(except.is_some_and(|e| self.conns.contains_key(e)));
        if slow.len() < receivers {
            let mut skip = slow.clone();
            skip.extend(except.map(str::to_owned));
            self.outbound.add(self.now, (receivers - slow.len()) as u64);
            self.push(Output::Broadcast { frame: frame.clone(), skip });
        }
        for conn in slow {
            self.send(&conn, frame.clone());
        }
    }

    /// A signal from `sender` (keyed by its session and topic) for every
    /// other connection: shed under load, coalesced inside a window.
    pub(super) fn broadcast_signal(&mut self, sender: &str, key: &str, frame: Rc<str>) {
        if self.busy() {
            self.stats.signals_dropped += self.conns.len().saturating_sub(1) as u64;
            return;
        }
        let now = self.now;
        let (mut idle, mut waiting, mut late) = (Vec::new(), Vec::new(), Vec::new());
        for (id, c) in self.conns.iter().filter(|(id, _)| id.as_str() != sender) {
            if c.out.holding(now) {
                waiting.push(id.clone());
            } else if c.out.is_empty() {
                idle.push(id.clone());
            } else {
                late.push(id.clone()); // its window ended; the flush has not run yet
            }
        }
        for conn in &waiting {
            let c = self.conns.get_mut(conn).expect("listed above");
            if c.out.push_signal(key, frame.clone()) {
                self.stats.signals_coalesced += 1;
            }
        }
        for conn in &late {
            let c = self.conns.get_mut(conn).expect("listed above");
            c.out.push_signal(key, frame.clone());
            let frames = c.out.take();
            self.emit(conn, frames);
            self.open_window(conn);
        }
        if idle.is_empty() {
            return;
        }
        let mut skip = waiting;
        skip.extend(late);
        skip.push(sender.to_owned());
        self.outbound.add(now, idle.len() as u64);
        self.push(Output::Broadcast { frame, skip });
        for conn in idle {
            self.open_window(&conn);
        }
    }

    /// Defers a connection's frames (its replay) until `until`.
    pub(super) fn hold(&mut self, conn: &str, until: u64) {
        if let Some(c) = self.conns.get_mut(conn) {
            c.out.hold_until = Some(until);
            self.deadlines.insert((until, conn.to_owned()));
        }
    }

    /// Releases the windows and holds that ended by now. A window that
    /// released frames stays open for another round (trailing edge).
    pub(super) fn flush_due(&mut self) {
        let now = self.now;
        while let Some((at, conn)) = self.deadlines.first().cloned() {
            if at > now {
                break;
            }
            self.deadlines.pop_first();
            let Some(c) = self.conns.get_mut(&conn) else {
                continue;
            };
            if c.out.hold_until.is_some_and(|t| t <= now) {
                c.out.hold_until = None;
            }
            if c.out.window_until.is_some_and(|t| t <= now) {
                c.out.window_until = None;
            }
            if c.out.holding(now) || c.out.is_empty() {
                continue;
            }
            let frames = c.out.take();
            self.emit(&conn, frames);
            self.open_window(&conn);
        }
    }

    /// The earliest window or hold end, for the wake-up timer.
    pub(super) fn next_flush(&self) -> Option<u64> {
        self.deadlines.first().map(|(at, _)| *at)
    }

    fn open_window(&mut self, conn: &str) {
        let until = self.now + self.config.batch_window_ms;
        if let Some(c) = self.conns.get_mut(conn) {
            if c.out.window_until.is_none_or(|t| t <= self.now) {
                c.out.window_until = Some(until);
                self.deadlines.insert((until, conn.to_owned()));
            }
        }
    }

    pub(super) fn emit(&mut self, conn: &str, frames: Vec<Rc<str>>) {
        if frames.len() > 1 {
            self.stats.batches += 1;
        }
        for frame in pack(frames, self.config.batch_max_bytes) {
            self.outbound.add(self.now, 1);
            self.push(Output::Send { conn: conn.to_owned(), frame });
        }
    }
}
