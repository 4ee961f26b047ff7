//! What the rooms' memory owes their clients ([`Engine::presence_owed`], [`Engine::frames_owed`]),
//! kept in JavaScript, where a Wasm reset does not reach: the glue makes a new instance with
//! the same imports, so this module's map outlives the instance whose memory held the debt,
//! and the room's next load settles it ([`crate::room::Snapshot::presence_owed`],
//! [`crate::room::Snapshot::frames_owed`]).
//!
//! [`Engine::presence_owed`]: crate::room::Room::presence_owed
//! [`Engine::frames_owed`]: crate::room::Room::frames_owed

use worker::wasm_bindgen::prelude::wasm_bindgen;

#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, inline_js = r#"
const owed = new Map();
export function homeroom_owe(key, bits) {
  if (bits) owed.set(key, bits);
  else owed.delete(key);
}
export function homeroom_owed(key) {
  const bits = owed.get(key) ?? 0;
  owed.delete(key);
  return bits;
}
"#)]
extern "C" {
    fn homeroom_owe(key: &str, bits: u8);
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

/// The room of object `key` owes this now. Called only when it changes (a window's start and
/// end, a queue filling and emptying), not every turn. At most one entry per object of this
/// isolate whose memory went while it owed something and that has not loaded since.
pub fn mark(key: &str, owed: Owed) {
    homeroom_owe(key, owed.bits());
}

/// What the room of object `key` owed when its memory went; forgets it.
pub fn take(key: &str) -> Owed {
    let bits = homeroom_owed(key);
    Owed { presence: bits & 1 != 0, frames: bits & 2 != 0 }
}
