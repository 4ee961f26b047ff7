//! The document engine's rows, measured natively in this process (no runtime): what a frame
//! costs in a document of many Yjs clients against one of a single client, and what `yrs`
//! takes to merge a run of one-character items against one insertion of the same text. Each
//! pair runs here, in the same run, so the ratio is the figure to read.

use std::time::Instant;

use homeroom::doc::{wire, DocConfig, DocRoom, Member};
use yrs::encoding::write::Write;
use yrs::{Doc, Text, Transact};

/// Yjs clients of the big document (a GC block each: two blocks of the census apiece).
pub const CLIENTS: u64 = 50_000;
/// Edits timed in each document.
const EDITS: u32 = 2_000;
/// Items of the run.
pub const RUN: u64 = 60_000;

/// The engine's figures.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct EngineRows {
    /// Microseconds an editor's one-character edit takes the room, in a document of one other
    /// client and in one of [`CLIENTS`] (after the first, which builds the census).
    pub edit_us_one: f64,
    pub edit_us_many: f64,
    /// Milliseconds the room takes for one update of [`RUN`] one-character items each after
    /// the one before, and for one insertion of as many characters.
    pub run_ms: f64,
    pub insertion_ms: f64,
}

fn config() -> DocConfig {
    // Budgets out of the way: this is about the engine's work, not its pacing.
    DocConfig {
        frames_per_sec: 1 << 30,
        frame_burst: 1 << 30,
        bytes_per_sec: 1 << 40,
        ..DocConfig::default()
    }
}

fn editor() -> Member {
    Member {
        user: "ed".into(),
        read_only: false,
        extensions: false,
        expires: None,
        anonymous: false,
    }
}

/// An update of `clients` Yjs clients (from 1,000,000 on), one GC block each.
fn many_clients(clients: u64) -> Vec<u8> {
    let mut u = Vec::new();
    u.write_var(clients);
    for c in 0..clients {
        u.write_var(1u32); // one block
        u.write_var(1_000_000 + c);
        u.write_var(0u32); // from clock 0
        u.write_u8(0); // GC
        u.write_var(1u32);
    }
    u.write_var(0u32);
    u
}

/// Microseconds per one-character edit in a room whose document first took `first`.
fn edit_us(first: &[u8]) -> f64 {
    let mut room = DocRoom::new(config(), 1);
    room.open(0, 1, editor());
    room.message(0, 1, &wire::update(first));
    let typist = Doc::with_client_id(7);
    let text = typist.get_or_insert_text("text");
    let edits: Vec<Vec<u8>> = (0..EDITS)
        .map(|_| {
            let mut txn = typist.transact_mut();
            let at = text.len(&txn);
            text.insert(&mut txn, at, "x");
            wire::update(&txn.encode_update_v1())
        })
        .collect();
    // The first edit builds the census from the whole document (once a load): not timed.
    room.message(1, 1, &edits[0]);
    room.take_effects();
    let start = Instant::now();
    for (i, frame) in edits.iter().enumerate().skip(1) {
        room.message(1 + i as u64, 1, frame);
        room.take_effects();
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(EDITS - 1)
}

/// Milliseconds the room takes to apply `update` to an empty document.
fn apply_ms(update: &[u8]) -> f64 {
    let mut room = DocRoom::new(config(), 1);
    room.open(0, 1, editor());
    room.take_effects();
    let frame = wire::update(update);
    let start = Instant::now();
    room.message(1, 1, &frame);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    room.take_effects();
    ms
}

/// One update of [`RUN`] one-character items from one client, each after the one before.
fn run() -> Vec<u8> {
    let mut u = Vec::new();
    u.write_var(1u32);
    u.write_var(RUN);
    u.write_var(9u64);
    u.write_var(0u32);
    u.write_u8(4); // a string, parent next: the root "text"
    u.write_var(1u32);
    u.write_string("text");
    u.write_string("x");
    for clock in 1..RUN {
        u.write_u8(0x84); // a string after its left origin
        u.write_var(9u64);
        u.write_var(clock - 1);
        u.write_string("x");
    }
    u.write_var(0u32);
    u
}

/// The same text, one insertion.
fn insertion() -> Vec<u8> {
    let doc = Doc::with_client_id(9);
    let text = doc.get_or_insert_text("text");
    let mut txn = doc.transact_mut();
    text.insert(&mut txn, 0, &"x".repeat(RUN as usize));
    txn.encode_update_v1()
}

/// Measures the rows (a few seconds).
pub fn measure() -> EngineRows {
    let one = many_clients(1);
    let many = many_clients(CLIENTS);
    EngineRows {
        edit_us_one: edit_us(&one),
        edit_us_many: edit_us(&many),
        run_ms: apply_ms(&run()),
        insertion_ms: apply_ms(&insertion()),
    }
}

/// The rows as a Markdown section.
pub fn section(rows: &EngineRows) -> String {
    format!(
        "\n### The document engine, natively\n\n`homeroom-bench docs` also times the engine in its own process ([`bench/src/doc_engine.rs`](src/doc_engine.rs)): each pair in the same run.\n\n| measure | figure | against | ratio |\n|---|---:|---:|---:|\n| an editor's one-character edit in a document of {CLIENTS} Yjs clients, against one of 1 (µs) | {:.1} | {:.1} | {:.2}× |\n| one update of {RUN} one-character items each after the one before, against one insertion of as many (ms) | {:.1} | {:.1} | {:.2}× |\n",
        rows.edit_us_many,
        rows.edit_us_one,
        rows.edit_us_many / rows.edit_us_one,
        rows.run_ms,
        rows.insertion_ms,
        rows.run_ms / rows.insertion_ms,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_updates_are_taken_whole() {
        // Each timed update must be one the room takes, or the rows time a refusal.
        for update in [many_clients(CLIENTS), run(), insertion()] {
            let mut room = DocRoom::new(config(), 1);
            room.open(0, 1, editor());
            room.message(1, 1, &wire::update(&update));
            let effects = room.take_effects();
            let stored = effects.iter().any(|e| matches!(e, homeroom::doc::Effect::Store(_)));
            let refused = effects.iter().any(|e| matches!(e, homeroom::doc::Effect::Refused(..)));
            assert!(stored && !refused, "{effects:?}");
        }
    }
}
