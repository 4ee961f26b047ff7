//! What the document bounds let a member make a room hold in memory, measured natively with a
//! counting allocator (its own test binary, so nothing else allocates meanwhile): for each of
//! the shapes that cost `yrs` the most memory per byte sent (one-character insertions that
//! never merge, empty maps, a long insertion cut by deletions), a member sends as much as the
//! room takes, and the room's memory must stay under [`LIMIT`]. A Worker has 128 MB, and the
//! document is not alone in it (a copy for the kind's rules, encodings, other rooms); Wasm's
//! 4-byte pointers make each block smaller there than here.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use homeroom::doc::{wire, DocConfig, DocError, DocRoom, Effect, Member};
use yrs::encoding::write::Write;
use yrs::{Array, Doc, Text, Transact, WriteTxn};

/// Bytes live now.
struct Live;

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// The most bytes live at once since it was last reset.
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let now = LIVE.fetch_add(new_size, Ordering::Relaxed) + new_size;
        PEAK.fetch_max(now, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Live = Live;

/// The most a room may hold natively for the worst shapes (bytes).
const LIMIT: usize = 64 * 1024 * 1024;

fn config() -> DocConfig {
    // Budgets out of the way: this is about what the bounds let in, not how fast.
    DocConfig {
        frames_per_sec: 1_000_000,
        frame_burst: 1_000_000,
        bytes_per_sec: 1 << 40,
        ..DocConfig::default()
    }
}

/// Mallory, a member who may write (or only read).
fn mallory(read_only: bool) -> Member {
    Member { user: "mallory".into(), read_only, extensions: false, expires: None, anonymous: false }
}

/// Sends `updates` as one member until the room refuses one; returns the updates taken and
/// the room's memory then (bytes, over an empty room's).
fn fill(updates: impl Iterator<Item = Vec<u8>>) -> (usize, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    let mut room = DocRoom::new(config(), 1);
    room.open(0, 1, mallory(false));
    room.take_effects();
    let mut taken = 0;
    for (second, update) in (1..).zip(updates) {
        room.message(second * 1000, 1, &wire::update(&update));
        let effects = room.take_effects();
        if let Some(refused) = effects.iter().find_map(|e| match e {
            Effect::Refused(_, r) => Some(r.clone()),
            _ => None,
        }) {
            assert_eq!(refused, DocError::TooLarge, "after {taken} updates");
            break;
        }
        taken += 1;
    }
    let held = LIVE.load(Ordering::Relaxed).saturating_sub(base);
    drop(room);
    (taken, held)
}

/// Updates of `per` insertions each, made by `insert` on the attacker's own document.
fn batches(
    per: usize,
    insert: impl Fn(&mut yrs::TransactionMut<'_>) + 'static,
) -> impl Iterator<Item = Vec<u8>> {
    let doc = Doc::with_client_id(9);
    (0..).map(move |_| {
        let mut txn = doc.transact_mut();
        for _ in 0..per {
            insert(&mut txn);
        }
        txn.encode_update_v1()
    })
}

fn report(shape: &str, taken: usize, held: usize) {
    println!("{shape}: {taken} updates taken, the room holds {:.1} MB", held as f64 / 1e6);
    assert!(taken > 0, "{shape}: the room took nothing");
    assert!(held <= LIMIT, "{shape}: {held} bytes held, past {LIMIT}");
}

#[test]
fn the_worst_documents_the_bounds_let_in_stay_within_memory() {
    // Characters inserted at the front: one block each, 7 bytes each in an update.
    let (taken, held) = fill(batches(10_000, |txn| {
        txn.get_or_insert_text("text").insert(txn, 0, "x");
    }));
    report("front insertions", taken, held);

    // Empty maps: a branch each, 6 bytes each in an update.
    let (taken, held) = fill(batches(10_000, |txn| {
        txn.get_or_insert_array("a").insert(txn, 0, yrs::MapPrelim::default());
    }));
    report("empty maps", taken, held);

    // A long insertion, then every other character deleted, 3 bytes a range.
    let chars = 150_000u64;
    let insertion = {
        let doc = Doc::with_client_id(9);
        let mut txn = doc.transact_mut();
        txn.get_or_insert_text("text").insert(&mut txn, 0, &"x".repeat(chars as usize));
        txn.encode_update_v1()
    };
    let cuts = (0..4).map(move |part| {
        // A quarter of the ranges each: every other character of a quarter of the text.
        let mut u = Vec::new();
        u.write_var(0u32);
        u.write_var(1u32);
        u.write_var(9u64);
        let (from, n) = (part * chars / 4, chars / 8);
        u.write_var(n);
        for i in 0..n {
            u.write_var(from + 2 * i);
            u.write_var(1u32);
        }
        u
    });
    let (taken, held) = fill(std::iter::once(insertion).chain(cuts));
    report("a cut insertion", taken, held);

    // Blocks that merge once taken, in updates for a new client each: the document holds a
    // block a client, but `yrs` kept the room its lists grew to (for these, 38 MB for the GC
    // blocks and 23 MB for the runs, before the patched `yrs` gave back a list's room once
    // merging left it mostly empty: vendor/README.md).
    // One-character items, each after the one before, 60,000 an update:
    let (taken, held) = fill((100..114).map(|client: u64| a_run(client, 60_000)));
    report("runs that merge", taken, held);
    assert!(held < 16 << 20, "runs that merge: {held} bytes held for a block a client");
    // GC blocks side by side, two bytes each, 150,000 an update:
    let (taken, held) = fill((100..106).map(|client: u64| gc_blocks(client, 150_000)));
    report("GC blocks", taken, held);
    assert!(held < 16 << 20, "GC blocks: {held} bytes held for a block a client");

    a_frame_of_gc_blocks_is_refused_before_yrs_decodes_it();
    deletions_of_nothing_leave_nothing_behind();
    one_frame_reserves_no_more_than_its_bytes_justify();
    one_update_of_a_million_deletions_is_refused_without_listing_them();
}

/// One update of two million GC blocks (4 MiB, a frame's worth): `yrs` reserved 48 MiB to
/// decode it and grew the client's list of blocks as long, held until the room unloads; two
/// such updates passed 128 MB. Counted, it is past the bound: refused before it is decoded.
fn a_frame_of_gc_blocks_is_refused_before_yrs_decodes_it() {
    let update = gc_blocks(100, 2_000_000);
    let mut room = DocRoom::new(config(), 1);
    room.open(0, 1, mallory(false));
    room.take_effects();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    room.message(0, 1, &wire::update(&update));
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let effects = room.take_effects();
    println!("{} bytes of GC blocks: peak +{:.1} MB", update.len(), peak as f64 / 1e6);
    let refused = effects.iter().any(|e| matches!(e, Effect::Refused(_, DocError::TooLarge)));
    assert!(refused, "refused: {effects:?}");
    assert!(peak < 16 << 20, "the room's memory peaked {peak} bytes over where it was");
}

/// Updates whose delete sets name 60,000 clients the document does not know, each with one
/// range of length 0: they delete nothing and add no block, so every bound passed them, but
/// `yrs` made an empty list of blocks for each client, kept for good (found by the document
/// fuzzer, seed 4, as a delete set that differed from storage's by an empty entry). Refused
/// `malformed` (no encoder writes an empty range), they leave nothing.
fn deletions_of_nothing_leave_nothing_behind() {
    let base = LIVE.load(Ordering::Relaxed);
    let mut room = DocRoom::new(config(), 1);
    let mut conn = 1;
    room.open(0, conn, mallory(false));
    room.take_effects();
    for round in 0..20u64 {
        let mut u = Vec::new();
        u.write_var(0u32); // no blocks
        u.write_var(60_000u32);
        for c in 0..60_000u64 {
            u.write_var(1_000_000 + round * 60_000 + c);
            u.write_var(1u32); // one range
            u.write_var(0u32);
            u.write_var(0u32); // of length 0
        }
        room.message(round * 1000, conn, &wire::update(&u));
        if room.take_effects().iter().any(|e| matches!(e, Effect::Close(..))) {
            room.close(round * 1000, conn);
            conn += 1;
            room.open(round * 1000, conn, mallory(false));
            room.take_effects();
        }
    }
    let held = LIVE.load(Ordering::Relaxed).saturating_sub(base);
    println!("20 updates of 60,000 empty deletions: the room holds {:.1} MB", held as f64 / 1e6);
    assert!(held < 1 << 20, "{held} bytes held for deletions of nothing (3.8 MB before)");
}

/// One update of `n` one-character items from `client` at the end of the text "t", each
/// after the one before (as if typed one by one): `yrs` merges them into one block when it
/// takes them.
fn a_run(client: u64, n: u64) -> Vec<u8> {
    let mut u = Vec::new();
    u.write_var(1u32); // one client
    u.write_var(n);
    u.write_var(client);
    u.write_var(0u32); // from clock 0
    u.write_u8(4); // a string, no origins: its parent follows
    u.write_var(1u32); // a root, by name
    u.write_string("t");
    u.write_string("x");
    for clock in 1..n {
        u.write_u8(0x84); // a string after its left origin
        u.write_var(client);
        u.write_var(clock - 1);
        u.write_string("x");
    }
    u.write_var(0u32); // an empty delete set
    u
}

/// One update of `n` GC blocks of one unit each, from `client`: two bytes a block. Uncounted,
/// two of these (4 MiB each) made `yrs` reserve 48 MiB to decode each and keep a list of
/// 48 MiB for each new client (2026-12-06, the document review).
fn gc_blocks(client: u64, n: u64) -> Vec<u8> {
    let mut u = Vec::new();
    u.write_var(1u32); // one client
    u.write_var(n);
    u.write_var(client);
    u.write_var(0u32); // from clock 0
    for _ in 0..n {
        u.write_u8(0); // GC
        u.write_var(1u32);
    }
    u.write_var(0u32); // an empty delete set
    u
}

/// A writer inserts 2,000,000 characters (one block), then sends one update of 900,000
/// one-character deletions (every other character, 4 MiB). The room refuses it
/// `document_too_large` (each range may cut two blocks), but listed every range first: a peak
/// of +41.3 MB (measured natively, 2026-12-06). A walk keeps no more ranges than a document may
/// hold blocks, and says the update is over: +13.5 MB (the rest is the room's own work on the
/// refused update).
fn one_update_of_a_million_deletions_is_refused_without_listing_them() {
    let chars = 2_000_000u64;
    let insertion = {
        let doc = Doc::with_client_id(9);
        let mut txn = doc.transact_mut();
        txn.get_or_insert_text("text").insert(&mut txn, 0, &"x".repeat(chars as usize));
        txn.encode_update_v1()
    };
    let n = 900_000u64;
    let mut cut = Vec::new();
    cut.write_var(0u32);
    cut.write_var(1u32);
    cut.write_var(9u64);
    cut.write_var(n);
    for i in 0..n {
        cut.write_var(2 * i);
        cut.write_var(1u32);
    }
    let mut room = DocRoom::new(config(), 1);
    room.open(0, 1, mallory(false));
    room.message(0, 1, &wire::update(&insertion));
    room.take_effects();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    room.message(0, 1, &wire::update(&cut));
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let effects = room.take_effects();
    println!("{} bytes of 900,000 deletions: peak +{:.1} MB", cut.len(), peak as f64 / 1e6);
    let refused = effects.iter().any(|e| matches!(e, Effect::Refused(_, DocError::TooLarge)));
    assert!(refused, "refused: {effects:?}");
    assert!(peak < 20 << 20, "the room's memory peaked {peak} bytes over where it was");
}

/// A member who may only read sends one sync step 1 whose state vector names one client two
/// million times (two bytes a pair, 4 MiB: the byte check passed it). `yrs` reserved a map of
/// that count before it read a pair, about 68 MiB at once of the isolate's 128 MB. A state
/// vector names each client once, at most as many as a document may hold: refused
/// `malformed`, and the room's peak stays near where it was. (In the same function as the
/// fills: the allocator's counts are the process's, and tests run side by side.)
fn one_frame_reserves_no_more_than_its_bytes_justify() {
    let mut room = DocRoom::new(config(), 1);
    room.open(0, 1, mallory(true));
    room.take_effects();
    let pairs = 2_000_000u64;
    let mut sv = Vec::new();
    sv.write_var(pairs);
    for _ in 0..pairs {
        sv.write_var(1u64);
        sv.write_var(0u64);
    }
    let frame = wire::sync_step1(&sv);
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    room.message(0, 1, &frame);
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let effects = room.take_effects();
    println!("a 4 MiB state vector of one client: peak +{:.1} MB", peak as f64 / 1e6);
    assert!(peak < 16 << 20, "the room's memory peaked {peak} bytes over where it was");
    let closed = effects.iter().any(|e| matches!(e, Effect::Close(..)));
    let refused = effects.iter().any(|e| matches!(e, Effect::Refused(_, DocError::Malformed)));
    assert!(closed || refused, "refused: {effects:?}");
}
