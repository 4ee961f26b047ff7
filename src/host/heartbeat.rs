//! When the runtime last answered a ping on a socket by itself (the
//! hibernation auto-response). workers-rs does not bind
//! `getWebSocketAutoResponseTimestamp`, so it is bound here.

use worker::wasm_bindgen::prelude::*;
use worker::wasm_bindgen::JsCast;
use worker::{js_sys, web_sys, worker_sys, State, WebSocket};

use crate::room::Time;

#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen)]
extern "C" {
    /// The same `DurableObjectState`, seen with the one method we need.
    #[wasm_bindgen(extends = js_sys::Object)]
    type StateWithTimestamps;

    #[wasm_bindgen(method, catch, js_name = getWebSocketAutoResponseTimestamp)]
    fn get_web_socket_auto_response_timestamp(
        this: &StateWithTimestamps,
        ws: &web_sys::WebSocket,
    ) -> Result<JsValue, JsValue>;
}

/// Every socket's last ping the runtime answered, by connection: the [`Input::Heartbeat`]s
/// of an alarm that looks for silent members (`Room::sweep_due`).
///
/// [`Input::Heartbeat`]: crate::room::Input::Heartbeat
pub fn collect(state: &State) -> Vec<(String, Time)> {
    let sockets = state.get_websockets();
    let beat = |ws: &WebSocket| Some((super::sockets::conn_of(ws)?, last_answered(state, ws)?));
    sockets.iter().filter_map(beat).collect()
}

/// When the runtime last answered a ping on `ws`, if it has.
pub fn last_answered(state: &State, ws: &WebSocket) -> Option<Time> {
    let raw: &worker_sys::DurableObjectState = state.as_raw();
    let value = raw
        .unchecked_ref::<StateWithTimestamps>()
        .get_web_socket_auto_response_timestamp(ws.as_ref())
        .ok()?;
    let date: js_sys::Date = value.dyn_into().ok()?;
    Some(Time::from_ms(date.get_time() as u64))
}
