//! A small room's presence diffs, coalesced: the first change after a quiet spell goes out at
//! once; the changes that follow within `presence_window_ms` go out together at the window's
//! end, one diff per reader of only what it has not seen (a newcomer's welcome already listed
//! the changes before it) and never its own session (a client keeps its own state). A storm of
//! joins into a small room so costs each member one diff per window, not one per join.

use std::collections::BTreeMap;
use std::rc::Rc;

use super::Room;
use crate::protocol::server::ServerFrame;

/// The changes held for the end of the presence window.
#[derive(Debug, Default)]
pub(super) struct Window {
    /// The window is open until then (ms): a change before it waits for its end.
    until: Option<u64>,
    /// The sessions changed within the window, each once, in the order of their first change
    /// (a list: at most a small room's members and leavers, searched once per change).
    held: Vec<(String, Held)>,
    /// Changes numbered so far: a connection's welcome shows every change up to the number
    /// it records then.
    count: u64,
}

/// One session's changes within the window.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// The number of its first change in the window, and of its latest.
    first: u64,
    latest: u64,
    /// It was a member before its first change: every reader knew it.
    listed: bool,
}

impl Window {
    /// When the held changes are due, if any are held.
    pub(super) fn due(&self) -> Option<u64> {
        self.until.filter(|_| !self.held.is_empty())
    }

    /// The number of the latest change: a welcome made now shows it and all before it.
    pub(super) fn seen(&self) -> u64 {
        self.count
    }

    /// Some change waits for the window's end.
    pub(super) fn holds(&self) -> bool {
        !self.held.is_empty()
    }

    /// A reset is on its way with the whole member list: nothing held is owed any more.
    pub(super) fn forget(&mut self) {
        self.held.clear();
    }
}

impl Room {
    /// `session`'s member joined, changed its state or left, in a small room (`listed`: it
    /// was a member before): the others hear of it now if the window is closed (everyone but
    /// `except`, the connection that made the change), else at the window's end (a room
    /// shedding load by then sends the whole list with its next summary instead).
    pub(super) fn presence_changed(
        &mut self,
        now: u64,
        session: &str,
        listed: bool,
        except: Option<&str>,
    ) {
        // Through relays each reader's own diff would cross the link on its own: a relayed
        // room (big, unless a team sets `RELAY_ABOVE` under `LARGE_ROOM`) sends each at once.
        let linked = self.linked();
        let ended = self.window.until.is_none_or(|t| t <= now);
        if (ended || linked) && !self.window.held.is_empty() {
            // What the window held goes first (its wake-up has not run yet, or a relay's
            // member came in during it).
            self.flush_presence(now);
        }
        self.window.count += 1;
        if self.window.until.is_some_and(|t| t > now) && !linked {
            let latest = self.window.count;
            match self.window.held.iter_mut().find(|(s, _)| s == session) {
                Some((_, held)) => held.latest = latest,
                None => {
                    let held = Held { first: latest, latest, listed };
                    self.window.held.push((session.to_owned(), held));
                }
            }
            return;
        }
        if let Some(frame) = self.diff_text(&[(session, true)]) {
            self.broadcast(frame.into(), except);
        }
        let length = self.config.presence_window_ms;
        self.window.until = (length > 0).then_some(now + length);
    }

    /// The window ended: each reader gets the held changes it has not seen, in one diff. A
    /// window that held changes opens again, so that a storm sends one diff per window.
    pub(super) fn flush_presence(&mut self, now: u64) {
        let held = std::mem::take(&mut self.window.held);
        let length = self.config.presence_window_ms;
        self.window.until = (!held.is_empty() && length > 0).then_some(now + length);
        let Some(first) = held.first().map(|(_, h)| h.first) else {
            return;
        };
        if self.large {
            return; // the reset that made it large had the whole list
        }
        if self.busy() {
            // Shedding: the next summary sends the whole list.
            self.presence_stale = true;
            return self.summary_changed(now, None);
        }
        // Readers welcomed within the window, and those whose own session changed, each get
        // theirs; every other reader shares the whole diff.
        let mut own: Vec<String> = self
            .conns
            .iter()
            .filter(|(_, c)| c.presence_seen >= first || held.iter().any(|(s, _)| *s == c.session))
            .map(|(id, _)| id.clone())
            .collect();
        own.sort(); // deterministic order of sends
        let skip: Vec<&str> = own.iter().map(String::as_str).collect();
        let all: Vec<(&str, bool)> = held.iter().map(|(s, h)| (s.as_str(), h.listed)).collect();
        if let Some(frame) = self.diff_text(&all) {
            self.broadcast_but(frame.into(), &skip);
        }
        for conn in &own {
            let Some(c) = self.conns.get(conn) else { continue };
            let seen = c.presence_seen;
            let unseen: Vec<(&str, bool)> = held
                .iter()
                .filter(|(s, h)| h.latest > seen && *s != c.session)
                .map(|(s, h)| (s.as_str(), h.listed || seen >= h.first))
                .collect();
            if let Some(frame) = self.diff_text(&unseen) {
                self.send(conn, Rc::from(frame));
            }
        }
    }

    /// The load before this one owed presence changes and lost them with its memory (a Wasm
    /// reset): nobody can tell which reader missed what, so every connection gets the whole
    /// member list at once (with the summary, on the timer a due summary asks for), as after
    /// shedding. A large room's readers hold no list: its summaries are whole each time.
    pub(super) fn presence_lost(&mut self, now: u64) {
        if self.large || self.conns.is_empty() {
            return;
        }
        self.presence_stale = true;
        self.summary.due = Some(now);
    }

    /// The load before this one owed frames to sockets of its own and lost them (a Wasm
    /// reset): each socket is closed 1012 `room_reset` and its client resumes from its `seq`.
    pub(super) fn frames_lost(&mut self, now: u64) {
        let mut own: Vec<String> =
            self.conns.iter().filter(|(_, c)| c.link.is_none()).map(|(id, _)| id.clone()).collect();
        own.sort(); // deterministic order of closes
        for conn in own {
            self.close(now, &conn, crate::room::CloseCode::Reset);
        }
    }

    /// Some connection comes over a relay's link.
    fn linked(&self) -> bool {
        self.conns.values().any(|c| c.link.is_some())
    }

    /// A diff of `sessions`: the present ones as joins (their member now), the others as
    /// leaves if the reader may have known them; `None` when that is nothing.
    fn diff_text(&self, sessions: &[(&str, bool)]) -> Option<String> {
        let (mut joins, mut leaves) = (BTreeMap::new(), Vec::new());
        for &(session, known) in sessions {
            match self.presence.get(session) {
                Some(m) => {
                    joins.insert(session, m.view());
                }
                None if known => leaves.push(session),
                None => {} // came and went unseen
            }
        }
        if joins.is_empty() && leaves.is_empty() {
            return None;
        }
        Some(ServerFrame::Presence { joins, leaves, reset: false, large: false }.to_text())
    }
}
