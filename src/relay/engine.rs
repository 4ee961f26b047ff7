//! [`Relay`]: one region's sockets of a room, spoken for to the home over one link.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::rc::Rc;

use serde_json::value::RawValue;

use super::{Input, Output, Tail};
use crate::protocol::link::{
    Back, Down, DownOp, Open, Up, UpOp, Welcome, FRAME_MAX, HEARD_EVERY, MESSAGE_MAX,
};
use crate::protocol::server::{self, ServerFrame};
use crate::protocol::{parse, ClientFrame};
use crate::room::flow::{Echo, Flow};
use crate::room::outbox::{pack, Outbox};
use crate::room::rate::{Bucket, Meter};

use crate::room::state::RoomState;
use crate::room::{Error, Hello, RoomConfig, Time};

mod delivery;

/// The close code a relay gives its clients when it cannot speak for them
/// any more (its link broke, or a newer instance speaks for the relay): the
/// WebSocket "service restart", after which a client reconnects and resumes.
pub const RESTART: u16 = 1012;

/// What a relay mixes into a client's secret for the key of its own marks (ASCII "relay").
const RELAY_MARKS: u64 = 0x0072_656c_6179;

/// The heartbeat a client sends, answered by the relay itself.
const PING: &str = r#"{"type":"ping"}"#;

/// How long after a message up the next one waits while it carries only opens and closes: in a
/// storm a relay's clients come a few milliseconds apart, each its own turn, and the home's
/// work per link message (reading it, its answer) is several joins' worth; held, the joins of
/// a window go in one message. A connect after a quiet window goes at once; a client's frame
/// never waits (it takes the held opens with it). The seeds' coalescing window.
pub const OPEN_HOLD_MS: u64 = 50;

/// The home's `send`s and `all`s of one message with nothing else between them, in order: what
/// each client gets of them goes as one text (a `batch` past one frame), not one per frame: the
/// home sends a link's sessions each frame at once, so the packing its own sockets get in a
/// busy turn happens here ([`Relay::fan_run`]).
#[derive(Default)]
struct Run(Vec<(Target, Rc<str>)>);

/// Who a frame of a [`Run`] is for.
enum Target {
    /// These clients (a `send`).
    To(Vec<String>),
    /// Every client the home has addressed but these (an `all`).
    AllBut(Vec<String>),
}

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
    /// Binary frames, and texts with a control character, refused past the sender's rate (no
    /// answer sent), or before its welcome past the room's burst of answers it is owed.
    pub binary_dropped: u64,
    /// Frames refused here for their user's byte budget (not sent up: the home would refuse
    /// them too).
    pub bytes_refused: u64,
    /// Signals of members elsewhere the home sent this relay once for all its clients (link
    /// version 4 on), to coalesce and shed as its own members'.
    pub home_signals: u64,
    /// Signals (its members', and the home's once for all) replaced inside the coalescing
    /// window by a newer one of the same sender and topic (a stale cursor is worth nothing).
    pub signals_coalesced: u64,
    /// Signals (its members', and the home's once for all) not delivered to the relay's
    /// members because the relay was over its outbound budget (`OUTBOUND_BUDGET` frames per
    /// second, as the home's).
    pub signals_shed: u64,
    /// Times the home asked for the relay's sessions back (it had lost its memory).
    pub recalls: u64,
    /// Catch-ups the relay sent its clients from its own tail of the log, and their frames.
    pub tail_replays: u64,
    pub tail_frames: u64,
    /// Catch-ups the home left to the tail that the tail no longer held by the time the home's
    /// word came: the client was closed (1012) and resumed.
    pub tail_lost: u64,
    /// Welcomes the relay made itself from the session's part the home sent
    /// ([`DownOp::Welcome`], link version 3 on).
    pub welcomes: u64,
    /// `state` and `resync` frames the relay sent from its mirror of the room's state, at the
    /// home's word ([`DownOp::State`], link version 3 on).
    pub state_replies: u64,
    /// Operations from the home of a later version of the link, skipped.
    pub unknown_ops: u64,
    /// Echoes of the relay's own marks it took (they never cross the link).
    pub echoes: u64,
    /// Clients closed (4013) because more waited for them than [`RoomConfig::max_backlog`].
    pub backlog_closes: u64,
    /// Clients closed (4013) because frames waited behind their full window with no echo for
    /// [`RoomConfig::echo_deadline_ms`].
    pub stalled_closes: u64,
}

/// A signal (a member's here, or the home's for all) waiting for the end of the relay's
/// coalescing window.
#[derive(Debug)]
struct Waiting {
    /// The sender's connection: it does not get its own signal.
    from: String,
    /// The sender's session and topic: a newer signal with it replaces this one.
    key: String,
    frame: Rc<str>,
}

/// One client of the relay.
#[derive(Debug)]
struct Client {
    session: String,
    user: String,
    /// The home has addressed it (its welcome comes first): a frame for all
    /// of the relay's members is for it.
    admitted: bool,
    last_seen: u64,
    /// Its signals delivered locally, at the room's per-connection rate.
    signals: Bucket,
    /// The home's last record of it ([`DownOp::Peer`]): what a home that lost its memory
    /// takes it back from. The relay holds its sessions; the home stores none of them.
    peer: Option<String>,
    /// Its open, until the home addresses it: a home that lost its memory before it did is
    /// asked again.
    hello: Option<Open>,
    /// Given back on a recall no home has taken yet: the `seq` it has had nothing after.
    from: Option<u64>,
    /// What the relay handed the runtime for it and what it confirmed: the relay keeps its
    /// clients' flow windows, with marks of its own (the home sends a relayed session's frames
    /// unmetered, see [`Flow::unmetered`]), so no echo crosses the link.
    flow: Flow,
    /// Frames waiting behind its full window (signals collapse to the latest per sender and
    /// topic), bounded by [`RoomConfig::max_backlog`] beyond a catch-up's allowance.
    out: Outbox,
    /// Since when frames have waited behind its full window with no echo (ms).
    stalled_since: Option<u64>,
    /// `bad_frame` answers to frames it sent before the home addressed it: they follow its
    /// welcome, which is a client's first frame. At most the room's burst, taken from the
    /// bucket its answers here are paid from.
    owed: Vec<&'static str>,
}

/// A relay: a pure state machine (see the [module](super) docs).
#[derive(Debug)]
pub struct Relay {
    name: String,
    epoch: u64,
    config: RoomConfig,
    clients: BTreeMap<String, Client>,
    /// Each user's bytes here, as the home keeps each user's byte budget
    /// ([`RoomConfig::user_bytes_per_sec`]): every frame they send up is charged, and a signal
    /// the relay delivers itself must fit. Only users with a client here are kept past a pass
    /// that finds more than [`Relay::BUDGETS_ABOVE`] entries.
    bytes_by_user: HashMap<String, Bucket>,
    /// The turn's operations for the home, sent at its end (opens and closes up to
    /// [`OPEN_HOLD_MS`] after the last message up).
    up: Vec<UpOp>,
    /// When the last message up went.
    up_at: Option<u64>,
    outputs: VecDeque<Output>,
    /// The short timer, as last asked for.
    wake: Option<u64>,
    /// Signals coalescing until `window_until`, in the order their keys first came,
    /// and where each key is in it (a room of movers must not scan the list per signal).
    signals: Vec<Waiting>,
    waiting_at: HashMap<String, usize>,
    /// The coalescing window: while the relay's members ask for more than `batch_above`
    /// signal frames a second, a local signal delivered at once opens it; signals inside it
    /// wait for its end, the latest per sender and topic, and go together.
    window_until: Option<u64>,
    /// Frames the relay sent its clients per second (a batch counts once).
    outbound: Meter,
    /// Signal frames asked for per second (one per receiver, before coalescing).
    asked: Meter,
    /// The liveness sweep's alarm, as last asked for.
    alarm: Option<u64>,
    now: u64,
    /// A newer instance speaks for the relay: this one takes no client.
    spent: bool,
    /// The last recall the relay answered.
    last_recall: Option<u64>,
    /// The newest entries of the room's log, learned from the home's frames: what a resuming
    /// client's catch-up comes from when it holds it.
    tail: Tail,
    /// Bytes of the home's messages taken on this link (since its home's last recall), and
    /// what the home was last told of them ([`Up::heard`]): the home holds the link to a
    /// window of what is in flight.
    heard: u64,
    told: u64,
    /// What every welcome the relay makes says of the room ([`DownOp::Room`], [`DownOp::Epoch`]),
    /// as the home told it on this link.
    room: Option<RoomParts>,
    log: Option<String>,
    /// The room's state as the home told it ([`DownOp::Snapshot`], then every [`DownOp::Set`]):
    /// what the relay's `state` and `resync` frames are made from.
    state: Option<RoomState>,
    stats: RelayStats,
}

/// The room's parts of a welcome ([`DownOp::Room`]).
#[derive(Debug)]
struct RoomParts {
    room: String,
    home: Option<String>,
    limits: Box<RawValue>,
}

impl Relay {
    /// Instance `epoch` of the relay `name` (the adapter stores the epoch and
    /// raises it at every start and every new link), with the room's config.
    pub fn new(name: &str, epoch: u64, config: RoomConfig) -> Relay {
        let replay_limit = config.replay_limit;
        Relay {
            name: name.to_owned(),
            epoch,
            config,
            clients: BTreeMap::new(),
            bytes_by_user: HashMap::new(),
            up: Vec::new(),
            up_at: None,
            outputs: VecDeque::new(),
            wake: None,
            signals: Vec::new(),
            waiting_at: HashMap::new(),
            window_until: None,
            outbound: Meter::default(),
            asked: Meter::default(),
            alarm: None,
            now: 0,
            spent: false,
            last_recall: None,
            // As many entries as the home's replay window.
            tail: Tail::new(replay_limit),
            heard: 0,
            told: 0,
            room: None,
            log: None,
            state: None,
            stats: RelayStats::default(),
        }
    }

    /// The same relay with the tail an earlier instance of it kept ([`Relay::take_tail`]): the
    /// entries of a log are the same whoever holds them, so a tail outlives its instance (the
    /// home names its log on each link, and a tail of another log is dropped then).
    pub fn with_tail(mut self, tail: Tail) -> Relay {
        self.tail = tail;
        self
    }

    /// The relay's tail of the log, for its next instance; this one keeps an empty one.
    pub fn take_tail(&mut self) -> Tail {
        let empty = Tail::new(self.config.replay_limit);
        std::mem::replace(&mut self.tail, empty)
    }

    /// Entries of the room's log the relay holds.
    pub fn tail_len(&self) -> usize {
        self.tail.len()
    }

    /// Bytes waiting in the relay for clients whose windows are full (each client's at most
    /// [`RoomConfig::max_backlog`] beyond a catch-up's allowance, then it is closed, 4013).
    pub fn waiting_bytes(&self) -> u64 {
        self.clients.values().map(|c| c.out.bytes()).sum()
    }

    /// The relay's name, the same across its instances.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether an [`Input::Alarm`] at `now` may find a client gone silent: the only use of
    /// [`Input::Heartbeat`]s, so an adapter need not collect them (a read of every socket)
    /// for an alarm of its own (the link's watch). The armed alarm is never later than the
    /// first client's due time (`arm_alarm`), so no silent client is missed.
    pub fn sweep_due(&self, now: Time) -> bool {
        self.alarm.is_some_and(|at| at <= now.ms())
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
                (self.heard, self.told) = (0, 0); // the next link counts afresh
                                                  // Not kept up to date since: the next link's home says them again first.
                (self.room, self.log, self.state) = (None, None, None);
            }
            Input::Alarm => {
                self.alarm = None;
                self.sweep();
            }
            Input::Wake => {
                self.wake = None;
                self.flush_up();
                self.flush_signals();
            }
        }
        self.arm_alarm();
        self.arm_wake();
    }

    fn open(&mut self, hello: Hello) {
        let now = self.now;
        if self.spent {
            let reason = "relay_replaced".into();
            self.outputs.push_back(Output::Close { conn: hello.conn, code: RESTART, reason });
            return;
        }
        let mut open: Open = hello.into();
        // What the relay can replay itself: the home then sends no frame of it over the link.
        open.tail = self.tail.claim(open.since, open.epoch.as_deref());
        let client = Client {
            session: open.session.clone(),
            user: open.user.clone(),
            admitted: false,
            last_seen: now,
            signals: Bucket::full(self.config.burst, now),
            peer: None,
            hello: Some(open.clone()),
            from: None,
            // A key of its own, made from the client's secret: a home of link version 1 marks
            // the same session with the secret itself, and its marks' echoes must not be taken
            // here for the relay's (the same counter would make the same tokens).
            flow: Flow::new(Flow::key_of_load(open.secret, RELAY_MARKS)),
            out: Outbox::default(),
            owed: Vec::new(),
            stalled_since: None,
        };
        // An id the adapter reused replaces its old connection.
        self.clients.insert(open.conn.clone(), client);
        self.send_up(UpOp::Open(open));
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
            return self.close_client(conn, 1009, "frame too large");
        }
        // A ping is answered here, as the runtime's auto-response answers
        // the exact one without waking the relay: liveness is the relay's.
        if text == PING {
            let frame: Rc<str> = ServerFrame::Pong.to_text().into();
            return self.emit(vec![conn.to_owned()], frame);
        }
        // A control character is never in a JSON frame (in a string it must be escaped): the
        // home would answer `bad_frame`, so it is answered here. Sent up, each would be six
        // bytes of the link's JSON (`\u0001`), and the home would unescape six times what the
        // member sent before refusing it.
        if text.bytes().any(|b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r')) {
            return self
                .bad_frame(conn, "not a JSON object: a control character outside an escape");
        }
        // An echo of one of the relay's marks is the relay's: its window is the relay's. An
        // echo of a home's mark (a home of link version 1 marks its relayed sessions itself)
        // goes up unpaid, as the home takes it: refused here for bytes, the home's window for
        // the session never opened again and it closed the client 4013. Only an admitted
        // client's: the home marks nothing before its welcome, and a client not yet admitted
        // (its relay dialing) would otherwise fill the relay's hold with mark-shaped frames.
        let mut echo = false;
        if text.len() <= 256 && text.contains("\"mark\"") {
            if let Ok(ClientFrame::Mark { mark }) = parse(text) {
                if self.echo(conn, &mark) {
                    return;
                }
                echo = self.clients.get(conn).is_some_and(|c| c.admitted);
            }
        }
        if !echo && !self.take_bytes(conn, text.len()) {
            return;
        }
        // A signal between two of the relay's members goes at once. Only a
        // frame that may be one is parsed here; the home parses every frame
        // again and decides it (a refusal is the home's to send). A frame with
        // an escape may spell `signal` another way (`"\u0073ignal"`): the home
        // would take it for one the relay had delivered, and send it to
        // everyone but the relay's members.
        if text.contains("\"signal\"") || text.contains('\\') {
            if let Ok(ClientFrame::Signal { topic, data }) = parse(text) {
                self.signal_from(conn, &topic, &data);
            }
        }
        self.send_up(UpOp::Text { conn: conn.to_owned(), text: text.to_owned() });
    }

    /// Takes a frame's `len` bytes from its user's budget here, as the home does, before it
    /// goes up: false when the budget says no (the frame goes no further, answered as the home
    /// answers it, with no id, at the per-connection rate; nothing to a client not yet
    /// admitted). Forwarded regardless, a flood of 64 KiB frames, refused at the home for
    /// bytes (which does not close a socket), cost the home's thread a parse each for free,
    /// and a client the home had not yet admitted (its relay dialing, or its open refused) sent
    /// all it could up the link. One budget for publishes and signals, or a user's publishes
    /// (the home's budget) and then signals would reach the relay's members at twice it.
    fn take_bytes(&mut self, conn: &str, len: usize) -> bool {
        let now = self.now;
        let Some(c) = self.clients.get(conn) else {
            return false;
        };
        let (admitted, user) = (c.admitted, c.user.clone());
        let (rate, burst) = (self.config.user_bytes_per_sec, self.config.user_bytes_burst);
        if self.user_bytes(&user).take(rate, burst, len as u64, now) {
            return true;
        }
        self.stats.bytes_refused += 1;
        let (per_conn, conn_burst) = (self.config.rate_per_sec, self.config.burst);
        let answered = admitted
            && self
                .clients
                .get_mut(conn)
                .is_some_and(|c| c.signals.take(per_conn, conn_burst, 1, now));
        if answered {
            let refusal = Error::BytesLimited { per_sec: rate };
            let message = refusal.message();
            let frame = ServerFrame::Error {
                code: refusal.code(),
                id: None,
                message: &message,
                version: None,
            };
            self.emit(vec![conn.to_owned()], frame.to_text().into());
        }
        false
    }

    /// What the home answers a frame it cannot read (`bad_frame`, with `message`), answered
    /// here at the room's per-connection rate (the bucket its local signals use); past it the
    /// frame gets no answer, so a flood of them costs the relay one check each and the home
    /// nothing.
    fn bad_frame(&mut self, conn: &str, message: &'static str) {
        let (now, rate, burst) = (self.now, self.config.rate_per_sec, self.config.burst);
        let Some(c) = self.clients.get_mut(conn) else {
            return;
        };
        if !c.signals.take(rate, burst, 1, now) || (!c.admitted && c.owed.len() >= burst as usize) {
            self.stats.binary_dropped += 1;
        } else if c.admitted {
            self.emit(vec![conn.to_owned()], Self::bad_frame_text(message));
        } else {
            c.owed.push(message); // after its welcome ([`Relay::pay_owed`])
        }
    }

    fn bad_frame_text(message: &str) -> Rc<str> {
        let frame = ServerFrame::Error { code: "bad_frame", id: None, message, version: None };
        frame.to_text().into()
    }

    /// The answers `conn` was owed before the home addressed it, now that its welcome went.
    fn pay_owed(&mut self, conn: &str, owed: Vec<&'static str>) {
        for message in owed {
            self.emit(vec![conn.to_owned()], Self::bad_frame_text(message));
        }
    }

    /// A signal from `conn`, for the relay's other members at the room's per-connection rate
    /// and its user's byte budget (a user's 64 KiB signals, each on a topic of its own, would
    /// otherwise reach every member here faster than any may read).
    fn signal_from(&mut self, conn: &str, topic: &str, data: &RawValue) {
        let (now, rate, burst) = (self.now, self.config.rate_per_sec, self.config.burst);
        let Some(c) = self.clients.get_mut(conn) else {
            return;
        };
        if !(c.admitted && c.signals.take(rate, burst, 1, now)) {
            self.stats.local_signals_refused += 1;
            return;
        }
        let session = c.session.clone();
        let frame: Rc<str> =
            ServerFrame::Signal { session: &session, topic, data }.to_text().into();
        self.stats.local_signals += 1;
        self.signal(conn, format!("{session}\u{0}{topic}"), frame);
    }

    /// Entries of [`Relay::bytes_by_user`] past which a pass keeps only users with a client here.
    const BUDGETS_ABOVE: usize = 256;

    /// `user`'s byte budget here (a full one for a user it has none of).
    fn user_bytes(&mut self, user: &str) -> &mut Bucket {
        let (now, burst) = (self.now, self.config.user_bytes_burst);
        if !self.bytes_by_user.contains_key(user) && self.bytes_by_user.len() >= Self::BUDGETS_ABOVE
        {
            let here: HashSet<&str> = self.clients.values().map(|c| c.user.as_str()).collect();
            self.bytes_by_user.retain(|u, _| here.contains(u.as_str()));
        }
        self.bytes_by_user.entry(user.to_owned()).or_insert_with(|| Bucket::full(burst, now))
    }

    /// What the home answers a binary frame (`bad_frame`), answered here ([`Relay::bad_frame`]).
    fn binary(&mut self, conn: &str, len: usize) {
        let now = self.now;
        let Some(c) = self.clients.get_mut(conn) else {
            return;
        };
        c.last_seen = now;
        if len > self.config.max_frame.min(FRAME_MAX) {
            return self.close_client(conn, 1009, "frame too large");
        }
        self.bad_frame(conn, "binary frames are not accepted");
    }

    fn down(&mut self, text: &str) {
        self.heard += text.len() as u64;
        let down = match Down::parse(text) {
            Ok(d) => d,
            Err(_) => {
                self.stats.bad_down += 1;
                return;
            }
        };
        self.stats.down += 1;
        if down.ops.iter().any(|op| matches!(op, DownOp::Recall { .. })) {
            // A home rebuilt without its memory counts what it sends from the message that asks.
            (self.heard, self.told) = (text.len() as u64, 0);
        }
        // Big frames the home sent once for several sessions: for this message only.
        let mut kept: HashMap<u64, Rc<str>> = HashMap::new();
        // The frames of a run of `send`s and `all`s, sent when the run ends, packed per client.
        let mut run = Run::default();
        for op in down.ops {
            match op {
                DownOp::Send { to, frame } => {
                    self.learn(&frame);
                    run.0.push((Target::To(to), frame.into()));
                }
                DownOp::All { skip, frame } => {
                    self.learn(&frame);
                    run.0.push((Target::AllBut(skip), frame.into()));
                }
                op => {
                    self.fan_run(std::mem::take(&mut run));
                    self.down_op(op, &mut kept);
                }
            }
        }
        self.fan_run(run);
    }

    /// One operation of the home's message (but the `send`s and `all`s of a run, above).
    fn down_op(&mut self, op: DownOp, kept: &mut HashMap<u64, Rc<str>>) {
        match op {
            DownOp::Send { to, frame } => {
                self.learn(&frame);
                self.send_to(to, frame.into());
            }
            DownOp::Keep { id, to, frame } => {
                // Learned once: its `again`s are the same frame.
                self.learn(&frame);
                let frame: Rc<str> = frame.into();
                kept.insert(id, frame.clone());
                self.send_to(to, frame);
            }
            DownOp::Again { id, to } => match kept.get(&id) {
                Some(frame) => self.send_to(to, frame.clone()),
                None => self.stats.bad_down += 1, // the home keeps a message whole
            },
            DownOp::All { skip, frame } => {
                self.learn(&frame);
                let skip: BTreeSet<&str> = skip.iter().map(String::as_str).collect();
                self.emit_all(&skip, frame.into(), None);
            }
            DownOp::Signal { key, frame } => self.home_signal(key, frame.into()),
            DownOp::Close { conn, code, reason } => {
                if self.clients.remove(&conn).is_some() {
                    self.outputs.push_back(Output::Close { conn, code, reason });
                }
            }
            DownOp::Peer { conn, peer } => {
                if let Some(c) = self.clients.get_mut(&conn) {
                    c.peer = Some(peer);
                }
            }
            DownOp::Recall { id, since } => self.recall(id, since),
            op @ (DownOp::Epoch { .. }
            | DownOp::Room { .. }
            | DownOp::Welcome(_)
            | DownOp::Snapshot { .. }
            | DownOp::Set { .. }
            | DownOp::State { .. }) => self.mirror_op(op),
            DownOp::Entries { frame } => self.tail.learn(&frame),
            DownOp::Replay { conn, after, upto } => self.replay(conn, after, upto),
            DownOp::CatchUp { conn, bytes } => self.allow(&conn, bytes),
            DownOp::Recalled { id } => {
                if self.last_recall == Some(id) {
                    for c in self.clients.values_mut() {
                        c.from = None;
                    }
                }
            }
            DownOp::Unknown => self.stats.unknown_ops += 1,
            DownOp::Stale { .. } => {
                // A newer instance speaks for this relay: nothing this
                // one holds reaches the room any more.
                self.up.clear();
                self.spent = true;
                self.restart_all("relay_replaced");
            }
        }
    }

    /// The home lost its memory (loaded at `since`) and asks for the relay's sessions (recall
    /// `id`): the records of those it addressed, each with the `seq` it has had nothing after
    /// (the earliest recall since the last one a home took), and the opens of those it had not
    /// addressed yet, again (the home ignores an open of a connection it knows); ahead of
    /// anything this turn holds for it: their frames must find them known.
    fn recall(&mut self, id: u64, since: u64) {
        self.stats.recalls += 1;
        self.last_recall = Some(id);
        let mut peers = Vec::new();
        let mut opens = Vec::new();
        for c in self.clients.values_mut() {
            match (&c.peer, c.admitted) {
                (Some(peer), true) => {
                    let from = c.from.map_or(since, |f| f.min(since));
                    c.from = Some(from);
                    peers.push(Back { peer: peer.clone(), from });
                }
                // Its tail's word is stale by now: the home sends the catch-up itself.
                (_, false) => opens.extend(c.hello.clone().map(|o| Open { tail: None, ..o })),
                (None, true) => {}
            }
        }
        self.up.insert(0, UpOp::Peers { recall: id, peers, opens });
    }

    /// Takes the log entries in a frame from the home into the tail; a gap does not start the
    /// tail again while a client the home has not answered yet claimed it (its fill is behind).
    fn learn(&mut self, frame: &str) {
        let clients = &self.clients;
        let waiting =
            || clients.values().any(|c| c.hello.as_ref().is_some_and(|o| o.tail.is_some()));
        self.tail.learn_holding(frame, waiting);
    }

    /// A frame from the home for `to`: each one still here is the home's now (its welcome
    /// comes first).
    fn send_to(&mut self, to: Vec<String>, frame: Rc<str>) {
        let mut owed = Vec::new();
        let conns: Vec<String> = to.into_iter().filter(|c| self.admit(c, &mut owed)).collect();
        self.emit(conns, frame);
        for (conn, answers) in owed {
            self.pay_owed(&conn, answers);
        }
    }

    /// The home sent `conn` a frame: it is the home's now (its welcome comes first; what it was
    /// owed before goes into `owed`, to follow it). False when it left (the home will hear).
    fn admit(&mut self, conn: &str, owed: &mut Vec<(String, Vec<&'static str>)>) -> bool {
        let Some(client) = self.clients.get_mut(conn) else {
            return false;
        };
        client.admitted = true;
        client.hello = None;
        if !client.owed.is_empty() {
            owed.push((conn.to_owned(), std::mem::take(&mut client.owed)));
        }
        true
    }

    /// The home admitted `part.conn`: the relay makes its welcome, the same bytes the home
    /// would have sent, from the session's part, its open and the room's parts. Without the
    /// room's parts (a home that never said them) the client cannot be welcomed here: it is
    /// closed (1012) and resumes.
    fn welcome(&mut self, part: Welcome) {
        let Some(c) = self.clients.get_mut(&part.conn) else {
            return; // it left; the home will hear
        };
        let presence = RawValue::from_string(part.presence).ok();
        let parts = (c.hello.take(), &self.room, &self.log, presence);
        let (Some(open), Some(room), Some(log), Some(presence)) = parts else {
            self.stats.bad_down += 1;
            return self.close_client(&part.conn, RESTART, "relay_unwelcome");
        };
        c.admitted = true;
        let owed = std::mem::take(&mut c.owed);
        let frame = server::Welcome {
            kind: "welcome",
            room: &room.room,
            session: &open.session,
            user: &open.user,
            conn: &part.conn,
            region: &open.region,
            epoch: log,
            home: room.home.as_deref(),
            seq: part.seq,
            resumed: part.resumed,
            missed: part.missed,
            presence: &presence,
            limits: &room.limits,
            expires: part.expires,
            relay: Some(&self.name),
        }
        .to_text();
        self.stats.welcomes += 1;
        self.emit(vec![part.conn.clone()], frame.into());
        self.pay_owed(&part.conn, owed);
    }

    /// What the home tells the relay of the room (its log, its parts, its state), and what it
    /// has the relay make from them (a welcome, a state reply).
    fn mirror_op(&mut self, op: DownOp) {
        match op {
            DownOp::Epoch { epoch } => {
                self.tail.label(&epoch);
                self.log = Some(epoch);
            }
            DownOp::Room { room, home, limits } => match RawValue::from_string(limits) {
                Ok(limits) => self.room = Some(RoomParts { room, home, limits }),
                Err(_) => self.stats.bad_down += 1,
            },
            DownOp::Welcome(part) => self.welcome(part),
            DownOp::Snapshot { state } => self.mirror(&state),
            DownOp::Set { key, value, version } => {
                match (self.state.as_mut(), RawValue::from_string(value)) {
                    (Some(state), Ok(value)) => state.set(key, value, version),
                    _ => self.stats.bad_down += 1,
                }
            }
            DownOp::State { conn, seq, reason } => self.state_reply(conn, seq, reason),
            _ => {}
        }
    }

    /// The home's state, whole: the mirror starts again from it.
    fn mirror(&mut self, text: &str) {
        #[derive(serde::Deserialize)]
        struct Value {
            value: Box<RawValue>,
            version: u64,
        }
        match serde_json::from_str::<BTreeMap<String, Value>>(text) {
            Ok(keys) => {
                let mut state = RoomState::default();
                for (key, v) in keys {
                    state.set(key, v.value, v.version);
                }
                self.state = Some(state);
            }
            Err(_) => {
                self.stats.bad_down += 1;
                self.state = None;
            }
        }
    }

    /// The home's word: send `conn` the state as of `seq` from the mirror (every write up to it
    /// came before the word), a `state` frame or with `reason` a `resync` frame (a catch-up: it
    /// may wait beyond the backlog bound). The same bytes the home would have sent. Without a
    /// mirror (a home that never told the state) the client is closed (1012) and resumes.
    fn state_reply(&mut self, conn: String, seq: u64, reason: Option<String>) {
        if !self.clients.contains_key(&conn) {
            return; // it left; the home will hear
        }
        let Some(state) = self.state.as_mut() else {
            self.stats.bad_down += 1;
            return self.close_client(&conn, RESTART, "relay_unmirrored");
        };
        let frame = server::state_frame(reason.as_deref(), seq, &state.json());
        self.stats.state_replies += 1;
        if reason.is_some() {
            self.allow(&conn, frame.len() as u64);
        }
        self.emit(vec![conn], frame.into());
    }

    /// The home's word: `conn`'s catch-up is entries `after + 1 ..= upto` of the tail, packed
    /// as the home packs one. A tail that lost some of them since it said it held them (newer
    /// entries pushed them out) cannot send them: the client is closed (1012) and resumes,
    /// and the home hears it closed.
    fn replay(&mut self, conn: String, after: u64, upto: u64) {
        if !self.clients.contains_key(&conn) {
            return; // it left; the home will hear
        }
        match self.tail.replay(after, upto) {
            Some(frames) => {
                self.stats.tail_replays += 1;
                self.stats.tail_frames += frames.len() as u64;
                let bytes = frames.iter().map(|f| f.len() as u64).sum();
                self.allow(&conn, bytes);
                for frame in pack(frames, self.config.batch_max_bytes) {
                    self.emit(vec![conn.clone()], frame);
                }
            }
            None => {
                self.stats.tail_lost += 1;
                self.close_client(&conn, RESTART, "relay_tail_lost");
            }
        }
    }

    /// Closes every client with [`RESTART`]: they reconnect and resume.
    fn restart_all(&mut self, reason: &str) {
        self.signals.clear();
        self.waiting_at.clear();
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
            self.stats.timed_out += 1;
            self.close_client(&conn, 4008, "heartbeat timeout");
        }
        self.close_stalled();
    }

    /// The sweep's next turn: the first client to go silent past the presence TTL, or to have
    /// waited past the echo deadline behind its full window. Found by a pass over every client,
    /// so only when no alarm is armed (at the first client, after each sweep, when a stall
    /// needs an earlier one: [`Relay::stalled_from`]), not after every input: a relay of
    /// thousands of clients took a pass per frame. An alarm armed earlier than needed runs a
    /// sweep that finds nobody: a client's due time only moves later, and a new client's is
    /// after every armed one.
    fn arm_alarm(&mut self) {
        if self.alarm.is_some() {
            return;
        }
        let (ttl, deadline) = (self.config.presence_ttl_ms, self.config.echo_deadline_ms);
        let due = self
            .clients
            .values()
            .map(|c| {
                let silent = c.last_seen + ttl;
                c.stalled_since.map_or(silent, |since| silent.min(since + deadline))
            })
            .min();
        if let Some(at) = due {
            self.alarm = due;
            self.outputs.push_back(Output::SetAlarm(Time::from_ms(at)));
        }
    }

    /// A client's frames began to wait behind its full window now: the sweep must come by the
    /// echo deadline.
    fn stalled_from(&mut self, now: u64) {
        let due = now + self.config.echo_deadline_ms;
        if self.alarm.is_some_and(|at| at > due) {
            self.alarm = None; // found again at the end of the input
        }
    }

    fn send_up(&mut self, op: UpOp) {
        self.up.push(op);
    }

    /// Asks for the short timer when the turn has something for the home (at once) or a
    /// coalescing window ends (then), unless it is asked for already.
    fn arm_wake(&mut self) {
        let owed = self.heard - self.told >= HEARD_EVERY;
        let comings = |op: &UpOp| matches!(op, UpOp::Open(_) | UpOp::Closed { .. });
        let held = (self.up_at.map(|at| at + OPEN_HOLD_MS))
            .filter(|&until| until > self.now && !owed && self.up.iter().all(comings));
        let turn = match held {
            Some(until) if !self.up.is_empty() => Some(until),
            _ => (!self.up.is_empty() || owed).then_some(self.now),
        };
        let window = self.window_until.filter(|_| !self.signals.is_empty());
        let due = [turn, window].into_iter().flatten().min();
        if let Some(at) = due {
            if self.wake.is_none_or(|w| w > at) {
                self.wake = Some(at);
                self.outputs.push_back(Output::SetWake(Time::from_ms(at)));
            }
        }
    }

    /// Sends the turn's operations to the home, with what the relay has taken of its messages;
    /// with none, a message saying only that once [`HEARD_EVERY`] bytes were taken unsaid.
    fn flush_up(&mut self) {
        let (ops, epoch, heard) = (std::mem::take(&mut self.up), self.epoch, self.heard);
        let texts = if !ops.is_empty() {
            Up::pack(&self.name, epoch, heard, ops, MESSAGE_MAX)
        } else if heard - self.told >= HEARD_EVERY {
            vec![Up { relay: self.name.clone(), epoch, heard, ops }.to_text()]
        } else {
            return;
        };
        self.told = heard;
        self.up_at = Some(self.now);
        for text in texts {
            self.stats.up += 1;
            self.outputs.push_back(Output::Up(text));
        }
    }
}
