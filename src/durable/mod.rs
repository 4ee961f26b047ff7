//! The room's Durable Object: a thin adapter that turns hibernation events
//! into engine inputs and applies the engine's outputs in order.
//!
//! The engine lives in memory only while the object does. After eviction or a
//! Wasm reset the first event rebuilds it from SQLite ([`storage`]) and the
//! attachments of the sockets that stayed connected ([`sockets`]).

mod heartbeat;
mod sockets;
mod storage;

use std::cell::RefCell;

use worker::{
    durable_object, js_sys, wasm_bindgen, DurableObject, Env, Request, Response, Result,
    ScheduledTime, State, WebSocket, WebSocketIncomingMessage, WebSocketPair,
};

use crate::edge::forward::{self, Forwarded, Inbound};
use crate::logline::log;
use crate::room::{Hello, Input, Room as Engine, RoomConfig};
use sockets::Sockets;

/// The engine and the sockets it talks to, present while the object is in memory.
struct Live {
    engine: Engine,
    sockets: Sockets,
}

#[durable_object]
pub struct Room {
    state: State,
    config: RoomConfig,
    live: RefCell<Option<Live>>,
}

impl DurableObject for Room {
    fn new(state: State, env: Env) -> Self {
        console_error_panic_hook::set_once();
        // Answered by the runtime without waking the object.
        if let Ok(pair) =
            worker::WebSocketRequestResponsePair::new(r#"{"type":"ping"}"#, r#"{"type":"pong"}"#)
        {
            state.set_websocket_auto_response(&pair);
        }
        let (config, problems) =
            RoomConfig::from_vars(|name| env.var(name).ok().map(|v| v.to_string()));
        for problem in problems {
            log("config_error", serde_json::json!({ "problem": problem }));
        }
        Room {
            state,
            config,
            live: RefCell::new(None),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        let Some(routed) = forward::read(&req) else {
            return Response::error(
                "the room accepts only requests forwarded by the Worker",
                400,
            );
        };
        let origin = Origin {
            room: &routed.room,
            home: routed.home.as_deref(),
        };
        let (response, alarm) = match routed.what {
            Inbound::Connect(fwd) => self.accept(origin, fwd)?,
            Inbound::Presence => {
                let (body, alarm) =
                    self.run(Some(origin), |live, _| live.engine.presence_json())?;
                (json_response(200, body)?, alarm)
            }
            Inbound::Stats => {
                let (body, alarm) = self.run(Some(origin), |live, _| live.engine.stats_json())?;
                (json_response(200, body)?, alarm)
            }
            Inbound::Drain => {
                let (closed, alarm) = self.run(Some(origin), |live, _| live.engine.drain())?;
                log(
                    "drain",
                    serde_json::json!({"room": routed.room, "closed": closed}),
                );
                (
                    json_response(200, serde_json::json!({ "closed": closed }).to_string())?,
                    alarm,
                )
            }
            Inbound::Publish { region } => {
                let body = req.text().await?;
                self.server_publish(origin, &body, region)?
            }
        };
        self.arm(alarm).await;
        Ok(response)
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        let Some(conn) = sockets::conn_of(&ws) else {
            return Ok(());
        };
        let ((), alarm) = self.run(None, |live, now| match &message {
            WebSocketIncomingMessage::String(text) => {
                live.engine.handle(now, Input::Text { conn: &conn, text })
            }
            WebSocketIncomingMessage::Binary(bytes) => live.engine.handle(
                now,
                Input::Binary {
                    conn: &conn,
                    len: bytes.len(),
                },
            ),
        })?;
        self.arm(alarm).await;
        Ok(())
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        _reason: String,
        clean: bool,
    ) -> Result<()> {
        log("close", serde_json::json!({"code": code, "clean": clean}));
        self.gone(&ws).await
    }

    async fn websocket_error(&self, ws: WebSocket, _error: worker::Error) -> Result<()> {
        self.gone(&ws).await
    }

    async fn alarm(&self) -> Result<Response> {
        // Pings answered by the runtime never woke us: collect them now, so a
        // client that only pings is not mistaken for a dead one.
        let beats: Vec<(String, u64)> = self
            .state
            .get_websockets()
            .iter()
            .filter_map(|ws| {
                Some((
                    sockets::conn_of(ws)?,
                    heartbeat::last_answered(&self.state, ws)?,
                ))
            })
            .collect();
        let ((), alarm) = self.run(None, |live, now| {
            for (conn, at) in &beats {
                live.engine.handle(now, Input::Heartbeat { conn, at: *at });
            }
            live.engine.handle(now, Input::Timer);
        })?;
        self.arm(alarm).await;
        Response::ok("")
    }

    async fn connect(&self, _socket: worker::Socket) -> Result<()> {
        Err("rooms accept WebSockets only".into())
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

impl Room {
    /// Accepts a forwarded upgrade: a hibernatable socket, then the engine's welcome.
    fn accept(&self, origin: Origin<'_>, fwd: Forwarded) -> Result<(Response, Option<u64>)> {
        let pair = WebSocketPair::new()?;
        let conn = format!("c-{}", random_hex());
        let session_tag = format!("s:{}", fwd.session);
        let region_tag = format!("r:{}", fwd.region);
        self.state
            .accept_websocket_with_tags(&pair.server, &[&conn, &session_tag, &region_tag]);
        let hello = Hello {
            conn: conn.clone(),
            session: fwd.session,
            user: fwd.user,
            region: fwd.region,
            since: fwd.since,
            epoch: fwd.epoch,
        };
        let server = pair.server;
        let ((), alarm) = self.run(Some(origin), move |live, now| {
            live.sockets.add(conn, server);
            live.engine.handle(now, Input::Open(hello));
        })?;
        Ok((Response::from_websocket(pair.client)?, alarm))
    }

    /// A server-side publish: 200 `{"seq"}` (the original seq for a retry),
    /// or 400/413 with the error's code.
    fn server_publish(
        &self,
        origin: Origin<'_>,
        body: &str,
        region: String,
    ) -> Result<(Response, Option<u64>)> {
        if body.len() > self.config.max_frame {
            let message = format!("body over {} bytes", self.config.max_frame);
            return Ok((error_response(413, "too_large", &message)?, None));
        }
        let parsed: PublishBody = match serde_json::from_str(body) {
            Ok(p) => p,
            Err(e) => {
                let message = format!("body must be {{\"id\",\"topic\",\"data\"}}: {e}");
                return Ok((error_response(400, "invalid", &message)?, None));
            }
        };
        let (result, alarm) = self.run(Some(origin), |live, now| {
            live.engine
                .server_publish(now, parsed.id, parsed.topic, parsed.data, region)
        })?;
        let response = match result {
            Ok(seq) => json_response(200, serde_json::json!({ "seq": seq }).to_string())?,
            Err(refusal) => error_response(400, refusal.code(), &refusal.message())?,
        };
        Ok((response, alarm))
    }

    async fn gone(&self, ws: &WebSocket) -> Result<()> {
        // Complete the closing handshake; the socket may already be closed.
        let _ = ws.close(Some(1000), Some("closed"));
        let Some(conn) = sockets::conn_of(ws) else {
            return Ok(());
        };
        let ((), alarm) = self.run(None, |live, now| {
            live.sockets.remove(&conn);
            live.engine.handle(now, Input::Closed { conn: &conn });
        })?;
        self.arm(alarm).await;
        Ok(())
    }

    /// Runs `f` on the engine (rebuilding it first if the object was evicted),
    /// then applies every output in order; returns what `f` returned and the
    /// alarm the engine asked for. If storage refuses a write, the engine is
    /// dropped before anything that write would reveal is sent: the next
    /// event rebuilds it from what is really stored.
    fn run<T>(
        &self,
        origin: Option<Origin<'_>>,
        f: impl FnOnce(&mut Live, u64) -> T,
    ) -> Result<(T, Option<u64>)> {
        let mut slot = self.live.borrow_mut();
        if slot.is_none() {
            *slot = Some(self.load(origin)?);
        }
        let live = slot.as_mut().expect("loaded above");
        let out = f(live, now_ms());
        let sql = self.state.storage().sql();
        match live.sockets.apply(&mut live.engine, &sql) {
            Ok(alarm) => Ok((out, alarm)),
            Err(e) => {
                let fields =
                    serde_json::json!({"room": live.engine.name(), "error": e.to_string()});
                log("storage_error", fields);
                *slot = None;
                Err(e)
            }
        }
    }

    /// Sets the storage alarm the engine asked for (after the borrow of the
    /// engine is released: this awaits).
    async fn arm(&self, alarm: Option<u64>) {
        let Some(at) = alarm else { return };
        let when = ScheduledTime::new(js_sys::Date::new(&(at as f64).into()));
        if let Err(e) = self.state.storage().set_alarm(when).await {
            log("alarm_error", serde_json::json!({ "error": e.to_string() }));
        }
    }

    fn load(&self, origin: Option<Origin<'_>>) -> Result<Live> {
        let sql = self.state.storage().sql();
        storage::migrate(&sql)?;
        let recent = self.config.replay_limit.max(1);
        let room = origin.map(|o| o.room);
        let home = origin.and_then(|o| o.home);
        let mut snap = storage::load(&sql, room, home, || format!("e-{}", random_hex()), recent)?;
        let sockets = Sockets::restore(&self.state.get_websockets(), &mut snap.peers);
        let engine = Engine::restore(self.config.clone(), snap, now_ms());
        let fields = serde_json::json!({
            "room": engine.name(), "epoch": engine.epoch(),
            "seq": engine.seq(), "sockets": engine.connections(),
        });
        log("room_loaded", fields);
        Ok(Live { engine, sockets })
    }
}

fn json_response(status: u16, body: String) -> Result<Response> {
    let response = Response::ok(body)?.with_status(status);
    response.headers().set("content-type", "application/json")?;
    Ok(response)
}

fn error_response(status: u16, code: &str, message: &str) -> Result<Response> {
    json_response(
        status,
        serde_json::json!({ "error": code, "message": message }).to_string(),
    )
}

fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

/// 64 random bits as hex, for connection ids and epochs.
fn random_hex() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        // Unreachable on workerd (crypto.getRandomValues); fall back to time.
        bytes = now_ms().to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
