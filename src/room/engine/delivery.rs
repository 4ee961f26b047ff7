//! Getting frames to connections: at once while the room is quiet; at the
//! end of the turn, batched, once frames come faster than the runtime can
//! send them one by one; signals coalesced inside a window (the latest per
//! sender and topic); everything held behind a deferred replay during a
//! reconnect storm; held back from a connection whose flow window is full
//! (it has not confirmed what it was sent, see [`crate::room::flow`]), and
//! the connection closed once too much waits for it; and signals shed first
//! when the room's outbound work exceeds its budget. Durable frames are
//! never dropped, reordered or delayed for a window.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::rc::Rc;

use super::Room;
use crate::room::flow::mark_frame;
use crate::room::io::Output;
use crate::room::outbox::pack;
use crate::room::CloseCode;

/// How often the keep-alive timer fires while frames wait for a client's
/// echo (well under the runtime's 10 s before it may hibernate an object).
const KEEPALIVE_MS: u64 = 5_000;

impl Room {
    /// Over the outbound budget (frames really sent, a batch counting
    /// once): signals are shed and presence diffs wait for the summary.
    pub(super) fn busy(&mut self) -> bool {
        self.outbound.rate(self.now) > self.config.outbound_budget
    }

    /// Frames are asked for fast enough that sending each on its own would
    /// cost more than the wait for the end of the turn: durable frames queue
    /// and leave together, as one `batch` per connection, when the turn
    /// ends. Counted before batching, so a room that batches stays batching.
    fn batching(&mut self) -> bool {
        self.asked.rate(self.now) > self.config.batch_above
    }

    /// Counts `asked` frames going out as `sent` texts.
    fn count(&mut self, asked: u64, sent: u64) {
        self.asked.add(self.now, asked);
        self.outbound.add(self.now, sent);
    }

    /// A durable or control frame for one connection.
    pub(super) fn send(&mut self, conn: &str, frame: Rc<str>) {
        let now = self.now;
        let batching = self.batching();
        let window = self.config.send_window;
        let Some(c) = self.conns.get_mut(conn) else {
            return; // a connection the room already let go
        };
        // Signals waiting in a window go first: they were queued earlier.
        c.out.push(frame);
        if !c.flow.open(window) {
            self.echo_wait = true;
            return self.check_backlog(conn);
        }
        if c.out.hold_until.is_some_and(|t| t > now) {
            return self.check_backlog(conn);
        }
        if batching {
            if !c.out.due {
                c.out.due = true;
                self.turn.push(conn.to_owned());
            }
            return;
        }
        let frames = c.out.take_upto(c.flow.room_left(window));
        let left = !c.out.is_empty();
        self.emit(conn, frames);
        if left {
            self.echo_wait = true; // what is left waits for the window
            self.check_backlog(conn);
        }
    }

    /// Dooms a connection that has more waiting for it than the room keeps
    /// for one reader: it is closed (4013) when the operation under way is
    /// done ([`Room::close_doomed`]), and resumes from its last `seq`.
    pub(super) fn check_backlog(&mut self, conn: &str) {
        let max = self.config.max_backlog;
        if self.conns.get(conn).is_some_and(|c| c.out.over(max)) {
            self.doomed.insert(conn.to_owned());
        }
    }

    /// Dooms (4013) each connection whose frames have waited behind its
    /// full window for `echo_deadline_ms` without an echo: a client that
    /// pings but never reads would otherwise keep the room's object awake
    /// (the keep-alive) for as long as its token lasts. Runs on the
    /// wake-up timer, which fires at least every [`KEEPALIVE_MS`] while
    /// anything waits for an echo.
    pub(super) fn check_stalled(&mut self, now: u64) {
        if !self.echo_wait {
            return;
        }
        let window = self.config.send_window;
        let deadline = self.config.echo_deadline_ms;
        let mut stuck = Vec::new();
        for (id, c) in self.conns.iter_mut() {
            if c.out.is_empty() || c.flow.open(window) {
                c.stalled_since = None;
                continue;
            }
            let since = *c.stalled_since.get_or_insert(now);
            if now.saturating_sub(since) >= deadline {
                stuck.push(id.clone());
            }
        }
        for conn in stuck {
            if self.doomed.insert(conn) {
                self.stats.stalled_closes += 1;
            }
        }
    }

    /// Closes the doomed connections (4013), in order. Their leaves may doom
    /// others, closed in the same loop.
    pub(super) fn close_doomed(&mut self) {
        if self.closing_doomed {
            return;
        }
        self.closing_doomed = true;
        while let Some(conn) = self.doomed.pop_first() {
            if self.conns.contains_key(&conn) {
                self.stats.backlog_closes += 1;
                let now = self.now;
                self.close(now, &conn, CloseCode::Backlog);
            }
        }
        self.closing_doomed = false;
    }

    /// A mark echo opened `conn`'s window: frames that waited only for it go.
    pub(super) fn release(&mut self, conn: &str) {
        let now = self.now;
        let window = self.config.send_window;
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        // A hold, a signal window or the end of the turn releases the rest.
        if c.out.is_empty() || c.out.holding(now) || c.out.due || !c.flow.open(window) {
            return;
        }
        let frames = c.out.take_upto(c.flow.room_left(window));
        self.echo_wait |= !c.out.is_empty();
        self.emit(conn, frames);
    }

    /// A durable or control frame for every connection but `except`.
    pub(super) fn broadcast(&mut self, frame: Rc<str>, except: Option<&str>) {
        match except {
            Some(conn) => self.broadcast_but(frame, &[conn]),
            None => self.broadcast_but(frame, &[]),
        }
    }

    /// A frame for every connection but those in `skip` (usually none or one: the sender; a
    /// window's presence diff skips those who get one of their own).
    pub(super) fn broadcast_but(&mut self, frame: Rc<str>, skip: &[&str]) {
        let window = self.config.send_window;
        let many: Option<HashSet<&str>> = (skip.len() > 8).then(|| skip.iter().copied().collect());
        let skipped = |id: &str| match &many {
            Some(set) => set.contains(id),
            None => skip.contains(&id),
        };
        if self.batching() {
            let now = self.now;
            let max_backlog = self.config.max_backlog;
            let mut over = Vec::new();
            for (id, c) in &mut self.conns {
                if skipped(id) {
                    continue;
                }
                c.out.push(frame.clone());
                if c.out.over(max_backlog) {
                    over.push(id.clone());
                } else if !c.out.due && c.out.hold_until.is_none_or(|t| t <= now) {
                    c.out.due = true;
                    self.turn.push(id.clone());
                }
            }
            over.sort(); // deterministic order of closes
            for conn in over {
                self.check_backlog(&conn);
            }
            return;
        }
        // Relayed sessions left out (held back, skipped): not among the sends either.
        let mut relayed_out = 0;
        let slow: Vec<String> = self
            .conns
            .iter()
            .filter(|(id, c)| !skipped(id) && !c.idle(window))
            .inspect(|(_, c)| relayed_out += usize::from(super::Relayed::link(c).is_some()))
            .map(|(id, _)| id.clone())
            .collect();
        let here: Vec<&super::Conn> = skip.iter().filter_map(|c| self.conns.get(*c)).collect();
        relayed_out += here.iter().filter(|c| super::Relayed::link(c).is_some()).count();
        let receivers = self.conns.len() - here.len();
        if slow.len() < receivers {
            let mut all_skipped = slow.clone();
            all_skipped.extend(skip.iter().map(|c| (*c).to_owned()));
            let fast = self.sends_for(receivers - slow.len(), relayed_out);
            self.count(fast, fast);
            self.sent_to_all(frame.len() as u64, &all_skipped);
            self.push(Output::Broadcast { frame: frame.clone(), skip: all_skipped });
        }
        for conn in slow {
            self.send(&conn, frame.clone());
        }
    }

    /// The sends a frame for `receivers` of the room's connections takes the adapter: one per
    /// socket of its own, and one per link whose far end keeps its sessions' windows (the
    /// adapter gathers a turn's frames for a link into one message), however many of the
    /// link's sessions it is for ([`super::Relayed`]). So a relayed room's members neither
    /// make the home batch its turns nor count against its outbound budget one by one.
    /// `relayed_out`: the relayed sessions not among the receivers.
    fn sends_for(&self, receivers: usize, relayed_out: usize) -> u64 {
        let members = self.relayed.members.saturating_sub(relayed_out);
        let links = self.relayed.links.len();
        (receivers.saturating_sub(members) + links.min(receivers)) as u64
    }

    /// Counts `bytes` sent to every connection but those in `skip`, and
    /// sends the marks that fall due (after the broadcast that made them due).
    fn sent_to_all(&mut self, bytes: u64, skip: &[String]) {
        let every = self.config.mark_every;
        // Usually nobody or only the sender is skipped; held connections in
        // a storm may be many, so look up fast then.
        let many: Option<HashSet<&str>> =
            (skip.len() > 8).then(|| skip.iter().map(String::as_str).collect());
        let mut marks = Vec::new();
        for (id, c) in &mut self.conns {
            let skipped = match &many {
                Some(set) => set.contains(id.as_str()),
                None => skip.iter().any(|s| s == id),
            };
            if skipped {
                continue;
            }
            if let Some(token) = c.flow.sent(bytes, every) {
                marks.push((id.clone(), token));
            }
        }
        self.mark(marks);
    }

    /// Queues the marks after the frame(s) that made them due; they go out
    /// whatever the connection's window (or nothing could ever open it).
    pub(super) fn mark(&mut self, mut marks: Vec<(String, String)>) {
        marks.sort(); // deterministic order
        for (conn, token) in marks {
            let frame: Rc<str> = mark_frame(&token).into();
            self.count(1, 1);
            self.push(Output::Send { conn, frame });
        }
    }

    /// The turn ended: every connection with durable frames queued gets
    /// them, packed. Connections whose queues are the same frames (the usual
    /// case: every member got the same messages) share one text; a group that
    /// is most of the room goes as a broadcast naming those left out, so that
    /// the adapter loops over its sockets once instead of looking each one up.
    pub(super) fn flush_turn(&mut self) {
        let now = self.now;
        let window = self.config.send_window;
        self.flushes += 1;
        let stamp = self.flushes;
        let mut groups: Vec<(Vec<Rc<str>>, Vec<String>)> = Vec::new();
        let mut index: HashMap<Vec<*const u8>, usize> = HashMap::new();
        for conn in std::mem::take(&mut self.turn) {
            let Some(c) = self.conns.get_mut(&conn) else {
                continue;
            };
            c.out.due = false;
            if c.out.hold_until.is_some_and(|t| t > now) || c.out.is_empty() {
                continue; // its hold releases it; or a signal flushed it already
            }
            if !c.flow.open(window) {
                self.echo_wait = true;
                continue; // a mark echo releases it
            }
            let frames = c.out.take_upto(c.flow.room_left(window));
            self.echo_wait |= !c.out.is_empty();
            // Most connections share the previous one's frames: no key to build for them.
            let last = groups.len().checked_sub(1).filter(|&i| same(&groups[i].0, &frames));
            let group = match last {
                Some(i) => i,
                None => {
                    let key: Vec<*const u8> = frames.iter().map(|f| f.as_ptr()).collect();
                    *index.entry(key).or_insert_with(|| {
                        groups.push((frames, Vec::new()));
                        groups.len() - 1
                    })
                }
            };
            c.out.flushed = (stamp, group);
            groups[group].1.push(conn);
        }
        for (i, (frames, conns)) in groups.into_iter().enumerate() {
            let skip = (conns.len() > 1 && conns.len() * 2 > self.conns.len()).then(|| {
                let mut out: Vec<String> = (self.conns.iter())
                    .filter(|(_, c)| c.out.flushed != (stamp, i))
                    .map(|(id, _)| id.clone())
                    .collect();
                out.sort(); // deterministic
                out
            });
            self.emit_to(conns, frames, skip);
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
        let window = self.config.send_window;
        let origin = self.conns.get(sender).and_then(|c| c.link.clone());
        // A sender whose relay coalesces signals: its link's sessions are in no skip list, so
        // the signal must name its origin even with no other link to go to, or a broadcast
        // would take it back over that link.
        let keyed_origin = self.conns.get(sender).is_some_and(|c| c.signals_at_link);
        let Receivers { idle, waiting, late, local, links } = self.signal_receivers(sender);
        let mut over = Vec::new();
        for conn in &waiting {
            let c = self.conns.get_mut(conn).expect("listed above");
            self.echo_wait |= !c.flow.open(window);
            if c.out.push_signal(key, frame.clone()) {
                // Asked for, though never sent: a room that coalesces keeps coalescing.
                self.asked.add(now, 1);
                self.stats.signals_coalesced += 1;
            } else if c.out.over(self.config.max_backlog) {
                over.push(conn.clone());
            }
        }
        for conn in &late {
            let c = self.conns.get_mut(conn).expect("listed above");
            c.out.push_signal(key, frame.clone());
            let frames = c.out.take_upto(c.flow.room_left(window));
            self.echo_wait |= !c.out.is_empty();
            self.emit(conn, frames);
            self.open_window(conn);
        }
        for conn in over {
            self.check_backlog(&conn);
        }
        if idle.is_empty() && links.is_empty() {
            return;
        }
        let mut skip = waiting;
        skip.extend(late);
        skip.extend(local);
        skip.push(sender.to_owned());
        let sends = (idle.len() + links.len()) as u64;
        self.count(sends, sends);
        self.sent_to_all(frame.len() as u64, &skip);
        match links.is_empty() && !keyed_origin {
            true => self.push(Output::Broadcast { frame, skip }),
            false => {
                let key = key.to_owned();
                self.push(Output::Signal { frame, key, skip, links, origin })
            }
        }
        for conn in idle {
            self.open_window(&conn);
        }
    }

    /// Who a signal from `sender` goes to, and how ([`Receivers`]).
    fn signal_receivers(&self, sender: &str) -> Receivers {
        let (now, window) = (self.now, self.config.send_window);
        // A signal that came over a link was delivered to the link's own
        // sessions by its far end already (a relay delivers its members'
        // signals at once); the room sends it to everyone else.
        let origin = self.conns.get(sender).and_then(|c| c.link.clone());
        let mut to = Receivers::default();
        let mut links: BTreeSet<&str> = BTreeSet::new();
        for (id, c) in self.conns.iter().filter(|(id, _)| id.as_str() != sender) {
            if c.signals_at_link {
                if c.link != origin {
                    links.extend(c.link.as_deref());
                }
                continue;
            }
            if origin.is_some() && c.link == origin {
                to.local.push(id.clone());
                continue;
            }
            // A reader that has not confirmed its window gets the latest
            // signals when it has: they collapse while they wait.
            if c.out.holding(now) || !c.flow.open(window) || c.out.due {
                to.waiting.push(id.clone());
            } else if c.out.is_empty() {
                to.idle.push(id.clone());
            } else {
                to.late.push(id.clone()); // its window ended; the flush has not run yet
            }
        }
        to.links = links.into_iter().map(str::to_owned).collect();
        to
    }

    /// Defers a connection's frames (its replay, a send its user's reply
    /// budget must wait for) until `until`, or longer if it is already held
    /// longer.
    pub(super) fn hold(&mut self, conn: &str, until: u64) {
        if let Some(c) = self.conns.get_mut(conn) {
            let until = c.out.hold_until.map_or(until, |held| held.max(until));
            c.out.hold_until = Some(until);
            self.deadlines.insert((until, conn.to_owned()));
        }
    }

    /// Releases the windows and holds that ended by now. A window that
    /// released frames stays open for another round (trailing edge).
    pub(super) fn flush_due(&mut self) {
        let now = self.now;
        let window = self.config.send_window;
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
                continue; // a later deadline releases it
            }
            if !c.flow.open(window) {
                self.echo_wait = true;
                continue; // a mark echo releases it
            }
            let frames = c.out.take_upto(c.flow.room_left(window));
            self.echo_wait |= !c.out.is_empty();
            self.emit(&conn, frames);
            self.open_window(&conn);
        }
    }

    /// The end of the turn when frames wait for it, else the earliest
    /// window or hold end, or a due summary: when the wake-up timer must
    /// fire. While a client's echo is awaited with frames queued for it, a
    /// keep-alive: the runtime hibernates an object only when no timer of
    /// its own is pending, and what the room owes its clients (queued
    /// frames, a due summary, held presence) lives in memory only.
    pub(super) fn next_flush(&mut self) -> Option<u64> {
        if self.echo_wait {
            self.echo_wait = self.waiting_for_echo();
        }
        // Away members live in memory only: the room stays awake until their grace ends.
        let waiting = self.echo_wait || !self.away.is_empty();
        let keepalive = waiting.then(|| self.now + KEEPALIVE_MS);
        let away = self.next_away();
        [self.flush_work(), keepalive, away].into_iter().flatten().min()
    }

    /// When the wake-up timer has work to do (the end of the turn, a window
    /// or hold that ends, a due summary), the keep-alive aside.
    pub(crate) fn flush_work(&self) -> Option<u64> {
        if !self.turn.is_empty() {
            return Some(self.now);
        }
        let deadline = self.deadlines.first().map(|(at, _)| *at);
        [deadline, self.summary.due, self.window.due()].into_iter().flatten().min()
    }

    /// Whether some connection has frames queued behind its flow window:
    /// only its client's echo releases them.
    pub(crate) fn waiting_for_echo(&self) -> bool {
        let window = self.config.send_window;
        self.conns.values().any(|c| !c.out.is_empty() && !c.flow.open(window))
    }

    /// Opens a signal coalescing window on `conn`, only while the room batches: below
    /// `batch_above` frames asked for a second, sending each signal at once costs less than
    /// the wait (a cursor a window late is the lag users see), as it does a durable frame.
    fn open_window(&mut self, conn: &str) {
        if !self.batching() {
            return;
        }
        let until = self.now + self.config.batch_window_ms;
        if let Some(c) = self.conns.get_mut(conn) {
            if c.out.window_until.is_none_or(|t| t <= self.now) {
                c.out.window_until = Some(until);
                self.deadlines.insert((until, conn.to_owned()));
            }
        }
    }

    pub(super) fn emit(&mut self, conn: &str, frames: Vec<Rc<str>>) {
        self.emit_to(vec![conn.to_owned()], frames, None);
    }

    /// Sends the same frames to each of `conns`, packed into batches; as a broadcast but
    /// `skip` when given (`conns` are then every connection not in it).
    fn emit_to(&mut self, conns: Vec<String>, frames: Vec<Rc<str>>, skip: Option<Vec<String>>) {
        if frames.len() > 1 {
            self.stats.batches += conns.len() as u64;
        }
        if frames.is_empty() {
            return;
        }
        let asked = frames.len() * conns.len();
        let packed = pack(frames, self.config.batch_max_bytes);
        self.count(asked as u64, (packed.len() * conns.len()) as u64);
        let bytes: u64 = packed.iter().map(|f| f.len() as u64).sum();
        let every = self.config.mark_every;
        let marks: Vec<(String, String)> = conns
            .iter()
            .filter_map(|id| {
                let token = self.conns.get_mut(id)?.flow.sent(bytes, every)?;
                Some((id.clone(), token))
            })
            .collect();
        if let Some(skip) = skip {
            for frame in packed {
                self.push(Output::Broadcast { frame, skip: skip.clone() });
            }
            return self.mark(marks);
        }
        let mut packed = packed.into_iter().peekable();
        while let Some(frame) = packed.next() {
            if conns.len() == 1 {
                self.push(Output::Send { conn: conns[0].clone(), frame });
            } else if packed.peek().is_none() {
                self.push(Output::Multicast { conns, frame });
                break;
            } else {
                self.push(Output::Multicast { conns: conns.clone(), frame });
            }
        }
        self.mark(marks);
    }
}

/// The connections a signal goes to, by how.
#[derive(Default)]
struct Receivers {
    /// Nothing waits for them: the signal goes now, in one broadcast.
    idle: Vec<String>,
    /// Held (a replay, a full flow window, a turn's batch): it waits in their outboxes.
    waiting: Vec<String>,
    /// Their window ended and its flush has not run: it goes now, after what waits.
    late: Vec<String>,
    /// Sessions of the sender's link, whose far end delivered it already.
    local: Vec<String>,
    /// Links whose relays coalesce signals themselves ([`crate::room::Hello::relay_signals`]):
    /// the signal goes to each once, never through their sessions' outboxes.
    links: Vec<String>,
}

/// The same frames (the same texts, not equal ones), in the same order.
fn same(a: &[Rc<str>], b: &[Rc<str>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Rc::ptr_eq(x, y))
}
