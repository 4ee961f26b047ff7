//! The runtime's wall clock, for the Worker and the objects alike: one crossing of the Wasm
//! boundary (`Date.now()`), where workers-rs's `Date::now()` makes a `Date` object and reads it
//! (three crossings: about 2% of a relay's connect in a profile).

/// Milliseconds since the Unix epoch, as the runtime tells them (frozen within an event).
pub fn now_ms() -> u64 {
    worker::js_sys::Date::now() as u64
}
