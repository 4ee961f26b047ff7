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

use crate::edge::forward::{self, Forwarded};
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

    async fn fetch(&self, req: Request) -> Result<Response> {
        match forward::read(&req) {
            Some(forward::Inbound::Connect(fwd)) => {
                let (response, alarm) = self.accept(fwd)?;
                self.arm(alarm).await;
                Ok(response)
            }
            Some(forward::Inbound::Presence { room }) => {
                let (body, alarm) = self.run(Some(&room), |live, _| live.engine.presence_json())?;
                self.arm(alarm).await;
                Response::ok(body).map(|r| {
                    let _ = r.headers().set("content-type", "application/json");
                    r
                })
            }
            None => Response::error(
                "the room accepts only requests forwarded by the Worker",
                400,
            ),
        }
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
        _code: usize,
        _reason: String,
        _clean: bool,
    ) -> Result<()> {
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

impl Room {
    /// Accepts a forwarded upgrade: a hibernatable socket, then the engine's welcome.
    fn accept(&self, fwd: Forwarded) -> Result<(Response, Option<u64>)> {
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
        let ((), alarm) = self.run(Some(&fwd.room), move |live, now| {
            live.sockets.add(conn, server);
            live.engine.handle(now, Input::Open(hello));
        })?;
        Ok((Response::from_websocket(pair.client)?, alarm))
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
        room: Option<&str>,
        f: impl FnOnce(&mut Live, u64) -> T,
    ) -> Result<(T, Option<u64>)> {
        let mut slot = self.live.borrow_mut();
        if slot.is_none() {
            *slot = Some(self.load(room)?);
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

    fn load(&self, room: Option<&str>) -> Result<Live> {
        let sql = self.state.storage().sql();
        storage::migrate(&sql)?;
        let recent = self.config.replay_limit.max(1);
        let mut snap = storage::load(&sql, room, || format!("e-{}", random_hex()), recent)?;
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

/// One structured log line: `{"event": event, ...fields}`.
fn log(event: &str, mut fields: serde_json::Value) {
    if let Some(map) = fields.as_object_mut() {
        map.insert("event".into(), event.into());
    }
    worker::console_log!("{fields}");
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
