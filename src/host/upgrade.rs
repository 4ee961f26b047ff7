//! Accepting a WebSocket upgrade in one call out to the runtime (the pair, the 101 response,
//! the hibernatable accept and the socket's attachment), and a socket's attachment read and
//! written as the JS string it is.
//!
//! Through workers-rs the same took about a dozen crossings of the Wasm boundary per connect
//! (the pair and its two halves, a `Headers`, a `ResponseInit` set field by field, the
//! response, the accept, the attachment through `serde_wasm_bindgen`): a connect is what a
//! storm is made of, and its crossings were the largest share of its CPU (bench/README.md,
//! "Where a connect's CPU goes").

use worker::wasm_bindgen::prelude::wasm_bindgen;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::ext::WebSocketExt as _;
use worker::worker_sys::{self, web_sys};
use worker::{js_sys, State, WebSocket};

#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, inline_js = r#"
export function homeroom_fanout(all, text, skip) {
  let sent = 0;
  for (const ws of all) {
    if (skip !== undefined && skip.has(ws)) continue;
    // A socket closing under us reports its close event next: a refused send is not an error.
    try {
      ws.send(text);
      sent++;
    } catch {}
  }
  return sent;
}

export function homeroom_accept(state, attachment) {
  const pair = new WebSocketPair();
  // Made before the socket is accepted: once the object holds it, nothing may fail before
  // the client has its answer.
  const response = new Response(null, { status: 101, webSocket: pair[0] });
  state.acceptWebSocket(pair[1]);
  if (attachment !== undefined) pair[1].serializeAttachment(attachment);
  return [pair[1], response];
}
"#)]
extern "C" {
    fn homeroom_fanout(all: &js_sys::Set, text: &JsValue, skip: Option<&js_sys::Set>) -> u32;

    #[wasm_bindgen(catch)]
    fn homeroom_accept(
        state: &worker_sys::DurableObjectState,
        attachment: Option<&str>,
    ) -> Result<js_sys::Array, JsValue>;
}

/// A socket the object has accepted, and the answer that hands the client its end.
pub struct Accepted {
    pub server: WebSocket,
    pub response: web_sys::Response,
}

/// Makes a socket pair, accepts its server end on `state` (hibernatable, no tags), with
/// `attachment` as its attachment if given; the 101 response carries the client's end.
pub fn accept(state: &State, attachment: Option<&str>) -> worker::Result<Accepted> {
    let both = homeroom_accept(state.as_raw(), attachment)?;
    let server: web_sys::WebSocket = both.get(0).unchecked_into();
    let response: web_sys::Response = both.get(1).unchecked_into();
    Ok(Accepted { server: server.into(), response })
}

/// Writes a socket's attachment (a JSON text: every attachment homeroom writes is one). Fails
/// past the runtime's 16 KiB.
pub fn attach(ws: &WebSocket, text: &str) -> worker::Result<()> {
    let socket: &web_sys::WebSocket = ws.as_ref();
    socket.serialize_attachment(JsValue::from_str(text))?;
    Ok(())
}

/// Closes a socket the room has decided to end (a kick, a block, a superseded or doomed
/// connection), first writing over its attachment so that no later load takes it for a member.
/// The runtime keeps listing a socket whose client never answered the close, and the client may
/// keep writing on it: its frame loads the room again, and with its record still attached it
/// was taken back as a member, a blocked user's writes stored and sent to everyone
/// (`attacks::tokens::a_blocked_socket_that_never_answers_its_close_stays_out_after_a_reload`).
/// A socket without a record is nobody's: its frames are dropped.
pub fn close_for_good(ws: &WebSocket, code: u16, reason: &str) {
    let _ = attach(ws, CLOSED);
    let _ = ws.close(Some(code), Some(reason));
}

/// The attachment of a socket the room closed: no kind reads a member out of it.
const CLOSED: &str = r#"{"closed":true}"#;

/// A socket's attachment, if it has one ([`attach`] wrote it).
pub fn attachment(ws: &WebSocket) -> Option<String> {
    let socket: &web_sys::WebSocket = ws.as_ref();
    socket.deserialize_attachment().ok()?.as_string()
}

/// Sends `text` (a JS string) to every socket in `all` but those in `skip`, in one call out of
/// the Wasm: the per-socket loop of a broadcast, where a room's time goes. Returns how many
/// sends the runtime took.
pub fn fanout(all: &js_sys::Set, text: &JsValue, skip: Option<&js_sys::Set>) -> u32 {
    homeroom_fanout(all, text, skip)
}
