//! A deterministic topology: the room's home (a [`Sim`](crate::room::sim::Sim)) and its relays, each
//! link one ordered connection with a one-way delay, on one virtual clock.
//! Clients connect to a relay by its name, or to the home itself ([`HOME`]: a mixed room);
//! what the relays say to the home and
//! the home to them crosses the wire as text, as the adapters would send it.
//! Links and relays can drop and reset; a relay can be split in two
//! instances (the stale-instance case), or hang with its link open, which the
//! home's lease ends ([`LEASE_MS`]) as its adapter does. Every frame a client gets is checked
//! against the home's disk ("stored before seen").
//!
//! ```
//! use homeroom::relay::sim::Topo;
//! use homeroom::room::RoomConfig;
//!
//! let mut t = Topo::new(RoomConfig::default(), 40);
//! let ann = t.connect("oc-0", "sess-ann1", "ann", "OC", None);
//! let bob = t.connect("eu-0", "sess-bob1", "bob", "EU", None);
//! t.settle();
//! t.publish(&ann, "m1", r#"{"text":"hi"}"#);
//! t.settle();
//! let got = t.take(&bob);
//! assert!(got.iter().any(|f| f["type"] == "message" && f["seq"] == 1));
//! ```

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Admit, Downlinks, Input, Output, Relay, Relays};
use crate::protocol::link::{Up, UpOp, LEASE_MS, LINK_VERSION};
use crate::room::sim::{Link, Sim};
use crate::room::{Hello, RoomConfig, Time};

/// The place of the home's own sockets: [`Topo::connect`] to `HOME` opens a socket at the home
/// itself, beside its relays' sessions, as a room that crossed the relay threshold keeps the
/// sockets it held (a mixed room). Its frames are checked as a relay's client's are.
pub const HOME: &str = "home";

/// One instance of a relay.
pub struct Node {
    pub relay: Relay,
    pub wake: Option<Time>,
    pub alarm: Option<Time>,
}

/// A client of a relay, as its browser sees it.
#[derive(Default)]
pub struct Client {
    /// The instance it is connected to (`name#epoch`).
    pub instance: String,
    pub session: String,
    pub user: String,
    pub region: String,
    pub inbox: Vec<Value>,
    /// Texts it was sent (a `batch` counts once): what its socket cost; and their bytes.
    pub texts: u64,
    pub bytes: u64,
    pub open: bool,
    /// The close code it got (1006 when its relay died under it).
    pub closed: Option<u16>,
    /// When its socket closed or broke.
    pub closed_at: Option<Time>,
    /// Reads but never echoes a `mark`.
    pub silent: bool,
    /// The highest `seq` it applied, and the epoch it counts in (from its
    /// welcome, acks, messages, resyncs): what it resumes from.
    pub seq: u64,
    pub epoch: Option<String>,
    /// The welcomes it was sent, as text (whichever object made them; at the home itself, as
    /// parsed and written again, not byte for byte).
    pub welcomes: Vec<String>,
}

impl Client {
    /// What a frame tells the client of where it is: the `seq` it applied and the epoch it
    /// counts in.
    fn applies(&mut self, v: &Value) {
        match v["type"].as_str() {
            Some("message") => self.seq = self.seq.max(v["seq"].as_u64().expect("seq")),
            Some("welcome") => {
                self.epoch = v["epoch"].as_str().map(str::to_owned);
                if v["resumed"] != true {
                    // No replay follows: the client is at the room's seq.
                    self.seq = v["seq"].as_u64().unwrap_or(0);
                }
            }
            Some("resync") => self.seq = v["seq"].as_u64().unwrap_or(self.seq),
            _ => {}
        }
    }
}

/// Where a message on the wire goes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum To {
    /// The home, from a relay instance.
    Home { from: String },
    /// A relay instance, from the home.
    Relay(String),
}

pub struct Topo {
    pub home: Sim,
    /// Relay instances by `name#epoch`.
    pub nodes: BTreeMap<String, Node>,
    /// Each relay's current instance (its epoch), as its storage holds it.
    pub epochs: BTreeMap<String, u64>,
    /// The clients, by connection id.
    pub clients: BTreeMap<String, Client>,
    /// The home's record of its relays' instances (as the adapter stores it).
    pub registry: Relays,
    /// One-way delay of every link, in ms.
    pub delay_ms: u64,
    /// More delay on the link of one instance (`name#epoch`), both ways.
    pub extra_delay: BTreeMap<String, u64>,
    pub now: Time,
    /// In flight: (arrival, order) -> (destination, text).
    wire: BTreeMap<(Time, u64), (To, String)>,
    order: u64,
    next_conn: u64,
    /// Messages the home sent over links (one per link per turn at most), and their bytes.
    pub home_link_messages: u64,
    pub home_link_bytes: u64,
    /// Whole welcome frames among them (a relay of link version 3 makes its clients' own).
    pub home_link_welcomes: u64,
    /// Whole `state` and `resync` frames among them (a relay of link version 3 makes them from
    /// its mirror of the state).
    pub home_link_states: u64,
    /// Messages the relays sent the home, and the clients' mark echoes they carried (a relay
    /// takes its clients' echoes itself: none should cross).
    pub up_messages: u64,
    pub up_echoes: u64,
    /// Bytes of the messages the relays sent the home.
    pub up_bytes: u64,
    /// Messages the home refused from a stale relay instance.
    pub stale_refused: u64,
    /// Answers the home had from relays it asked for their sessions (after an eviction).
    pub recalled: u64,
    /// Frames of sessions the home did not know yet that waited for their relay's answer.
    pub parked: u64,
    /// Opens the home held until every link had answered its recall.
    pub held: u64,
    /// Instances that hung with their link open (`name#epoch`), since when: they forward
    /// nothing and ping nothing, and the home's lease closes their link.
    pub hung: BTreeMap<String, Time>,
    /// Messages of hung instances that went nowhere.
    pub hung_dropped: u64,
    /// Clients a relay closed because its tail no longer held the catch-up the home left to it.
    pub tail_lost: u64,
    /// Links the home closed because their relays fell more than the link's window behind.
    pub behind_closed: u64,
    /// The link version the home serves its relays in ([`LINK_VERSION`]; an earlier one for a
    /// home of an earlier deployment).
    pub link_version: u32,
}

impl Topo {
    /// A home of the open rules and no relays yet; links delay `delay_ms` one way.
    pub fn new(config: RoomConfig, delay_ms: u64) -> Topo {
        let home = Sim::new(config);
        let now = home.now;
        Topo {
            home,
            nodes: BTreeMap::new(),
            epochs: BTreeMap::new(),
            clients: BTreeMap::new(),
            registry: Relays::default(),
            delay_ms,
            extra_delay: BTreeMap::new(),
            now,
            wire: BTreeMap::new(),
            order: 0,
            next_conn: 0,
            home_link_messages: 0,
            home_link_bytes: 0,
            home_link_welcomes: 0,
            home_link_states: 0,
            up_messages: 0,
            up_bytes: 0,
            up_echoes: 0,
            stale_refused: 0,
            recalled: 0,
            parked: 0,
            held: 0,
            hung: BTreeMap::new(),
            hung_dropped: 0,
            tail_lost: 0,
            behind_closed: 0,
            link_version: LINK_VERSION,
        }
    }

    /// The current instance of relay `name`, started if it has none.
    fn instance(&mut self, name: &str) -> String {
        let epoch = *self.epochs.entry(name.to_owned()).or_insert(1);
        let key = Relays::link(name, epoch);
        if !self.nodes.contains_key(&key) {
            let relay = Relay::new(name, epoch, self.home.config.clone());
            self.nodes.insert(key.clone(), Node { relay, wake: None, alarm: None });
        }
        key
    }

    /// Connects a client to relay `name` (its current instance), resuming
    /// from `since` (`seq`, epoch) when given.
    pub fn connect(
        &mut self,
        relay: &str,
        session: &str,
        user: &str,
        region: &str,
        since: Option<(u64, &str)>,
    ) -> String {
        if relay == HOME {
            return self.connect_home(session, user, region, since);
        }
        let instance = self.instance(relay);
        self.next_conn += 1;
        let conn = format!("{relay}.c{}", self.next_conn);
        let n = self.next_conn;
        self.clients.insert(
            conn.clone(),
            Client {
                instance: instance.clone(),
                session: session.into(),
                user: user.into(),
                region: region.into(),
                open: true,
                seq: since.map_or(0, |s| s.0),
                epoch: since.map(|s| s.1.to_owned()),
                ..Default::default()
            },
        );
        let hello = Hello {
            conn: conn.clone(),
            session: session.into(),
            user: user.into(),
            region: region.into(),
            since: since.map(|s| s.0),
            epoch: since.map(|s| s.1.to_owned()),
            rand: n.wrapping_mul(2_654_435_761) % 10_007,
            secret: n.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            expires: None,
            info: None,
            canary: false,
            link: None,
            tail: None,
            relay_flow: false,
            relay_mirror: false,
            relay_signals: false,
        };
        self.relay_input(&instance, Input::Open(hello));
        conn
    }

    /// A socket at the home itself ([`HOME`]). While a rebuilt home waits for its links to
    /// give their sessions back, its adapter decides no member: a connect there is closed
    /// 1012 `room_recalling` at once (or sent to a relay), and the client tries again.
    fn connect_home(
        &mut self,
        session: &str,
        user: &str,
        region: &str,
        since: Option<(u64, &str)>,
    ) -> String {
        self.home.now = self.now;
        let recalling = self.home.recalls.recalling();
        let conn = match recalling {
            true => {
                self.next_conn += 1;
                format!("{HOME}.c{}", self.next_conn)
            }
            false => self.home.connect_as(session, user, region, since),
        };
        let client = Client {
            instance: HOME.into(),
            session: session.into(),
            user: user.into(),
            region: region.into(),
            open: !recalling,
            closed: recalling.then_some(super::RESTART),
            closed_at: recalling.then_some(self.now),
            seq: since.map_or(0, |s| s.0),
            epoch: since.map(|s| s.1.to_owned()),
            ..Default::default()
        };
        self.clients.insert(conn.clone(), client);
        if !recalling {
            self.flush_home();
        }
        conn
    }

    /// The client reconnects to relay `name` as the same session, resuming
    /// from what it applied: what our client does after any close.
    pub fn resume(&mut self, conn: &str, relay: &str) -> String {
        let region = self.clients[conn].region.clone();
        self.resume_in(conn, relay, &region)
    }

    /// The client reconnects as the same session from another `region`
    /// (its user moved), to relay `name`, resuming from what it applied.
    pub fn resume_in(&mut self, conn: &str, relay: &str, region: &str) -> String {
        let c = &self.clients[conn];
        let (session, user) = (c.session.clone(), c.user.clone());
        let since = c.epoch.clone().map(|e| (c.seq, e));
        self.connect(relay, &session, &user, region, since.as_ref().map(|(s, e)| (*s, e.as_str())))
    }

    /// A client sends a text frame.
    pub fn send(&mut self, conn: &str, text: &str) {
        let c = &self.clients[conn];
        assert!(c.open, "test bug: sending on a closed socket");
        let instance = c.instance.clone();
        if instance == HOME {
            self.home.now = self.now;
            self.home.send(conn, text);
            return self.flush_home();
        }
        self.relay_input(&instance, Input::Text { conn, text });
    }

    /// A client sends a binary frame of `len` bytes.
    pub fn send_binary(&mut self, conn: &str, len: usize) {
        let c = &self.clients[conn];
        assert!(c.open, "test bug: sending on a closed socket");
        let instance = c.instance.clone();
        if instance == HOME {
            self.home.now = self.now;
            self.home.send_binary(conn, len);
            return self.flush_home();
        }
        self.relay_input(&instance, Input::Binary { conn, len });
    }

    /// A client publishes `data` (JSON text) as `id` on the topic `chat`.
    pub fn publish(&mut self, conn: &str, id: &str, data: &str) {
        self.send(
            conn,
            &format!(r#"{{"type":"publish","id":"{id}","topic":"chat","data":{data}}}"#),
        );
    }

    /// A client signals `data` (JSON text) on the topic `cursor`.
    pub fn signal(&mut self, conn: &str, data: &str) {
        self.send(conn, &format!(r#"{{"type":"signal","topic":"cursor","data":{data}}}"#));
    }

    /// The client drops its socket.
    pub fn drop_client(&mut self, conn: &str) {
        let c = self.clients.get_mut(conn).expect("known client");
        if c.open {
            c.open = false;
            c.closed_at = Some(self.now);
            let instance = c.instance.clone();
            if instance == HOME {
                self.home.now = self.now;
                self.home.drop_conn(conn);
                return self.flush_home();
            }
            self.relay_input(&instance, Input::Closed { conn });
        }
    }

    /// Relay `name`'s current instance dies (a reset): its clients' sockets
    /// break (1006), its link closes, and what was on the wire to or from it
    /// is lost. Its next client starts a newer instance.
    pub fn reset_relay(&mut self, name: &str) {
        let key = self.instance(name);
        self.nodes.remove(&key);
        *self.epochs.get_mut(name).expect("known relay") += 1;
        for c in self.clients.values_mut().filter(|c| c.instance == key && c.open) {
            c.open = false;
            c.closed = Some(1006);
            c.closed_at = Some(self.now);
        }
        self.lose_wire(&key);
        self.home_link_closed(&key);
    }

    /// Relay `name`'s current instance hangs with its link open (as a test build's `mute`
    /// does): it still takes its clients' frames and the home's, but nothing it would send the
    /// home leaves, and it stops pinging, so the home's lease closes the link [`LEASE_MS`]
    /// after its last sign of life; the relay then closes its clients (1012).
    pub fn hang_relay(&mut self, name: &str) {
        let key = self.instance(name);
        if self.nodes.contains_key(&key) {
            self.hung.entry(key).or_insert(self.now);
        }
    }

    /// The lease of a hung instance ran out: the home closes its link, and the relay hears it.
    fn lease_expired(&mut self, instance: &str) {
        let hung_at = self.hung.remove(instance).unwrap_or(self.now);
        self.home_closes(instance, hung_at);
    }

    /// The home closes the link of `instance`, last heard from at `heard`, and the relay hears
    /// it: its next instance dials, or a newer one owns the relay already.
    fn home_closes(&mut self, instance: &str, hung_at: Time) {
        let (name, epoch) = instance.rsplit_once('#').expect("name#epoch");
        let current = self.epochs.get(name).is_some_and(|e| e.to_string() == epoch);
        if !self.nodes.contains_key(instance) {
            return; // it went another way first
        }
        // The link socket is the home's from the dial, heard from or not.
        self.home_link_closed_heard(instance, hung_at);
        if current {
            let name = name.to_owned();
            self.relink(&name);
        } else {
            self.instance_replaced(instance); // a newer instance owns the relay
        }
    }

    /// The link of relay `name`'s current instance breaks, both ends
    /// alive: what was on it is lost; the home and the relay each hear.
    pub fn drop_link(&mut self, name: &str) {
        let key = self.instance(name);
        self.lose_wire(&key);
        self.home_link_closed(&key);
        self.relink(name);
    }

    /// Relay `name`'s instance heard its link close: its adapter takes the
    /// next epoch for its next link.
    fn relink(&mut self, name: &str) {
        let key = self.instance(name);
        let next = self.epochs[name] + 1;
        self.epochs.insert(name.to_owned(), next);
        let node = self.nodes.remove(&key).expect("a live instance");
        let new_key = Relays::link(name, next);
        for c in self.clients.values_mut().filter(|c| c.instance == key) {
            c.instance = new_key.clone();
        }
        self.nodes.insert(new_key.clone(), node);
        self.relay_input(&new_key, Input::LinkClosed { epoch: next });
    }

    /// The home's object resets (its Wasm instance, say): its memory and
    /// every socket it held go, its relays' links with them, and all that
    /// was on the wire. It comes back from storage; each relay hears its
    /// link close. (The turn under way finishes first: what it sends was
    /// stored, and is lost with the wire.)
    pub fn reset_home(&mut self) {
        self.home.now = self.now;
        self.home.end_turn();
        for l in self.home.links.values_mut() {
            l.open = false;
        }
        self.home.downlinks = Downlinks::default();
        for s in self.home.sockets.values_mut() {
            s.open = false;
        }
        self.wire.clear();
        self.home.reload();
        let instances: Vec<String> = self.nodes.keys().cloned().collect();
        for key in instances {
            let (name, epoch) = key.rsplit_once('#').expect("name#epoch");
            let current = self.epochs.get(name).is_some_and(|e| e.to_string() == epoch);
            if current {
                let name = name.to_owned();
                self.relink(&name);
            } else {
                self.instance_replaced(&key);
            }
        }
        self.sync_home_sockets();
    }

    /// What the operator (or anything outside the sockets) does to the home
    /// now, its outputs applied and sent.
    pub fn operator<R>(&mut self, f: impl FnOnce(&mut Sim) -> R) -> R {
        self.home.now = self.now;
        let r = f(&mut self.home);
        self.home.pump();
        self.flush_home();
        r
    }

    /// A second instance of relay `name` starts (the runtime ran two for a
    /// moment) and the clients that connect from now on reach it; the old
    /// one keeps its clients and its link, not knowing it is stale.
    pub fn split_relay(&mut self, name: &str) -> String {
        self.instance(name);
        *self.epochs.get_mut(name).expect("known relay") += 1;
        self.instance(name)
    }

    /// The home is evicted (hibernation), if the runtime could hibernate it
    /// now (no timer of its pending, no frame waiting for an echo): memory
    /// gone, its sockets and its relays' links stay. Whether it was.
    pub fn evict_home(&mut self) -> bool {
        self.home.now = self.now;
        // The adapter keeps a timer while frames wait for a relay's answer.
        let holding = self.home.recalls.holding_since().is_some();
        let can = !holding && !self.home.waiting_for_echo() && self.home.hibernatable();
        // What a turn's end made on the way (`hibernatable` lets it end) is sent before the
        // memory goes, as the adapter sends it the moment the turn's timer fires.
        self.flush_home();
        if can {
            self.home.reload();
        }
        self.flush_home();
        can
    }

    /// The home closed the link of `instance`, an older instance than the
    /// relay's current one: it hears the close, cannot take a next epoch
    /// (the newer instance owns the relay's storage), and resets; its
    /// clients' sockets break.
    fn instance_replaced(&mut self, instance: &str) {
        if self.nodes.remove(instance).is_none() {
            return;
        }
        for c in self.clients.values_mut().filter(|c| c.instance == instance && c.open) {
            c.open = false;
            c.closed = Some(1006);
            c.closed_at = Some(self.now);
        }
        self.lose_wire(instance);
    }

    fn lose_wire(&mut self, instance: &str) {
        self.wire.retain(|_, (to, _)| match to {
            To::Home { from } => from != instance,
            To::Relay(to) => to != instance,
        });
    }

    /// The home hears `instance`'s link close: last heard from now, or when it hung.
    fn home_link_closed(&mut self, instance: &str) {
        let heard = self.hung.get(instance).copied().unwrap_or(self.now);
        self.home_link_closed_heard(instance, heard);
    }

    fn home_link_closed_heard(&mut self, instance: &str, heard: Time) {
        if self.home.links.get(instance).is_some_and(|l| l.open) {
            self.home.now = self.now;
            self.home.close_link_heard(instance, heard);
            // It may have been the last link that owed the home its sessions.
            self.home_release();
            self.home.pump();
            self.flush_home();
        }
    }

    fn relay_input(&mut self, instance: &str, input: Input<'_>) {
        let now = self.now;
        let Some(node) = self.nodes.get_mut(instance) else {
            return; // it died; its sockets with it
        };
        node.relay.handle(now, input);
        self.pump_relay(instance);
    }

    fn pump_relay(&mut self, instance: &str) {
        let mut outs = Vec::new();
        {
            let node = self.nodes.get_mut(instance).expect("a live instance");
            while let Some(out) = node.relay.poll_output() {
                match out {
                    Output::SetWake(at) => node.wake = Some(node.wake.map_or(at, |w| w.min(at))),
                    Output::SetAlarm(at) => node.alarm = Some(at),
                    other => outs.push(other),
                }
            }
        }
        for out in outs {
            match out {
                Output::Up(_) if self.hung.contains_key(instance) => self.hung_dropped += 1,
                Output::Up(text) => {
                    self.up_messages += 1;
                    self.up_bytes += text.len() as u64;
                    self.up_echoes += text.matches(r#"\"type\":\"mark\""#).count() as u64;
                    self.put(To::Home { from: instance.to_owned() }, text);
                }
                Output::Send { conn, frame } => self.deliver(&conn, &frame),
                Output::Multicast { conns, frame } => {
                    for c in conns {
                        self.deliver(&c, &frame);
                    }
                }
                Output::AllBut { skip, frame } => {
                    // The adapter's loop: every open socket of this instance but those named.
                    let to: Vec<String> = (self.clients.iter())
                        .filter(|(_, c)| c.instance == instance && c.open)
                        .filter(|(id, _)| skip.binary_search(id).is_err())
                        .map(|(id, _)| id.clone())
                        .collect();
                    for c in to {
                        self.deliver(&c, &frame);
                    }
                }
                Output::Close { conn, code, reason } => {
                    self.tail_lost += u64::from(reason == "relay_tail_lost");
                    let c = self.clients.get_mut(&conn).expect("known client");
                    assert!(c.open, "closing {conn} twice");
                    c.open = false;
                    c.closed = Some(code);
                    c.closed_at = Some(self.now);
                }
                Output::SetWake(_) | Output::SetAlarm(_) => unreachable!("taken above"),
            }
        }
    }

    fn put(&mut self, to: To, text: String) {
        self.order += 1;
        let instance = match &to {
            To::Home { from } => from,
            To::Relay(to) => to,
        };
        let delay = self.delay_ms + self.extra_delay.get(instance).copied().unwrap_or(0);
        // A link is ordered: nothing overtakes what went before it on it.
        let at = self.now.plus_ms(delay);
        self.wire.insert((at, self.order), (to, text));
    }

    fn deliver(&mut self, conn: &str, frame: &str) {
        let frames = crate::room::sim::unpack(frame);
        let stored = self.home.disk.seq;
        self.check_states(conn, &frames);
        let c = self.clients.get_mut(conn).expect("known client");
        assert!(c.open, "frame sent to closed client {conn}: {frame}");
        c.texts += 1;
        c.bytes += frame.len() as u64;
        if frame.starts_with(r#"{"type":"welcome""#) {
            c.welcomes.push(frame.to_owned());
        }
        for v in frames {
            if matches!(v["type"].as_str(), Some("ack" | "message")) {
                let seq = v["seq"].as_u64().expect("seq");
                assert!(seq <= stored, "frame for seq {seq} left before it was stored");
            }
            c.applies(&v);
            c.inbox.push(v);
        }
    }

    /// A `state` or `resync` frame is the room's state at its `seq` exactly, whoever made it
    /// (the home, or a relay from its mirror). A room deleted since started a new log.
    fn check_states(&self, conn: &str, frames: &[Value]) {
        for v in frames.iter().filter(|v| v["type"] == "state" || v["type"] == "resync") {
            let seq = v["seq"].as_u64().expect("seq");
            if self.home.disk.deleted == 0 {
                let want = self.home.disk.state_at(seq);
                assert_eq!(v["state"], want, "{conn} got the state at {seq} wrong");
            }
        }
    }

    /// The frames a socket at the home got so far (the home's simulator delivered them, and
    /// checked each was stored before it left), as its client reads them. None for a connect
    /// the home closed at once (while it recalled).
    fn take_home(&mut self, conn: &str) -> Vec<Value> {
        let frames = match self.home.sockets.get_mut(conn) {
            Some(s) => std::mem::take(&mut s.inbox),
            None => Vec::new(),
        };
        let c = self.clients.get_mut(conn).expect("known client");
        for v in &frames {
            if v["type"] == "welcome" {
                c.welcomes.push(v.to_string()); // its text as parsed, not as sent
            }
            c.applies(v);
            c.inbox.push(v.clone());
        }
        self.check_states(conn, &frames);
        let c = self.clients.get_mut(conn).expect("known client");
        let (echoes, frames) = crate::room::sim::read(&mut c.inbox, c.open && !c.silent);
        for echo in echoes {
            self.send(conn, &echo);
        }
        frames
    }

    /// The home takes a relay's message.
    /// A frame of a session its relay has not given back yet: it waits for the answer, or, past
    /// the bound, it (or the connection holding the most of the allowance) resumes instead.
    fn park(&mut self, link: &str, conn: &str, text: String) {
        let mut refused = Vec::new();
        if self.home.recalls.park(link, conn, text, self.now.ms()) {
            self.parked += 1;
        } else {
            refused.push((link.to_owned(), conn.to_owned()));
        }
        refused.extend(self.home.recalls.evicted());
        for (link, conn) in refused {
            if self.home.recalls.unknown(&link, &conn) == Some(true) {
                self.home.downlinks.restart(&link, &conn, "relay_session_unknown");
                if let Some(s) = self.home.sockets.get_mut(&conn) {
                    s.open = false;
                }
            }
        }
    }

    fn home_up(&mut self, from: &str, text: &str) {
        self.home.now = self.now;
        let up = Up::parse(text).expect("relays send what the link defines");
        let link = match self.registry.admit(&up.relay, up.epoch) {
            Admit::Stale { current } => {
                self.stale_refused += 1;
                // Over the instance's own connection, which the home
                // does not take as a link.
                let mut refusal = Downlinks::default();
                refusal.stale(from, current);
                for (to, text) in refusal.take() {
                    self.home_link_messages += 1;
                    self.put(To::Relay(to), text);
                }
                return;
            }
            Admit::Current { link } => link,
            Admit::Newer { link, replaced } => {
                if let Some(old) = replaced {
                    self.home_link_closed(&old);
                    self.instance_replaced(&old);
                }
                self.home_accepts(&link);
                link
            }
        };
        assert!(self.home.links[&link].open, "a message over the closed link {link}");
        self.home.downlinks.heard(&link, up.heard);
        let prefix = format!("{}.", up.relay);
        for op in up.ops {
            match op {
                UpOp::Open(open) if open.conn.starts_with(&prefix) => {
                    self.home_hold_or_open(&link, open);
                }
                UpOp::Text { conn, text } if self.home.recalls.held(&conn) => {
                    // Its open waits for every link's answer: so does the frame.
                    self.home_hold_text(&link, &conn, text);
                }
                UpOp::Text { conn, text } if self.home.room.knows(&conn) => {
                    self.home
                        .room
                        .handle(self.now, crate::room::Input::Text { conn: &conn, text: &text });
                }
                UpOp::Text { conn, text } => self.park(&link, &conn, text),
                UpOp::Closed { conn } => {
                    self.home.recalls.drop_held(&conn);
                    self.home.runtime_close(&conn);
                }
                UpOp::Open(_) | UpOp::Unknown => {}
                UpOp::Peers { recall, peers, opens } => {
                    let Some(back) = self.home.recalls.answer(&link, recall, &prefix, peers, opens)
                    else {
                        continue; // an answer to an earlier load's recall
                    };
                    self.home_recalled(&link, recall, back);
                    // The last answer: what waited goes before the message's next operations.
                    self.home_release();
                }
            }
        }
        self.home_release();
        // As the adapter does: the engine's outputs are applied after the message's operations.
        self.home.pump();
        self.flush_home();
    }

    /// The home accepts a new link, as the adapter does: held to the window (its relay speaks
    /// version 2 on), the log's name first, then the room's parts of a welcome (version 3 on).
    fn home_accepts(&mut self, link: &str) {
        let (mirror, signals) = (self.link_version >= 3, self.link_version >= 4);
        let open = Link { open: true, relayed: true, mirror, signals, ..Default::default() };
        self.home.links.insert(link.to_owned(), open);
        self.home.downlinks.accepted(link, self.link_version, &mut self.home.room);
    }

    /// `link`'s answer to the home's recall `id`, as the adapter takes it: its sessions back,
    /// then its opens (held while another link owes its answer), then the frames kept for it.
    fn home_recalled(&mut self, link: &str, id: u64, back: super::Answer) {
        self.recalled += 1;
        self.home.downlinks.recalled(link, id);
        let peers = back.peers;
        self.home.room.handle(self.now, crate::room::Input::Recalled { link, peers });
        for open in back.opens {
            self.home_hold_or_open(link, open);
        }
        for (conn, text) in back.parked {
            if self.home.room.knows(&conn) {
                let text = crate::room::Input::Text { conn: &conn, text: &text };
                self.home.room.handle(self.now, text);
            } else {
                self.home_hold_text(link, &conn, text);
            }
        }
    }

    /// A frame of `conn`, whose open waits, waits behind it, as the adapter takes it; past the
    /// bound the connection holding the most (or `conn`) is closed to resume.
    fn home_hold_text(&mut self, link: &str, conn: &str, text: String) {
        if !self.home.recalls.hold_text(link, conn, text) {
            self.home_refuse(link, conn);
        }
        self.home_made_way();
    }

    /// Closes `conn` (1012, to resume) once, its open not taken.
    fn home_refuse(&mut self, link: &str, conn: &str) {
        if self.home.recalls.refuse(link, conn) {
            self.home.downlinks.restart(link, conn, "room_recalling");
        }
    }

    /// Closes the held connections that made way for a newcomer's open or frame.
    fn home_made_way(&mut self) {
        for (link, conn) in self.home.recalls.evicted() {
            self.home_refuse(&link, &conn);
        }
    }

    /// A relay's client opens at the home, as the adapter does: held while a link owes the
    /// home its sessions ([`Recalls::hold`](super::Recalls::hold)), or past the bound closed
    /// to resume; else decided now.
    fn home_hold_or_open(&mut self, link: &str, open: crate::protocol::link::Open) {
        let again = self.home.recalls.held(&open.conn); // a recall's answer names it again
        if !self.home.recalls.recalling() && !again {
            return self.home_open(link, open);
        }
        let conn = open.conn.clone();
        if self.home.recalls.hold(link, open, self.now.ms()) {
            self.held += u64::from(!again);
        } else {
            self.home_refuse(link, &conn);
        }
        self.home_made_way();
    }

    /// Once no link owes the home its sessions, the opens held meanwhile are decided, each
    /// followed by what its client said, in the order they came.
    fn home_release(&mut self) {
        for held in self.home.recalls.release() {
            match held {
                super::Held::Open { link, open } => self.home_open(&link, open),
                super::Held::Text { conn, text, .. } if self.home.room.knows(&conn) => {
                    let text = crate::room::Input::Text { conn: &conn, text: &text };
                    self.home.room.handle(self.now, text);
                }
                super::Held::Text { .. } => {}
            }
        }
    }

    /// A relay's client opens at the home, unless the home knows it already (a recall's
    /// answer opens again those the home had not addressed).
    fn home_open(&mut self, link: &str, open: crate::protocol::link::Open) {
        if !self.home.room.knows(&open.conn) {
            let hello =
                open.into_hello(link, self.link_version).expect("the relays send JSON info");
            self.home.open_deferred(hello);
        }
    }

    /// What the home queued for each relay in the turn goes, one message per link.
    fn flush_home(&mut self) {
        for (link, text) in self.home.downlinks.take() {
            self.home_link_messages += 1;
            self.home_link_bytes += text.len() as u64;
            self.home_link_welcomes += text.matches(r#"{\"type\":\"welcome\""#).count() as u64;
            self.home_link_states += (text.matches(r#"{\"type\":\"state\""#).count()
                + text.matches(r#"{\"type\":\"resync\""#).count())
                as u64;
            self.put(To::Relay(link), text);
        }
        // As the adapter does after every turn: a relay more than the link's window behind
        // has its link closed (1013), as its lease would.
        for instance in self.home.downlinks.behind() {
            self.behind_closed += 1;
            let heard = self.hung.remove(&instance).unwrap_or(self.now);
            self.home_closes(&instance, heard);
        }
        self.sync_home_sockets();
    }

    /// The home's own sockets it closed (or lost in a reset) are closed for their clients.
    fn sync_home_sockets(&mut self) {
        let now = self.now;
        for (conn, c) in self.clients.iter_mut().filter(|(_, c)| c.instance == HOME && c.open) {
            let s = &self.home.sockets[conn];
            if !s.open {
                c.open = false;
                c.closed = Some(s.closed.unwrap_or(1006));
                c.closed_at = Some(now);
            }
        }
    }

    /// The time of the next thing due anywhere, if any.
    fn next_due(&self) -> Option<Time> {
        let wire = self.wire.keys().next().map(|k| k.0);
        let home = [self.home.wake, self.home.alarm].into_iter().flatten().min();
        let relays = self.nodes.values().flat_map(|n| [n.wake, n.alarm]).flatten().min();
        let leases = self.hung.values().map(|at| at.plus_ms(LEASE_MS)).min();
        [wire, home, relays, leases].into_iter().flatten().min()
    }

    /// Runs everything due up to `until`, in time order.
    pub fn run_until(&mut self, until: Time) {
        // Time must move: a timer that re-arms for a moment already past (an alarm asked for
        // again and again at the same time) is a stuck object, not a busy one.
        let (mut last, mut same) = (self.now, 0u32);
        for _ in 0..10_000_000 {
            let Some(at) = self.next_due().filter(|at| *at <= until) else {
                break;
            };
            self.now = self.now.max(at);
            self.step(at);
            if self.now == last {
                same += 1;
                assert!(
                    same < 100_000,
                    "stuck at {}: a timer keeps firing with time still",
                    last.ms()
                );
            } else {
                (last, same) = (self.now, 0);
            }
        }
        self.now = self.now.max(until);
        self.home.now = self.home.now.max(self.now);
    }

    fn step(&mut self, at: Time) {
        // The wire first, then the home's timers, then the relays'.
        if let Some((&key, _)) = self.wire.iter().next().filter(|(k, _)| k.0 <= at) {
            let (to, text) = self.wire.remove(&key).expect("listed");
            match to {
                To::Home { from } => self.home_up(&from, &text),
                To::Relay(instance) => self.relay_input(&instance, Input::Down(&text)),
            }
            return;
        }
        let expired = self.hung.iter().find(|(_, t)| t.plus_ms(LEASE_MS) <= at);
        if let Some(instance) = expired.map(|(k, _)| k.clone()) {
            return self.lease_expired(&instance);
        }
        if [self.home.wake, self.home.alarm].into_iter().flatten().any(|t| t <= at) {
            self.home.now = self.now;
            // Fires the home's due timers (and nothing later).
            self.home.run_until(at);
            self.flush_home();
            return;
        }
        let due: Vec<(String, bool)> = self
            .nodes
            .iter()
            .filter_map(|(k, n)| {
                if n.wake.is_some_and(|t| t <= at) {
                    Some((k.clone(), true))
                } else if n.alarm.is_some_and(|t| t <= at) {
                    Some((k.clone(), false))
                } else {
                    None
                }
            })
            .collect();
        for (key, wake) in due {
            let node = self.nodes.get_mut(&key).expect("listed");
            if wake {
                node.wake = None;
                self.relay_input(&key, Input::Wake);
            } else {
                node.alarm = None;
                self.relay_input(&key, Input::Alarm);
            }
        }
    }

    /// Runs until nothing is on the wire and no turn is pending (alarms in
    /// the future stay set).
    pub fn settle(&mut self) {
        for _ in 0..1_000_000 {
            let wire = self.wire.keys().next().map(|k| k.0);
            let wakes = self.nodes.values().filter_map(|n| n.wake).min();
            // The home's work waits on the timer it asked for; the keep-alive it asks for
            // while members are away is not work (they come back, or their grace ends, as the
            // clock moves).
            let home = match self.home.waiting_for_echo() || self.home.room.away() == 0 {
                true => self.home.wake,
                false => self.home.room.flush_work().map(Time::from_ms),
            };
            let Some(at) = [wire, wakes, home].into_iter().flatten().min() else {
                return;
            };
            self.run_until(at.max(self.now));
        }
        panic!("the topology never settled");
    }

    /// Moves the clock on by `ms`, running what falls due.
    pub fn advance(&mut self, ms: u64) {
        let until = self.now.plus_ms(ms);
        self.run_until(until);
    }

    /// Takes the frames a client got so far; echoes each `mark` (unless
    /// the client is silent), which are not returned.
    pub fn take(&mut self, conn: &str) -> Vec<Value> {
        if self.clients[conn].instance == HOME {
            return self.take_home(conn);
        }
        let c = self.clients.get_mut(conn).expect("known client");
        let (echoes, frames) = crate::room::sim::read(&mut c.inbox, c.open && !c.silent);
        for echo in echoes {
            self.send(conn, &echo);
        }
        frames
    }

    /// Relay `name`'s current instance.
    pub fn relay(&mut self, name: &str) -> &Relay {
        let key = self.instance(name);
        &self.nodes[&key].relay
    }
}
