//! A deterministic, seeded fuzzer that runs in `cargo test --lib`: frame
//! parsing (`protocol::parse`, `json::{depth, deeper_than, frame_types}`,
//! `server::carries`) on generated, mutated and random texts, and the room
//! engine on the simulated adapter fed arbitrary frame sequences from
//! several connections and users, with the invariants checked after every
//! step. cargo-fuzz needs a nightly toolchain; this needs nothing but the
//! test build. What it found, and a long run, are in `tests/FUZZ.md`.
//!
//! ```text
//! cargo test --lib fuzz -- --nocapture                  # default: 100k inputs
//! FUZZ_INPUTS=10000000 cargo test --release --lib fuzz -- --nocapture
//! FUZZ_SEED=7 ...                                        # another base seed
//! FUZZ_CASE=0x1234abcd cargo test --lib fuzz_engine -- --nocapture   # replay one case
//! FUZZ_TRACE=1 ...                                       # trace the shrunk failing case
//! ```
//!
//! `FUZZ_INPUTS` is the total over both targets (80% parser, 20% engine;
//! an input is one text fed to the parser, or one frame fed to the engine).
//! Every case has its own seed, derived from the base seed and its index;
//! a failure prints it with the op sequence shrunk by delta debugging, and
//! `FUZZ_CASE` replays exactly that case with a trace of every step and
//! frame.
//!
//! The tests in `findings.rs` are the twelve engine bugs the fuzzer
//! found, each as it was found, now fixed: they run as regression tests,
//! and the fuzzer checks every invariant they broke without steering
//! around anything. The one thing it does not do is evict a room that
//! keeps a timer (frames wait for a client's echo): the runtime does not
//! hibernate an object with a timer pending.
//!
//! The files: this one (the harness: seeds, the PRNG, shrinking), `values` (JSON and string
//! generators), `frames` (client frames with the answer the protocol fixes, server frames,
//! mutations), `parser` (the parser target), `ops` (what clients and the operator do),
//! `world` (the model the engine is checked against), `steps` (applying each op, the end of a
//! case, the engine target), `budgets` (the model of what members' actions cost) and
//! `findings` (what it found, as regression tests).

mod budgets;
mod findings;
mod frames;
mod ops;
mod parser;
mod steps;
mod values;
mod world;

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Once;
use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::protocol::client::MAX_DEPTH;
use crate::protocol::json::{deeper_than, depth, frame_types};
use crate::protocol::names;
use crate::protocol::server::{carries, Message};
use crate::protocol::{parse, ClientFrame, FrameError};
use crate::room::outbox::pack;
use crate::room::sim::Sim;
use crate::room::{Block, RoomConfig, Time};
use budgets::{Account, ModelBucket, Sender, POKE};

#[allow(unused_imports)]
use frames::*;
#[allow(unused_imports)]
use ops::*;
#[allow(unused_imports)]
use steps::*;
#[allow(unused_imports)]
use values::*;
#[allow(unused_imports)]
use world::*;

// ---- harness ----------------------------------------------------------------

/// The default base seed ("homeroom").
pub(super) const BASE_SEED: u64 = 0x686f_6d65_726f_6f6d;
/// Inputs of the default run, over both targets.
pub(super) const DEFAULT_INPUTS: u64 = 100_000;
/// The parser's share of the inputs, in percent (the engine has the rest:
/// an engine frame costs about as much as twenty parser inputs).
pub(super) const PARSER_SHARE: u64 = 80;

/// A small, fast, well-mixed PRNG (SplitMix64), one per case.
#[derive(Clone)]
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub(super) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (0 when n is 0).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// Uniform in lo..=hi.
    pub(super) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    pub(super) fn idx(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    pub(super) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub(super) fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.idx(xs.len())]
    }

    /// An index into `weights`, with those weights.
    pub(super) fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|w| *w as u64).sum();
        let mut x = self.below(total);
        for (i, w) in weights.iter().enumerate() {
            if x < *w as u64 {
                return i;
            }
            x -= *w as u64;
        }
        weights.len() - 1
    }
}

/// The seed of case `index` under `base`.
pub(super) fn case_seed(base: u64, target: u64, index: u64) -> u64 {
    let mix = |x: u64| Rng::new(x).next();
    mix(mix(mix(base) ^ target).wrapping_add(index))
}

pub(super) struct Settings {
    /// Inputs for this target.
    pub(super) inputs: u64,
    pub(super) base: u64,
    /// Replay one case.
    pub(super) case: Option<u64>,
}

pub(super) fn parse_num(text: &str) -> Option<u64> {
    let t = text.trim().replace('_', "");
    match t.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

pub(super) fn settings(share_percent: u64) -> Settings {
    let var = |name: &str| std::env::var(name).ok().and_then(|v| parse_num(&v));
    let total = var("FUZZ_INPUTS").unwrap_or(DEFAULT_INPUTS);
    Settings {
        inputs: (total * share_percent / 100).max(1),
        base: var("FUZZ_SEED").unwrap_or(BASE_SEED),
        case: var("FUZZ_CASE"),
    }
}

thread_local! {
    /// Panics caught by the fuzzer are reported by it, not by the hook.
    pub(super) static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, returning the panic message if it panicked (quietly).
pub(super) fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    pub(super) static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let result = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(false));
    result.map_err(|payload| {
        if let Some(s) = payload.downcast_ref::<String>() {
            s.clone()
        } else if let Some(s) = payload.downcast_ref::<&str>() {
            (*s).to_owned()
        } else {
            "panic with a non-string payload".to_owned()
        }
    })
}

/// What a failure is, for shrinking: its message without numbers.
pub(super) fn signature(message: &str) -> String {
    message.chars().filter(|c| !c.is_ascii_digit()).take(48).collect()
}

/// Removes chunks of `items` while `fails` still holds (delta debugging),
/// within `budget` tries.
pub(super) fn shrink<T: Clone>(
    items: Vec<T>,
    budget: usize,
    mut fails: impl FnMut(&[T]) -> bool,
) -> Vec<T> {
    let mut cur = items;
    let mut tries = 0;
    let mut chunk = cur.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        let mut progressed = false;
        while i < cur.len() && tries < budget {
            let mut candidate = cur.clone();
            candidate.drain(i..(i + chunk).min(cur.len()));
            tries += 1;
            if fails(&candidate) {
                cur = candidate;
                progressed = true;
            } else {
                i += chunk;
            }
        }
        if tries >= budget || (chunk == 1 && !progressed) {
            return cur;
        }
        if !progressed {
            chunk = chunk.div_ceil(2);
        }
    }
}

/// A text shown in a report: short ones whole, long ones cut.
#[derive(Clone, PartialEq)]
pub(super) struct Txt(String);

impl fmt::Debug for Txt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() <= 160 {
            write!(f, "{:?}", self.0)
        } else {
            let mut end = 120;
            while !self.0.is_char_boundary(end) {
                end -= 1;
            }
            write!(f, "{:?}…({} bytes)", &self.0[..end], self.0.len())
        }
    }
}

/// A failing input as a report shows it: whole unless huge.
pub(super) fn shown(text: &str) -> String {
    if text.len() <= 2_000 {
        format!("{text:?}")
    } else {
        format!("{:?}", Txt(text.to_owned()))
    }
}
