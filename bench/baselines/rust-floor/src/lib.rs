//! The plain JavaScript room's object (bench/baselines/plain) written in Rust, twice: `Floor`
//! through workers-rs's `#[durable_object]` (its Request and Response conversions, its futures
//! turned into promises), and `BareFloor`, a wasm-bindgen class whose `fetch` answers at once.
//! Each accepts every upgrade and sends every text to every socket; neither does anything of
//! homeroom's. `BareWelcome` is `BareFloor` sending one welcome-sized text on each new socket,
//! as `plain-welcome` is the plain object's: the least a Rust object can do at a connect that
//! must tell its member something. `bench/split` and `bench/once` measure what a connect costs
//! each, beside the plain object.

use wasm_bindgen::prelude::*;
use worker::worker_sys::{web_sys, DurableObjectState, WebSocketPair as RawPair};
use worker::{
    durable_object, DurableObject, Env, Request, Response, Result, State, WebSocket,
    WebSocketIncomingMessage, WebSocketPair,
};

#[durable_object]
pub struct Floor {
    state: State,
}

impl DurableObject for Floor {
    fn new(state: State, _env: Env) -> Self {
        Floor { state }
    }

    async fn fetch(&self, _req: Request) -> Result<Response> {
        let pair = WebSocketPair::new()?;
        self.state.accept_web_socket(&pair.server);
        Response::from_websocket(pair.client)
    }

    async fn websocket_message(
        &self,
        _ws: WebSocket,
        message: WebSocketIncomingMessage,
    ) -> Result<()> {
        if let WebSocketIncomingMessage::String(text) = message {
            for ws in self.state.get_websockets() {
                let _ = ws.send_with_str(&text);
            }
        }
        Ok(())
    }

    async fn websocket_close(
        &self,
        ws: WebSocket,
        code: usize,
        reason: String,
        _clean: bool,
    ) -> Result<()> {
        let code = if code == 1005 || code == 1006 { 1000 } else { code as u16 };
        let _ = ws.close(Some(code), Some(reason));
        Ok(())
    }
}

#[wasm_bindgen]
pub struct BareFloor {
    state: DurableObjectState,
}

#[wasm_bindgen]
impl BareFloor {
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, _env: JsValue) -> BareFloor {
        BareFloor { state }
    }

    pub fn fetch(&self, _req: web_sys::Request) -> std::result::Result<web_sys::Response, JsValue> {
        accept(&self.state, None)
    }

    #[wasm_bindgen(js_name = webSocketMessage)]
    pub fn websocket_message(&self, _ws: web_sys::WebSocket, message: JsValue) {
        fan_out(&self.state, &message);
    }

    #[wasm_bindgen(js_name = webSocketClose)]
    pub fn websocket_close(&self, ws: web_sys::WebSocket, code: u16, reason: String, _clean: bool) {
        close_back(&ws, code, &reason);
    }
}

/// Every text to every socket, as the plain room does.
fn fan_out(state: &DurableObjectState, message: &JsValue) {
    if let Some(text) = message.as_string() {
        for ws in state.get_websockets().unwrap_or_default() {
            let _ = ws.send_with_str(&text);
        }
    }
}

/// A client's close, answered (1005 and 1006 may not be sent: 1000 instead).
fn close_back(ws: &web_sys::WebSocket, code: u16, reason: &str) {
    let code = if code == 1005 || code == 1006 { 1000 } else { code };
    let _ = ws.close_with_code_and_reason(code, reason);
}

/// The pair, the accept, `welcome` sent on the new socket (if any), and the 101.
fn accept(
    state: &DurableObjectState,
    welcome: Option<&str>,
) -> std::result::Result<web_sys::Response, JsValue> {
    let mut pair = RawPair::new()?;
    let (client, server) = (pair.client()?, pair.server()?);
    state.accept_websocket(&server)?;
    if let Some(text) = welcome {
        server.send_with_str(text)?;
    }
    let init = web_sys::ResponseInit::new();
    init.set_status(101);
    js_sys::Reflect::set(&init, &"webSocket".into(), &client)?;
    web_sys::Response::new_with_opt_str_and_init(None, &init)
}

/// `BareFloor` that answers each connect with one text of the plain-welcome baseline's size
/// (about homeroom's welcome to a member of a big room).
#[wasm_bindgen]
pub struct BareWelcome {
    state: DurableObjectState,
    welcome: String,
}

#[wasm_bindgen]
impl BareWelcome {
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, _env: JsValue) -> BareWelcome {
        let welcome = format!(r#"{{"type":"welcome","pad":"{}"}}"#, "x".repeat(600));
        BareWelcome { state, welcome }
    }

    pub fn fetch(&self, _req: web_sys::Request) -> std::result::Result<web_sys::Response, JsValue> {
        accept(&self.state, Some(&self.welcome))
    }

    #[wasm_bindgen(js_name = webSocketMessage)]
    pub fn websocket_message(&self, _ws: web_sys::WebSocket, message: JsValue) {
        fan_out(&self.state, &message);
    }

    #[wasm_bindgen(js_name = webSocketClose)]
    pub fn websocket_close(&self, ws: web_sys::WebSocket, code: u16, reason: String, _clean: bool) {
        close_back(&ws, code, &reason);
    }
}

#[wasm_bindgen(inline_js = "export function floor_send(ws, text) { ws.send(text); }")]
extern "C" {
    #[wasm_bindgen(catch)]
    fn floor_send(ws: &web_sys::WebSocket, text: &JsValue) -> std::result::Result<(), JsValue>;
}

/// `BareWelcome` whose welcome is one JavaScript string made once, not a text copied out of
/// the Wasm's memory on every connect.
#[wasm_bindgen]
pub struct BareWelcomeKept {
    state: DurableObjectState,
    welcome: JsValue,
}

#[wasm_bindgen]
impl BareWelcomeKept {
    #[wasm_bindgen(constructor)]
    pub fn new(state: DurableObjectState, _env: JsValue) -> BareWelcomeKept {
        let text = format!(r#"{{"type":"welcome","pad":"{}"}}"#, "x".repeat(600));
        BareWelcomeKept { state, welcome: JsValue::from_str(&text) }
    }

    pub fn fetch(&self, _req: web_sys::Request) -> std::result::Result<web_sys::Response, JsValue> {
        let mut pair = RawPair::new()?;
        let (client, server) = (pair.client()?, pair.server()?);
        self.state.accept_websocket(&server)?;
        floor_send(&server, &self.welcome)?;
        let init = web_sys::ResponseInit::new();
        init.set_status(101);
        js_sys::Reflect::set(&init, &"webSocket".into(), &client)?;
        web_sys::Response::new_with_opt_str_and_init(None, &init)
    }

    #[wasm_bindgen(js_name = webSocketMessage)]
    pub fn websocket_message(&self, _ws: web_sys::WebSocket, message: JsValue) {
        fan_out(&self.state, &message);
    }

    #[wasm_bindgen(js_name = webSocketClose)]
    pub fn websocket_close(&self, ws: web_sys::WebSocket, code: u16, reason: String, _clean: bool) {
        close_back(&ws, code, &reason);
    }
}

/// The Worker: `GET /rooms/{room}/ws` to the room's object (of the class bound as `ROOMS`),
/// anything else 404, as the plain room's Worker does.
#[worker::event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: worker::Context) -> Result<Response> {
    let path = req.path();
    let room = path.strip_prefix("/rooms/").and_then(|p| p.strip_suffix("/ws"));
    let upgrade =
        req.headers().get("Upgrade")?.is_some_and(|u| u.eq_ignore_ascii_case("websocket"));
    match room {
        Some(room) if upgrade && !room.is_empty() && room.len() <= 64 && !room.contains('/') => {
            let ns = env.durable_object("ROOMS")?;
            ns.id_from_name(room)?.get_stub()?.fetch_with_request(req).await
        }
        _ => Response::error("not found", 404),
    }
}
