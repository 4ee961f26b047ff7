//! The document room's decoding, fuzzed natively (`cargo test --test doc_fuzz`): real
//! y-protocols frames (sync steps, updates of every shared type, awareness) mutated and fed to
//! a `DocRoom` as a member's frames. What must hold for every input: no panic (a panic on
//! workerd resets the Wasm instance and every room in it), no single allocation larger than
//! the input justifies (a Worker has 128 MB), storage always holds what memory holds, and no
//! type nests deeper than `MAX_NESTING` (a deeper chain exhausts the Wasm stack).
//!
//! `DOC_FUZZ_INPUTS` scales it (default 20,000; the recorded run in tests/FUZZ.md used
//! millions, with `--release`); `DOC_FUZZ_SEED` picks another base seed; a failure prints the
//! case's seed and frame.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use homeroom::doc::{wire, DocConfig, DocRoom, Effect, Member};
use yrs::updates::encoder::Encode;
use yrs::{Array, Doc, Map, ReadTxn, StateVector, Text, Transact, XmlFragment};

/// Counts the largest single allocation since it was last reset.
struct Largest;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Largest {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Largest = Largest;

/// splitmix64: each case's own stream, from the base seed and its index.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Frames an editor really sends: its sync step 1, updates touching every shared type,
/// awareness, a query.
fn corpus() -> Vec<Vec<u8>> {
    // UTF-16 offsets, as Yjs counts (with byte offsets yrs 0.28 splits a character and
    // overflows: an editor's bug, not a frame's).
    let mut options = yrs::Options::with_client_id(yrs::ClientID::new(42));
    options.offset_kind = yrs::OffsetKind::Utf16;
    let doc = Doc::with_options(options);
    let text = doc.get_or_insert_text("text");
    let map = doc.get_or_insert_map("map");
    let array = doc.get_or_insert_array("array");
    let xml = doc.get_or_insert_xml_fragment("xml");
    let mut frames = vec![wire::sync_step1(&StateVector::default().encode_v1())];
    let mut edit = |f: &dyn Fn(&mut yrs::TransactionMut<'_>)| {
        let mut txn = doc.transact_mut();
        f(&mut txn);
        frames.push(wire::update(&txn.encode_update_v1()));
    };
    edit(&|t| text.insert(t, 0, "hello ☃ wörld"));
    edit(&|t| text.remove_range(t, 1, 4));
    edit(&|t| {
        let attrs = yrs::types::Attrs::from([("bold".into(), true.into())]);
        text.format(t, 0, 3, attrs);
    });
    edit(&|t| {
        text.insert_embed(t, 1, yrs::any!({"image": "x.png"}));
    });
    edit(&|t| {
        map.insert(t, "n", yrs::any!({"a": [1, 2.5, true, null, "s", {"deep": [[[]]]}]}));
    });
    edit(&|t| {
        array.insert(t, 0, yrs::any!([1, 2, 3]));
        array.insert(t, 0, yrs::MapPrelim::default());
    });
    edit(&|t| {
        xml.insert(t, 0, yrs::XmlElementPrelim::empty("p"));
    });
    edit(&|t| map.remove(t, "n").map(|_| ()).unwrap_or(()));
    // Types in types: a chain of 40 maps, and one from another editor past the nesting bound
    // (its mutations land on both sides of it).
    edit(&|t| {
        let mut at = map.insert(t, "chain", yrs::MapPrelim::default());
        for _ in 0..40 {
            at = at.insert(t, "k", yrs::MapPrelim::default());
        }
    });
    frames.push(wire::update(&chain(43, usize::from(homeroom::doc::MAX_NESTING) + 20)));
    // One client under two headers, which no encoder writes (`yrs` 0.28 took the second run
    // untrimmed and freed a block the document still linked): refused by the room's walk, and
    // the mutations land on both sides of that check (a byte of a client id flipped makes two
    // clients of it, an ordinary update).
    for (first, second) in [(0u8, 0u8), (3, 0), (0, 2)] {
        let mut update = vec![2];
        for (clock, s) in [(first, "abc"), (second, "xyz")] {
            update.extend([1, 44, clock, 4, 1, 1, b't', 3]);
            update.extend(s.bytes());
        }
        update.push(0); // no deletions
        frames.push(wire::update(&update));
    }
    frames
        .push(wire::sync_step2(&doc.transact().encode_state_as_update_v1(&StateVector::default())));
    frames.push(wire::sync_step1(&doc.transact().state_vector().encode_v1()));
    let entries = [wire::Entry { client: 42, clock: 3, json: r#"{"user":{"name":"ann"}}"#.into() }];
    frames.push(wire::awareness(entries.iter()));
    frames.push(vec![3]); // query awareness
    frames
}

/// An update from editor `client`: `depth` maps, each in the one before, under the root map
/// "deep".
fn chain(client: u64, depth: usize) -> Vec<u8> {
    let doc = Doc::with_client_id(client);
    let root = doc.get_or_insert_map("deep");
    let mut txn = doc.transact_mut();
    let mut at = root.insert(&mut txn, "k", yrs::MapPrelim::default());
    for _ in 1..depth {
        at = at.insert(&mut txn, "k", yrs::MapPrelim::default());
    }
    txn.encode_update_v1()
}

/// How deeply the document's maps and arrays nest under its roots "map", "array" and "deep",
/// read through `yrs`'s API with an explicit stack (no recursion).
fn deepest(doc: &Doc) -> usize {
    use yrs::Out;
    let txn = doc.transact();
    let mut stack: Vec<(Out, usize)> = Vec::new();
    for name in ["map", "deep"] {
        if let Some(m) = txn.get_map(name) {
            stack.push((Out::YMap(m), 0));
        }
    }
    if let Some(a) = txn.get_array("array") {
        stack.push((Out::YArray(a), 0));
    }
    let mut deepest = 0;
    while let Some((value, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match value {
            Out::YMap(m) => stack.extend(m.iter(&txn).map(|(_, v)| (v, depth + 1))),
            Out::YArray(a) => stack.extend(a.iter(&txn).map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    deepest
}

/// What a document holds, as ranges of ids: its items (deleted ones included) and its
/// deletions, however its blocks are cut.
fn ranges(encoded: &[u8]) -> (yrs::IdSet, yrs::IdSet) {
    use yrs::updates::decoder::Decode;
    let update = yrs::Update::decode_v1(encoded).expect("the room's own encoding decodes");
    (update.insertions(true), update.delete_set().clone())
}

/// One input: a frame of the corpus, mutated a few times, or two spliced, or random bytes.
fn input(rng: &mut Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    if rng.below(20) == 0 {
        let n = rng.below(64);
        return (0..n).map(|_| rng.next() as u8).collect();
    }
    let mut f = corpus[rng.below(corpus.len())].clone();
    if rng.below(8) == 0 {
        f.extend_from_slice(&corpus[rng.below(corpus.len())]);
    }
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(f.len() + 1);
        let last = f.len().saturating_sub(1);
        match rng.below(7) {
            0 if !f.is_empty() => f[at.min(last)] ^= 1 << rng.below(8),
            1 if !f.is_empty() => f[at.min(last)] = [0, 0x7f, 0x80, 0xff][rng.below(4)],
            2 => f.truncate(at),
            3 if at < f.len() => {
                let end = (at + 1 + rng.below(8)).min(f.len());
                f.drain(at..end);
            }
            4 => {
                // A varint as large as the counts that made yrs reserve too much.
                let big: &[u8] =
                    [&[0xff, 0xff, 0xff, 0x07][..], &[0x80, 0x80, 0x80, 0x08], &[0xff; 9]]
                        [rng.below(3)];
                f.splice(at..at, big.iter().copied());
            }
            5 => {
                let garbage: Vec<u8> = (0..1 + rng.below(6)).map(|_| rng.next() as u8).collect();
                f.splice(at..at, garbage);
            }
            _ if at < f.len() => {
                let end = (at + 1 + rng.below(16)).min(f.len());
                let copy = f[at..end].to_vec();
                f.splice(at..at, copy);
            }
            _ => {}
        }
    }
    f
}

/// What the room stored, as its effects said.
#[derive(Default)]
struct Stored {
    snapshot: Vec<u8>,
    log: Vec<Vec<u8>>,
}

fn roomy() -> DocConfig {
    // Budgets out of the way (the fuzzer reopens its socket after every close).
    DocConfig {
        frames_per_sec: 1_000_000,
        frame_burst: 1_000_000,
        connects_per_sec: 1_000_000,
        connect_burst: 1_000_000,
        ..DocConfig::default()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn no_frame_panics_overallocates_or_parts_storage_from_memory() {
    let inputs: u64 =
        std::env::var("DOC_FUZZ_INPUTS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let seed: u64 = std::env::var("DOC_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    // How often storage is compared with memory (every input: `DOC_FUZZ_CHECK=1`).
    let every: u64 =
        std::env::var("DOC_FUZZ_CHECK").ok().and_then(|v| v.parse().ok()).unwrap_or(2_000);
    let corpus = corpus();
    let (mut room, mut stored) = (DocRoom::new(roomy(), 1), Stored::default());
    let member = Member {
        user: "mallory".into(),
        read_only: false,
        extensions: true,
        expires: None,
        anonymous: false,
    };
    let (mut conn, mut refused, mut applied, mut taken) = (1u64, 0u64, 0u64, 0u64);
    room.open(0, conn, member.clone());
    for case in 0..inputs {
        let mut rng = Rng(seed.wrapping_mul(0x1000_0000_01B3) ^ case);
        let frame = input(&mut rng, &corpus);
        LARGEST.store(0, Ordering::Relaxed);
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            room.message(case, conn, &frame);
            room.take_effects()
        }));
        let Ok(effects) = ran else {
            let log: Vec<String> = stored.log.iter().map(|u| hex(u)).collect();
            panic!(
                "case {case} (DOC_FUZZ_SEED={seed}) panicked on frame {}\nwith the room stored as snapshot {} and log {log:?}",
                hex(&frame),
                hex(&stored.snapshot)
            );
        };
        let largest = LARGEST.load(Ordering::Relaxed);
        assert!(
            largest <= (1 << 20).max(64 * frame.len()),
            "case {case}: one allocation of {largest} bytes for a frame of {}: {}",
            frame.len(),
            hex(&frame)
        );
        for effect in effects {
            match effect {
                Effect::Store(u) => {
                    applied += 1;
                    stored.log.push(u);
                }
                Effect::Compact(s) => stored = Stored { snapshot: s, log: Vec::new() },
                Effect::Refused(..) => refused += 1,
                // `saved`: an update taken whole (one that repeats what the room holds is taken
                // and not stored).
                Effect::Send(_, f) if f.first() == Some(&(wire::SAVED as u8)) => taken += 1,
                Effect::Close(c, ..) => {
                    room.close(case, c);
                    conn += 1;
                    room.open(case, conn, member.clone());
                }
                _ => {}
            }
        }
        let _ = room.take_effects();
        if case % every == every - 1 || case + 1 == inputs {
            // Storage holds what memory holds.
            let mut reloaded = DocRoom::new(roomy(), 2);
            reloaded.restore(&stored.snapshot, stored.log.iter().map(Vec::as_slice));
            let sv = |r: &DocRoom| r.doc().transact().state_vector();
            assert_eq!(
                sv(&reloaded),
                sv(&room),
                "case {case}: storage and memory differ after frame {}",
                hex(&frame)
            );
            // The same items and deletions. (Not byte for byte: an update that repeats what the
            // room holds can cut a block in two in memory, and is not stored.)
            assert_eq!(
                ranges(&reloaded.encoded()),
                ranges(&room.encoded()),
                "case {case}: storage and memory differ"
            );
            // Counted from a root's value at 0: a type in a root is at depth 1.
            let depth = deepest(room.doc());
            assert!(
                depth <= usize::from(homeroom::doc::MAX_NESTING),
                "case {case}: the document nests {depth} deep"
            );
        }
    }
    println!("{inputs} inputs: {taken} updates taken, {applied} stored, {refused} refused");
    assert!(taken > inputs / 100, "the mutations still reach the document: {taken} taken");
    assert!(applied > 0, "and change it: {applied} stored");
    assert!(refused > inputs / 10, "and reach the refusals: {refused}");
}
