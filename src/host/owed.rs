//! The rooms whose memory owes their readers presence changes ([`Engine::presence_owed`]),
//! kept in JavaScript, where a Wasm reset does not reach: the glue makes a new instance with
//! the same imports, so this module's set outlives the instance whose memory held the
//! changes, and the room's next load sends every reader the whole list
//! ([`crate::room::Snapshot::presence_owed`]).
//!
//! [`Engine::presence_owed`]: crate::room::Room::presence_owed

use worker::wasm_bindgen::prelude::wasm_bindgen;

#[wasm_bindgen(wasm_bindgen = ::worker::wasm_bindgen, inline_js = r#"
const owed = new Set();
export function homeroom_owe(key, yes) {
  if (yes) owed.add(key);
  else owed.delete(key);
}
export function homeroom_owed(key) {
  return owed.delete(key);
}
"#)]
extern "C" {
    fn homeroom_owe(key: &str, yes: bool);
    fn homeroom_owed(key: &str) -> bool;
}

/// The room of object `key` owes presence (`true`) or no longer does (`false`). Called only
/// when that changes: a window's start and end, not every turn. At most one entry per object
/// of this isolate that owed presence when its memory went and has not loaded since.
pub fn mark(key: &str, owed: bool) {
    homeroom_owe(key, owed);
}

/// Whether the room of object `key` owed presence when its memory went; forgets it.
pub fn take(key: &str) -> bool {
    homeroom_owed(key)
}
