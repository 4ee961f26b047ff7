//! What the rooms' memory owes their clients ([`Engine::presence_owed`], [`Engine::frames_owed`]),
//! kept in JavaScript, where a Wasm reset does not reach: the glue makes a new instance with
//! the same imports, so this module's map outlives the instance whose memory held the debt,
//! and the room's next load settles it ([`crate::room::Snapshot::presence_owed`],
//! [`crate::room::Snapshot::frames_owed`]).
//!
//! A room that owes is looked at again [`OWED_CHECK_MS`] later, in JavaScript too: if the Wasm
//! instance has been replaced since (workers-rs counts its instances) and nothing has loaded the
//! room, the look sets the room's storage alarm for now, whose event loads it. Without that a
//! room quiet after a reset kept its debt until its next event: a member's frame, or the alarm
//! of its heartbeat sweep, up to `PRESENCE_TTL_MS` (60 s) away.
//!
//! [`Engine::presence_owed`]: crate::room::Room::presence_owed
//! [`Engine::frames_owed`]: crate::room::Room::frames_owed

use worker::wasm_bindgen::prelude::wasm_bindgen;
use worker::worker_sys::DurableObjectState;

/// How soon after a room starts to owe, and then how often while it still does, JavaScript
/// looks for a Wasm reset that left the debt behind (a timer, no event into the Wasm).
pub const OWED_CHECK_MS: u64 = 1_000;

#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, inline_js = r#"
const owed = new Map(); // key -> { bits, by: the instance that noted them }
const watched = new Set();
function instance() {
  return globalThis.__worker_init_state?.instanceId;
}
function watch(key, state, ms) {
  watched.add(key);
  setTimeout(() => {
    watched.delete(key);
    const debt = owed.get(key);
    if (!debt) return;
    if (debt.by === instance()) return watch(key, state, ms);
    // The instance that owed is gone and nothing has loaded the room since: its alarm will.
    state.storage.setAlarm(Date.now()).catch(() => {});
  }, ms);
}
export function homeroom_owe(key, bits, state, ms) {
  if (!bits) {
    owed.delete(key);
    return;
  }
  owed.set(key, { bits, by: instance() });
  if (!watched.has(key)) watch(key, state, ms);
}
export function homeroom_owed(key) {
  const bits = owed.get(key)?.bits ?? 0;
  owed.delete(key);
  return bits;
}
"#)]
extern "C" {
    fn homeroom_owe(key: &str, bits: u8, state: &DurableObjectState, ms: u32);
    fn homeroom_owed(key: &str) -> u8;
}

/// What one room's memory owes: presence changes, frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Owed {
    pub presence: bool,
    pub frames: bool,
}

impl Owed {
    fn bits(self) -> u8 {
        u8::from(self.presence) | (u8::from(self.frames) << 1)
    }
}

/// The room of object `key` (whose state is `state`) owes this now. Called only when it changes
/// (a window's start and end, a queue filling and emptying), not every turn. At most one entry,
/// and one pending look ([`OWED_CHECK_MS`]), per object of this isolate that owes something or
/// whose memory went while it did and that has not loaded since.
pub fn mark(key: &str, state: &DurableObjectState, owed: Owed) {
    homeroom_owe(key, owed.bits(), state, OWED_CHECK_MS as u32);
}

/// What the room of object `key` owed when its memory went; forgets it.
pub fn take(key: &str) -> Owed {
    let bits = homeroom_owed(key);
    Owed { presence: bits & 1 != 0, frames: bits & 2 != 0 }
}
