//! Getting frames to a relay's clients: each client's flow window, kept by the relay with marks
//! of its own (their echoes never cross the link); frames waiting behind a full window, to the
//! backlog bound or the echo deadline, after which the client is closed (4013) as the home
//! closes its own; and the members' signals to each other, coalesced inside a window and shed
//! past the relay's outbound budget. A client's frames are never reordered: whatever waits for
//! it goes before anything newer.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use super::{Client, Echo, Output, Relay, Run, Target, UpOp, Waiting};
use crate::room::flow::mark_frame;
use crate::room::outbox::pack;

/// The close code and reason of a client that confirmed too little (the home's `Backlog`).
const BACKLOG: u16 = 4013;

/// Where one frame went for each client it was for: sent now (with the marks it made due), or
/// left waiting.
#[derive(Clone, Copy)]
struct Cfg {
    window: u64,
    every: u64,
}

#[derive(Default)]
struct Fanout {
    /// The clients it went to now, by name (a frame for named clients).
    sent: Vec<String>,
    /// How many clients it went to now (a frame for every client).
    count: usize,
    /// For a frame for every client: those it did not go to now (held, not yet admitted,
    /// skipped), so that the adapter loops over its sockets once instead of looking each one
    /// up. `None` for a frame for named clients.
    left: Option<Vec<String>>,
    marks: Vec<(String, String)>,
    held: Vec<String>,
}

impl Fanout {
    /// `frame` for client `id`: at once when nothing waits for it and its window is open (the
    /// window may overshoot by this one frame, as the home's), else after what waits; a
    /// signal (`key`: its sender's session and topic) replaces a waiting one with its key.
    fn add(&mut self, id: &str, c: &mut Client, frame: &Rc<str>, key: Option<&str>, cfg: Cfg) {
        let len = frame.len() as u64;
        if c.out.is_empty() && c.flow.open(cfg.window) {
            // Sent at once: what is left of a catch-up it may belong to is smaller.
            c.out.allowance = c.out.allowance.saturating_sub(len);
            if let Some(token) = c.flow.sent(len, cfg.every) {
                self.marks.push((id.to_owned(), token));
            }
            match self.left {
                Some(_) => self.count += 1,
                None => self.sent.push(id.to_owned()),
            }
            return;
        }
        match key {
            Some(key) => {
                c.out.push_signal(key, frame.clone());
            }
            None => c.out.push(frame.clone()),
        }
        self.held.push(id.to_owned());
        self.skip(id);
    }

    /// `id` is not sent this frame now (only noted for a frame for every client).
    fn skip(&mut self, id: &str) {
        if let Some(left) = &mut self.left {
            left.push(id.to_owned());
        }
    }
}

impl Relay {
    fn cfg(&self) -> Cfg {
        Cfg { window: self.config.send_window, every: self.config.mark_every }
    }

    /// A durable or control frame for these clients (those still here), in order.
    pub(super) fn emit(&mut self, conns: Vec<String>, frame: Rc<str>) {
        let (mut fan, cfg) = (Fanout::default(), self.cfg());
        for id in &conns {
            if let Some(c) = self.clients.get_mut(id) {
                fan.add(id, c, &frame, None, cfg);
            }
        }
        self.fan(fan, frame);
    }

    /// A frame for every client the home has addressed but those in `skip` (the home's `all`),
    /// or (`signal`: its key) a signal for all of them.
    pub(super) fn emit_all(&mut self, skip: &BTreeSet<&str>, frame: Rc<str>, key: Option<&str>) {
        let cfg = self.cfg();
        let mut fan = Fanout { left: Some(Vec::new()), ..Fanout::default() };
        for (id, c) in self.clients.iter_mut() {
            if c.admitted && !skip.contains(id.as_str()) {
                fan.add(id, c, &frame, key, cfg);
            } else {
                fan.skip(id);
            }
        }
        self.fan(fan, frame);
    }

    /// Sends a [`Run`] of the home's frames: each client what the run has for it, packed (one
    /// text where the home's frames were several). The clients the run names (a `send`'s, those
    /// an `all` skips: its writers, mostly) get theirs one by one, in the run's order; every
    /// other client gets every `all`, as one frame for all of them (a `batch` of the home's is
    /// packed by its frames: [`pack`]). A run of one frame, or naming more clients than is
    /// cheap to follow, goes frame by frame, as it came.
    pub(super) fn fan_run(&mut self, Run(ops): Run) {
        const NAMED_MAX: usize = 64;
        let named: BTreeSet<String> = (ops.iter())
            .flat_map(|(t, _)| match t {
                Target::To(v) | Target::AllBut(v) => v.iter().cloned(),
            })
            .collect();
        if ops.len() < 2 || named.len() > NAMED_MAX {
            for (target, frame) in ops {
                match target {
                    Target::To(to) => self.send_to(to, frame),
                    Target::AllBut(skip) => {
                        let skip: BTreeSet<&str> = skip.iter().map(String::as_str).collect();
                        self.emit_all(&skip, frame, None);
                    }
                }
            }
            return;
        }
        let mut own: BTreeMap<&str, Vec<Rc<str>>> = BTreeMap::new();
        let (mut common, mut owed) = (Vec::new(), Vec::new());
        for (target, frame) in &ops {
            match target {
                Target::To(to) => {
                    for c in to.iter().filter(|c| self.admit(c, &mut owed)) {
                        own.entry(c.as_str()).or_default().push(frame.clone());
                    }
                }
                Target::AllBut(skip) => {
                    common.push(frame.clone());
                    let admitted = |c: &str| self.clients.get(c).is_some_and(|c| c.admitted);
                    for c in named.iter().filter(|c| !skip.contains(c) && admitted(c)) {
                        own.entry(c.as_str()).or_default().push(frame.clone());
                    }
                }
            }
        }
        let max = self.config.batch_max_bytes;
        let skip: BTreeSet<&str> = named.iter().map(String::as_str).collect();
        for frame in pack(common, max) {
            self.emit_all(&skip, frame, None);
        }
        for (c, frames) in own {
            for frame in pack(frames, max) {
                self.emit(vec![c.to_owned()], frame);
            }
        }
        for (conn, answers) in owed {
            self.pay_owed(&conn, answers);
        }
    }

    /// Sends what a [`Fanout`] says went now, then the marks it made due, then checks the
    /// clients it left waiting against the backlog bound.
    fn fan(&mut self, mut fan: Fanout, frame: Rc<str>) {
        let sent = if fan.left.is_some() { fan.count } else { fan.sent.len() };
        self.outbound.add(self.now, (sent + fan.marks.len()) as u64);
        match (sent, fan.left) {
            (0, _) => {}
            (_, Some(skip)) => self.outputs.push_back(Output::AllBut { skip, frame }),
            (1, None) => self.outputs.push_back(Output::Send { conn: fan.sent.remove(0), frame }),
            (_, None) => self.outputs.push_back(Output::Multicast { conns: fan.sent, frame }),
        }
        for (conn, token) in fan.marks {
            self.outputs.push_back(Output::Send { conn, frame: mark_frame(&token).into() });
        }
        for conn in fan.held {
            self.held(&conn);
        }
    }

    /// Frames wait for `conn`: its stall is timed from now if it was not already, and it is
    /// closed (4013) once more waits than a reader may have.
    fn held(&mut self, conn: &str) {
        let (now, max) = (self.now, self.config.max_backlog);
        let Some(c) = self.clients.get_mut(conn) else {
            return;
        };
        if c.stalled_since.is_none() {
            c.stalled_since = Some(now);
            self.stalled_from(now);
        }
        let c = self.clients.get_mut(conn).expect("looked up above");
        if c.out.over(max) {
            self.stats.backlog_closes += 1;
            self.close_client(conn, BACKLOG, "backlog");
        }
    }

    /// A catch-up of `bytes` for `conn` follows: it may wait beyond the backlog bound, which
    /// the replay limit bounds (counted against the backlog, a long catch-up would close the
    /// client on every resume).
    pub(super) fn allow(&mut self, conn: &str, bytes: u64) {
        if let Some(c) = self.clients.get_mut(conn) {
            c.out.allowance = c.out.allowance.saturating_add(bytes);
        }
    }

    /// An echo of `mark` from `conn`: true when the relay took it (it confirmed one of the
    /// relay's marks, and the frames waiting for it go; or it echoed one again, paid for at
    /// the connection's rate and dropped as the home drops one). Any other goes to the home,
    /// which refuses it (`invalid`, a mark it never sent) and counts it against the user's budget.
    pub(super) fn echo(&mut self, conn: &str, mark: &str) -> bool {
        let (now, rate, burst) = (self.now, self.config.rate_per_sec, self.config.burst);
        let Some(c) = self.clients.get_mut(conn) else {
            return true;
        };
        match c.flow.echo(mark) {
            Echo::Advanced => {
                self.stats.echoes += 1;
                self.release(conn);
                true
            }
            Echo::Spent => c.signals.take(rate, burst, 1, now) && c.flow.was_issued(mark),
        }
    }

    /// An echo opened `conn`'s window: what waited goes, packed, as far as the window allows.
    fn release(&mut self, conn: &str) {
        let (now, window, max) = (self.now, self.config.send_window, self.config.batch_max_bytes);
        let Some(c) = self.clients.get_mut(conn) else {
            return;
        };
        c.stalled_since = None;
        if c.out.is_empty() {
            return;
        }
        let frames = c.out.take_upto(c.flow.room_left(window));
        if !c.out.is_empty() {
            c.stalled_since = Some(now);
            self.stalled_from(now);
        }
        for frame in pack(frames, max) {
            let mut fan = Fanout::default();
            let c = self.clients.get_mut(conn).expect("looked up above");
            let len = frame.len() as u64;
            if let Some(token) = c.flow.sent(len, self.config.mark_every) {
                fan.marks.push((conn.to_owned(), token));
            }
            fan.sent.push(conn.to_owned());
            self.fan(fan, frame);
        }
    }

    /// Closes (4013) each client whose frames waited behind its full window past the echo
    /// deadline: a client that pings but never reads would otherwise hold them as long as its
    /// token lasts.
    pub(super) fn close_stalled(&mut self) {
        let (now, deadline) = (self.now, self.config.echo_deadline_ms);
        let stuck: Vec<String> = self
            .clients
            .iter()
            .filter(|(_, c)| c.stalled_since.is_some_and(|since| now >= since + deadline))
            .map(|(id, _)| id.clone())
            .collect();
        for conn in stuck {
            self.stats.stalled_closes += 1;
            self.close_client(&conn, BACKLOG, "backlog");
        }
    }

    /// Closes a client the relay lets go itself; the home hears it closed.
    pub(super) fn close_client(&mut self, conn: &str, code: u16, reason: &str) {
        if self.clients.remove(conn).is_some() {
            let (conn, reason) = (conn.to_owned(), reason.to_owned());
            self.outputs.push_back(Output::Close { conn: conn.clone(), code, reason });
            self.send_up(UpOp::Closed { conn });
        }
    }

    /// A signal from `from` (a client here, or none: the home sent it once for all) for the
    /// relay's other members, as the home treats one for its
    /// own sockets: shed while the relay sends more than its outbound budget; at once when
    /// no coalescing window is open (which it opens while busy, see `open_window`); else
    /// waiting for the window's end, the latest per sender and topic. However many members
    /// move their cursors, each member gets at most one frame of signals per window from the
    /// relay; one whose own window is full gets the latest of each when it has read.
    pub(super) fn signal(&mut self, from: &str, key: String, frame: Rc<str>) {
        let now = self.now;
        if self.outbound.rate(now) > self.config.outbound_budget {
            self.stats.signals_shed += 1;
            return;
        }
        let receivers = self.clients.len().saturating_sub(self.clients.contains_key(from).into());
        let receivers = receivers as u64;
        self.asked.add(now, receivers);
        // A window that has ended but not yet been flushed (its wake-up still to come) takes
        // the signal too, in the place of the one it replaces, and goes now: sent at once
        // past it, the signal would go before an older one of the same sender still waiting,
        // and a member behind on reading would have the newer replaced by the older.
        if let Some(until) = self.window_until {
            match self.waiting_at.get(&key) {
                Some(&i) => {
                    self.stats.signals_coalesced += 1;
                    let w = &mut self.signals[i];
                    w.frame = frame;
                    w.from = from.to_owned();
                }
                None => {
                    self.waiting_at.insert(key.clone(), self.signals.len());
                    self.signals.push(Waiting { from: from.to_owned(), key, frame });
                }
            }
            if until <= now {
                self.flush_signals();
            }
            return;
        }
        self.emit_all(&BTreeSet::from([from]), frame, Some(&key));
        self.open_window();
    }

    /// A signal of a member elsewhere, which the home sends once for all the relay's clients
    /// (link version 4 on): coalesced and shed as its own members' (its sender is no client
    /// here, so every admitted client may get it).
    pub(super) fn home_signal(&mut self, key: String, frame: Rc<str>) {
        self.stats.home_signals += 1;
        self.signal("", key, frame);
    }

    /// Opens the coalescing window, only while the members ask for more than `batch_above`
    /// signal frames a second (as the home's windows): below it, a signal sent at once costs
    /// less than the wait.
    fn open_window(&mut self) {
        if self.asked.rate(self.now) > self.config.batch_above {
            self.window_until = Some(self.now + self.config.batch_window_ms);
        }
    }

    /// The window ended: what waited in it goes, packed, each member getting every waiting
    /// signal but its own (a member whose window is full: each queued behind what waits for
    /// it, the latest per sender and topic); a window that released signals stays open for
    /// another round.
    pub(super) fn flush_signals(&mut self) {
        let now = self.now;
        if self.window_until.is_none_or(|until| until > now) {
            return;
        }
        self.window_until = None;
        self.waiting_at.clear();
        let waiting = std::mem::take(&mut self.signals);
        if waiting.is_empty() {
            return;
        }
        let held = self.queue_signals(&waiting);
        let senders: BTreeSet<&str> = waiting.iter().map(|w| w.from.as_str()).collect();
        let max = self.config.batch_max_bytes;
        let all: Vec<Rc<str>> = waiting.iter().map(|w| w.frame.clone()).collect();
        // A set lookup per member: with every member moving a cursor, a list of the senders
        // scanned per member would be members × senders each window.
        let others = self.admitted_but(|id| senders.contains(id) || held.contains(id));
        let mut sends = vec![(others, pack(all, max))];
        for sender in &senders {
            if held.contains(*sender) || !self.clients.get(*sender).is_some_and(|c| c.admitted) {
                continue;
            }
            let theirs: Vec<Rc<str>> =
                waiting.iter().filter(|w| w.from != *sender).map(|w| w.frame.clone()).collect();
            if !theirs.is_empty() {
                sends.push((vec![(*sender).to_owned()], pack(theirs, max)));
            }
        }
        for (to, frames) in sends {
            for frame in frames {
                self.emit(to.clone(), frame);
            }
        }
        self.open_window();
    }

    /// Queues the window's signals for each member that has frames waiting or a full window,
    /// each by its key; returns those members.
    fn queue_signals(&mut self, waiting: &[Waiting]) -> BTreeSet<String> {
        let window = self.config.send_window;
        let mut held = BTreeSet::new();
        for (id, c) in self.clients.iter_mut() {
            if !c.admitted || (c.out.is_empty() && c.flow.open(window)) {
                continue;
            }
            for w in waiting.iter().filter(|w| w.from != *id) {
                if c.out.push_signal(&w.key, w.frame.clone()) {
                    self.stats.signals_coalesced += 1;
                }
            }
            held.insert(id.clone());
        }
        for id in &held {
            self.held(id);
        }
        held
    }

    /// The relay's admitted clients but those `except` names.
    fn admitted_but(&self, except: impl Fn(&str) -> bool) -> Vec<String> {
        self.clients
            .iter()
            .filter(|(id, c)| c.admitted && !except(id.as_str()))
            .map(|(id, _)| id.clone())
            .collect()
    }
}
