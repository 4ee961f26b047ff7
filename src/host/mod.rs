//! The room's Durable Object: a thin adapter that turns hibernation events
//! into engine inputs and applies the engine's outputs in order. A crate's
//! Durable Object class (made by [`crate::worker!`]) holds a [`Host`]
//! and hands it every event.
//!
//! The engine lives in memory only while the object does. After eviction or a
//! Wasm reset the first event rebuilds it from SQLite ([`storage`]) and the
//! attachments of the sockets that stayed connected ([`sockets`]), with a
//! fresh value of the kind's rules.

#[cfg(feature = "documents")]
mod doc;
mod event;
#[cfg(feature = "fault-injection")]
mod fault;
mod heartbeat;
mod linked;
mod links;
mod object;
mod owed;
mod relay;
mod sockets;
mod storage;
mod timer;
mod upgrade;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use worker::worker_sys::web_sys;
use worker::{
    js_sys, Env, Request, Response, Result, ScheduledTime, State, WebSocket,
    WebSocketIncomingMessage,
};

use crate::forward::{self, Forwarded, Inbound, Routed};
use crate::logline::log;
use crate::room::rules::{Rules, Vars, Who};
use crate::room::{self, Block, Input, Room as Engine, RoomConfig, Time};
use crate::settings;
#[cfg(feature = "documents")]
pub use doc::{DocHost, MakeDocRules};
#[doc(hidden)]
pub use event::settle;
use links::Links;
pub use object::{Companion, Object};
pub use relay::Relay;
use sockets::{Attached, Effects, Sockets};

/// The engine and the sockets it talks to, present while the object is in memory.
struct Live {
    engine: Engine,
    sockets: Sockets,
    /// The relays' links and the sessions they carry.
    links: Links,
    /// What [`owed`] says of this room: what the engine owed after the last turn.
    owed: owed::Owed,
}

/// Makes the rules of a kind of room from the deployment's variables: called
/// each time a room is loaded into memory (created, or after an eviction or
/// a reset).
pub type MakeRules = fn(&Vars<'_>) -> Box<dyn Rules>;

/// The rules a room runs, as the host runs them: as given, or, in a test
/// build (`fault-injection`), able to panic on demand.
pub fn hosted(rules: Box<dyn Rules>) -> Box<dyn Rules> {
    #[cfg(feature = "fault-injection")]
    let rules: Box<dyn Rules> = Box::new(fault::Panicky(rules));
    rules
}

/// What a room's Durable Object does: the class a crate declares (with
/// [`crate::worker!`]) holds one and forwards every event to it.
pub struct Host {
    inner: Rc<Inner>,
}

/// Everything the object owns, shared with the flush timer it spawns.
struct Inner {
    state: State,
    /// The object's id: its entry in [`owed`].
    key: String,
    env: Env,
    config: RoomConfig,
    rules: MakeRules,
    live: RefCell<Option<Live>>,
    /// The flush timer that is pending, if any (ms).
    wake_at: Cell<Option<Time>>,
    /// `LOG_CONNECTIONS`: a `close` line per socket gone.
    log_connections: bool,
    /// New connects go through relays (`RELAY_ABOVE`, with its hysteresis).
    relaying: Cell<bool>,
    /// The object's SQLite, fetched once: every event writes or may write.
    sql: worker::SqlStorage,
    /// The storage alarm this instance last set and has not seen fire.
    alarm_at: Cell<Option<Time>>,
    /// When this instance last had an event other than its alarm or flush timer (ms; 0: not
    /// yet): how often it looks at its links' leases ([`linked::LINK_REST_MS`]). Set from the
    /// clock the event's turn reads anyway (`busy` marks the turn).
    last_event: Cell<u64>,
    busy: Cell<bool>,
    /// Test builds: how long the home waits before it takes a relay's link ([`Inbound::Stall`]).
    #[cfg(feature = "fault-injection")]
    stall_links_ms: Cell<u64>,
}

impl Host {
    /// The host of one room object, whose rooms run the rules `rules` makes.
    pub fn new(state: State, env: Env, rules: MakeRules) -> Self {
        console_error_panic_hook::set_once();
        // Answered by the runtime without waking the object.
        if let Ok(pair) =
            worker::WebSocketRequestResponsePair::new(r#"{"type":"ping"}"#, r#"{"type":"pong"}"#)
        {
            state.set_websocket_auto_response(&pair);
        }
        let (config, problems) = RoomConfig::from_vars(|name| settings::read(&env, name));
        for problem in problems {
            log("config_error", serde_json::json!({ "problem": problem }));
        }
        let log_connections = crate::logline::connections_logged(settings::read(
            &env,
            settings::LOG_CONNECTIONS.name,
        ));
        let sql = state.storage().sql();
        let key = state.id().to_string();
        let inner = Inner {
            sql,
            key,
            state,
            env,
            config,
            rules,
            live: RefCell::new(None),
            wake_at: Cell::new(None),
            log_connections,
            relaying: Cell::new(false),
            alarm_at: Cell::new(None),
            last_event: Cell::new(0),
            busy: Cell::new(false),
            #[cfg(feature = "fault-injection")]
            stall_links_ms: Cell::new(0),
        };
        Host { inner: Rc::new(inner) }
    }

    /// A request the Worker forwarded to the room.
    pub async fn fetch(&self, req: Request) -> Result<Response> {
        // `Clone::clone`, not the JS `clone()` (which would copy the body).
        self.fetch_raw(Clone::clone(req.inner())).await.map(Response::from)
    }

    /// A request the Worker forwarded to the room, as the runtime delivered it: a connect
    /// never becomes workers-rs's `Request` or `Response` ([`upgrade`]). What the classes
    /// [`crate::worker!`] writes call; [`Host::fetch`] is the same for a `Request`.
    #[doc(hidden)]
    pub async fn fetch_raw(&self, req: web_sys::Request) -> Result<web_sys::Response> {
        self.inner.event();
        let Some(routed) = forward::read_raw(&req) else {
            let refused =
                Response::error("the room accepts only requests forwarded by the Worker", 400);
            return refused.map(Into::into);
        };
        let inner = &self.inner;
        let Inbound::Connect(fwd) = routed.what else {
            return self.routed(routed, req.into()).await.map(Into::into);
        };
        let origin = Origin { room: &routed.room, home: routed.home.as_deref() };
        let (response, effects) = inner.connect(origin, fwd)?;
        inner.after(effects).await;
        response
    }

    /// A request other than a connect.
    async fn routed(&self, routed: Routed, mut req: Request) -> Result<Response> {
        let inner = &self.inner;
        let origin = Origin { room: &routed.room, home: routed.home.as_deref() };
        // The engine has run once `run` returns: its timers are started even
        // when building the response fails after it.
        // Reading or administering a room that does not exist must not
        // create it: only a connect, or a write by the operator's backend.
        let creates = match &routed.what {
            Inbound::Connect(_) | Inbound::Publish { .. } | Inbound::PutKey { .. } => true,
            Inbound::Link { .. } => true,
            Inbound::Custom(c) => c.admin,
            _ => false,
        };
        if !creates && !inner.exists()? {
            return error_response(404, "room_not_found", "no such room");
        }
        let (response, effects) = inner.answer(origin, routed.what, &mut req).await?;
        inner.after(effects).await;
        response
    }

    /// A frame arrived on a socket of the room.
    pub async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        let conn = match sockets::attached(&ws) {
            Some(Attached::Conn(conn)) => conn,
            Some(Attached::Link(link)) => {
                // A relay still dialled to a room deleted under it: loading would make the
                // room again, nameless, for its retention.
                let text = match &message {
                    WebSocketIncomingMessage::String(text) if self.inner.exists()? => text,
                    _ => return Ok(()),
                };
                let effects = self.inner.link_message(&link, text)?;
                self.inner.after(effects).await;
                return Ok(());
            }
            None => return Ok(()),
        };
        if !self.inner.exists()? {
            return Ok(()); // a socket of a deleted room: loading would make the room again
        }
        self.inner.event();
        let ((), effects) = self.inner.run(None, |live, now| match &message {
            WebSocketIncomingMessage::String(text) => {
                live.engine.handle(now, Input::Text { conn: &conn, text })
            }
            WebSocketIncomingMessage::Binary(bytes) => {
                live.engine.handle(now, Input::Binary { conn: &conn, len: bytes.len() })
            }
        })?;
        self.inner.after(effects).await;
        Ok(())
    }

    /// A socket of the room closed.
    pub async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        _reason: String,
        clean: bool,
    ) -> Result<()> {
        self.inner.event();
        self.inner.gone(&ws, Some((code, clean))).await
    }

    /// A socket of the room failed.
    pub async fn websocket_error(&self, ws: WebSocket, _error: worker::Error) -> Result<()> {
        self.inner.event();
        self.inner.gone(&ws, None).await
    }

    /// The room's storage alarm fired.
    pub async fn alarm(&self) -> Result<Response> {
        let inner = &self.inner;
        if !inner.exists()? {
            return Response::ok(""); // a deleted room's leftover alarm
        }
        // Pings answered by the runtime never woke us: collect them now, so a
        // client that only pings is not mistaken for a dead one; only when the alarm looks for
        // silent members (a read of every socket; most alarms are a big room's summaries),
        // or when the room is not in memory to say.
        let sweeps = inner.live.borrow().as_ref().is_none_or(|l| l.engine.sweep_due(now()));
        let beats = if sweeps { heartbeat::collect(&inner.state) } else { Vec::new() };
        inner.alarm_at.set(None);
        let ((), effects) = inner.run(None, |live, now| {
            for (conn, at) in &beats {
                live.engine.handle(now, Input::Heartbeat { conn, at: *at });
            }
            live.engine.handle(now, Input::Alarm);
        })?;
        inner.after(effects).await;
        for effects in inner.expire_links()? {
            inner.after(effects).await;
        }
        Response::ok("")
    }
}

impl timer::Timed for Inner {
    fn wake_at(&self) -> &Cell<Option<Time>> {
        &self.wake_at
    }
}

/// The room a request is for, and where the Worker would place it.
#[derive(Clone, Copy)]
struct Origin<'a> {
    room: &'a str,
    home: Option<&'a str>,
}

/// The body of `POST /rooms/{room}/messages`.
#[derive(serde::Deserialize)]
struct PublishBody {
    id: String,
    topic: String,
    data: Box<serde_json::value::RawValue>,
}

/// The body of `POST /rooms/{room}/kick`.
#[derive(serde::Deserialize)]
struct KickBody {
    user: String,
    /// Refuse the user's connects for this long; 0 lifts a block; absent
    /// leaves it as it is.
    block_secs: Option<u64>,
}

/// The longest block a kick may set: 30 days.
const MAX_BLOCK_SECS: u64 = 30 * 24 * 3600;

/// How often an operator's request looks whether the links have answered a home just
/// rebuilt ([`Inner::recalled`]): an answer is a round trip to a relay.
const RECALL_POLL_MS: u64 = 5;

/// Whether what `what` does or reads depends on every member being known: a kick, a drain,
/// a delete, a presence read, the stats' topology and a rule's request.
fn counts_members(what: &Inbound) -> bool {
    matches!(
        what,
        Inbound::Presence { .. }
            | Inbound::Stats
            | Inbound::Drain
            | Inbound::Kick
            | Inbound::Delete
            | Inbound::Custom(_)
    )
}

impl Inner {
    /// What the room answers to `what` (the request `req` carries its body),
    /// and the timers its engine asked for.
    async fn answer(
        &self,
        origin: Origin<'_>,
        what: Inbound,
        req: &mut Request,
    ) -> Result<(Result<Response>, Effects)> {
        let Some(settled) = self.settled(origin, &what).await? else {
            return Ok((error_response(404, "room_not_found", "no such room"), Effects::default()));
        };
        let answered = match what {
            Inbound::Connect(fwd) => {
                let (answer, fx) = self.connect(origin, fwd)?;
                (answer.map(Response::from), fx)
            }
            Inbound::Link { relay, epoch, version } => {
                #[cfg(feature = "fault-injection")]
                self.stalled().await;
                self.link(origin, &relay, epoch, version)?
            }
            Inbound::Presence { reader, info, region } => {
                self.presence(origin, reader.as_deref(), info, &region)?
            }
            Inbound::Drain => {
                let (closed, fx) = self.run(Some(origin), |live, now| live.engine.drain(now))?;
                log("drain", serde_json::json!({"room": origin.room, "closed": closed}));
                (json_response(200, serde_json::json!({ "closed": closed }).to_string()), fx)
            }
            Inbound::Publish { region } => {
                let body = req.text().await?;
                self.server_publish(origin, &body, region)?
            }
            Inbound::Kick => {
                let body = req.text().await?;
                self.kick(origin, &body)?
            }
            #[cfg(feature = "fault-injection")]
            fault @ (Inbound::Fault
            | Inbound::Forget
            | Inbound::Nap { .. }
            | Inbound::Stall { .. }
            | Inbound::Mute
            | Inbound::Cut) => (self.fault(origin, fault).await, Effects::default()),
            Inbound::Delete => {
                let (closed, fx) = self.run(Some(origin), |live, now| live.engine.delete(now))?;
                let body = serde_json::json!({ "closed": closed, "deleted": true }).to_string();
                (json_response(200, body), fx)
            }
            Inbound::PutKey { key, region } => {
                let body = req.text().await?;
                self.server_set(origin, key, &body, region)?
            }
            Inbound::State | Inbound::Key(_) | Inbound::Log { .. } | Inbound::Stats => {
                self.read(origin, what)?
            }
            #[cfg(feature = "documents")] // never sent here (the edge routes by kind): refused
            Inbound::Doc(_) => self.read(origin, what)?,
            Inbound::Custom(custom) => {
                let body = req.text().await.unwrap_or_default();
                let request = custom.with_body(body);
                let (answer, fx) =
                    self.run(Some(origin), |live, now| live.engine.request(now, &request))?;
                match answer {
                    Some(r) => (json_response(r.status, r.body), fx),
                    None => (error_response(404, "not_found", "no such route"), fx),
                }
            }
        };
        Ok((answered.0, settled.and(answered.1)))
    }

    /// What `what` needs before it runs: every link's answer if it counts members
    /// ([`counts_members`], [`Inner::recalled`]); `None` when the room went meanwhile.
    async fn settled(&self, origin: Origin<'_>, what: &Inbound) -> Result<Option<Effects>> {
        if counts_members(what) {
            self.recalled(origin).await
        } else {
            Ok(Some(Effects::default()))
        }
    }

    /// Loads the room if it is not in memory, then waits until every link has given its
    /// sessions back, at most a link's lease: a home just rebuilt does not know its relays'
    /// sessions until they answer, and a kick, a drain or a delete must reach them, a
    /// presence read or a rule's request count them.
    /// `None` when the room left memory while it waited: deleted (a request after it must not
    /// load it again; its storage may still be going), or dropped after a storage error (the
    /// caller asks again).
    async fn recalled(&self, origin: Origin<'_>) -> Result<Option<Effects>> {
        // In memory (the usual case) the answer is read as it is; else the room is loaded.
        let known = self.live.borrow().as_ref().map(|live| live.links.recalling());
        let (recalling, fx) = match known {
            Some(recalling) => (recalling, Effects::default()),
            None => self.run(Some(origin), |live, _| live.links.recalling())?,
        };
        if recalling {
            let until = now().ms() + linked::LINK_LEASE_MS;
            let waiting = || self.live.borrow().as_ref().is_some_and(|l| l.links.recalling());
            while waiting() && now().ms() < until {
                // The links' answers come in meanwhile: only storage shuts the input gate.
                worker::Delay::from(std::time::Duration::from_millis(RECALL_POLL_MS)).await;
            }
            if self.live.borrow().is_none() {
                return Ok(None);
            }
        }
        Ok(Some(fx))
    }

    /// The operator's reads of the room's stats (with its topology), state and log.
    fn read(&self, origin: Origin<'_>, what: Inbound) -> Result<(Result<Response>, Effects)> {
        Ok(match what {
            Inbound::Stats => {
                let (body, fx) = self.run(Some(origin), |live, _| {
                    let mut stats: serde_json::Value =
                        serde_json::from_str(&live.engine.stats_json()).unwrap_or_default();
                    stats["topology"] = live.links.topology();
                    // Members whose link closed, kept for the grace while they come back.
                    stats["topology"]["away"] = live.engine.away().into();
                    stats["io"] = serde_json::json!({
                        "socket_sends": live.sockets.sends,
                        "link_messages_out": live.links.messages_out,
                        "link_messages_in": live.links.messages_in,
                        "link_behind_closes": live.links.behind_closes,
                    });
                    stats.to_string()
                })?;
                (json_response(200, body), fx)
            }
            Inbound::State => {
                let (body, fx) = self.run(Some(origin), |live, _| live.engine.state_json())?;
                (json_response(200, body), fx)
            }
            Inbound::Key(key) => {
                let (body, fx) = self.run(Some(origin), |live, _| live.engine.key_json(&key))?;
                match body {
                    Some(body) => (json_response(200, body), fx),
                    None => (error_response(404, "no_such_key", "the state has no such key"), fx),
                }
            }
            Inbound::Log { since, limit } => {
                let ((), fx) = self.run(Some(origin), |_, _| ())?;
                let entries = storage::log_after(&self.sql, since, limit)?;
                let frames: Vec<serde_json::Value> =
                    entries.iter().filter_map(|e| serde_json::from_str(&e.frame()).ok()).collect();
                (json_response(200, serde_json::json!({ "messages": frames }).to_string()), fx)
            }
            _ => (error_response(404, "not_found", "no such route"), Effects::default()),
        })
    }

    /// `GET /presence` for `reader` (the token's user, its `info`, where they are; `None` in
    /// anonymous dev mode): the list, or the engine's refusal.
    fn presence(
        &self,
        origin: Origin<'_>,
        reader: Option<&str>,
        info: Option<String>,
        region: &str,
    ) -> Result<(Result<Response>, Effects)> {
        let info = info.and_then(|i| serde_json::value::RawValue::from_string(i).ok());
        let who = reader.map(|user| Who {
            session: crate::room::READER_SESSION,
            user,
            region,
            info: info.as_deref(),
            server: false,
        });
        let (read, fx) =
            self.run(Some(origin), |live, now| live.engine.presence_read(now, who.as_ref()))?;
        match read {
            Ok(body) => Ok((json_response(200, body), fx)),
            Err(refused) => Ok((read_refused(&refused), fx)),
        }
    }

    /// A forwarded upgrade: sent back to go through a relay if the room is relayed now,
    /// else accepted.
    fn connect(
        &self,
        origin: Origin<'_>,
        fwd: Forwarded,
    ) -> Result<(Result<web_sys::Response>, Effects)> {
        match self.use_relay(origin, &fwd)? {
            (Some(answer), fx) => Ok((answer.map(Into::into), fx)),
            (None, fx) => {
                let (answer, more) = self.accept(origin, fwd)?;
                Ok((answer, fx.and(more)))
            }
        }
    }

    /// Accepts a forwarded upgrade: a hibernatable socket, then the engine's welcome.
    fn accept(
        &self,
        origin: Origin<'_>,
        fwd: Forwarded,
    ) -> Result<(Result<web_sys::Response>, Effects)> {
        // No tags: nothing looks a socket up by tag (its attachment names its connection,
        // written when the engine has admitted it).
        let upgrade::Accepted { server, response } = upgrade::accept(&self.state, None)?;
        let rand = random_u64();
        let conn = room::conn_id(rand);
        let hello = fwd.into_hello(conn.clone(), random_u64(), random_u64());
        let ((), effects) = self.run(Some(origin), move |live, now| {
            if live.links.recalling() {
                // A home just rebuilt, whose relays have not given their sessions back: no
                // open is decided before they have (`Links::hold`). Only a connect the Worker
                // sent here without asking whether the room is relayed comes this way.
                let _ = server.close(Some(1012), Some("room_recalling"));
                return;
            }
            live.sockets.add_pending(conn, server);
            live.engine.handle(now, Input::Open(hello));
        })?;
        Ok((Ok(response), effects))
    }

    /// A server-side publish: 200 `{"seq"}` (the original seq for a retry),
    /// or 400/413 with the error's code.
    fn server_publish(
        &self,
        origin: Origin<'_>,
        body: &str,
        region: String,
    ) -> Result<(Result<Response>, Effects)> {
        if body.len() > self.config.max_frame {
            let message = format!("body over {} bytes", self.config.max_frame);
            return Ok((error_response(413, "too_large", &message), Effects::default()));
        }
        let parsed: PublishBody = match serde_json::from_str(body) {
            Ok(p) => p,
            Err(e) => {
                let message = format!("body must be {{\"id\",\"topic\",\"data\"}}: {e}");
                return Ok((error_response(400, "invalid", &message), Effects::default()));
            }
        };
        let (result, effects) = self.run(Some(origin), |live, now| {
            live.engine.server_publish(now, parsed.id, parsed.topic, parsed.data, region)
        })?;
        let response = match result {
            Ok(seq) => json_response(200, serde_json::json!({ "seq": seq }).to_string()),
            Err(refusal) => error_response(400, refusal.code(), &refusal.message()),
        };
        Ok((response, effects))
    }

    /// A backend state write (`PUT /{kind}/{room}/state/{key}`, body
    /// `{"value","if_version"?,"id"?}`): 200 `{"version"}`, 409 `conflict`
    /// with the current `version`, or the rules' refusal (400).
    fn server_set(
        &self,
        origin: Origin<'_>,
        key: String,
        body: &str,
        region: String,
    ) -> Result<(Result<Response>, Effects)> {
        #[derive(serde::Deserialize)]
        struct PutBody {
            value: Box<serde_json::value::RawValue>,
            if_version: Option<u64>,
            id: Option<String>,
        }
        let parsed: PutBody = match serde_json::from_str(body) {
            Ok(p) => p,
            Err(e) => {
                let message = format!("body must be {{\"value\", \"if_version\"?, \"id\"?}}: {e}");
                return Ok((error_response(400, "invalid", &message), Effects::default()));
            }
        };
        let (result, effects) = self.run(Some(origin), |live, now| {
            live.engine.server_set(now, parsed.id, key, parsed.value, parsed.if_version, region)
        })?;
        let response = match result {
            Ok(version) => json_response(200, serde_json::json!({ "version": version }).to_string()),
            Err(crate::room::Error::Conflict { version }) => json_response(
                409,
                serde_json::json!({"error": "conflict", "message": "version mismatch", "version": version})
                    .to_string(),
            ),
            Err(refusal) => error_response(400, refusal.code(), &refusal.message()),
        };
        Ok((response, effects))
    }

    /// A kick: 200 `{"closed","blocked_until"}`, or 400 for a bad body.
    fn kick(&self, origin: Origin<'_>, body: &str) -> Result<(Result<Response>, Effects)> {
        let parsed = match serde_json::from_str::<KickBody>(body) {
            Ok(k)
                if crate::auth::valid_user(&k.user)
                    || crate::protocol::names::valid_session(&k.user) =>
            {
                k
            }
            Ok(_) => {
                let message = "`user` must be a user id as a token's `sub` carries it";
                return Ok((error_response(400, "invalid", message), Effects::default()));
            }
            Err(e) => {
                let message = format!("body must be {{\"user\", \"block_secs\"?}}: {e}");
                return Ok((error_response(400, "invalid", &message), Effects::default()));
            }
        };
        let now = now();
        let block = match parsed.block_secs {
            None => Block::Keep,
            Some(0) => Block::Lift,
            Some(secs) => Block::Until(now.plus_secs(secs.min(MAX_BLOCK_SECS))),
        };
        let until = match block {
            Block::Until(t) => Some(t),
            _ => None,
        };
        let (closed, effects) =
            self.run(Some(origin), |live, now| live.engine.kick(now, &parsed.user, block))?;
        log(
            "kick",
            serde_json::json!({"room": origin.room, "user": parsed.user, "closed": closed, "blocked_until": until}),
        );
        let body = serde_json::json!({ "closed": closed, "blocked_until": until }).to_string();
        Ok((json_response(200, body), effects))
    }

    /// Whether the room exists: in memory, or in storage (read without
    /// creating anything).
    fn exists(&self) -> Result<bool> {
        if self.live.borrow().is_some() {
            return Ok(true);
        }
        storage::exists(&self.sql)
    }

    /// A socket closed (`code` and whether it was clean) or errored.
    async fn gone(self: &Rc<Self>, ws: &WebSocket, close: Option<(usize, bool)>) -> Result<()> {
        // Complete the closing handshake; the socket may already be closed.
        let _ = ws.close(Some(1000), Some("closed"));
        if !self.exists()? {
            // A socket of a deleted room (a relay's link closing after its linger): loading
            // would make the room again, nameless, for its retention.
            return Ok(());
        }
        let conn = match sockets::attached(ws) {
            Some(Attached::Conn(conn)) => conn,
            Some(Attached::Link(tag)) => {
                let effects = self.link_gone(&tag, (1000, "closed"))?;
                self.after(effects).await;
                return Ok(());
            }
            None => return Ok(()),
        };
        let ((), effects) = self.run(None, |live, now| {
            let (code, clean) = close.map_or((None, false), |(c, k)| (Some(c), k));
            if close.is_none() || self.log_connections {
                let fields = serde_json::json!({"room": live.engine.name(), "conn": conn, "code": code, "clean": clean});
                log(if close.is_some() { "close" } else { "socket_error" }, fields);
            }
            live.sockets.remove(&conn);
            live.engine.handle(now, Input::Closed { conn: &conn });
        })?;
        self.after(effects).await;
        Ok(())
    }

    /// Runs `f` on the engine (rebuilding it first if the object was evicted),
    /// then applies every output in order; returns what `f` returned and the
    /// timers the engine asked for. If storage refuses a write, the engine is
    /// dropped before anything that write would reveal is sent: the next
    /// event rebuilds it from what is really stored.
    fn run<T>(
        &self,
        origin: Option<Origin<'_>>,
        f: impl FnOnce(&mut Live, Time) -> T,
    ) -> Result<(T, Effects)> {
        let mut slot = self.live.borrow_mut();
        if slot.is_none() {
            *slot = Some(self.load(origin)?);
        }
        let live = slot.as_mut().expect("loaded above");
        let now = now();
        if self.busy.replace(false) {
            self.last_event.set(now.ms());
        }
        let out = f(live, now);
        // Frames that waited a lease for their relay's answer: their writers resume instead.
        let parked = live.links.parked(now.ms(), linked::LINK_LEASE_MS);
        let sql = &self.sql;
        let applied = live.sockets.apply(&mut live.engine, &mut live.links, sql, now);
        let applied = applied.and_then(|fx| Ok(fx.and(self.close_behind(live, sql, now)?)));
        let applied = applied.map(|mut fx| {
            if let Some(at) = parked.map(Time::from_ms) {
                fx.wake = Some(fx.wake.map_or(at, |w| w.min(at)));
            }
            fx
        });
        match applied {
            Ok(effects) => {
                let engine = &live.engine;
                // A deleted room's engine is spent and owes nothing: a note left behind would
                // keep its look (`owed`) running after the memory it watches is gone.
                let owed = if effects.delete {
                    owed::Owed::default()
                } else {
                    owed::Owed { presence: engine.presence_owed(), frames: engine.frames_owed() }
                };
                if owed != live.owed {
                    live.owed = owed;
                    owed::mark(&self.key, self.state.as_raw(), owed);
                }
                if effects.delete {
                    // The engine is spent; the next event finds no room. Its relays' links
                    // close (after the closes of their clients, already sent down them): a
                    // relay left dialled would speak for a room that is gone.
                    log("room_deleted", serde_json::json!({"room": live.engine.name()}));
                    live.links.close_all(4404, "room_deleted");
                    *slot = None;
                }
                Ok((out, effects))
            }
            Err(e) => {
                let fields =
                    serde_json::json!({"room": live.engine.name(), "error": e.to_string()});
                log("storage_error", fields);
                // Frames of earlier writes may still wait for the end of the
                // turn in the engine about to be dropped. Rather than leave a
                // client without an ack or a message it will not miss until
                // the next one, every socket is closed (1011): clients resume
                // from what they applied and resend what was not acked.
                live.sockets.close_all(1011, "storage error");
                live.links.close_all(1011, "storage error");
                // With every socket closed nothing is owed (and the note's look stops).
                if live.owed != owed::Owed::default() {
                    owed::mark(&self.key, self.state.as_raw(), owed::Owed::default());
                }
                *slot = None;
                Err(e)
            }
        }
    }

    /// Starts the timers the engine asked for, once the engine is no longer
    /// borrowed: the storage alarm (awaited) and the short flush timer.
    async fn after(self: &Rc<Self>, effects: Effects) {
        if effects.delete {
            let storage = self.state.storage();
            let deleted = async {
                storage.delete_alarm().await?;
                storage.delete_all().await
            };
            if let Err(e) = deleted.await {
                log(
                    "storage_error",
                    serde_json::json!({ "error": e.to_string(), "during": "delete" }),
                );
            }
            return;
        }
        if let Some(at) = effects.wake {
            self.schedule_flush(at);
        }
        if let Some(at) = self.alarm_wanted(effects.alarm) {
            self.alarm_at.set(Some(at));
            let when = ScheduledTime::new(js_sys::Date::new(&(at.ms() as f64).into()));
            if let Err(e) = self.state.storage().set_alarm(when).await {
                log("alarm_error", serde_json::json!({ "error": e.to_string() }));
            }
        }
    }

    /// An event that is not the object's own timer (nor a relay's answer to the home's own
    /// recall, which a wake from hibernation asks for): the room is not at rest.
    fn event(&self) {
        self.busy.set(true);
    }

    /// When the storage alarm should fire, if it must be set (again): what the engine asked
    /// for, or, while the room has relays' links, no later than half a link lease from now
    /// (the check that expires a hung relay's sessions; at rest, [`linked::LINK_REST_MS`]
    /// after its last event, no later than `presence_ttl_ms` from now), whichever is first.
    /// An alarm the engine did not ask for only makes it look at its deadlines early.
    fn alarm_wanted(&self, asked: Option<Time>) -> Option<Time> {
        let linked = self.live.borrow().as_ref().is_some_and(|l| l.links.any());
        if asked.is_none() && !linked {
            return None; // what is set stays (most turns, a connect's among them)
        }
        let now = now();
        // An alarm that is due but has not fired yet must not be replaced by a later one: that
        // would cancel it (the runtime keeps one alarm). One overdue by more than a minute is
        // taken for lost.
        let pending = self.alarm_at.get().filter(|p| p.plus_ms(60_000) > now);
        let lease = linked.then(|| now.plus_ms(self.lease_check_ms(now)));
        let want = [asked, lease, pending].into_iter().flatten().min()?;
        (Some(want) != pending).then_some(want)
    }

    /// How soon the home looks at its links' leases again: every half lease while the room
    /// is busy, every `presence_ttl_ms` once it has been quiet for [`linked::LINK_REST_MS`]
    /// (the runtime hibernates an object only after about 10 s with no event).
    fn lease_check_ms(&self, now: Time) -> u64 {
        let resting = now.ms() >= self.last_event.get() + linked::LINK_REST_MS;
        if resting {
            self.config.presence_ttl_ms.max(linked::LINK_LEASE_MS / 2)
        } else {
            linked::LINK_LEASE_MS / 2
        }
    }

    /// The flush timer (see [`timer`]).
    fn schedule_flush(self: &Rc<Self>, at: Time) {
        timer::schedule(self, at, |this| async move {
            // What the timer was for went with the engine (deleted, or
            // dropped after a storage error): nothing to flush or reload.
            if this.live.borrow().is_none() {
                return;
            }
            match this.run(None, |live, now| live.engine.handle(now, Input::Wake)) {
                Ok(((), effects)) => this.after(effects).await,
                Err(e) => log("flush_error", serde_json::json!({ "error": e.to_string() })),
            }
        });
    }

    /// The test builds' faults ([`Inbound::Fault`] and those after it).
    #[cfg(feature = "fault-injection")]
    async fn fault(&self, origin: Origin<'_>, what: Inbound) -> Result<Response> {
        match what {
            Inbound::Fault => {
                // What a bug would do: abort mid-event. The runtime resets the
                // Wasm instance; the next event rebuilds the room from storage
                // and the sockets' attachments.
                log("fault_injected", serde_json::json!({"room": origin.room}));
                panic!("fault injection: a forced Wasm reset in room {}", origin.room);
            }
            Inbound::Forget => self.forget(origin),
            Inbound::Nap { ms } => nap(ms).await,
            Inbound::Stall { ms } => {
                let ms = ms.min(60_000);
                self.stall_links_ms.set(ms);
                log("fault_injected", serde_json::json!({"room": origin.room, "stall_ms": ms}));
                json_response(200, serde_json::json!({ "stall_ms": ms }).to_string())
            }
            _ => error_response(404, "not_found", "a room has no link of its own"),
        }
    }

    /// A relay's link request waits out the stall the test build was asked for, if any.
    #[cfg(feature = "fault-injection")]
    async fn stalled(&self) {
        let ms = self.stall_links_ms.get();
        if ms > 0 {
            worker::Delay::from(std::time::Duration::from_millis(ms)).await;
        }
    }

    /// What an eviction does (test builds' `forget`): the memory goes, the sockets and
    /// links stay; the next event rebuilds the room.
    #[cfg(feature = "fault-injection")]
    fn forget(&self, origin: Origin<'_>) -> Result<Response> {
        let forgot = self.live.borrow_mut().take().is_some();
        log("fault_injected", serde_json::json!({"room": origin.room, "forgot": forgot}));
        json_response(200, serde_json::json!({ "forgot": forgot }).to_string())
    }

    fn load(&self, origin: Option<Origin<'_>>) -> Result<Live> {
        let sql = &self.sql;
        storage::migrate(sql)?;
        let recent = self.config.replay_limit.max(1);
        let room = origin.map(|o| o.room);
        let home = origin.and_then(|o| o.home);
        let new_epoch = || room::epoch_id(random_u64());
        let mut snap = storage::load(sql, room, home, new_epoch, recent, now())?;
        snap.nonce = random_u64();
        // What the room owed its clients when its memory last went (a Wasm reset).
        let owed = owed::take(&self.key);
        (snap.presence_owed, snap.frames_owed) = (owed.presence, owed.frames);
        let all = self.state.get_websockets();
        let sockets = Sockets::restore(&all, &mut snap.peers);
        let mut links = Links::restore(sql, &all, (snap.nonce, snap.seq))?;
        let env = &self.env;
        let var = |name: &str| settings::read(env, name);
        let rules = (self.rules)(&Vars::new(&var));
        let mut engine = Engine::restore_with(self.config.clone(), rules, snap, now());
        // After each recall: the relays that mirror the state start again from this one.
        links.mirror_all(&engine.state_text());
        let fields = serde_json::json!({
            "room": engine.name(), "epoch": engine.epoch(),
            "seq": engine.seq(), "sockets": engine.connections(),
        });
        log("room_loaded", fields);
        Ok(Live { engine, sockets, links, owed: owed::Owed::default() })
    }
}

pub(super) fn json_response(status: u16, body: String) -> Result<Response> {
    let response = Response::ok(body)?.with_status(status);
    response.headers().set("content-type", "application/json")?;
    Ok(response)
}

pub(super) fn error_response(status: u16, code: &str, message: &str) -> Result<Response> {
    json_response(status, serde_json::json!({ "error": code, "message": message }).to_string())
}

/// A refused read: its status and code, and when to ask again.
fn read_refused(refused: &crate::room::ReadRefusal) -> Result<Response> {
    let response = error_response(refused.status(), refused.code(), &refused.message())?;
    if let crate::room::ReadRefusal::Budget { retry_ms, .. } = refused {
        response.headers().set("retry-after", &retry_ms.div_ceil(1000).max(1).to_string())?;
    }
    Ok(response)
}

/// The runtime's clock, which the engine has none of.
fn now() -> Time {
    Time::from_ms(crate::clock::now_ms())
}

/// Waits `ms` (at most 5 s) on a timer from the handler's first poll, whose waker the timer
/// keeps, then answers how long (test builds: `host::settle` must forward that wake).
#[cfg(feature = "fault-injection")]
async fn nap(ms: u64) -> Result<Response> {
    let ms = ms.min(5_000);
    worker::Delay::from(std::time::Duration::from_millis(ms)).await;
    json_response(200, serde_json::json!({ "napped": ms }).to_string())
}

/// 64 random bits, for connection ids, epochs and the engine's jitter.
fn random_u64() -> u64 {
    // Drawn 32 at a time: each draw is a call out to the runtime (a connect takes three).
    thread_local! {
        static POOL: RefCell<(Vec<u64>, usize)> = const { RefCell::new((Vec::new(), 0)) };
    }
    POOL.with_borrow_mut(|(pool, next)| {
        if *next >= pool.len() {
            let mut bytes = [0u8; 256];
            if getrandom::fill(&mut bytes).is_err() {
                // Unreachable on workerd (crypto.getRandomValues); fall back to time.
                return now().ms();
            }
            *pool = bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect();
            *next = 0;
        }
        *next += 1;
        pool[*next - 1]
    })
}
