//! A deterministic stand-in for the Durable Object adapter: applies outputs
//! in order to an in-memory "disk" and per-socket inboxes, on a virtual clock.
//! It checks "stored before seen" on every frame it delivers. The engine's
//! tests use it, and so can a team's tests of its own rules (feature `sim`):
//!
//! ```
//! use homeroom::room::rules::Open;
//! use homeroom::room::sim::Sim;
//! use homeroom::room::RoomConfig;
//!
//! let mut s = Sim::with_rules(RoomConfig::default(), || Box::new(Open));
//! let ann = s.connect_as("sess-ann1", "ann", "EU", None);
//! s.publish(&ann, "m1", r#"{"text":"hi"}"#);
//! let frames = s.take(&ann);
//! assert_eq!(frames[0]["type"], "welcome");
//! assert!(frames.iter().any(|f| f["type"] == "ack" && f["seq"] == 1));
//! ```

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

use std::rc::Rc;

use crate::relay::{Downlinks, Recalls};
use crate::room::rules::Rules;
use crate::room::{Hello, Input, LogEntry, LogId, Output, Peer, Room, RoomConfig, Snapshot, Time};

/// What SQLite would hold.
#[derive(Default)]
pub struct Disk {
    pub seq: u64,
    pub log: BTreeMap<u64, LogEntry>,
    pub state: BTreeMap<String, (Box<RawValue>, u64)>,
    pub blocks: BTreeMap<String, Time>,
    pub idle_since: Option<Time>,
    /// The room's storage was deleted this many times.
    pub deleted: usize,
    /// The epoch a reload gets (a deleted room starts a new log).
    pub epoch: Option<String>,
    /// The rules' timers as stored.
    pub timers: Vec<(String, Time)>,
    /// Every state write stored (`seq`, key, value), never trimmed: what the state was at
    /// any `seq`, for [`Disk::state_at`].
    pub writes: Vec<(u64, String, Box<RawValue>)>,
}

impl Disk {
    /// The room's state as of `seq`, as `state` and `resync` frames show it (`{key: {"value",
    /// "version"}}`): every write up to it, none after.
    pub fn state_at(&self, seq: u64) -> Value {
        let mut state = serde_json::Map::new();
        for (at, key, value) in self.writes.iter().filter(|(at, ..)| *at <= seq) {
            let value: Value = serde_json::from_str(value.get()).expect("stored JSON");
            state.insert(key.clone(), serde_json::json!({ "value": value, "version": at }));
        }
        Value::Object(state)
    }
}

/// One client socket as the simulated runtime sees it.
#[derive(Default)]
pub struct Socket {
    pub inbox: Vec<Value>,
    /// The close code the room sent, if it closed the socket.
    pub closed: Option<u16>,
    pub peer: Option<Peer>,
    pub open: bool,
    /// WebSocket frames received (a `batch` counts once).
    pub raw: usize,
    /// When the runtime last auto-answered a ping on this socket.
    pub pinged: Option<Time>,
    /// Bytes of text the room handed the runtime for this socket.
    pub bytes: u64,
    /// The client reads but never echoes a `mark` (a hostile or broken reader).
    pub silent: bool,
    /// Its first frame (its welcome) went: a relayed session opened in a turn is not given a
    /// broadcast the room made before it joined (see [`Sim::open_deferred`]).
    pub welcomed: bool,
    /// The link it is reached over ([`Sim::connect_via`]), if not its own socket.
    pub link: Option<String>,
}

/// A link: one connection from another object that carries many sessions
/// (see [`Hello::link`]). Its far end is simulated as handing each frame to
/// the sessions it is for, unless the link is `relayed`: then what crosses
/// it waits in [`Sim::downlinks`], as the link's operations, for a relay to
/// take ([`crate::relay::sim::Topo`]).
#[derive(Default, Debug)]
pub struct Link {
    pub open: bool,
    /// Sends that crossed it: a frame for several of its sessions once, a
    /// frame or a close for one of them once.
    pub sends: u64,
    /// A relay's link: frames are not handed to the sessions here.
    pub relayed: bool,
    /// Its relay speaks link version 1 (it names none): the room keeps its sessions' flow
    /// windows ([`crate::protocol::link::LINK_VERSION`]).
    pub v1: bool,
    /// Its relay mirrors the room's parts and state (link version 3 on): it makes its clients'
    /// welcomes and state replies, and is told the state again after each recall.
    pub mirror: bool,
    /// Its relay coalesces the signals it is sent (link version 4 on): a signal crosses once.
    pub signals: bool,
}

/// A signal's key, the links the engine listed for it, and its sender's link
/// ([`Output::Signal`]).
type Keyed<'a> = (&'a str, &'a [String], Option<&'a str>);

pub struct Sim {
    pub room: Room,
    pub config: RoomConfig,
    /// The virtual clock; starts at 1 s after the epoch.
    pub now: Time,
    pub disk: Disk,
    pub sockets: BTreeMap<String, Socket>,
    /// The links sessions came over, by name.
    pub links: BTreeMap<String, Link>,
    /// What the room sent over relayed links since the relay side last took it.
    pub downlinks: Downlinks,
    /// The relayed links asked for their sessions since the last reload, not answered yet.
    pub recalls: Recalls,
    /// The alarm the engine asked for, as the runtime keeps it.
    pub alarm: Option<Time>,
    /// Every alarm time the engine asked for, in order.
    pub alarms_set: Vec<Time>,
    /// The short in-memory timer the engine asked for.
    pub wake: Option<Time>,
    /// How many connections each `Multicast` went to, in order.
    pub multicasts: Vec<usize>,
    /// How many of the room's own sockets each `Broadcast` went to, in order.
    pub broadcasts: Vec<usize>,
    /// Catch-ups the room left to a relay's tail ([`Output::Replay`]), across reloads.
    pub tail_replays: u64,
    /// Welcomes the room left to a relay to make ([`Output::Welcome`]), across reloads.
    pub relay_welcomes: u64,
    /// State replies the room left to a relay's mirror ([`Output::State`]), across reloads.
    pub relay_states: u64,
    /// Makes the rules a reload runs (the open rules when `None`).
    pub rules: Option<Rc<dyn Fn() -> Box<dyn Rules>>>,
    next_conn: u64,
    /// Loads of the room so far (each gets its own nonce).
    loads: u64,
    /// The adapter keeps [`Room::presence_owed`] and [`Room::frames_owed`] where a reset does
    /// not reach, and gives them to the next load (true, as the adapter does; false: a test's
    /// control, as if it did not).
    pub keeps_owed: bool,
    /// The next connect is the health canary's.
    canary_next: bool,
    /// The next connect comes over this link.
    link_next: Option<String>,
}

impl Sim {
    /// A room of the open rules, as the adapter would start it.
    pub fn new(config: RoomConfig) -> Sim {
        let snap = Snapshot { room: "r1".into(), epoch: "e-1".into(), ..Default::default() };
        Sim {
            room: Room::restore(config.clone(), snap, Time::EPOCH),
            config,
            now: Time::from_ms(1_000),
            disk: Disk::default(),
            sockets: BTreeMap::new(),
            links: BTreeMap::new(),
            downlinks: Downlinks::default(),
            recalls: Recalls::default(),
            alarm: None,
            alarms_set: Vec::new(),
            wake: None,
            multicasts: Vec::new(),
            broadcasts: Vec::new(),
            tail_replays: 0,
            relay_welcomes: 0,
            relay_states: 0,
            rules: None,
            next_conn: 0,
            loads: 0,
            keeps_owed: true,
            canary_next: false,
            link_next: None,
        }
    }

    /// A room that runs the rules `make` makes (fresh ones after each
    /// [`Sim::evict`], as the adapter does).
    pub fn with_rules(config: RoomConfig, make: impl Fn() -> Box<dyn Rules> + 'static) -> Sim {
        let mut sim = Sim::new(config);
        sim.rules = Some(Rc::new(make));
        sim.evict(); // the room starts with its rules
        sim
    }

    /// Opens a socket for `session` from `region`, resuming from `since`.
    pub fn connect(&mut self, session: &str, region: &str, since: Option<(u64, &str)>) -> String {
        self.connect_as(session, session, region, since)
    }

    pub fn connect_as(
        &mut self,
        session: &str,
        user: &str,
        region: &str,
        since: Option<(u64, &str)>,
    ) -> String {
        self.connect_until(session, user, region, since, None)
    }

    /// Connects with a token that expires at `expires`.
    pub fn connect_until(
        &mut self,
        session: &str,
        user: &str,
        region: &str,
        since: Option<(u64, &str)>,
        expires: Option<Time>,
    ) -> String {
        self.open(session, user, region, (since.map(|s| s.0), since.map(|s| s.1)), expires, None)
    }

    /// Connects as `user` with the verified `info` (JSON text) a token's
    /// `info` claim gives.
    pub fn connect_with_info(
        &mut self,
        session: &str,
        user: &str,
        region: &str,
        info: &str,
    ) -> String {
        let info = RawValue::from_string(info.to_owned()).expect("info is JSON");
        self.open(session, user, region, (None, None), None, Some(info))
    }

    /// Connects `session` of `user` over `link` (opened on its first use):
    /// one of the many sessions another object carries over one connection.
    pub fn connect_via(&mut self, link: &str, session: &str, user: &str, region: &str) -> String {
        let l = self
            .links
            .entry(link.to_owned())
            .or_insert_with(|| Link { open: true, ..Default::default() });
        assert!(l.open, "connecting over the closed link {link}");
        self.link_next = Some(link.to_owned());
        self.open(session, user, region, (None, None), None, None)
    }

    /// The link drops (its object reset, or the connection broke), alive until now: its
    /// sessions' clients are cut off with it, and the room is told once (its members are away
    /// for the grace).
    pub fn close_link(&mut self, link: &str) {
        self.close_link_heard(link, self.now);
    }

    /// As [`Sim::close_link`], for a link last heard from at `heard` (a relay that hung: the
    /// home closes its link when its lease runs out).
    pub fn close_link_heard(&mut self, link: &str, heard: Time) {
        self.links.get_mut(link).expect("known link").open = false;
        self.downlinks.forget(link); // what was owed to it is lost with it
        self.recalls.forget(link); // and what it owed the room
        for s in self.sockets.values_mut().filter(|s| s.link.as_deref() == Some(link)) {
            s.open = false;
        }
        self.room.handle(self.now, Input::LinkClosed { link, heard });
        self.pump();
    }

    /// Opens a connection as the adapter was told of it (a relay's client,
    /// over `hello.link`, which must be a known link).
    pub fn open_hello(&mut self, hello: Hello) {
        self.open_deferred(hello);
        self.pump();
    }

    /// [`Sim::open_hello`] without applying the outputs: as the adapter opens a relay's
    /// clients, the turn's opens first, then the outputs of them all ([`Sim::pump`]).
    pub fn open_deferred(&mut self, hello: Hello) {
        let conn = hello.conn.clone();
        let socket = Socket { open: true, link: hello.link.clone(), ..Default::default() };
        self.sockets.insert(conn, socket);
        self.room.handle(self.now, Input::Open(hello));
    }

    /// Connects the Worker's health canary (the rules are not asked about it).
    pub fn connect_canary(&mut self, session: &str) -> String {
        self.canary_next = true;
        self.open(session, "canary", "NA", (None, None), None, None)
    }

    fn open(
        &mut self,
        session: &str,
        user: &str,
        region: &str,
        (since, epoch): (Option<u64>, Option<&str>),
        expires: Option<Time>,
        info: Option<Box<RawValue>>,
    ) -> String {
        self.next_conn += 1;
        let conn = crate::room::conn_id(self.next_conn);
        let link = self.link_next.take();
        let socket = Socket { open: true, link: link.clone(), ..Default::default() };
        self.sockets.insert(conn.clone(), socket);
        let hello = Hello {
            conn: conn.clone(),
            session: session.into(),
            user: user.into(),
            region: region.into(),
            since,
            epoch: epoch.map(str::to_owned),
            // deterministic "randomness": spread over the jitter range
            rand: self.next_conn.wrapping_mul(2_654_435_761) % 10_007,
            secret: self.next_conn.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            expires,
            info,
            canary: std::mem::take(&mut self.canary_next),
            relay_flow: link.as_ref().is_some_and(|l| !self.links.get(l).is_some_and(|l| l.v1)),
            relay_mirror: false,
            relay_signals: false,
            link,
            tail: None,
        };
        self.room.handle(self.now, Input::Open(hello));
        self.pump();
        conn
    }

    pub fn send(&mut self, conn: &str, text: &str) {
        assert!(self.sockets[conn].open, "test bug: sending on a closed socket");
        self.room.handle(self.now, Input::Text { conn, text });
        self.pump();
    }

    pub fn send_binary(&mut self, conn: &str, len: usize) {
        self.room.handle(self.now, Input::Binary { conn, len });
        self.pump();
    }

    pub fn publish(&mut self, conn: &str, id: &str, data: &str) {
        self.send(
            conn,
            &format!(r#"{{"type":"publish","id":"{id}","topic":"chat","data":{data}}}"#),
        );
    }

    /// The client side drops the socket (network loss or a close frame).
    pub fn drop_conn(&mut self, conn: &str) {
        let s = self.sockets.get_mut(conn).expect("known socket");
        if s.open {
            s.open = false;
            self.room.handle(self.now, Input::Closed { conn });
            self.pump();
        }
    }

    /// The object is evicted: memory is gone, storage and open sockets stay.
    /// A pending timer keeps an object in memory, so the end of a turn that
    /// is due runs first.
    /// Whether the runtime could hibernate the room now: no timer of the
    /// room's is pending (the end of the turn counts as over). The runtime
    /// hibernates only objects with no `setTimeout` pending, and the room
    /// keeps one while it owes its clients something that lives in memory.
    pub fn hibernatable(&mut self) -> bool {
        self.end_turn();
        self.wake.is_none()
    }

    /// The room goes idle and the runtime hibernates it; the next event
    /// rebuilds it from storage and the sockets' attachments. Idle: the
    /// room's pending timers fire first (the virtual clock moves to each),
    /// since the runtime hibernates only an object with none pending.
    /// Panics if the room keeps re-arming one (it waits for an echo).
    pub fn evict(&mut self) {
        for _ in 0..100 {
            self.settle();
            assert!(
                !self.waiting_for_echo(),
                "frames wait for a client's echo: the room keeps a timer and never hibernates"
            );
            if self.hibernatable() {
                return self.reload();
            }
            // A timer asked for work that has gone since (a closed
            // connection's hold): it fires, finds nothing, and is over.
            let at = self.wake.expect("not hibernatable: a timer is pending");
            self.run_until(at.max(self.now));
        }
        panic!("the room keeps asking for a timer with nothing to do");
    }

    /// The room is rebuilt from storage and the sockets' attachments, as
    /// after any eviction (tests of what survives one that the runtime
    /// does not hibernate use this directly).
    pub fn reload(&mut self) {
        self.end_turn();
        self.load();
    }

    /// A Wasm reset at any moment (a panic anywhere in the instance): the memory goes with
    /// whatever the turn still held, and the in-memory timer with it (its callback belongs to
    /// the old instance); the sockets, the storage, its alarm and what the adapter keeps
    /// outside the memory stay. The next load is at once here (the runtime's comes with the
    /// room's next event).
    pub fn reset(&mut self) {
        self.wake = None;
        self.load();
    }

    /// The engine rebuilt from storage, the sockets' attachments and what the adapter keeps
    /// outside the Wasm's memory.
    fn load(&mut self) {
        let recent_from = self.disk.seq.saturating_sub(self.config.replay_limit);
        let snap = Snapshot {
            room: self.room.name().into(),
            epoch: self.disk.epoch.clone().unwrap_or_else(|| self.room.epoch().into()),
            home: None,
            seq: self.disk.seq,
            state: self.disk.state.iter().map(|(k, (v, n))| (k.clone(), v.clone(), *n)).collect(),
            recent: self.disk.log.range(recent_from + 1..).map(|(_, e)| e.clone()).collect(),
            ids: self
                .disk
                .log
                .values()
                .map(|e| LogId {
                    seq: e.seq,
                    session: e.session.clone(),
                    id: e.id.clone(),
                    user: e.user.clone(),
                    bytes: e.data.get().len() as u64,
                })
                .collect(),
            // A relay's sessions are not stored: the relays give them back (below).
            peers: self
                .sockets
                .values()
                .filter(|s| s.open && !self.relayed(s))
                .filter_map(|s| s.peer.clone())
                .collect(),
            blocks: self.disk.blocks.iter().map(|(u, t)| (u.clone(), *t)).collect(),
            idle_since: self.disk.idle_since,
            timers: self.disk.timers.clone(),
            // The adapter's fresh randomness of this load (deterministic here).
            nonce: self.loads.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            // What the adapter keeps outside the Wasm's memory after each turn.
            presence_owed: self.keeps_owed && self.room.presence_owed(),
            frames_owed: self.keeps_owed && self.room.frames_owed(),
        };
        self.loads += 1;
        let rules = match &self.rules {
            Some(make) => make(),
            None => Box::new(crate::room::rules::Open),
        };
        let (id, since) = (snap.nonce, snap.seq);
        self.room = Room::restore_with(self.config.clone(), rules, snap, self.now);
        // The adapter's memory goes with the engine: what it was owed by its relays too.
        self.recalls = Recalls::default();
        let open: Vec<String> = self
            .links
            .iter()
            .filter(|(_, l)| l.open && l.relayed)
            .map(|(n, _)| n.clone())
            .collect();
        for link in open {
            // A new memory: it counts what it sends the link from its recall on, as the relay.
            self.downlinks.forget(&link);
            if !self.links[&link].v1 {
                self.downlinks.hold(&link);
            }
            self.downlinks.recall(&link, id, since);
            self.recalls.start(&link, id);
            if self.links[&link].mirror {
                let state = self.room.state_text();
                self.downlinks.mirror(&link, &state);
            }
        }
        self.pump();
    }

    /// Runs virtual time to the end of a presence window opened now: the changes it held go
    /// out (and whatever else falls due by then).
    pub fn presence_window_ends(&mut self) {
        let end = self.now.plus_ms(self.config.presence_window_ms);
        self.run_until(end);
    }

    /// Moves the virtual clock `ms` milliseconds on (nothing fires).
    pub fn advance(&mut self, ms: u64) {
        self.now = self.now.plus_ms(ms);
    }

    /// Applies every pending output, in order, as the adapter does.
    pub fn pump(&mut self) {
        while let Some(out) = self.room.poll_output() {
            match out {
                Output::Persist(c) => self.persist(*c),
                Output::Send { conn, frame } => {
                    let conns = self.relay_down(vec![conn], &frame);
                    self.cross(&conns);
                    for c in conns {
                        self.deliver(&c, &frame);
                    }
                }
                Output::Multicast { conns, frame } => {
                    self.multicasts.push(conns.len());
                    let conns = self.relay_down(conns, &frame);
                    self.cross(&conns);
                    for c in conns {
                        self.deliver(&c, &frame);
                    }
                }
                Output::Broadcast { frame, skip } => self.broadcast(&frame, &skip, None),
                Output::Signal { frame, key, skip, links, origin } => {
                    self.broadcast(&frame, &skip, Some((&key, &links, origin.as_deref())))
                }
                Output::Close { conn, code } => self.close(conn, code),
                tail @ (Output::Replay { .. }
                | Output::Entries { .. }
                | Output::CatchUp { .. }
                | Output::Welcome(_)
                | Output::State { .. }) => self.tail_work(tail),
                Output::SetWake(at) => self.wake = Some(self.wake.map_or(at, |w| w.min(at))),
                Output::SetAlarm(at) => {
                    self.alarm = Some(at);
                    self.alarms_set.push(at);
                }
                Output::Remember(peer) => {
                    let conn = peer.conn.clone();
                    let s = self.sockets.get(&conn).expect("known socket");
                    if self.relayed(s) {
                        // Its relay keeps the record, as the adapter sends it.
                        let link = s.link.clone().expect("a relayed socket has a link");
                        let text = serde_json::to_string(&peer).expect("a peer serializes");
                        self.downlinks.peer(&link, &conn, text);
                    }
                    self.sockets.get_mut(&conn).expect("known socket").peer = Some(peer);
                }
                Output::Block { user, until } => match until {
                    Some(t) => {
                        self.disk.blocks.insert(user, t);
                    }
                    None => {
                        self.disk.blocks.remove(&user);
                    }
                },
                Output::Idle(at) => self.disk.idle_since = Some(at),
                Output::Timers(all) => self.disk.timers = all,
                Output::Delete => {
                    let deleted = self.disk.deleted + 1;
                    let epoch = Some(format!("e-deleted-{deleted}"));
                    self.disk = Disk { deleted, epoch, ..Disk::default() };
                    self.alarm = None;
                }
            }
        }
    }

    /// The engine's broadcast (or signal, with its key and the links that take it once), as
    /// the adapter applies it: over each link, then to the sockets here.
    fn broadcast(&mut self, frame: &str, skip: &[String], signal: Option<Keyed>) {
        self.relay_all(skip, frame, signal);
        let to: Vec<String> = self
            .sockets
            .iter()
            // Only admitted sockets (their record written), as the adapter's set.
            .filter(|(c, s)| s.open && s.peer.is_some() && !skip.contains(c))
            .filter(|(_, s)| !self.relayed(s))
            .map(|(c, _)| c.clone())
            .collect();
        self.broadcasts.push(to.len());
        self.cross(&to);
        for c in to {
            self.deliver(&c, frame);
        }
    }

    /// A commit reaches the disk, in order.
    fn persist(&mut self, c: crate::room::Commit) {
        assert_eq!(c.entry.seq, self.disk.seq + 1, "commits are gapless");
        self.disk.seq = c.entry.seq;
        if let Some(w) = &c.state {
            self.disk.state.insert(w.key.clone(), (w.value.clone(), c.entry.seq));
            self.disk.writes.push((c.entry.seq, w.key.clone(), w.value.clone()));
            // As the adapter does: the relays that mirror the state hear of the write.
            self.downlinks.state_write(&w.key, w.value.get(), c.entry.seq);
        }
        self.disk.log.insert(c.entry.seq, c.entry);
        if let Some(t) = c.trim_through {
            self.disk.log = self.disk.log.split_off(&(t + 1));
        }
    }

    /// What the room asks of a relay's tail ([`Output::Replay`], [`Output::Entries`]), its
    /// flow window ([`Output::CatchUp`]) or its welcomes ([`Output::Welcome`]) goes over the
    /// session's link.
    fn tail_work(&mut self, out: Output) {
        let conn = out.link_conn().expect("only a relay's outputs come here");
        let s = self.sockets.get(conn).expect("known socket");
        if matches!(out, Output::CatchUp { .. }) && !self.relayed(s) {
            return; // the sessions of this sim's own links read their frames here
        }
        assert!(self.relayed(s), "a tail's work is for a relayed session");
        let link = s.link.clone().expect("a relayed socket has a link");
        match out {
            Output::Replay { conn, after, upto } => {
                self.tail_replays += 1;
                self.downlinks.replay(&link, &conn, after, upto);
            }
            Output::Entries { frame, .. } => self.downlinks.entries(&link, &frame),
            Output::CatchUp { conn, bytes } => self.downlinks.catch_up(&link, &conn, bytes),
            Output::Welcome(part) => {
                self.relay_welcomes += 1;
                if let Some(s) = self.sockets.get_mut(&part.conn) {
                    s.welcomed = true;
                }
                self.downlinks.welcome(&link, *part);
            }
            Output::State { conn, seq, reason } => {
                self.relay_states += 1;
                self.downlinks.state(&link, &conn, seq, reason);
            }
            _ => {}
        }
    }

    /// The room closes `conn`: over its relay's link, or here.
    fn close(&mut self, conn: String, code: crate::room::CloseCode) {
        let s = self.sockets.get(&conn).expect("known socket");
        if self.relayed(s) {
            let link = s.link.clone().expect("a relayed socket has a link");
            self.downlinks.close(&link, &conn, &code);
        } else {
            self.cross(std::slice::from_ref(&conn));
        }
        let s = self.sockets.get_mut(&conn).expect("known socket");
        assert!(s.open, "closing {conn} twice");
        s.open = false;
        s.closed = Some(code.code());
    }

    fn relayed(&self, s: &Socket) -> bool {
        s.link.as_ref().is_some_and(|l| self.links.get(l).is_some_and(|l| l.relayed))
    }

    /// Queues `frame` for the relayed links among `conns`' (one operation per
    /// link); returns the connections the simulator delivers to itself.
    fn relay_down(&mut self, conns: Vec<String>, frame: &str) -> Vec<String> {
        let mut links = std::collections::BTreeSet::new();
        let mut welcomed = Vec::new();
        let routed: Vec<(String, Option<String>)> = conns
            .into_iter()
            .map(|c| match self.sockets.get(&c) {
                Some(s) if self.relayed(s) => {
                    assert!(s.open, "frame sent to closed socket {c}: {frame}");
                    let link = s.link.clone().expect("relayed");
                    welcomed.push(c.clone());
                    links.insert(link.clone());
                    (c, Some(link))
                }
                _ => (c, None),
            })
            .collect();
        for c in welcomed {
            self.sockets.get_mut(&c).expect("listed above").welcomed = true;
        }
        let to = routed.iter().map(|(c, l)| (c.as_str(), l.as_deref()));
        let rest = self.downlinks.send(to, frame).into_iter().map(str::to_owned).collect();
        for link in links {
            let l = self.links.get_mut(&link).expect("known link");
            assert!(l.open, "a send over the closed link {link}");
            l.sends += 1;
        }
        rest
    }

    /// A frame for everyone but `skip`: once over each relayed link that has
    /// a session it is for, with the link's sessions in `skip`; a signal (its key and the links
    /// listed) once to each listed link whose relay coalesces signals, and to such a link not
    /// listed not at all.
    fn relay_all(&mut self, skip: &[String], frame: &str, signal: Option<Keyed>) {
        // Per link, the sessions it is for and those skipped, of the ones the room knows (a
        // link that owes its sessions has others: they catch up when they come back).
        let mut per_link: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
        for (c, s) in &self.sockets {
            if s.open && self.relayed(s) && self.room.knows(c) {
                let e = per_link.entry(s.link.clone().expect("relayed")).or_default();
                if skip.contains(c) {
                    e.1.push(c.clone());
                } else {
                    e.0.push(c.clone());
                }
            }
        }
        for (link, (to, skip)) in per_link {
            let keyed = signal.filter(|_| self.links[&link].signals);
            if keyed.is_some_and(|(_, _, origin)| origin == Some(link.as_str())) {
                continue; // the sender's own relay delivered it
            }
            // Not listed: its sessions, one by one, are the engine's (as the adapter does).
            let keyed = keyed.filter(|(_, listed, _)| listed.contains(&link));
            assert!(keyed.is_none() || skip.is_empty(), "a keyed link's session skipped: {skip:?}");
            if to.is_empty() {
                continue;
            }
            let l = self.links.get_mut(&link).expect("known link");
            assert!(l.open, "a send over the closed link {link}");
            l.sends += 1;
            if let (Some((key, _, _)), false) = (keyed, self.recalls.owes(&link)) {
                self.downlinks.signal(&link, key, frame);
            } else if self.recalls.owes(&link) {
                // One by one, as the adapter sends them: not to a session opened in this turn
                // whose welcome has not gone yet (the broadcast came before it joined).
                let to = to.iter().filter(|c| self.sockets[c.as_str()].welcomed);
                let to: Vec<&String> = to.collect();
                if to.is_empty() {
                    continue;
                }
                self.downlinks.send(to.iter().map(|c| (c.as_str(), Some(link.as_str()))), frame);
            } else {
                self.downlinks.all(&link, skip, frame);
            }
        }
    }

    /// One send over each link that carries any of `conns`.
    fn cross(&mut self, conns: &[String]) {
        let links: std::collections::BTreeSet<String> =
            conns.iter().filter_map(|c| self.sockets.get(c)?.link.clone()).collect();
        for link in links {
            let l = self.links.get_mut(&link).expect("known link");
            assert!(l.open, "a send over the closed link {link}");
            l.sends += 1;
        }
    }

    fn deliver(&mut self, conn: &str, frame: &str) {
        let frames = unpack(frame);
        let s = self.sockets.get_mut(conn).expect("known socket");
        assert!(s.open, "frame sent to closed socket {conn}: {frame}");
        s.raw += 1;
        s.bytes += frame.len() as u64;
        for v in frames {
            if matches!(v["type"].as_str(), Some("ack" | "message")) {
                let seq = v["seq"].as_u64().expect("seq");
                assert!(seq <= self.disk.seq, "frame for seq {seq} left before it was stored");
            }
            s.inbox.push(v);
        }
    }

    /// Takes the frames a socket received so far. A client reads after the
    /// runtime ran out of inputs, so a turn's end that is due has run (read
    /// `sockets[conn].inbox` to see a turn before it ends).
    /// A client echoes every `mark` it reads (unless it is `silent`); marks
    /// are not returned.
    pub fn take(&mut self, conn: &str) -> Vec<Value> {
        self.end_turn();
        let s = self.sockets.get_mut(conn).expect("known socket");
        let (echoes, frames) = read(&mut s.inbox, s.open && !s.silent);
        for echo in echoes {
            self.send(conn, &echo);
        }
        frames
    }

    /// Takes the frames of one type.
    pub fn take_type(&mut self, conn: &str, kind: &str) -> Vec<Value> {
        self.take(conn).into_iter().filter(|f| f["type"] == kind).collect()
    }
}

/// The frames a WebSocket message carries: a `batch`'s, or itself.
pub fn unpack(frame: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(frame).expect("server frames are JSON");
    match v["type"].as_str() {
        Some("batch") => {
            let frames = v["frames"].as_array().expect("batch frames").clone();
            // The protocol's batch is one level: a client reads no deeper.
            assert!(frames.iter().all(|f| f["type"] != "batch"), "a batch inside a batch: {frame}");
            frames
        }
        _ => vec![v],
    }
}

/// A client reads its `inbox`: the frames but the marks, and the echoes of
/// the marks it sends back (none if it does not `echo`).
pub fn read(inbox: &mut Vec<Value>, echo: bool) -> (Vec<String>, Vec<Value>) {
    let (marks, frames): (Vec<Value>, Vec<Value>) =
        std::mem::take(inbox).into_iter().partition(|f| f["type"] == "mark");
    let echoes = if echo {
        marks.iter().map(|m| format!(r#"{{"type":"mark","mark":{}}}"#, m["mark"])).collect()
    } else {
        Vec::new()
    };
    (echoes, frames)
}

/// The `seq` of each `message` frame in `frames`.
pub fn seqs(frames: &[Value]) -> Vec<u64> {
    frames.iter().filter(|f| f["type"] == "message").map(|f| f["seq"].as_u64().unwrap()).collect()
}

impl Sim {
    /// The runtime reports a close for `conn` whatever the engine thinks of
    /// it (e.g. the late close event of a socket the room superseded).
    pub fn runtime_close(&mut self, conn: &str) {
        // What the room made before it heard of the close goes first (a relay's turn may hold
        // a client's frames and then its close).
        self.pump();
        if let Some(s) = self.sockets.get_mut(conn) {
            s.open = false;
        }
        self.room.handle(self.now, Input::Closed { conn });
        self.pump();
    }
}

impl Sim {
    /// The client pings and the runtime answers without waking the room.
    pub fn ping_runtime(&mut self, conn: &str) {
        let now = self.now;
        self.sockets.get_mut(conn).expect("known socket").pinged = Some(now);
    }

    /// Runs virtual time forward to `until`, firing the alarm on the way as
    /// the adapter does ([`Sim::fire_alarm`]).
    pub fn run_until(&mut self, until: Time) {
        // Time must move: an alarm the room asks for again and again at a moment already past
        // is a stuck room (the runtime would fire it as fast as it can).
        let (mut last, mut same) = (self.now, 0u32);
        loop {
            let alarm = self.alarm.filter(|at| *at <= until);
            let wake = self.wake.filter(|at| *at <= until);
            match (alarm, wake) {
                (Some(a), w) if w.is_none_or(|w| a <= w) => {
                    self.now = self.now.max(a);
                    self.alarm = None;
                    self.fire_alarm();
                    if self.now == last {
                        same += 1;
                        let at = last.ms();
                        assert!(same < 10_000, "stuck at {at}: the alarm keeps firing, time still");
                    } else {
                        (last, same) = (self.now, 0);
                    }
                }
                (_, Some(w)) => {
                    self.now = self.now.max(w);
                    self.wake = None;
                    self.room.handle(self.now, Input::Wake);
                    self.pump();
                }
                _ => break,
            }
        }
        self.now = self.now.max(until);
    }

    /// Fires the flush timer if the engine asked for it by now (the end of
    /// the turn), and nothing else.
    pub fn end_turn(&mut self) {
        while self.wake.is_some_and(|at| at <= self.now) {
            self.wake = None;
            self.room.handle(self.now, Input::Wake);
            self.pump();
        }
    }

    /// Lets every pending flush fire (turn ends, windows, replay holds, due
    /// summaries), as a room with no more inputs would; alarms due on the
    /// way fire too. A keep-alive (frames wait for a client's echo) is left
    /// pending: only the client can end it.
    pub fn settle(&mut self) {
        // Work may re-arm (a room shedding load looks again each summary
        // interval), but time must move: a room that asks for the timer
        // again and again at the same time is stuck.
        let (mut last, mut same) = (self.now, 0);
        for _ in 0..1_000_000 {
            let Some(at) = self.room.flush_work().map(Time::from_ms) else {
                return;
            };
            self.run_until(at.max(self.now));
            if self.now == last {
                same += 1;
                assert!(same < 1_000, "the flush timer keeps re-arming with nothing to send");
            } else {
                (last, same) = (self.now, 0);
            }
        }
        panic!("the flush timer kept work for a million rounds");
    }

    /// Whether frames wait in the room for a client's echo of a mark.
    pub fn waiting_for_echo(&self) -> bool {
        self.room.waiting_for_echo()
    }

    /// Fires the alarm now, whatever it was set to (an early alarm).
    /// As the adapter does, the heartbeats only when the alarm looks for silent members
    /// ([`Room::sweep_due`](super::Room::sweep_due)).
    pub fn fire_alarm(&mut self) {
        let beats: Vec<(String, Time)> = self
            .sockets
            .iter()
            .filter(|(_, s)| s.open && self.room.sweep_due(self.now))
            .filter_map(|(c, s)| s.pinged.map(|at| (c.clone(), at)))
            .collect();
        for (conn, at) in &beats {
            self.room.handle(self.now, Input::Heartbeat { conn, at: *at });
        }
        self.room.handle(self.now, Input::Alarm);
        self.pump();
    }
}

impl Sim {
    /// Opens a socket with `since` and `epoch` given apart (a client may
    /// send `since` without `epoch`, or an epoch the room never had) and a
    /// token expiry: what the fuzzer's clients do.
    pub fn connect_hello(
        &mut self,
        session: &str,
        user: &str,
        region: &str,
        since: Option<u64>,
        epoch: Option<&str>,
        expires: Option<Time>,
    ) -> String {
        self.open(session, user, region, (since, epoch), expires, None)
    }
}
