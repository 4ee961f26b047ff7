//! The relay's Durable Object: a thin adapter around [`crate::relay::Relay`]. It accepts a
//! region's client sockets (forwarded by the Worker, hibernatable like the home's), dials the
//! room's home for its link (a WebSocket the home accepts; an outgoing socket keeps the relay
//! in memory while it is open), and applies the engine's outputs in order.
//!
//! A relay keeps nothing it cannot lose: after a Wasm reset or a lost link it closes its
//! clients (1012) and they resume, through a new instance with a higher epoch. The epoch is
//! the only thing it stores (one row), and it deletes it 10 s after its last client leaves (the
//! next instance takes an epoch from the clock, above any before it).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use futures::StreamExt as _;
use worker::worker_sys::web_sys;
use worker::{
    js_sys, wasm_bindgen_futures, Delay, Env, Method, Request, Response, Result, ScheduledTime,
    State, WebSocket, WebSocketIncomingMessage, WebsocketEvent,
};

use super::sockets::{self, Sockets};
use super::{error_response, heartbeat, json_response, now, random_u64};
use crate::forward::{self, Forwarded, Inbound, Routed, Via};
use crate::logline::log;
use crate::relay::{self as engine, Input, Output};
use crate::room::{self, RoomConfig, Time};
use crate::settings;

/// The close a relay gives a client it cannot speak for (its engine is gone: a reset).
const RESTARTED: (u16, &str) = (engine::RESTART, "relay_restarted");
/// The longest a relay's storage alarm waits while it has clients. After a Wasm reset the
/// relay's memory and its link are gone but its clients' sockets stay connected (and the
/// runtime answers their pings): the alarm is what finds them and closes them (1012), so
/// they resume through a new instance within this bound.
const WATCH_MS: u64 = 5_000;
/// What a relay sends its link at every watch (the home's runtime answers it without waking
/// the home: the sign of life the home's lease counts), and the answer.
const PING: &str = r#"{"type":"ping"}"#;
const PONG: &str = r#"{"type":"pong"}"#;
/// How long a relay keeps its instance and its link after its last client leaves. A client
/// back within it (a reload, a reconnect) finds the link up; and a member who connects and
/// leaves in a loop through a relay nobody else uses costs the home a new link (the room's
/// parts and its whole state sent, the registry written) at most once per this per relay,
/// not once per connect.
const LINGER_MS: u64 = 10_000;
/// The most bytes a relay keeps for its home while it dials it (what its clients said
/// meanwhile, and their opens: a storm's of several seconds). A dial that takes long, while
/// a client sends as fast as it can, must not grow the relay's memory until the dial's lease
/// runs out: past this the instance stops and its clients resume (1012 `link_dial_overflow`).
const DIAL_HOLD_BYTES: usize = 16 * 1024 * 1024;

/// A relay of a kind's rooms: declare it as the kind's companion in [`crate::worker!`],
/// `, companion RoomRelay(homeroom::host::Relay), binding "ROOM_RELAYS"`, and a SQLite class
/// for it in `wrangler.toml`. The Worker routes a relayed room's connects to it (README,
/// "Relays").
pub struct Relay {
    inner: Rc<RelayInner>,
}

struct RelayInner {
    state: State,
    env: Env,
    config: RoomConfig,
    live: RefCell<Option<Live>>,
    /// The end-of-turn timer that is pending, if any (ms).
    wake_at: Cell<Option<Time>>,
    /// `LINK_DELAY_MS` (benchmarks: a home an ocean away), 0 where tokens are on.
    link_delay: u64,
    /// The tail of the room's log the last instance kept, for the next one (memory only: a
    /// reset loses it, and the home then sends catch-ups itself).
    tail: RefCell<Option<engine::Tail>>,
}

/// Where the relay's home is.
struct Route {
    room: String,
    home: Option<String>,
    home_binding: String,
}

/// The link as the adapter holds it.
enum Link {
    /// Being dialed: what goes up waits.
    Dialing(Vec<String>),
    Open(WebSocket),
}

/// An instance of the relay, in memory while it has clients.
struct Live {
    engine: engine::Relay,
    route: Route,
    clients: Sockets,
    link: Link,
    /// The link's last sign of life (ms): its opening, a message or a pong; while it is being
    /// dialed, the instance's start.
    heard: u64,
    /// Test builds: the relay plays one that hangs (forwards nothing, pings nothing).
    muted: bool,
    /// Since when the instance has had no client (ms): it stops [`LINGER_MS`] after, unless
    /// one came meanwhile.
    idle_since: Option<u64>,
    /// The bytes kept for the home while the link is dialed ([`DIAL_HOLD_BYTES`]).
    dialing_bytes: usize,
}

impl super::Companion for Relay {
    fn new(state: State, env: Env) -> Self {
        console_error_panic_hook::set_once();
        if let Ok(pair) =
            worker::WebSocketRequestResponsePair::new(r#"{"type":"ping"}"#, r#"{"type":"pong"}"#)
        {
            state.set_websocket_auto_response(&pair);
        }
        let (config, _) = RoomConfig::from_vars(|name| settings::read(&env, name));
        // A deployment with tokens never waits, whatever the variable says.
        let link_delay = match settings::read(&env, settings::AUTH_SECRET) {
            Some(_) => 0,
            None => settings::read(&env, settings::LINK_DELAY_MS.name)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
                .min(10_000),
        };
        let inner = RelayInner {
            state,
            env,
            config,
            live: RefCell::new(None),
            wake_at: Cell::new(None),
            link_delay,
            tail: RefCell::new(None),
        };
        Relay { inner: Rc::new(inner) }
    }
}

impl super::Object for Relay {
    async fn fetch(&self, req: Request) -> Result<Response> {
        // `Clone::clone`, not the JS `clone()` (which would copy the body).
        self.fetch_raw(Clone::clone(req.inner())).await.map(Response::from)
    }

    /// A connect never becomes workers-rs's `Request` or `Response` ([`super::upgrade`]).
    async fn fetch_raw(&self, req: web_sys::Request) -> Result<web_sys::Response> {
        let Some(routed) = forward::read_raw(&req) else {
            let refused =
                error_response(400, "invalid", "a relay takes requests from the Worker only");
            return refused.map(Into::into);
        };
        let Some(via) = routed.via.clone() else {
            let refused = error_response(400, "invalid", "a relay takes requests for a relay only");
            return refused.map(Into::into);
        };
        let room = routed.room;
        let answer = match routed.what {
            Inbound::Connect(fwd) => {
                let route =
                    Route { room, home: routed.home, home_binding: via.home_binding.clone() };
                return self.inner.accept(route, &via, fwd);
            }
            Inbound::Stats => json_response(200, self.inner.stats(&via)),
            #[cfg(feature = "fault-injection")]
            Inbound::Mute => {
                if let Some(live) = self.inner.live.borrow_mut().as_mut() {
                    live.muted = true;
                }
                log("relay_muted", serde_json::json!({"room": room, "relay": via.relay}));
                json_response(200, "{}".into())
            }
            #[cfg(feature = "fault-injection")]
            Inbound::Cut => {
                let epoch = self.inner.live.borrow().as_ref().map(|l| l.engine.epoch());
                log("link_cut", serde_json::json!({"room": room, "relay": via.relay}));
                if let Some(epoch) = epoch {
                    self.inner.link_lost(epoch);
                }
                json_response(200, serde_json::json!({ "cut": epoch.is_some() }).to_string())
            }
            #[cfg(feature = "fault-injection")]
            Inbound::Fault => {
                log("fault_injected", serde_json::json!({"room": room, "relay": via.relay}));
                panic!("fault injection: a forced Wasm reset in relay {}", via.relay);
            }
            _ => error_response(404, "not_found", "a relay answers connects and stats"),
        };
        answer.map(Into::into)
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        let Some(conn) = sockets::conn_of(&ws) else {
            return Ok(());
        };
        let inner = &self.inner;
        if inner.live.borrow().is_none() {
            inner.orphaned();
            return Ok(());
        }
        match &message {
            WebSocketIncomingMessage::String(text) => {
                inner.run(|e, now| e.handle(now, Input::Text { conn: &conn, text }));
            }
            WebSocketIncomingMessage::Binary(bytes) => {
                let len = bytes.len();
                inner.run(|e, now| e.handle(now, Input::Binary { conn: &conn, len }));
            }
        }
        Ok(())
    }

    async fn websocket_close(&self, ws: WebSocket, _: usize, _: String, _: bool) -> Result<()> {
        let _ = ws.close(Some(1000), Some("closed"));
        if let Some(conn) = sockets::conn_of(&ws) {
            self.inner.client_gone(&conn);
        }
        Ok(())
    }

    async fn websocket_error(&self, ws: WebSocket, _: worker::Error) -> Result<()> {
        if let Some(conn) = sockets::conn_of(&ws) {
            self.inner.client_gone(&conn);
        }
        Ok(())
    }

    async fn alarm(&self) -> Result<Response> {
        let inner = &self.inner;
        if inner.live.borrow().is_none() {
            inner.orphaned();
            return Response::ok("");
        }
        // The runtime's answers to pings, only when the engine may sweep (every 5 s the watch
        // wakes the relay too).
        let sweeps = inner.live.borrow().as_ref().is_some_and(|l| l.engine.sweep_due(now()));
        let beats = if sweeps { heartbeat::collect(&inner.state) } else { Vec::new() };
        inner.run(|e, now| {
            for (conn, at) in &beats {
                e.handle(now, Input::Heartbeat { conn, at: *at });
            }
            e.handle(now, Input::Alarm);
        });
        inner.tend_link();
        Response::ok("")
    }
}

impl super::timer::Timed for RelayInner {
    fn wake_at(&self) -> &Cell<Option<Time>> {
        &self.wake_at
    }
}

impl RelayInner {
    /// A client the Worker vouched for: accepted, and opened at the home over the link.
    fn accept(
        self: &Rc<Self>,
        route: Route,
        via: &Via,
        fwd: Forwarded,
    ) -> Result<web_sys::Response> {
        if self.live.borrow().is_none() {
            self.start(route, via)?;
        }
        let conn = format!("{}.{}", via.relay, room::conn_id(random_u64()));
        let attachment = serde_json::json!({ "conn": conn }).to_string();
        let accepted = super::upgrade::accept(&self.state, Some(&attachment))?;
        let hello = fwd.into_hello(conn.clone(), random_u64(), random_u64());
        if let Some(live) = self.live.borrow_mut().as_mut() {
            live.clients.add(conn, accepted.server);
        }
        self.run(|e, now| e.handle(now, Input::Open(hello)));
        Ok(accepted.response)
    }

    /// A new instance: the next epoch (stored), and the sockets an instance before a reset
    /// left behind closed, as nothing speaks for them any more.
    fn start(self: &Rc<Self>, route: Route, via: &Via) -> Result<()> {
        let sql = self.state.storage().sql();
        sql.exec(
            "CREATE TABLE IF NOT EXISTS relay_meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL)",
            None,
        )?;
        #[derive(serde::Deserialize)]
        struct Row {
            v: i64,
        }
        let rows: Vec<Row> =
            sql.exec("SELECT v FROM relay_meta WHERE k = 'epoch'", None)?.to_array()?;
        let stored = rows.first().map_or(0, |r| r.v as u64);
        let epoch = (stored + 1).max(now().ms());
        sql.exec(
            "INSERT OR REPLACE INTO relay_meta (k, v) VALUES ('epoch', ?)",
            vec![worker::SqlStorageValue::Integer(epoch as i64)],
        )?;
        self.orphaned();
        let mut engine = engine::Relay::new(&via.relay, epoch, self.config.clone());
        if let Some(tail) = self.tail.borrow_mut().take() {
            engine = engine.with_tail(tail);
        }
        let fields = serde_json::json!({"room": route.room, "relay": via.relay, "epoch": epoch,
            "home_binding": route.home_binding});
        log("relay_started", fields);
        let live = Live {
            engine,
            route,
            clients: Sockets::default(),
            link: Link::Dialing(Vec::new()),
            heard: now().ms(),
            muted: false,
            idle_since: None,
            dialing_bytes: 0,
        };
        *self.live.borrow_mut() = Some(live);
        let this = Rc::clone(self);
        wasm_bindgen_futures::spawn_local(async move { this.dial().await });
        Ok(())
    }

    /// Closes every client socket (1012): no instance speaks for them (they outlived one in a
    /// Wasm reset), so they resume through the next.
    fn orphaned(&self) {
        for ws in self.state.get_websockets() {
            let _ = ws.close(Some(RESTARTED.0), Some(RESTARTED.1));
        }
    }

    /// Runs `f` on the engine and applies its outputs in order (nothing if the instance is
    /// gone).
    fn run(self: &Rc<Self>, f: impl FnOnce(&mut engine::Relay, Time)) {
        let (alarm, wake, end, linger) = {
            let mut slot = self.live.borrow_mut();
            let Some(live) = slot.as_mut() else {
                return;
            };
            let now = now();
            f(&mut live.engine, now);
            let (mut alarm, mut wake) = live.apply(self.link_delay);
            let idle = live.engine.clients() == 0;
            if idle {
                // What went up with the last close goes first: the end of the turn, now.
                live.engine.handle(now, Input::Wake);
                (alarm, wake) = live.apply(self.link_delay);
            }
            let overflow = live.dialing_bytes > DIAL_HOLD_BYTES;
            let end = match live.engine.spent() {
                true => Some("relay_replaced"),
                false => overflow.then_some("link_dial_overflow"),
            };
            // Newly idle: it lingers ([`LINGER_MS`]) before it lets its link go.
            let became = if idle { live.idle_since.is_none() } else { false };
            live.idle_since = if idle { live.idle_since.or(Some(now.ms())) } else { None };
            let linger = live.idle_since.filter(|_| became).map(|at| (at, live.engine.epoch()));
            (alarm, wake, end, linger)
        };
        if let Some(why) = end {
            if why == "link_dial_overflow" {
                log(why, serde_json::json!({"bytes": DIAL_HOLD_BYTES}));
            }
            self.stop(why);
            return;
        }
        if let Some((since, epoch)) = linger {
            self.linger(since, epoch);
        }
        if let Some(at) = wake {
            self.schedule_flush(at);
        }
        if let Some(at) = alarm {
            let at = at.min(now().plus_ms(WATCH_MS));
            let storage = self.state.storage();
            wasm_bindgen_futures::spawn_local(async move {
                let when = ScheduledTime::new(js_sys::Date::new(&(at.ms() as f64).into()));
                if let Err(e) = storage.set_alarm(when).await {
                    log("alarm_error", serde_json::json!({ "error": e.to_string() }));
                }
            });
        }
    }

    /// Stops the instance `epoch` [`LINGER_MS`] after it had its last client at `since`, if it
    /// has had none since. (Its open link keeps it in memory meanwhile: an object that dials
    /// out does not hibernate.)
    fn linger(self: &Rc<Self>, since: u64, epoch: u64) {
        let this = Rc::clone(self);
        wasm_bindgen_futures::spawn_local(async move {
            Delay::from(Duration::from_millis(LINGER_MS)).await;
            let still = this
                .live
                .borrow()
                .as_ref()
                .is_some_and(|l| l.engine.epoch() == epoch && l.idle_since == Some(since));
            if still {
                this.stop("relay_idle");
            }
        });
    }

    /// A client's socket closed: the home hears it (a relay left with no client lets its link
    /// go and forgets its epoch [`LINGER_MS`] later, so that it can leave memory: see
    /// [`RelayInner::run`]).
    fn client_gone(self: &Rc<Self>, conn: &str) {
        if let Some(live) = self.live.borrow_mut().as_mut() {
            live.clients.remove(conn);
        }
        self.run(|e, now| e.handle(now, Input::Closed { conn }));
    }

    /// Ends this instance: its link is closed and its stored epoch deleted.
    fn stop(&self, why: &str) {
        let Some(mut live) = self.live.borrow_mut().take() else {
            return;
        };
        // A storm's members all gone at once leave an idle relay: the tail is what their
        // resumes catch up from when they come back.
        *self.tail.borrow_mut() = Some(live.engine.take_tail());
        if let Link::Open(ws) = &live.link {
            let _ = ws.close(Some(1000), Some(why));
        }
        live.clients.close_all(RESTARTED.0, why);
        // Synchronous, so that an instance started right after (a client that reconnects at
        // once) cannot lose what it writes to a deletion still on its way. A pending alarm
        // fires once more and finds nothing to do.
        let _ = self.state.storage().sql().exec("DELETE FROM relay_meta", None);
    }

    /// Opens the link to the home, sends what waited for it, and feeds the home's messages
    /// to the engine until it closes.
    async fn dial(self: Rc<Self>) {
        let ask = match self.live.borrow().as_ref() {
            Some(live) => {
                let what = Inbound::Link {
                    relay: live.engine.name().to_owned(),
                    epoch: live.engine.epoch(),
                    version: crate::protocol::link::LINK_VERSION,
                };
                let r = &live.route;
                let routed = Routed { room: r.room.clone(), home: r.home.clone(), what, via: None };
                (routed, r.home_binding.clone())
            }
            None => return,
        };
        let epoch = ask.0.what_epoch();
        match self.open_link(&ask.0, &ask.1).await {
            Ok(ws) => {
                let waiting = {
                    let mut slot = self.live.borrow_mut();
                    match slot.as_mut() {
                        Some(live) if live.engine.epoch() == epoch => {
                            live.heard = now().ms();
                            live.dialing_bytes = 0;
                            std::mem::replace(&mut live.link, Link::Open(ws.clone()))
                        }
                        _ => {
                            let _ = ws.close(Some(1000), Some("relay_idle"));
                            return;
                        }
                    }
                };
                if let Link::Dialing(ups) = waiting {
                    for up in ups {
                        send_up(&ws, up, self.link_delay);
                    }
                }
                self.listen(ws, epoch).await;
            }
            Err(e) => {
                log("link_error", serde_json::json!({"room": ask.0.room, "error": e.to_string()}));
                self.link_lost(epoch);
            }
        }
    }

    async fn open_link(&self, routed: &Routed, binding: &str) -> Result<WebSocket> {
        let req = forward::request(routed, None, Method::Get, None)?;
        let namespace = self.env.durable_object(binding)?;
        let stub = match &routed.home {
            Some(hint) => namespace.get_by_name_with_location_hint(&routed.room, hint)?,
            None => namespace.get_by_name(&routed.room)?,
        };
        let response = stub.fetch_with_request(req).await?;
        let ws = response.websocket().ok_or("the home did not take the link")?;
        ws.accept()?;
        Ok(ws)
    }

    async fn listen(self: &Rc<Self>, ws: WebSocket, epoch: u64) {
        if let Ok(mut events) = ws.events() {
            while let Some(event) = events.next().await {
                match event {
                    Ok(WebsocketEvent::Message(m)) => {
                        let Some(text) = m.text() else { continue };
                        if let Some(live) = self.live.borrow_mut().as_mut() {
                            live.heard = now().ms();
                        }
                        if text == PONG {
                            continue;
                        }
                        if self.link_delay == 0 {
                            self.run(|e, now| e.handle(now, Input::Down(&text)));
                            continue;
                        }
                        // Timers of one length fire in the order they were set: the
                        // messages keep their order, and the close below comes after them.
                        // One that fires after its instance ended (an idle relay stops) is
                        // not fed to the next instance.
                        let (this, delay) = (self.clone(), self.link_delay);
                        wasm_bindgen_futures::spawn_local(async move {
                            Delay::from(Duration::from_millis(delay)).await;
                            let same = this
                                .live
                                .borrow()
                                .as_ref()
                                .is_some_and(|l| l.engine.epoch() == epoch);
                            if same {
                                this.run(|e, now| e.handle(now, Input::Down(&text)));
                            }
                        });
                    }
                    Ok(WebsocketEvent::Close(_)) | Err(_) => break,
                }
            }
        }
        if self.link_delay > 0 {
            Delay::from(Duration::from_millis(self.link_delay)).await;
        }
        self.link_lost(epoch);
    }

    /// At every watch: pings the link (the home's lease counts the runtime's answers), and
    /// takes a link silent past the lease (no message, no pong) for lost; and a dial the home
    /// has not answered within the lease of the instance's start too. Without that, a dial
    /// that hangs (the runtime never settles the home's `fetch`) leaves every client of the
    /// instance waiting for a welcome that cannot come, for as long as they stay: closed
    /// (1012), they resume through the next instance, which dials again.
    fn tend_link(self: &Rc<Self>) {
        let lost = {
            let slot = self.live.borrow();
            let Some(live) = slot.as_ref() else { return };
            let lease = super::linked::LINK_LEASE_MS;
            let past = live.heard + lease < now().ms();
            match &live.link {
                Link::Open(ws) => {
                    if !live.muted {
                        let _ = ws.send_with_str(PING);
                    }
                    // A hung relay (test builds) notices nothing: the home's lease must.
                    (!live.muted && past).then_some((live.engine.epoch(), "link_silent"))
                }
                Link::Dialing(_) => past.then_some((live.engine.epoch(), "link_dial_timeout")),
            }
        };
        if let Some((epoch, event)) = lost {
            log(event, serde_json::json!({"epoch": epoch}));
            self.link_lost(epoch);
        }
    }

    /// The link of instance `epoch` is gone: if that is still the instance, its clients are
    /// closed (1012) and resume through the next one.
    fn link_lost(self: &Rc<Self>, epoch: u64) {
        let current = self.live.borrow().as_ref().is_some_and(|l| l.engine.epoch() == epoch);
        if current {
            self.run(|e, now| e.handle(now, Input::LinkClosed { epoch: epoch + 1 }));
            self.stop("relay_link_lost");
        }
    }

    /// The end-of-turn timer (see [`super::timer`]).
    fn schedule_flush(self: &Rc<Self>, at: Time) {
        super::timer::schedule(self, at, |this| async move {
            this.run(|e, now| e.handle(now, Input::Wake));
        });
    }

    fn stats(&self, via: &Via) -> String {
        let slot = self.live.borrow();
        let Some(live) = slot.as_ref() else {
            return serde_json::json!({"relay": via.relay, "running": false}).to_string();
        };
        let s = live.engine.stats();
        serde_json::json!({
            "relay": via.relay, "running": true, "epoch": live.engine.epoch(),
            "clients": live.engine.clients(),
            "link": if matches!(live.link, Link::Open(_)) { "open" } else { "dialing" },
            "up": s.up, "down": s.down, "bad_down": s.bad_down,
            "local_signals": s.local_signals, "local_signals_refused": s.local_signals_refused,
            "timed_out": s.timed_out, "binary_dropped": s.binary_dropped, "bytes_refused": s.bytes_refused,
            "home_signals": s.home_signals, "signals_coalesced": s.signals_coalesced, "signals_shed": s.signals_shed,
            "recalls": s.recalls, "tail": live.engine.tail_len(),
            "tail_replays": s.tail_replays, "tail_frames": s.tail_frames, "tail_lost": s.tail_lost,
            "echoes": s.echoes, "backlog_closes": s.backlog_closes, "welcomes": s.welcomes,
            "state_replies": s.state_replies,
            "stalled_closes": s.stalled_closes, "waiting_bytes": live.engine.waiting_bytes(),
        })
        .to_string()
    }
}

impl Routed {
    /// The epoch a link request speaks as.
    fn what_epoch(&self) -> u64 {
        match self.what {
            Inbound::Link { epoch, .. } => epoch,
            _ => 0,
        }
    }
}

impl Live {
    /// Applies the engine's outputs in order (what goes up after `delay` ms, benchmarks
    /// only); returns the timers it asked for.
    fn apply(&mut self, delay: u64) -> (Option<Time>, Option<Time>) {
        let (mut alarm, mut wake) = (None, None::<Time>);
        while let Some(out) = self.engine.poll_output() {
            match out {
                Output::Up(_) if self.muted => {}
                Output::Up(text) => match &mut self.link {
                    Link::Open(ws) => send_up(ws, text, delay),
                    Link::Dialing(waiting) => {
                        self.dialing_bytes += text.len();
                        waiting.push(text);
                    }
                },
                Output::Send { conn, frame } => {
                    if let Some(ws) = self.clients.get(&conn) {
                        let _ = ws.send_with_str(&*frame);
                    }
                }
                Output::Multicast { conns, frame } => {
                    let text = worker::wasm_bindgen::JsValue::from_str(&frame);
                    for conn in &conns {
                        if let Some(ws) = self.clients.get(conn) {
                            sockets::send_shared(ws, &text);
                        }
                    }
                }
                Output::AllBut { skip, frame } => {
                    self.clients.send_all_but(&frame, &skip);
                }
                Output::Close { conn, code, reason } => {
                    if let Some(ws) = self.clients.remove(&conn) {
                        super::upgrade::close_for_good(&ws, code, &reason);
                    }
                }
                Output::SetAlarm(at) => alarm = Some(at),
                Output::SetWake(at) => wake = Some(wake.map_or(at, |w| w.min(at))),
            }
        }
        (alarm, wake)
    }
}

/// Sends one link message up, at once or (`LINK_DELAY_MS`, benchmarks only) after `delay` ms.
fn send_up(ws: &WebSocket, text: String, delay: u64) {
    if delay == 0 {
        let _ = ws.send_with_str(&text);
        return;
    }
    let ws = ws.clone();
    wasm_bindgen_futures::spawn_local(async move {
        Delay::from(Duration::from_millis(delay)).await;
        let _ = ws.send_with_str(&text);
    });
}
