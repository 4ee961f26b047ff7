//! The room's Durable Object: a thin adapter that turns hibernation events
//! into engine inputs and applies the engine's outputs in order.
//!
//! The engine lives in memory only while the object does. After eviction or a
//! Wasm reset the first event rebuilds it from SQLite ([`storage`]) and the
//! attachments of the sockets that stayed connected ([`sockets`]).

mod sockets;
mod storage;

use std::cell::RefCell;

use worker::{
    durable_object, wasm_bindgen, DurableObject, Env, Request, Response, Result, State, WebSocket,
    WebSocketIncomingMessage, WebSocketPair,
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
        Room {
            state,
            config: RoomConfig::default(),
            live: RefCell::new(None),
        }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        let Some(fwd) = forward::read(&req) else {
            return Response::error(
                "the room accepts only requests forwarded by the Worker",
                400,
            );
        };
        self.accept(fwd)
    }

    async fn websocket_message(
        &self,
        ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        let Some(conn) = sockets::conn_of(&ws) else {
            return Ok(());
        };
        self.with_engine(None, |live, now| match &message {
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
        })
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        _code: usize,
        _reason: String,
        _clean: bool,
    ) -> Result<()> {
        self.gone(&ws)
    }

    async fn websocket_error(&self, ws: WebSocket, _error: worker::Error) -> Result<()> {
        self.gone(&ws)
    }

    async fn alarm(&self) -> Result<Response> {
        // No timers yet; an alarm that finds nothing to do is harmless.
        Response::ok("")
    }

    async fn connect(&self, _socket: worker::Socket) -> Result<()> {
        Err("rooms accept WebSockets only".into())
    }
}

impl Room {
    /// Accepts a forwarded upgrade: a hibernatable socket, then the engine's welcome.
    fn accept(&self, fwd: Forwarded) -> Result<Response> {
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
        self.with_engine(Some(&fwd.room), move |live, now| {
            live.sockets.add(conn, server);
            live.engine.handle(now, Input::Open(hello));
        })?;
        Response::from_websocket(pair.client)
    }

    fn gone(&self, ws: &WebSocket) -> Result<()> {
        // Complete the closing handshake; the socket may already be closed.
        let _ = ws.close(Some(1000), Some("closed"));
        let Some(conn) = sockets::conn_of(ws) else {
            return Ok(());
        };
        self.with_engine(None, |live, now| {
            live.sockets.remove(&conn);
            live.engine.handle(now, Input::Closed { conn: &conn });
        })
    }

    /// Runs `f` on the engine (rebuilding it first if the object was evicted),
    /// then applies every output in order. If storage refuses a write, the
    /// engine is dropped before anything that write would reveal is sent:
    /// the next event rebuilds it from what is really stored.
    fn with_engine(&self, room: Option<&str>, f: impl FnOnce(&mut Live, u64)) -> Result<()> {
        let mut slot = self.live.borrow_mut();
        if slot.is_none() {
            *slot = Some(self.load(room)?);
        }
        let live = slot.as_mut().expect("loaded above");
        f(live, now_ms());
        let sql = self.state.storage().sql();
        if let Err(e) = live.sockets.apply(&mut live.engine, &sql) {
            worker::console_error!(
                "{}",
                serde_json::json!({"event": "storage_error", "room": live.engine.name(), "error": e.to_string()})
            );
            *slot = None;
            return Err(e);
        }
        Ok(())
    }

    fn load(&self, room: Option<&str>) -> Result<Live> {
        let sql = self.state.storage().sql();
        storage::migrate(&sql)?;
        let recent = self.config.replay_limit.max(1);
        let mut snap = storage::load(&sql, room, || format!("e-{}", random_hex()), recent)?;
        let sockets = Sockets::restore(&self.state.get_websockets(), &mut snap.peers);
        let engine = Engine::restore(self.config.clone(), snap, now_ms());
        worker::console_log!(
            "{}",
            serde_json::json!({
                "event": "room_loaded", "room": engine.name(), "epoch": engine.epoch(),
                "seq": engine.seq(), "sockets": engine.connections(),
            })
        );
        Ok(Live { engine, sockets })
    }
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
