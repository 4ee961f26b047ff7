//! One simulated client: connects (with its region's `MF-CF-Blob`),
//! receives and checks every frame, publishes and signals when it is a
//! publisher or signaler, and in a storm drops its socket (a TCP reset, no
//! close frame), waits as the browser client would, and resumes with
//! `since`/`epoch`. Steered by the scenario through a [`Control`] watch.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Semaphore};
use tokio::time::{sleep_until, timeout, MissedTickBehavior};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::backoff::{self, Rng};
use crate::order::{Order, Verdict};
use crate::spread::Spread;
use crate::target::{Protocol, Region, Target};
use crate::wire::{self, Event, Payload};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Receivers never speak; a ping keeps homeroom's presence TTL (60 s) away.
const PING_EVERY: Duration = Duration::from_secs(20);

/// What the scenario tells every client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    pub phase: Phase,
    /// Record latency samples and count deliveries for the rate.
    pub record: bool,
    /// Bumped to drop every socket at once (a storm).
    pub drops: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// Connect and wait.
    Connect,
    /// Publishers publish, signalers signal.
    Publish,
    /// Publishing stopped: receivers wait until they have every publish.
    Drain,
    /// Close and report.
    Stop,
}

/// How a publisher publishes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PublishMode {
    /// One publish per `every` (open loop), the first at `phase` past the
    /// run's start: publishers of a rate take turns instead of publishing
    /// at the same instant.
    Every { every: Duration, phase: Duration },
    /// Flat out: keep this many publishes in flight (a publish is done when
    /// its own message comes back).
    Window(usize),
}

/// What every client of a run shares.
pub struct Shared {
    pub start: Instant,
    pub target: Target,
    pub port: u16,
    pub room: String,
    pub pad: usize,
    pub publishers: usize,
    /// Homeroom's clients ping every [`PING_EVERY`], as the browser client does.
    pub pings: bool,
    /// Clients with a first welcome (homeroom) or upgrade (baselines).
    pub connected: AtomicUsize,
    /// Clients that came back after the last drop and applied their replay.
    pub back: AtomicUsize,
    /// Receivers that have every publish (in the drain).
    pub complete: AtomicUsize,
    /// Per publisher, how many it published (set when the drain starts).
    pub final_sent: Vec<AtomicU64>,
    pub finals_set: AtomicUsize,
    /// Bounds the initial connects in flight.
    pub connect_gate: Semaphore,
    /// With a connect rate: client `i`'s first connect starts no sooner than `i` times this
    /// after the start.
    pub connect_every: Option<Duration>,
    /// Each publish's first and last receiver (runs at a rate).
    pub spread: Spread,
}

impl Shared {
    pub fn now_us(&self) -> u64 {
        self.start.elapsed().as_micros() as u64
    }

    pub fn now_ms(&self) -> u32 {
        self.start.elapsed().as_millis() as u32
    }

    fn finals(&self) -> Option<Vec<u64>> {
        (self.finals_set.load(Ordering::Acquire) >= self.publishers)
            .then(|| self.final_sent.iter().map(|a| a.load(Ordering::Acquire)).collect())
    }
}

/// Who one client is.
#[derive(Debug, Clone)]
pub struct Spec {
    pub index: usize,
    pub session: String,
    pub region: Region,
    /// Publisher index and how it publishes.
    pub publisher: Option<(u32, PublishMode)>,
    pub signal_every: Option<Duration>,
    pub seed: u64,
    /// Keeps its socket when the others are dropped.
    pub spared: bool,
}

/// Everything one client saw.
#[derive(Debug, Default)]
pub struct ClientResult {
    /// First connect: TCP + upgrade, and until the welcome (µs).
    pub connect_us: Vec<u32>,
    pub welcome_us: Vec<u32>,
    /// Reconnects after a drop: TCP + upgrade (µs).
    pub reconnect_us: Vec<u32>,
    /// Live bench messages while recording: (receive time ms, latency µs).
    pub samples: Vec<(u32, u32)>,
    /// The first deliveries over 500 ms: (receive ms, latency ms, publisher, n, seq).
    pub slow: Vec<(u32, u32, u32, u64, u64)>,
    pub delivered: u64,
    pub delivered_recorded: u64,
    /// Messages that came as a resume's replay.
    pub replayed: u64,
    /// The `missed` counts of resumed welcomes (what the room said it would replay).
    pub missed_announced: u64,
    pub gaps: u64,
    pub missing: u64,
    pub duplicates: u64,
    pub resyncs: u64,
    pub errors: BTreeMap<String, u64>,
    pub published: u64,
    pub acked: u64,
    pub unacked: u64,
    pub resent: u64,
    pub signals_sent: u64,
    pub signals_received: u64,
    /// Signal latencies while recording (µs): a signal's send to its receipt here.
    pub signal_us: Vec<u32>,
    pub drops: u32,
    /// Welcomes after a drop with `resumed: true` / `false`.
    pub resumed: u32,
    pub not_resumed: u32,
    /// When the client was back (welcome and replay applied) after the
    /// last drop, ms since the start.
    pub back_at_ms: Option<u32>,
    pub failed_connects: u32,
    /// Why connects failed (at most a few different reasons, counted).
    pub connect_errors: BTreeMap<String, u64>,
    /// Closes the client did not ask for (and drops it did not make).
    pub unexpected_closes: u32,
    pub close_codes: BTreeMap<String, u64>,
    /// Had every publish when the drain ended.
    pub complete: bool,
    pub connected: bool,
}

/// A live connection.
struct Conn {
    ws: Ws,
    /// The welcome's seq once it arrived (homeroom); replay ends there.
    welcome_seq: Option<u64>,
    /// The connection follows a drop: it is resuming.
    resuming: bool,
    opened: Instant,
    first: bool,
}

struct Client<'a> {
    spec: Spec,
    shared: &'a Shared,
    protocol: Protocol,
    order: Order,
    epoch: Option<String>,
    result: ClientResult,
    rng: Rng,
    /// homeroom: publishes sent and not yet acked, by counter, to resend.
    unacked: BTreeMap<u64, String>,
    next_n: u64,
    inflight: usize,
    finals_published: bool,
    back_counted: bool,
    complete_counted: bool,
    events: Vec<Event>,
}

/// Runs one client until the scenario says stop.
pub async fn run(
    spec: Spec,
    shared: &Shared,
    mut control: watch::Receiver<Control>,
) -> ClientResult {
    let protocol = shared.target.protocol();
    let mut c = Client {
        rng: Rng::new(spec.seed),
        order: Order::new(protocol, shared.publishers),
        spec,
        shared,
        protocol,
        epoch: None,
        result: ClientResult::default(),
        unacked: BTreeMap::new(),
        next_n: 0,
        inflight: 0,
        finals_published: false,
        back_counted: false,
        complete_counted: false,
        events: Vec::new(),
    };
    let mut ctl = *control.borrow_and_update();
    let mut conn: Option<Conn> = None;
    let mut attempt: u32 = 0;
    // When to (re)connect; None: closed for good.
    let mut connect_at: Option<Instant> = Some(Instant::now());
    let mut publish_tick = match c.spec.publisher {
        Some((_, PublishMode::Every { every, phase })) => {
            tokio::time::interval_at((shared.start + phase).into(), every)
        }
        _ => tokio::time::interval(Duration::from_secs(3600)),
    };
    publish_tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut signal_tick =
        tokio::time::interval(c.spec.signal_every.unwrap_or(Duration::from_secs(3600)));
    signal_tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    // Browsers connect at different moments, so their pings do not come
    // all at once.
    let ping_phase = Duration::from_millis(c.rng.below(PING_EVERY.as_millis() as u64));
    let mut ping_tick = tokio::time::interval_at((Instant::now() + ping_phase).into(), PING_EVERY);
    ping_tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut drain_tick = tokio::time::interval(Duration::from_millis(100));
    drain_tick.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut drops_seen = ctl.drops;

    loop {
        if ctl.phase == Phase::Stop {
            break;
        }
        if ctl.drops != drops_seen {
            drops_seen = ctl.drops;
            if let Some(live) = conn.take_if(|_| !c.spec.spared) {
                abort(live.ws);
                c.result.drops += 1;
                c.back_counted = false;
                c.inflight = 0;
                attempt = 0;
                connect_at = Some(Instant::now() + backoff::full_jitter(0, &mut c.rng));
            }
        }
        if ctl.phase == Phase::Drain {
            c.drain_step(&conn);
        }
        let Some(live) = conn.as_mut() else {
            // Not connected: wait for the reconnect time (or a control change).
            let Some(at) = connect_at else {
                if control.changed().await.is_err() {
                    break;
                }
                ctl = *control.borrow_and_update();
                continue;
            };
            tokio::select! {
                _ = sleep_until(at.into()) => {}
                changed = control.changed() => {
                    if changed.is_err() { break; }
                    ctl = *control.borrow_and_update();
                    continue;
                }
            }
            let first = !c.result.connected;
            match c.connect(first).await {
                Ok(new) => {
                    conn = Some(new);
                    connect_at = None;
                    if c.protocol == Protocol::Raw {
                        c.on_open_raw(conn.as_mut().unwrap());
                    }
                }
                Err(e) => {
                    c.result.failed_connects += 1;
                    let errors = &mut c.result.connect_errors;
                    if errors.len() < 4 || errors.contains_key(&e) {
                        *errors.entry(e).or_default() += 1;
                    }
                    attempt += 1;
                    connect_at = Some(Instant::now() + backoff::full_jitter(attempt, &mut c.rng));
                }
            }
            continue;
        };
        let can_publish = ctl.phase == Phase::Publish && live.welcome_seq.is_some();
        if can_publish {
            if let Some((_, PublishMode::Window(w))) = c.spec.publisher {
                while c.inflight < w {
                    if c.publish(live).await.is_err() {
                        break;
                    }
                }
            }
        }
        let publishing_every =
            can_publish && matches!(c.spec.publisher, Some((_, PublishMode::Every { .. })));
        let signaling = can_publish && c.spec.signal_every.is_some();
        let pinging = c.protocol == Protocol::Homeroom && shared.pings;
        let draining = ctl.phase == Phase::Drain;
        // The close code, and the key its count goes under (the code, and the reason if any).
        let mut ended: Option<(Option<u16>, String)> = None;
        tokio::select! {
            frame = live.ws.next() => match frame {
                Some(Ok(Message::Text(text))) => c.on_text(live, ctl.record, &text).await,
                Some(Ok(Message::Close(frame))) => {
                    let code = frame.as_ref().map_or(1005, |f| u16::from(f.code));
                    let reason = frame.as_ref().map_or("", |f| f.reason.as_str());
                    let key = if reason.is_empty() { code.to_string() } else { format!("{code} {reason}") };
                    ended = Some((Some(code), key))
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => ended = Some((None, "none".to_owned())),
            },
            _ = publish_tick.tick(), if publishing_every => { let _ = c.publish(live).await; }
            _ = signal_tick.tick(), if signaling => {
                let x = c.shared.now_us();
                if live.ws.send(Message::text(wire::signal_text("cursor", x))).await.is_ok() {
                    c.result.signals_sent += 1;
                }
            }
            _ = ping_tick.tick(), if pinging => {
                let _ = live.ws.send(Message::text(r#"{"type":"ping"}"#)).await;
            }
            _ = drain_tick.tick(), if draining => {}
            changed = control.changed() => {
                if changed.is_err() { break; }
                ctl = *control.borrow_and_update();
            }
        }
        if let Some((code, key)) = ended {
            conn = None;
            c.result.unexpected_closes += 1;
            *c.result.close_codes.entry(key).or_default() += 1;
            c.inflight = 0;
            connect_at =
                backoff::after_close(code, attempt, &mut c.rng).map(|d| Instant::now() + d);
            attempt += 1;
        }
    }
    if let Some(mut live) = conn.take() {
        let close = CloseFrame { code: CloseCode::Normal, reason: "bench done".into() };
        let _ = timeout(Duration::from_secs(2), live.ws.close(Some(close))).await;
    }
    c.finish()
}

/// Drops a socket the hard way: RST, no close frame (the server sees 1006).
fn abort(ws: Ws) {
    if let MaybeTlsStream::Plain(tcp) = ws.get_ref() {
        let _ = tcp.set_zero_linger();
    }
    drop(ws);
}

impl Client<'_> {
    async fn connect(&mut self, first: bool) -> Result<Conn, String> {
        let resume = match (&self.epoch, self.order.last_seq()) {
            (Some(epoch), Some(seq)) if !first => Some((seq, epoch.as_str())),
            _ => None,
        };
        let path = self.shared.target.ws_path(&self.shared.room, &self.spec.session, resume);
        let url = format!("ws://127.0.0.1:{}{path}", self.shared.port);
        let mut request = url.into_client_request().map_err(|e| e.to_string())?;
        let blob = HeaderValue::from_str(&self.spec.region.cf_blob()).map_err(|e| e.to_string())?;
        request.headers_mut().insert("MF-CF-Blob", blob);
        if let Some(every) = self.shared.connect_every.filter(|_| first) {
            tokio::time::sleep_until((self.shared.start + every * self.spec.index as u32).into())
                .await;
        }
        let _permit = if first { self.shared.connect_gate.acquire().await.ok() } else { None };
        let opened = Instant::now();
        let connecting = tokio_tungstenite::connect_async_with_config(request, None, true);
        let (ws, _) = timeout(CONNECT_TIMEOUT, connecting)
            .await
            .map_err(|_| "connect timed out".to_owned())?
            .map_err(|e| e.to_string())?;
        let us = opened.elapsed().as_micros() as u32;
        if first {
            self.result.connect_us.push(us);
        } else {
            self.result.reconnect_us.push(us);
        }
        Ok(Conn { ws, welcome_seq: None, resuming: !first, opened, first })
    }

    /// The baselines have no welcome: the upgrade is the start.
    fn on_open_raw(&mut self, live: &mut Conn) {
        live.welcome_seq = Some(0);
        if live.first {
            self.result.connected = true;
            self.shared.connected.fetch_add(1, Ordering::AcqRel);
        } else {
            self.mark_back();
        }
    }

    async fn publish(&mut self, live: &mut Conn) -> Result<(), ()> {
        let Some((p, _)) = self.spec.publisher else {
            return Err(());
        };
        let payload = Payload { t: self.shared.now_us(), p, n: self.next_n };
        let text = wire::publish_text(self.protocol, &payload, self.shared.pad);
        if self.protocol == Protocol::Homeroom {
            self.unacked.insert(payload.n, text.clone());
        }
        self.next_n += 1;
        self.result.published += 1;
        self.inflight += 1;
        live.ws.send(Message::text(text)).await.map_err(|_| ())
    }

    async fn on_text(&mut self, live: &mut Conn, record: bool, text: &str) {
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        wire::parse(self.protocol, text, &mut events);
        for event in events.drain(..) {
            self.on_event(live, record, event).await;
        }
        self.events = events;
    }

    async fn on_event(&mut self, live: &mut Conn, record: bool, event: Event) {
        match event {
            Event::Welcome { seq, epoch, resumed, missed } => {
                self.result.missed_announced += missed;
                self.order.welcome(seq);
                self.epoch = Some(epoch);
                live.welcome_seq = Some(seq);
                if live.first {
                    self.result.welcome_us.push(live.opened.elapsed().as_micros() as u32);
                    if !self.result.connected {
                        self.result.connected = true;
                        self.shared.connected.fetch_add(1, Ordering::AcqRel);
                    }
                } else if resumed {
                    self.result.resumed += 1;
                } else {
                    self.result.not_resumed += 1;
                }
                if live.resuming && self.order.last_seq().is_some_and(|l| l >= seq) {
                    self.mark_back();
                }
                // Publishes the room may not have sequenced: the same ids again.
                let pending: Vec<String> = self.unacked.values().cloned().collect();
                for text in pending {
                    self.result.resent += 1;
                    let _ = live.ws.send(Message::text(text)).await;
                }
            }
            Event::Message { seq, payload } => {
                let replay = matches!((seq, live.welcome_seq), (Some(s), Some(w)) if s <= w);
                let verdict = self.order.message(seq, payload);
                if let Some(payload) = payload.filter(|_| verdict != Verdict::Duplicate) {
                    self.result.delivered += 1;
                    if Some(payload.p) == self.spec.publisher.map(|(p, _)| p) {
                        self.inflight = self.inflight.saturating_sub(1);
                    }
                    if replay {
                        self.result.replayed += 1;
                    } else if record {
                        self.result.delivered_recorded += 1;
                        let now = self.shared.now_us();
                        let latency = now.saturating_sub(payload.t).min(u32::MAX as u64) as u32;
                        self.result.samples.push(((now / 1000) as u32, latency));
                        self.shared.spread.note(payload.p, payload.n, latency);
                        if latency > 500_000 && self.result.slow.len() < 64 {
                            let at = (now / 1000) as u32;
                            let seq = seq.unwrap_or(0);
                            self.result.slow.push((at, latency / 1000, payload.p, payload.n, seq));
                        }
                    }
                }
                if live.resuming && !self.back_counted {
                    if let (Some(w), Some(l)) = (live.welcome_seq, self.order.last_seq()) {
                        if l >= w {
                            self.mark_back();
                        }
                    }
                }
            }
            Event::Ack { n, .. } => {
                if let Some(n) = n {
                    if self.unacked.remove(&n).is_some() {
                        self.result.acked += 1;
                    }
                }
            }
            Event::Signal { x } => {
                self.result.signals_received += 1;
                if let (true, Some(x)) = (record, x) {
                    let us = self.shared.now_us().saturating_sub(x);
                    self.result.signal_us.push(u32::try_from(us).unwrap_or(u32::MAX));
                }
            }
            Event::Resync { seq } => {
                self.result.resyncs += 1;
                self.order.resync(seq);
                if live.resuming {
                    self.mark_back();
                }
            }
            Event::Error { code } => *self.result.errors.entry(code).or_default() += 1,
            Event::Mark { mark } => {
                // What every reader does: else the room holds its frames back.
                let _ = live.ws.send(Message::text(wire::mark_text(&mark))).await;
            }
            Event::Other => {}
        }
    }

    fn mark_back(&mut self) {
        if !self.back_counted {
            self.back_counted = true;
            self.result.back_at_ms = Some(self.shared.now_ms());
            self.shared.back.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// In the drain: a publisher says how many it published; a receiver
    /// tells when it has them all.
    fn drain_step(&mut self, conn: &Option<Conn>) {
        if let Some((p, _)) = self.spec.publisher {
            if !self.finals_published {
                self.finals_published = true;
                self.shared.final_sent[p as usize].store(self.next_n, Ordering::Release);
                self.shared.finals_set.fetch_add(1, Ordering::AcqRel);
            }
        }
        if self.complete_counted || conn.is_none() {
            return;
        }
        let complete = match self.shared.finals() {
            Some(finals) => self.order.has_all(&finals),
            None => false,
        };
        if complete {
            self.complete_counted = true;
            self.result.complete = true;
            self.shared.complete.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn finish(mut self) -> ClientResult {
        self.result.gaps = self.order.gaps;
        self.result.missing = self.order.missing;
        self.result.duplicates = self.order.duplicates;
        self.result.unacked = self.unacked.len() as u64;
        self.result
    }
}
