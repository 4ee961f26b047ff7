//! [`Relay`]: one region's sockets of a room, spoken for to the home over one link.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use super::{Input, Output};
use crate::protocol::link::{Down, DownOp, Up, UpOp, FRAME_MAX, MESSAGE_MAX};
use crate::protocol::server::ServerFrame;
use crate::protocol::{parse, ClientFrame};
use crate::room::rate::Bucket;
use crate::room::{Hello, RoomConfig, Time};

/// The close code a relay gives its clients when it cannot speak for them
/// any more (its link broke, or a newer instance speaks for the relay): the
/// WebSocket "service restart", after which a client reconnects and resumes.
pub const RESTART: u16 = 1012;

/// The heartbeat a client sends, answered by the relay itself.
const PING: &str = r#"{"type":"ping"}"#;

/// What a relay counts, for `/stats` and the tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RelayStats {
    /// Messages sent to the home.
    pub up: u64,
    /// Messages from the home.
    pub down: u64,
    /// Messages from the home that were not understood (dropped).
    pub bad_down: u64,
    /// Signals delivered to the relay's own members without the home.
    pub local_signals: u64,
    /// Signals not delivered locally: the sender was over its rate (the home
    /// still hears of them, and refuses them).
    pub local_signals_refused: u64,
    /// Clients closed because they went silent past the presence TTL.
    pub timed_out: u64,
    /// Binary frames refused past the sender's rate (no answer sent).
    pub binary_dropped: u64,
}

/// One client of the relay.
#[derive(Debug)]
struct Client {
    session: String,
    /// The home has addressed it (its welcome comes first): a frame for all
    /// of the relay's members is for it.
    admitted: bool,
    last_seen: u64,
    /// Its signals delivered locally, at the room's per-connection rate.
    signals: Bucket,
}

/// A relay: a pure state machine (see the [module](super) docs).
#[derive(Debug)]
pub struct Relay {
    name: String,
    epoch: u64,
    config: RoomConfig,
    clients: BTreeMap<String, Client>,
    /// The turn's operations for the home, sent at its end.
    up: Vec<UpOp>,
    outputs: VecDeque<Output>,
    /// The end of the turn is asked for.
    wake_set: bool,
    /// The liveness sweep's alarm, as last asked for.
    alarm: Option<u64>,
    now: u64,
    /// A newer instance speaks for the relay: this one takes no client.
    spent: bool,
    stats: RelayStats,
}

impl Relay {
    /// Instance `epoch` of the relay `name` (the adapter stores the epoch and
    /// raises it at every start and every new link), with the room's config.
    pub fn new(name: &str, epoch: u64, config: RoomConfig) -> Relay {
        Relay {
            name: name.to_owned(),
            epoch,
            config,
            clients: BTreeMap::new(),
            up: Vec::new(),
            outputs: VecDeque::new(),
            wake_set: false,
            alarm: None,
            now: 0,
            spent: false,
            stats: RelayStats::default(),
        }
    }

    /// The relay's name, the same across its instances.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The instance the relay's messages speak as.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Clients connected to the relay.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// Whether the home said a newer instance speaks for the relay: this one
    /// closes every client that reaches it (1012); its adapter should start
    /// afresh from storage.
    pub fn spent(&self) -> bool {
        self.spent
    }

    /// What the relay counted so far.
    pub fn stats(&self) -> &RelayStats {
        &self.stats
    }

    /// The next thing to do, in order; `None` when there is nothing.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// Handles one event at `now`.
    pub fn handle(&mut self, now: Time, input: Input<'_>) {
        self.now = self.now.max(now.ms());
        match input {
            Input::Open(hello) => self.open(hello),
            Input::Text { conn, text } => self.text(conn, text),
            Input::Binary { conn, len } => self.binary(conn, len),
            Input::Closed { conn } => {
                if self.clients.remove(conn).is_some() {
                    self.send_up(UpOp::Closed { conn: conn.to_owned() });
                }
            }
            Input::Heartbeat { conn, at } => {
                if let Some(c) = self.clients.get_mut(conn) {
                    c.last_seen = c.last_seen.max(at.ms());
                }
            }
            Input::Down(text) => self.down(text),
            Input::LinkClosed { epoch } => {
                // Whatever was on its way up is lost with the link; the
                // clients resume through the next one, as any client whose
                // socket broke does.
                self.up.clear();
                self.restart_all("relay_link_lost");
                self.epoch = self.epoch.max(epoch);
            }
            Input::Alarm => {
                self.alarm = None;
                self.sweep();
            }
            Input::Wake => {
                self.wake_set = false;
                self.flush_up();
            }
        }
        self.arm_alarm();
    }

    fn open(&mut self, hello: Hello) {
        let now = self.now;
        if self.spent {
            let reason = "relay_replaced".into();
            self.outputs.push_back(Output::Close { conn: hello.conn, code: RESTART, reason });
            return;
        }
        let client = Client {
            session: hello.session.clone(),
            admitted: false,
            last_seen: now,
            signals: Bucket::full(self.config.burst, now),
        };
        // An id the adapter reused replaces its old connection.
        self.clients.insert(hello.conn.clone(), client);
        self.send_up(UpOp::Open(hello.into()));
    }

    fn text(&mut self, conn: &str, text: &str) {
        let now = self.now;
        let Some(c) = self.clients.get_mut(conn) else {
            return; // a socket the relay already closed
        };
        c.last_seen = now;
        if text.len() > self.config.max_frame.min(FRAME_MAX) {
            // What the home would do (1009), done here: a frame over the
            // limit does not cross the link (nor one the link could not carry).
            self.clients.remove(conn);
            let reason = "frame too large".into();
            self.outputs.push_back(Output::Close { conn: conn.to_owned(), code: 1009, reason });
            return self.send_up(UpOp::Closed { conn: conn.to_owned() });
        }
        // A ping is answered here, as the runtime's auto-response answers
        // the exact one without waking the relay: liveness is the relay's.
        if text == PING {
            let frame: Rc<str> = ServerFrame::Pong.to_text().into();
            self.outputs.push_back(Output::Send { conn: conn.to_owned(), frame });
            return;
        }
        // A signal between two of the relay's members goes at once. Only a
        // frame that may be one is parsed here; the home parses every frame
        // again and decides it (a refusal is the home's to send).
        if text.contains("\"signal\"") {
            if let Ok(ClientFrame::Signal { topic, data }) = parse(text) {
                let (rate, burst) = (self.config.rate_per_sec, self.config.burst);
                if c.admitted && c.signals.take(rate, burst, 1, now) {
                    let session = c.session.clone();
                    let frame: Rc<str> =
                        ServerFrame::Signal { session: &session, topic: &topic, data: &data }
                            .to_text()
                            .into();
                    let to: Vec<String> = self
                        .clients
                        .iter()
                        .filter(|(id, o)| o.admitted && id.as_str() != conn)
                        .map(|(id, _)| id.clone())
                        .collect();
                    self.stats.local_signals += 1;
                    if !to.is_empty() {
                        self.outputs.push_back(Output::Multicast { conns: to, frame });
                    }
                } else {
                    self.stats.local_signals_refused += 1;
                }
            }
        }
        self.send_up(UpOp::Text { conn: conn.to_owned(), text: text.to_owned() });
    }

    /// What the home answers a binary frame (`bad_frame`), answered here at the room's
    /// per-connection rate (the bucket its local signals use); past it the frame gets no
    /// answer, so a flood of them costs the relay one check each and the home nothing.
    fn binary(&mut self, conn: &str, len: usize) {
        let now = self.now;
        let (rate, burst) = (self.config.rate_per_sec, self.config.burst);
        let Some(c) = self.clients.get_mut(conn) else {
            return;
        };
        c.last_seen = now;
        if len > self.config.max_frame.min(FRAME_MAX) {
            self.clients.remove(conn);
            let reason = "frame too large".into();
            self.outputs.push_back(Output::Close { conn: conn.to_owned(), code: 1009, reason });
            return self.send_up(UpOp::Closed { conn: conn.to_owned() });
        }
        if c.signals.take(rate, burst, 1, now) {
            let message = "binary frames are not accepted";
            let frame = ServerFrame::Error { code: "bad_frame", id: None, message, version: None };
            let frame: Rc<str> = frame.to_text().into();
            self.outputs.push_back(Output::Send { conn: conn.to_owned(), frame });
        } else {
            self.stats.binary_dropped += 1;
        }
    }

    fn down(&mut self, text: &str) {
        let down = match Down::parse(text) {
            Ok(d) => d,
            Err(_) => {
                self.stats.bad_down += 1;
                return;
            }
        };
        self.stats.down += 1;
        for op in down.ops {
            match op {
                DownOp::Send { to, frame } => {
                    let conns: Vec<String> = to
                        .into_iter()
                        .filter(|c| match self.clients.get_mut(c) {
                            Some(client) => {
                                client.admitted = true;
                                true
                            }
                            None => false, // it left; the home will hear
                        })
                        .collect();
                    self.emit(conns, frame.into());
                }
                DownOp::All { skip, frame } => {
                    let skip: BTreeSet<&str> = skip.iter().map(String::as_str).collect();
                    let conns: Vec<String> = self
                        .clients
                        .iter()
                        .filter(|(id, c)| c.admitted && !skip.contains(id.as_str()))
                        .map(|(id, _)| id.clone())
                        .collect();
                    self.emit(conns, frame.into());
                }
                DownOp::Close { conn, code, reason } => {
                    if self.clients.remove(&conn).is_some() {
                        self.outputs.push_back(Output::Close { conn, code, reason });
                    }
                }
                DownOp::Stale { .. } => {
                    // A newer instance speaks for this relay: nothing this
                    // one holds reaches the room any more.
                    self.up.clear();
                    self.spent = true;
                    self.restart_all("relay_replaced");
                }
            }
        }
    }

    fn emit(&mut self, mut conns: Vec<String>, frame: Rc<str>) {
        match conns.len() {
            0 => {}
            1 => self.outputs.push_back(Output::Send { conn: conns.remove(0), frame }),
            _ => self.outputs.push_back(Output::Multicast { conns, frame }),
        }
    }

    /// Closes every client with [`RESTART`]: they reconnect and resume.
    fn restart_all(&mut self, reason: &str) {
        for (conn, _) in std::mem::take(&mut self.clients) {
            self.outputs.push_back(Output::Close { conn, code: RESTART, reason: reason.into() });
        }
    }

    /// Closes the clients that went silent past the presence TTL.
    fn sweep(&mut self) {
        let (now, ttl) = (self.now, self.config.presence_ttl_ms);
        let gone: Vec<String> = self
            .clients
            .iter()
            .filter(|(_, c)| c.last_seen + ttl <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for conn in gone {
            self.clients.remove(&conn);
            self.stats.timed_out += 1;
            self.outputs.push_back(Output::Close {
                conn: conn.clone(),
                code: 4008,
                reason: "heartbeat timeout".into(),
            });
            self.send_up(UpOp::Closed { conn });
        }
    }

    fn arm_alarm(&mut self) {
        let ttl = self.config.presence_ttl_ms;
        let due = self.clients.values().map(|c| c.last_seen + ttl).min();
        if due != self.alarm {
            self.alarm = due;
            if let Some(at) = due {
                self.outputs.push_back(Output::SetAlarm(Time::from_ms(at)));
            }
        }
    }

    fn send_up(&mut self, op: UpOp) {
        self.up.push(op);
        if !self.wake_set {
            self.wake_set = true;
            self.outputs.push_back(Output::SetWake(Time::from_ms(self.now)));
        }
    }

    fn flush_up(&mut self) {
        if self.up.is_empty() {
            return;
        }
        let ops = std::mem::take(&mut self.up);
        for text in Up::pack(&self.name, self.epoch, ops, MESSAGE_MAX) {
            self.stats.up += 1;
            self.outputs.push_back(Output::Up(text));
        }
    }
}
