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
//! The tests at the end of this file are the ten engine bugs the fuzzer
//! found, each as it was found, now fixed: they run as regression tests,
//! and the fuzzer checks every invariant they broke without steering
//! around anything. The one thing it does not do is evict a room that
//! keeps a timer (frames wait for a client's echo): the runtime does not
//! hibernate an object with a timer pending.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::Once;
use std::time::Instant;

use serde_json::value::RawValue;
use serde_json::Value;

use super::fuzz_budgets::{Account, ModelBucket, Sender, POKE};
use crate::protocol::client::MAX_DEPTH;
use crate::protocol::json::{deeper_than, depth, frame_types};
use crate::protocol::names;
use crate::protocol::server::{carries, Message};
use crate::protocol::{parse, ClientFrame, FrameError};
use crate::room::outbox::pack;
use crate::room::sim::Sim;
use crate::room::{Block, RoomConfig};

// ---- harness ----------------------------------------------------------------

/// The default base seed ("homeroom").
const BASE_SEED: u64 = 0x686f_6d65_726f_6f6d;
/// Inputs of the default run, over both targets.
const DEFAULT_INPUTS: u64 = 100_000;
/// The parser's share of the inputs, in percent (the engine has the rest:
/// an engine frame costs about as much as twenty parser inputs).
const PARSER_SHARE: u64 = 80;

/// A small, fast, well-mixed PRNG (SplitMix64), one per case.
#[derive(Clone)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n (0 when n is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    /// Uniform in lo..=hi.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn idx(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.idx(xs.len())]
    }

    /// An index into `weights`, with those weights.
    fn weighted(&mut self, weights: &[u32]) -> usize {
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
fn case_seed(base: u64, target: u64, index: u64) -> u64 {
    let mix = |x: u64| Rng::new(x).next();
    mix(mix(mix(base) ^ target).wrapping_add(index))
}

struct Settings {
    /// Inputs for this target.
    inputs: u64,
    base: u64,
    /// Replay one case.
    case: Option<u64>,
}

fn parse_num(text: &str) -> Option<u64> {
    let t = text.trim().replace('_', "");
    match t.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

fn settings(share_percent: u64) -> Settings {
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
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, returning the panic message if it panicked (quietly).
fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    static HOOK: Once = Once::new();
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
fn signature(message: &str) -> String {
    message.chars().filter(|c| !c.is_ascii_digit()).take(48).collect()
}

/// Removes chunks of `items` while `fails` still holds (delta debugging),
/// within `budget` tries.
fn shrink<T: Clone>(items: Vec<T>, budget: usize, mut fails: impl FnMut(&[T]) -> bool) -> Vec<T> {
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
struct Txt(String);

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
fn shown(text: &str) -> String {
    if text.len() <= 2_000 {
        format!("{text:?}")
    } else {
        format!("{:?}", Txt(text.to_owned()))
    }
}

// ---- JSON and string generators ---------------------------------------------

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// A generated JSON string literal and what it decodes to.
#[derive(Clone, Debug)]
struct GStr {
    /// The literal, quotes included.
    lit: String,
    /// The decoded text; `None` when it holds a lone surrogate escape.
    decoded: Option<String>,
    /// False when it holds a raw control character (not JSON).
    syntax_ok: bool,
}

/// A string literal of `chars` characters; with `bad`, lone surrogate
/// escapes and raw control characters too.
fn gen_str(rng: &mut Rng, chars: usize, bad: bool) -> GStr {
    let mut lit = String::from("\"");
    let mut dec = String::new();
    let (mut decodable, mut syntax_ok) = (true, true);
    for _ in 0..chars {
        match rng.below(100) {
            0..=44 => {
                let c = ALNUM[rng.idx(ALNUM.len())] as char;
                lit.push(c);
                dec.push(c);
            }
            45..=51 => {
                let c = rng.pick(&['[', ']', '{', '}', ',', ':', ' ', '-', '_', '.', '\'', '~']);
                lit.push(c);
                dec.push(c);
            }
            52..=55 => {
                let (e, c) = rng.pick(&[("\\\"", '"'), ("\\\\", '\\'), ("\\/", '/')]);
                lit.push_str(e);
                dec.push(c);
            }
            56..=58 => {
                let (e, c) =
                    rng.pick(&[("\\n", '\n'), ("\\t", '\t'), ("\\b", '\u{8}'), ("\\f", '\u{c}')]);
                lit.push_str(e);
                dec.push(c);
            }
            59..=67 => {
                let c =
                    rng.pick(&['é', 'ß', '中', '☃', '‽', 'Ω', '\u{2028}', '\u{feff}', '\u{7f}']);
                lit.push(c);
                dec.push(c);
            }
            68..=71 => {
                let c = rng.pick(&['😀', '𝄞', '🦀']);
                lit.push(c);
                dec.push(c);
            }
            72..=79 => {
                let c = rng.pick(&['A', '\0', '\u{1f}', 'é', '"', '中', '$']);
                lit.push_str(&format!("\\u{:04x}", c as u32));
                dec.push(c);
            }
            80..=83 => {
                let c = rng.pick(&['😀', '𝄞', '🦀']);
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    lit.push_str(&format!("\\u{u:04X}"));
                }
                dec.push(c);
            }
            84..=88 if bad => {
                // A high surrogate is always followed by a plain character,
                // so two lone halves never pair up by accident.
                if rng.chance(50) {
                    lit.push_str("\\ud800x");
                } else {
                    lit.push_str("\\uDFFF");
                }
                decodable = false;
            }
            89..=90 if bad => {
                let c = char::from(rng.below(0x20) as u8);
                lit.push(c);
                dec.push(c);
                syntax_ok = false;
            }
            _ => {
                lit.push('$');
                dec.push('$');
            }
        }
    }
    lit.push('"');
    GStr { lit, decoded: decodable.then_some(dec), syntax_ok }
}

/// A length for a name: often at the edges of 1-64.
fn name_len(rng: &mut Rng) -> usize {
    if rng.chance(50) {
        rng.pick(&[0, 1, 2, 8, 63, 64, 65, 70])
    } else {
        rng.range(1, 20) as usize
    }
}

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "7",
    "42",
    "-0",
    "3.14",
    "-2.5e-3",
    "1E+2",
    "1e10",
    "0.000001",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775809",
    "123456789012345678901234567890",
    "1e-400",
];
/// Numbers past f64: valid JSON that serde_json's `Value` refuses.
const HUGE_NUMBERS: &[&str] = &["1e999", "-1e999", "1.5e400"];

fn ws(rng: &mut Rng, out: &mut String) {
    if rng.chance(15) {
        out.push_str(rng.pick(&[" ", "\n", "\t", "\r\n  ", "  "]));
    }
}

fn scalar(rng: &mut Rng, out: &mut String, relayable: bool) {
    match rng.below(10) {
        0 => out.push_str("null"),
        1 => out.push_str(rng.pick(&["true", "false"])),
        2..=4 => {
            if !relayable && rng.chance(15) {
                out.push_str(rng.pick(HUGE_NUMBERS));
            } else if rng.chance(50) {
                out.push_str(rng.pick(NUMBERS));
            } else {
                out.push_str(&(rng.next() as i64 >> rng.below(60)).to_string());
            }
        }
        _ => {
            let n = rng.pick(&[0, 1, 3, 8, 20, 70]);
            let bad = !relayable && rng.chance(30);
            let s = gen_str(rng, n, bad);
            if s.syntax_ok {
                out.push_str(&s.lit);
            } else {
                out.push_str("\"\"");
            }
        }
    }
}

/// Writes a JSON value nesting at most `budget` levels; returns its depth.
fn gen_value(rng: &mut Rng, out: &mut String, budget: usize, relayable: bool) -> usize {
    let kind = rng.below(100);
    if budget == 0 || kind < 50 {
        scalar(rng, out, relayable);
        return 0;
    }
    let mut deepest = 0;
    if kind < 75 {
        out.push('[');
        for i in 0..rng.below(5) {
            if i > 0 {
                out.push(',');
            }
            ws(rng, out);
            deepest = deepest.max(gen_value(rng, out, budget - 1, relayable));
            ws(rng, out);
        }
        out.push(']');
    } else {
        out.push('{');
        // Keys are unique (a reader keeps one of duplicates: the depth of
        // the value it drops would not count).
        let mut keys = BTreeSet::new();
        for _ in 0..rng.below(5) {
            let n = rng.pick(&[0, 1, 4, 10]);
            let key = if rng.chance(10) {
                GStr { lit: "\"type\"".into(), decoded: Some("type".into()), syntax_ok: true }
            } else {
                gen_str(rng, n, false)
            };
            if !keys.insert(key.decoded.clone()) {
                continue;
            }
            if keys.len() > 1 {
                out.push(',');
            }
            ws(rng, out);
            out.push_str(&key.lit);
            ws(rng, out);
            out.push(':');
            deepest = deepest.max(gen_value(rng, out, budget - 1, relayable));
        }
        out.push('}');
    }
    deepest + 1
}

/// `inner` (of depth `inner_depth`) wrapped in `levels` arrays and objects.
fn nest(rng: &mut Rng, levels: usize, inner: &str, inner_depth: usize) -> (String, usize) {
    let mut text = String::with_capacity(levels * 6 + inner.len());
    let mut closes = Vec::with_capacity(levels);
    for _ in 0..levels {
        match rng.below(4) {
            0 | 1 => {
                text.push('[');
                closes.push("]");
            }
            2 => {
                text.push_str("[1,\"]\",");
                closes.push(",0]");
            }
            _ => {
                text.push_str("{\"k\":");
                closes.push("}");
            }
        }
    }
    text.push_str(inner);
    for c in closes.iter().rev() {
        text.push_str(c);
    }
    (text, levels + inner_depth)
}

/// A value for `data`: mostly small, sometimes at the depth limit, deep,
/// very deep or long.
fn gen_data(rng: &mut Rng, relayable: bool) -> (String, usize) {
    if heavy(rng) {
        if rng.chance(50) {
            let levels = rng.range(500, 5_000) as usize;
            return nest(rng, levels, "\"x\"", 0);
        }
        let pad = "y".repeat(rng.range(100, 20_000) as usize);
        return (format!(r#"{{"pad":"{pad}","brackets":"[[[{{{{"}}"#), 1);
    }
    match rng.below(100) {
        0..=83 => {
            let mut out = String::new();
            let budget = rng.pick(&[1, 2, 3, 4]);
            let d = gen_value(rng, &mut out, budget, relayable);
            (out, d)
        }
        84..=93 => {
            let mut inner = String::new();
            let d = gen_value(rng, &mut inner, 2, relayable);
            let levels = (rng.pick(&[30, 31, 32, 33, 34]) as usize).saturating_sub(d);
            nest(rng, levels, &inner, d)
        }
        _ => {
            let levels = rng.range(100, 140) as usize;
            nest(rng, levels, "0", 0)
        }
    }
}

/// How often (per mille) a generated value is a heavy one: thousands of
/// levels deep, or tens of kilobytes long. The default (debug) run keeps
/// them rare to stay fast; a release run has ten times as many.
const HEAVY_PER_MILLE: u64 = if cfg!(debug_assertions) { 1 } else { 20 };

fn heavy(rng: &mut Rng) -> bool {
    rng.below(1000) < HEAVY_PER_MILLE
}

/// A reference depth, independent of `protocol::json`: of a parsed value.
fn value_depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Another reference depth for any text: a char-level walk that decodes
/// string escapes as a JSON reader does (unclosed brackets still count).
fn scan_depth(text: &str) -> usize {
    let (mut d, mut deepest) = (0usize, 0usize);
    let mut in_str = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if in_str {
            match c {
                '\\' => {
                    chars.next();
                }
                '"' => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '[' | '{' => {
                d += 1;
                deepest = deepest.max(d);
            }
            ']' | '}' => d = d.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

// ---- client frames with an oracle -------------------------------------------

const KNOWN: &[&str] =
    &["type", "id", "topic", "data", "key", "value", "if_version", "state", "mark"];

/// A field value as generated.
#[derive(Clone, Debug)]
enum Fv {
    Null,
    Str(GStr),
    /// Any other JSON value, with its depth.
    Val(String, usize),
}

impl Fv {
    fn text(&self) -> &str {
        match self {
            Fv::Null => "null",
            Fv::Str(s) => &s.lit,
            Fv::Val(t, _) => t,
        }
    }

    fn depth(&self) -> usize {
        match self {
            Fv::Val(_, d) => *d,
            _ => 0,
        }
    }

    fn syntax_ok(&self) -> bool {
        match self {
            Fv::Str(s) => s.syntax_ok,
            _ => true,
        }
    }

    /// The decoded string, when it is a readable one.
    fn string(&self) -> Option<&str> {
        match self {
            Fv::Str(s) => s.decoded.as_deref(),
            _ => None,
        }
    }
}

/// A frame as generated: its fields in order (names decoded).
#[derive(Clone, Debug)]
struct GFrame {
    fields: Vec<(String, String, Fv)>,
}

/// What `parse` must answer.
#[derive(Debug, PartialEq)]
enum Expect {
    Publish { id: String, topic: String, data: String },
    Signal { topic: String, data: String },
    Set { id: String, key: String, value: String, if_version: Option<u64> },
    Presence { state: String },
    GetState,
    Ping,
    Mark { mark: String },
    Bad,
    Invalid(Option<String>),
}

impl GFrame {
    fn text(&self, rng: &mut Rng) -> String {
        let mut out = String::new();
        ws(rng, &mut out);
        out.push('{');
        for (i, (lit, _, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            ws(rng, &mut out);
            out.push_str(lit);
            ws(rng, &mut out);
            out.push(':');
            ws(rng, &mut out);
            out.push_str(v.text());
            ws(rng, &mut out);
        }
        out.push('}');
        ws(rng, &mut out);
        out
    }

    fn get(&self, name: &str) -> Option<&Fv> {
        self.fields.iter().find(|(_, n, _)| n == name).map(|(_, _, v)| v)
    }

    /// The answer PROTOCOL.md and the README fix for this frame.
    fn expect(&self) -> Expect {
        if self.fields.iter().any(|(_, _, v)| !v.syntax_ok()) {
            return Expect::Bad;
        }
        let mut names = BTreeSet::new();
        for (_, name, _) in &self.fields {
            if KNOWN.contains(&name.as_str()) && !names.insert(name.as_str()) {
                return Expect::Bad; // duplicate field
            }
        }
        let kind = match self.get("type") {
            Some(v) => match v.string() {
                Some(k) => k.to_owned(),
                None => return Expect::Bad,
            },
            None => return Expect::Bad,
        };
        // A field a reader must find: absent or `null` are the same.
        let name = |f: &str| -> Option<String> {
            self.get(f).and_then(Fv::string).filter(|s| names::bounded(s)).map(str::to_owned)
        };
        let topic = || self.get("topic").and_then(Fv::string).filter(|t| names::valid_topic(t));
        // Nested at most MAX_DEPTH, and readable by a strict reader
        // (serde_json refuses lone surrogates and numbers past f64, as the
        // room does since finding 4).
        let shallow = |f: &str| {
            self.get(f).filter(|v| {
                v.depth() <= MAX_DEPTH && serde_json::from_str::<Value>(v.text()).is_ok()
            })
        };
        match kind.as_str() {
            "publish" => {
                let Some(id) = name("id") else { return Expect::Invalid(None) };
                match (topic(), shallow("data")) {
                    (Some(topic), Some(data)) => Expect::Publish {
                        id,
                        topic: topic.to_owned(),
                        data: data.text().to_owned(),
                    },
                    _ => Expect::Invalid(Some(id)),
                }
            }
            "signal" => match (topic(), shallow("data")) {
                (Some(topic), Some(data)) => {
                    Expect::Signal { topic: topic.to_owned(), data: data.text().to_owned() }
                }
                _ => Expect::Invalid(None),
            },
            "set" => {
                let Some(id) = name("id") else { return Expect::Invalid(None) };
                let if_version = match self.get("if_version") {
                    None | Some(Fv::Null) => Some(None),
                    Some(Fv::Val(t, _)) if t == "null" => Some(None),
                    Some(Fv::Val(t, _))
                        if !t.is_empty()
                            && t.bytes().all(|b| b.is_ascii_digit())
                            && (t == "0" || !t.starts_with('0')) =>
                    {
                        t.parse::<u64>().ok().map(Some)
                    }
                    Some(_) => None,
                };
                match (name("key"), shallow("value"), if_version) {
                    (Some(key), Some(value), Some(if_version)) => {
                        Expect::Set { id, key, value: value.text().to_owned(), if_version }
                    }
                    _ => Expect::Invalid(Some(id)),
                }
            }
            "presence" => match shallow("state") {
                Some(state) if state.text().starts_with('{') => {
                    Expect::Presence { state: state.text().to_owned() }
                }
                _ => Expect::Invalid(None),
            },
            "get_state" => Expect::GetState,
            "ping" => Expect::Ping,
            "mark" => match name("mark") {
                Some(mark) => Expect::Mark { mark },
                None => Expect::Invalid(None),
            },
            _ => Expect::Bad,
        }
    }
}

/// What `parse` answered, in the oracle's terms.
fn answered(result: &Result<ClientFrame, FrameError>) -> Expect {
    match result {
        Ok(ClientFrame::Publish { id, topic, data }) => {
            Expect::Publish { id: id.clone(), topic: topic.clone(), data: data.get().to_owned() }
        }
        Ok(ClientFrame::Signal { topic, data }) => {
            Expect::Signal { topic: topic.clone(), data: data.get().to_owned() }
        }
        Ok(ClientFrame::Set { id, key, value, if_version }) => Expect::Set {
            id: id.clone(),
            key: key.clone(),
            value: value.get().to_owned(),
            if_version: *if_version,
        },
        Ok(ClientFrame::Presence { state }) => Expect::Presence { state: state.get().to_owned() },
        Ok(ClientFrame::GetState) => Expect::GetState,
        Ok(ClientFrame::Ping) => Expect::Ping,
        Ok(ClientFrame::Mark { mark }) => Expect::Mark { mark: mark.clone() },
        Err(FrameError::BadFrame(_)) => Expect::Bad,
        Err(FrameError::Invalid { id, .. }) => Expect::Invalid(id.clone()),
    }
}

/// The literal of a field name: usually plain, sometimes with an escape.
fn key_lit(rng: &mut Rng, name: &str) -> String {
    if rng.chance(8) && !name.is_empty() {
        let first = name.chars().next().unwrap();
        format!("\"\\u{:04x}{}\"", first as u32, &name[first.len_utf8()..])
    } else {
        format!("\"{name}\"")
    }
}

/// A string field (`id`, `topic`, `key`, `mark`, `type`): usually a
/// readable name, else anything.
fn name_value(rng: &mut Rng, bad: bool, good: &str) -> Fv {
    match rng.below(100) {
        0..=54 => Fv::Str(GStr {
            lit: format!("\"{good}\""),
            decoded: Some(good.into()),
            syntax_ok: true,
        }),
        55..=84 => {
            let n = name_len(rng);
            Fv::Str(gen_str(rng, n, bad))
        }
        85..=89 => Fv::Null,
        _ => {
            let mut out = String::new();
            let d = gen_value(rng, &mut out, 2, true);
            if out.starts_with('"') {
                Fv::Val("7".into(), 0)
            } else {
                Fv::Val(out, d)
            }
        }
    }
}

fn data_value(rng: &mut Rng, bad: bool, object: bool) -> Fv {
    match rng.below(100) {
        0..=4 => Fv::Null,
        5..=9 => {
            let n = name_len(rng);
            Fv::Str(gen_str(rng, n, bad))
        }
        _ => {
            let (text, d) = gen_data(rng, !bad);
            let v = if object && rng.chance(80) && !text.starts_with('{') {
                (format!("{{\"v\":{text}}}"), d + 1)
            } else {
                (text, d)
            };
            v.into()
        }
    }
}

impl From<(String, usize)> for Fv {
    fn from((text, d): (String, usize)) -> Fv {
        if text.starts_with('"') {
            // (only a known field the frame's type does not read, or data,
            // get here; what a name decodes to matters only for the former)
            let decoded = serde_json::from_str::<String>(&text).ok();
            Fv::Str(GStr { decoded, lit: text, syntax_ok: true })
        } else {
            Fv::Val(text, d)
        }
    }
}

/// A client frame of any kind, with each field right, wrong or missing.
fn gen_frame(rng: &mut Rng, bad: bool) -> GFrame {
    let kind = rng.pick(&[
        "publish",
        "publish",
        "signal",
        "set",
        "set",
        "presence",
        "get_state",
        "ping",
        "mark",
        "other",
    ]);
    let mut fields: Vec<(String, Fv)> = Vec::new();
    match rng.below(100) {
        0..=84 => {
            let name = if kind == "other" {
                rng.pick(&["publishx", "", "PUBLISH", "pub lish", "join", "batch"])
            } else {
                kind
            };
            let v = if rng.chance(5) && !name.is_empty() {
                // the same type, spelled with an escape
                let first = name.chars().next().unwrap();
                let lit = format!("\"\\u{:04x}{}\"", first as u32, &name[1..]);
                Fv::Str(GStr { lit, decoded: Some(name.into()), syntax_ok: true })
            } else {
                Fv::Str(GStr {
                    lit: format!("\"{name}\""),
                    decoded: Some(name.into()),
                    syntax_ok: true,
                })
            };
            fields.push(("type".into(), v));
        }
        85..=89 => {}
        _ => fields.push(("type".into(), name_value(rng, bad, "publish"))),
    }
    let want = |rng: &mut Rng| rng.chance(92);
    let topic_good = rng.pick(&["chat", "cursor", "t", "a/b", "🦀", "x$"]);
    let id_good = format!("m{}", rng.below(1000));
    match kind {
        "publish" => {
            if want(rng) {
                fields.push(("id".into(), name_value(rng, bad, &id_good)));
            }
            if want(rng) {
                fields.push(("topic".into(), name_value(rng, bad, topic_good)));
            }
            if want(rng) {
                fields.push(("data".into(), data_value(rng, bad, false)));
            }
        }
        "signal" => {
            if want(rng) {
                fields.push(("topic".into(), name_value(rng, bad, topic_good)));
            }
            if want(rng) {
                fields.push(("data".into(), data_value(rng, bad, false)));
            }
        }
        "set" => {
            if want(rng) {
                fields.push(("id".into(), name_value(rng, bad, &id_good)));
            }
            if want(rng) {
                fields.push(("key".into(), name_value(rng, bad, "k")));
            }
            if want(rng) {
                fields.push(("value".into(), data_value(rng, bad, false)));
            }
            if rng.chance(50) {
                let v = match rng.below(12) {
                    0 => Fv::Null,
                    1 => Fv::Str(GStr {
                        lit: "\"7\"".into(),
                        decoded: Some("7".into()),
                        syntax_ok: true,
                    }),
                    k => Fv::Val(
                        [
                            "0",
                            "7",
                            "18446744073709551615",
                            "18446744073709551616",
                            "-1",
                            "1.5",
                            "1e3",
                            "true",
                            "[]",
                            "12345678901",
                        ][k as usize - 2]
                            .into(),
                        0,
                    ),
                };
                let v = match &v {
                    Fv::Val(t, _) if t == "[]" => Fv::Val(t.clone(), 1),
                    _ => v,
                };
                fields.push(("if_version".into(), v));
            }
        }
        "presence" if want(rng) => fields.push(("state".into(), data_value(rng, bad, true))),
        "mark" if want(rng) => {
            fields.push(("mark".into(), name_value(rng, bad, "0123456789abcdef")));
        }
        _ => {}
    }
    // Known fields the type does not read, and unknown ones: any value,
    // however deep (they are skipped, never parsed into values).
    for _ in 0..rng.below(3) {
        let name = if rng.chance(30) {
            rng.pick(KNOWN).to_owned()
        } else {
            let n = rng.range(1, 8) as usize;
            let s = gen_str(rng, n, false).decoded.unwrap();
            if KNOWN.contains(&s.as_str()) {
                format!("{s}_")
            } else {
                s
            }
        };
        if fields.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let v = data_value(rng, bad, false);
        fields.push((name, v));
    }
    // Shuffle.
    for i in (1..fields.len()).rev() {
        let j = rng.idx(i + 1);
        fields.swap(i, j);
    }
    let fields = fields
        .into_iter()
        .map(|(name, v)| {
            let lit = if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                key_lit(rng, &name)
            } else {
                serde_json::to_string(&name).unwrap()
            };
            (lit, name, v)
        })
        .collect();
    GFrame { fields }
}

/// The rules every frame `parse` accepts must keep, whatever the text.
fn check_accepted(frame: &ClientFrame) {
    let shallow = |raw: &RawValue, what: &str| {
        let text = raw.get();
        assert!(scan_depth(text) <= MAX_DEPTH, "[parse] {what} nests deeper than {MAX_DEPTH}");
        if let Ok(v) = serde_json::from_str::<Value>(text) {
            assert!(value_depth(&v) <= MAX_DEPTH, "[parse] {what} nests deeper (serde)");
        }
        assert!(serde_json::from_str::<&RawValue>(text).is_ok(), "[parse] {what} is not JSON");
        assert!(
            serde_json::from_str::<Value>(text).is_ok(),
            "[parse] {what} is not readable by a strict JSON reader"
        );
    };
    match frame {
        ClientFrame::Publish { id, topic, data } => {
            assert!(names::bounded(id), "[parse] publish id {id:?} out of bounds");
            assert!(names::valid_topic(topic), "[parse] publish topic {topic:?}");
            shallow(data, "data");
        }
        ClientFrame::Signal { topic, data } => {
            assert!(names::valid_topic(topic), "[parse] signal topic {topic:?}");
            shallow(data, "data");
        }
        ClientFrame::Set { id, key, value, .. } => {
            assert!(names::bounded(id), "[parse] set id {id:?} out of bounds");
            assert!(names::bounded(key), "[parse] set key {key:?} out of bounds");
            shallow(value, "value");
        }
        ClientFrame::Presence { state } => {
            let t = state.get();
            assert!(t.starts_with('{') && t.ends_with('}'), "[parse] presence state not an object");
            shallow(state, "state");
        }
        ClientFrame::Mark { mark } => assert!(names::bounded(mark), "[parse] mark {mark:?}"),
        ClientFrame::GetState | ClientFrame::Ping => {}
    }
}

/// Every text goes through every reader: no panic, and what they say holds.
fn check_text(text: &str) -> Result<ClientFrame, FrameError> {
    check_parsed(text, parse(text))
}

/// [`check_text`] with `parse(text)` already done.
fn check_parsed(
    text: &str,
    result: Result<ClientFrame, FrameError>,
) -> Result<ClientFrame, FrameError> {
    if let Ok(frame) = &result {
        check_accepted(frame);
    }
    let d = depth(text);
    assert_eq!(d, scan_depth(text), "[depth] differs from the reference walk");
    for m in [MAX_DEPTH, d.saturating_sub(1), d] {
        assert_eq!(deeper_than(text, m), d > m, "[deeper_than] {m} against depth {d}");
    }
    if let Some(t) = frame_types(text).and_then(|types| types.into_iter().next()) {
        assert!(carries(text, &t), "[carries] misses {t}");
    }
    result
}

// ---- server frames for frame_types ------------------------------------------

const SERVER_TYPES: &[&str] = &[
    "welcome", "message", "ack", "signal", "presence", "summary", "state", "resync", "error",
    "pong", "mark", "x-custom", "t😀", "",
];

/// A server-like frame of type `kind`, its fields in any order, carrying
/// whatever members put in frames.
fn gen_server_frame(rng: &mut Rng, kind: &str, nested_batch: bool) -> String {
    let mut fields: Vec<String> = vec![format!("\"type\":\"{kind}\"")];
    let names = ["seq", "id", "data", "session", "presence", "frames", "state", "note", "t"];
    let mut chosen: Vec<&str> = names.iter().copied().filter(|_| rng.chance(30)).collect();
    if nested_batch {
        chosen.retain(|n| *n != "frames");
    }
    for name in chosen {
        let mut v = String::new();
        match rng.below(6) {
            0 => {
                // a member's data that looks like frames
                v.push_str(r#"{"type":"pong","frames":[{"type":"welcome"}],"s":"\"type\":\"x\""}"#);
            }
            1 => {
                let levels = if heavy(rng) { rng.range(1, 3_000) } else { rng.range(1, 12) };
                let levels = levels as usize;
                v.push_str(&nest(rng, levels, "\"]}\\\"\"", 0).0);
            }
            _ => {
                let relayable = rng.chance(50);
                let budget = rng.pick(&[1, 2, 3]);
                gen_value(rng, &mut v, budget, relayable);
            }
        }
        fields.push(format!("\"{name}\":{v}"));
    }
    if nested_batch {
        fields.push(r#""frames":[{"type":"pong"}]"#.into());
    }
    for i in (1..fields.len()).rev() {
        let j = rng.idx(i + 1);
        fields.swap(i, j);
    }
    let mut out = String::from("{");
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        ws(rng, &mut out);
        out.push_str(f);
    }
    ws(rng, &mut out);
    out.push('}');
    out
}

/// A frame or a batch of frames, and the types `frame_types` must find.
fn gen_server_text(rng: &mut Rng) -> (String, Vec<String>) {
    if rng.chance(30) {
        let kind = rng.pick(SERVER_TYPES);
        return (gen_server_frame(rng, kind, false), vec![kind.to_owned()]);
    }
    if rng.chance(25) {
        // Real frames, packed as the room packs them.
        let n = rng.range(1, 6) as usize;
        let mut frames: Vec<Rc<str>> = Vec::new();
        let mut kinds = Vec::new();
        for i in 0..n {
            let (data, _) = gen_data(rng, true);
            let data = RawValue::from_string(data).unwrap();
            let id = gen_str(rng, 5, false).decoded.unwrap();
            let text = Message {
                kind: "message",
                seq: i as u64,
                id: &id,
                session: "s-1",
                user: "u",
                region: "EU",
                topic: "t",
                data: &data,
                ts: 0,
            }
            .to_text();
            frames.push(text.into());
            kinds.push("message".to_owned());
        }
        let packed = pack(frames, rng.range(64, 4096) as usize);
        // Each packed text carries its share, in order.
        let mut all = Vec::new();
        let mut texts = Vec::new();
        for p in &packed {
            let types = frame_types(p).expect("[frame_types] a packed text is an object");
            all.extend(types.clone());
            texts.push(p.to_string());
        }
        assert_eq!(all, kinds, "[frame_types] packed batches lose or invent frames");
        let text = texts[rng.idx(texts.len())].clone();
        let types = frame_types(&text).unwrap();
        return (text, types);
    }
    let n = rng.below(7) as usize;
    let mut kinds = Vec::new();
    let mut frames = Vec::new();
    for _ in 0..n {
        let nested = rng.chance(5);
        let kind = if nested { "batch" } else { rng.pick(SERVER_TYPES) };
        frames.push(gen_server_frame(rng, kind, nested));
        kinds.push(kind.to_owned());
    }
    let mut fields =
        vec!["\"type\":\"batch\"".to_owned(), format!("\"frames\":[{}]", frames.join(","))];
    if rng.chance(30) {
        let mut v = String::new();
        gen_value(rng, &mut v, 3, true);
        fields.push(format!("\"extra\":{v}"));
    }
    if rng.chance(50) {
        fields.swap(0, 1);
    }
    (format!("{{{}}}", fields.join(",")), kinds)
}

// ---- mutations and noise ----------------------------------------------------

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for _ in 0..rng.range(1, 3) {
        let n = bytes.len();
        match rng.below(8) {
            0 if n > 0 => {
                let i = rng.idx(n);
                bytes[i] ^= 1 << rng.below(8);
            }
            1 if n > 0 => bytes.truncate(rng.idx(n)),
            2 => {
                let i = rng.idx(n + 1);
                let junk: &[u8] = rng.pick(&[
                    b",".as_slice(),
                    b"}",
                    b"]",
                    b"\"",
                    b"\\",
                    b"{\"type\":\"ping\"}",
                    b"null",
                    b"\xff\xfe",
                    b"\"type\":\"publish\",",
                    b"\\ud800",
                ]);
                bytes.splice(i..i, junk.iter().copied());
            }
            3 if n > 1 => {
                let i = rng.idx(n);
                let j = (i + rng.range(1, 20) as usize).min(n);
                bytes.drain(i..j);
            }
            4 if n > 1 => {
                let (i, j) = (rng.idx(n), rng.idx(n));
                bytes.swap(i, j);
            }
            5 => {
                let copy = bytes.clone();
                bytes.extend_from_slice(&copy);
            }
            6 if n > 0 => {
                let i = rng.idx(n);
                let num: &[u8] =
                    rng.pick(&[b"1e999".as_slice(), b"-1", b"1.5", b"18446744073709551616"]);
                bytes.splice(i..i, num.iter().copied());
            }
            _ => {
                let i = rng.idx(n + 1);
                bytes.insert(i, rng.below(256) as u8);
            }
        }
    }
    lossy(&bytes)
}

fn noise(rng: &mut Rng) -> String {
    let n = rng.pick(&[0, 1, 2, 5, 20, 60, 200]);
    let alphabet = b"{}[]\":,\\ 0123456789.eE+-tnufalsr\"type\"publish";
    let bytes: Vec<u8> =
        (0..n)
            .map(|_| {
                if rng.chance(60) {
                    alphabet[rng.idx(alphabet.len())]
                } else {
                    rng.below(256) as u8
                }
            })
            .collect();
    lossy(&bytes)
}

// ---- the parser target ------------------------------------------------------

/// Tallies of the parser run.
#[derive(Default)]
struct ParserStats {
    inputs: u64,
    oracle: u64,
    accepted: u64,
    bad_frame: u64,
    invalid: u64,
    mutated: u64,
    noise: u64,
    values: u64,
    server: u64,
    deepest: usize,
    longest: usize,
    /// Accepted frames whose payload serde_json's `Value` cannot read
    /// (lone surrogates, numbers past f64): the room relays them as is.
    unreadable_payloads: u64,
    bytes: u64,
}

/// One parser case: a handful of inputs from one seed.
fn parser_case(seed: u64, stats: &mut ParserStats, log: &mut Vec<String>) {
    let mut rng = Rng::new(seed);
    for _ in 0..8 {
        let kind = rng.weighted(&[40, 20, 8, 12, 12, 8]);
        let (text, parsed) = match kind {
            0 | 5 => {
                let bad = rng.chance(30);
                let mut frame = gen_frame(&mut rng, bad);
                if kind == 5 && !frame.fields.is_empty() {
                    // a duplicated field
                    let i = rng.idx(frame.fields.len());
                    let dup = frame.fields[i].clone();
                    frame.fields.insert(rng.idx(frame.fields.len() + 1), dup);
                }
                let text = frame.text(&mut rng);
                log.push(text.clone());
                let want = frame.expect();
                let result = parse(&text);
                let got = answered(&result);
                assert_eq!(got, want, "[oracle] parse disagrees with the protocol: {frame:?}");
                stats.oracle += 1;
                if let Ok(f) = &result {
                    let payload = match f {
                        ClientFrame::Publish { data, .. } | ClientFrame::Signal { data, .. } => {
                            Some(data)
                        }
                        ClientFrame::Set { value, .. } => Some(value),
                        ClientFrame::Presence { state } => Some(state),
                        _ => None,
                    };
                    if payload.is_some_and(|p| serde_json::from_str::<Value>(p.get()).is_err()) {
                        stats.unreadable_payloads += 1;
                    }
                }
                (text, Some(result))
            }
            1 => {
                let bad = rng.chance(30);
                let frame = gen_frame(&mut rng, bad);
                let text = frame.text(&mut rng);
                stats.mutated += 1;
                (mutate(&mut rng, &text), None)
            }
            2 => {
                stats.noise += 1;
                (noise(&mut rng), None)
            }
            3 => {
                // A value: its depth against the generator's and serde's.
                let (text, d) = if rng.chance(70) {
                    let mut out = String::new();
                    let relayable = rng.chance(50);
                    let d = gen_value(&mut rng, &mut out, 8, relayable);
                    (out, d)
                } else {
                    let relayable = rng.chance(50);
                    gen_data(&mut rng, relayable)
                };
                log.push(text.clone());
                assert_eq!(depth(&text), d, "[depth] differs from the generated depth");
                if let Ok(v) = serde_json::from_str::<Value>(&text) {
                    assert_eq!(value_depth(&v), d, "[depth] differs from serde's");
                }
                stats.values += 1;
                (text, None)
            }
            _ => {
                let (text, types) = gen_server_text(&mut rng);
                log.push(text.clone());
                assert_eq!(
                    frame_types(&text),
                    Some(types.clone()),
                    "[frame_types] wrong types for a generated frame"
                );
                for t in &types {
                    assert!(carries(&text, t), "[carries] does not find {t}");
                }
                assert!(!carries(&text, "no-such-type"), "[carries] finds a type not there");
                stats.server += 1;
                (text, None)
            }
        };
        log.push(text.clone());
        let parsed = parsed.unwrap_or_else(|| parse(&text));
        match check_parsed(&text, parsed) {
            Ok(_) => stats.accepted += 1,
            Err(FrameError::BadFrame(_)) => stats.bad_frame += 1,
            Err(FrameError::Invalid { .. }) => stats.invalid += 1,
        }
        stats.deepest = stats.deepest.max(depth(&text));
        stats.longest = stats.longest.max(text.len());
        stats.bytes += text.len() as u64;
        stats.inputs += 1;
        log.clear();
    }
}

#[test]
fn fuzz_parser() {
    let s = settings(PARSER_SHARE);
    let start = Instant::now();
    let mut stats = ParserStats::default();
    let (mut cases, mut first, mut last) = (0u64, None, 0u64);
    let mut index = 0u64;
    while stats.inputs < s.inputs {
        let seed = s.case.unwrap_or_else(|| case_seed(s.base, 1, index));
        first.get_or_insert(seed);
        last = seed;
        let mut log = Vec::new();
        if let Err(message) = catch(|| parser_case(seed, &mut stats, &mut log)) {
            let text = log.last().cloned().unwrap_or_default();
            let sig = signature(&message);
            // Shrink the failing text by characters.
            let chars: Vec<char> = text.chars().collect();
            let small = shrink(chars, 3_000, |cand| {
                let t: String = cand.iter().collect();
                catch(|| drop(check_text(&t))).err().is_some_and(|m| signature(&m) == sig)
            });
            let small: String = small.into_iter().collect();
            let shrunk =
                if small != text { format!("\n  shrunk: {small:?}") } else { String::new() };
            panic!(
                "parser fuzz failure\n  case seed: {seed:#x} (replay: FUZZ_CASE={seed:#x} cargo test --lib fuzz_parser -- --nocapture)\n  \
                 message: {message}\n  input ({} bytes): {}{shrunk}",
                text.len(),
                shown(&text),
            );
        }
        cases += 1;
        index += 1;
        if s.case.is_some() {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz_parser: {} inputs in {cases} cases ({secs:.1} s, {:.0}/s); base seed {:#x}, case seeds {:#x}..{:#x}\n  \
         oracle-checked frames {}, mutated {}, noise {}, values {}, server frames {}; parse: ok {}, bad_frame {}, invalid {}; \
         {} bytes in all, deepest {} levels, longest {} bytes; accepted payloads serde_json cannot read: {}",
        stats.inputs,
        stats.inputs as f64 / secs,
        s.base,
        first.unwrap_or(0),
        last,
        stats.oracle,
        stats.mutated,
        stats.noise,
        stats.values,
        stats.server,
        stats.accepted,
        stats.bad_frame,
        stats.invalid,
        stats.bytes,
        stats.deepest,
        stats.longest,
        stats.unreadable_payloads,
    );
    if s.case.is_none() && s.inputs >= 10_000 {
        assert!(stats.oracle > 0 && stats.accepted > 0 && stats.invalid > 0 && stats.bad_frame > 0);
        assert!(stats.deepest >= 1_000, "deep nesting was generated");
    }
}

// ---- the engine target: what clients and the operator do ---------------------

/// How a connection reads what the room sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Reads after every step and echoes each mark.
    Reading,
    /// Reads only when told to (its frames pile up in the runtime).
    Lazy,
    /// Reads but never echoes a mark (a hostile or broken reader).
    Silent,
}

/// What a reconnect says about where the client left off.
#[derive(Debug, Clone, Copy)]
enum Resume {
    Fresh,
    Correct,
    /// `since` this far behind what it applied.
    Stale(u64),
    /// `since` this far past it.
    Future(u64),
    BogusEpoch,
    NoEpoch,
}

/// Which mark an echo carries.
#[derive(Debug, Clone)]
enum MarkPick {
    Latest,
    Oldest,
    /// One already echoed.
    Stale,
    /// One another connection received.
    Foreign,
    Forged(Txt),
}

/// One frame a client sends.
#[derive(Debug, Clone)]
enum Payload {
    Text(Txt),
    /// A `set` whose `if_version` is the key's version now (plus `delta`).
    SetCurrent {
        id: String,
        key: String,
        value: Txt,
        delta: i64,
    },
    Mark(MarkPick),
}

#[derive(Debug, Clone, Copy)]
enum BlockOp {
    Keep,
    For(u64),
    Lift,
}

/// One step. `pick` chooses among the open connections (or, for `Late`
/// and `RuntimeClose`, among all), modulo their number.
#[derive(Debug, Clone)]
enum Op {
    Connect {
        slot: usize,
        resume: Resume,
        region: usize,
        exp: Option<i64>,
    },
    /// `slot`'s user opens a connection with `victim`'s session.
    Hijack {
        slot: usize,
        victim: usize,
        region: usize,
    },
    Send {
        pick: usize,
        payload: Payload,
    },
    /// Several frames in one turn.
    Burst(Vec<(usize, Payload)>),
    /// A frame that arrives after the room closed the socket.
    Late {
        pick: usize,
        text: Txt,
    },
    Binary {
        pick: usize,
        len: usize,
    },
    Drop {
        pick: usize,
    },
    RuntimeClose {
        pick: usize,
    },
    Read {
        pick: usize,
    },
    SetMode {
        pick: usize,
        mode: Mode,
    },
    Ping {
        pick: usize,
    },
    Evict,
    Advance(u64),
    TurnEnds,
    RunFor(u64),
    Settle,
    EarlyAlarm,
    Kick {
        user: usize,
        block: BlockOp,
    },
    Drain,
    Delete,
    ServerPublish {
        id: String,
        topic: String,
        data: Txt,
    },
}

/// A generated case: the room's config, who the clients are, what they do.
#[derive(Debug, Clone)]
struct Setup {
    config: RoomConfig,
    /// Rules that send (else the open rules).
    rules: Option<Sender>,
    users: usize,
    /// The user of each client slot (a browser tab).
    slot_users: Vec<usize>,
    /// How each slot reads at first.
    slot_modes: Vec<Mode>,
}

const REGIONS: &[&str] = &["EU", "NA", "OC"];
/// How long a departed member's session stays its user's (admission.rs).
const DEPARTED_MS: u64 = 10 * 60 * 1000;
const CLOSE_CODES: &[u16] = &[1001, 1009, 4001, 4008, 4013, 4029, 4401, 4403, 4404, 4409, 4429];
const ERROR_CODES: &[&str] = &["bad_frame", "too_large", "rate_limited", "conflict", "invalid"];

fn user_name(u: usize) -> String {
    format!("user-{u}")
}

/// A room config with small windows, backlogs, limits and thresholds, so
/// that flow control, backlog closes, batching, shedding, storms, trims,
/// large rooms and rate limits all happen in a few hundred steps.
fn gen_config(rng: &mut Rng) -> RoomConfig {
    let mut c = RoomConfig::default();
    if rng.chance(85) {
        c.replay_limit = rng.pick(&[1, 2, 3, 5, 8, 13, 20]);
        c.log_retain = c.replay_limit + rng.below(30);
        c.max_frame = rng.pick(&[300, 512, 1024, 2048, 4096]) + rng.below(200) as usize;
        c.log_retain_bytes = rng.range(100, 20_000);
        c.batch_max_bytes = rng.range(200, 8_000) as usize;
        c.presence_max = rng.range(20, 400) as usize;
        c.state_max_keys = rng.range(1, 12) as usize;
        c.state_max_bytes = rng.range(50, 3_000) as usize;
        c.send_window = rng.range(1, 16_000);
        c.reply_bytes_per_sec = rng.range(100, 20_000);
        c.reply_burst_bytes = rng.range(100, 50_000);
    }
    if rng.chance(55) {
        c.rate_per_sec = rng.range(1, 20);
        c.burst = rng.range(1, 20);
        c.abuse_drain_per_sec = rng.range(1, 10);
        c.abuse_limit = rng.range(3, 30);
        c.user_rate_per_sec = rng.range(1, 40);
        c.user_burst = rng.range(1, 40);
    } else {
        c.rate_per_sec = 10_000;
        c.burst = 10_000;
        c.user_rate_per_sec = 10_000;
        c.user_burst = 10_000;
    }
    c.presence_ttl_ms = rng.pick(&[1_000, 5_000, 30_000, 60_000, 300_000]);
    c.summary_interval_ms = rng.range(1, 5_000);
    c.large_room = rng.range(1, 8) as usize;
    c.batch_window_ms = rng.range(1, 200);
    c.batch_above = if rng.chance(50) { rng.range(1, 30) } else { 5_000 };
    c.outbound_budget = if rng.chance(40) { rng.range(1, 40) } else { 50_000 };
    c.storm_resumes_per_sec = if rng.chance(50) { rng.range(1, 3) } else { 50 };
    let lo = rng.range(1, 500);
    c.storm_jitter_ms = (lo, lo + rng.below(2_000));
    c.user_connections = rng.range(1, 4) as usize;
    if rng.chance(50) {
        c.user_connects_per_sec = rng.range(1, 4);
        c.user_connect_burst = rng.range(1, 30);
    }
    c.retention_ms = rng.pick(&[0, 10_000, 120_000, 3_600_000, 90 * 24 * 3_600_000]);
    c.echo_deadline_ms = rng.pick(&[3_000, 20_000, 60_000]);
    c.log_retain = c.log_retain.max(c.replay_limit);
    c.finish();
    // The backlog a reader may have waiting: often at least the largest
    // catch-up (a replay or a resync); sometimes less (but at least a
    // frame: a held catch-up is allowed on top of it), so that silent
    // readers reach it (4013).
    let replay = c.replay_limit * (2 * c.max_frame as u64 + 2_000);
    let state = 2 * c.state_max_bytes as u64 + c.state_max_keys as u64 * 300 + 2_000;
    c.max_backlog = if rng.chance(50) {
        replay.max(state) + rng.below(30_000)
    } else {
        c.max_frame as u64 + rng.range(200, 6_000)
    };
    c
}

/// Pools of names a case draws from, so that ids repeat (retries), topics
/// and keys collide (coalescing, CAS).
struct Pools {
    ids: u64,
    max_frame: usize,
    presence_max: usize,
}

fn small_data(rng: &mut Rng) -> String {
    let mut out = String::new();
    gen_value(rng, &mut out, 3, true);
    out
}

/// Any frame from the parser's generator, mutated or not.
fn any_frame(rng: &mut Rng) -> String {
    let bad = rng.chance(20);
    let frame = gen_frame(rng, bad);
    let text = frame.text(rng);
    match rng.below(4) {
        0 => mutate(rng, &text),
        1 if rng.chance(20) => noise(rng),
        _ => text,
    }
}

fn gen_payload(rng: &mut Rng, pools: &Pools) -> Payload {
    let id = |rng: &mut Rng| {
        if rng.chance(85) {
            format!("m{}", rng.below(pools.ids))
        } else {
            format!("u{}", rng.next() % 1_000_000)
        }
    };
    let text = match rng.weighted(&[30, 10, 6, 12, 8, 5, 5, 8, 10, 3, 3]) {
        0 => {
            let data = match rng.below(100) {
                0..=79 => small_data(rng),
                80..=94 => {
                    let n = rng.range(pools.max_frame as u64 / 4, pools.max_frame as u64);
                    format!(r#"{{"pad":"{}"}}"#, "p".repeat(n as usize))
                }
                95..=97 => {
                    let n = rng.range(30, 36) as usize;
                    nest(rng, n, "1", 0).0
                }
                _ => {
                    let n = pools.max_frame + rng.below(200) as usize;
                    format!(r#""{}""#, "o".repeat(n))
                }
            };
            let topic = rng.pick(&["chat", "t", "news", "$state", "🦀"]);
            format!(r#"{{"type":"publish","id":"{}","topic":"{topic}","data":{data}}}"#, id(rng))
        }
        1 => {
            let key = format!("k{}", rng.below(5));
            let value = if rng.chance(15) {
                format!(r#""{}""#, "v".repeat(rng.below(pools.max_frame as u64) as usize))
            } else {
                small_data(rng)
            };
            return Payload::SetCurrent {
                id: id(rng),
                key,
                value: Txt(value),
                delta: rng.pick(&[0, 0, 0, 0, 1, -1, 5]),
            };
        }
        2 => {
            let key = format!("k{}", rng.below(5));
            let v = match rng.below(4) {
                0 => String::new(),
                1 => r#","if_version":0"#.into(),
                _ => format!(r#","if_version":{}"#, rng.below(40)),
            };
            let value = small_data(rng);
            format!(r#"{{"type":"set","id":"{}","key":"{key}","value":{value}{v}}}"#, id(rng))
        }
        3 => {
            let topic = rng.pick(&["cursor", "typing", "t", "$x"]);
            format!(r#"{{"type":"signal","topic":"{topic}","data":{}}}"#, small_data(rng))
        }
        4 => {
            let state = match rng.below(10) {
                0 => format!(r#"{{"pad":"{}"}}"#, "s".repeat(pools.presence_max)),
                1 => "[1]".into(),
                _ => format!(r#"{{"name":"n{}","n":{}}}"#, rng.below(9), small_data(rng)),
            };
            format!(r#"{{"type":"presence","state":{state}}}"#)
        }
        5 => r#"{"type":"get_state"}"#.into(),
        6 => r#"{"type":"ping"}"#.into(),
        7 => {
            let pick = match rng.below(10) {
                0..=4 => MarkPick::Latest,
                5 => MarkPick::Oldest,
                6 => MarkPick::Stale,
                7 => MarkPick::Foreign,
                8 => MarkPick::Forged(Txt(format!("{:016x}", rng.next()))),
                _ => MarkPick::Forged(Txt(gen_str(rng, 70, false).decoded.unwrap())),
            };
            return Payload::Mark(pick);
        }
        8 | 9 => any_frame(rng),
        _ => {
            // over the frame limit
            let n = pools.max_frame + rng.below(100) as usize;
            format!(r#"{{"type":"ping","pad":"{}"}}"#, "x".repeat(n))
        }
    };
    Payload::Text(Txt(text))
}

fn gen_case(seed: u64) -> (Setup, Vec<Op>) {
    let mut rng = Rng::new(seed);
    let config = gen_config(&mut rng);
    let users = rng.range(3, 4) as usize;
    let slots = rng.range(4, 8) as usize;
    let slot_users =
        (0..slots).map(|i| if rng.chance(70) { i % users } else { rng.idx(users) }).collect();
    let slot_modes = (0..slots)
        .map(|_| match rng.below(10) {
            0 => Mode::Silent,
            1 | 2 => Mode::Lazy,
            _ => Mode::Reading,
        })
        .collect();
    let pools = Pools {
        ids: rng.range(5, 200),
        max_frame: config.max_frame,
        presence_max: config.presence_max,
    };
    // Rules that send, sized against the reply budget (a send over it is refused as a rule
    // problem; one near it takes the user's whole burst).
    let burst = config.reply_burst_bytes as usize;
    let rules = rng.chance(35).then(|| Sender {
        join_blob: *rng.pick(&[&0, &100, &(burst / 8), &(burst / 3)]),
        poke_blob: *rng.pick(&[&10, &(burst / 16), &(burst / 4)]),
    });
    let n = rng.range(20, 350) as usize;
    let mut ops = Vec::with_capacity(n + slots);
    // Most slots start connected.
    for slot in 0..slots {
        if rng.chance(80) {
            ops.push(Op::Connect { slot, resume: Resume::Fresh, region: rng.idx(3), exp: None });
        }
    }
    let pick = |rng: &mut Rng| rng.idx(64);
    for _ in 0..n {
        let op = match rng
            .weighted(&[35, 3, 9, 2, 1, 1, 3, 1, 3, 2, 2, 1, 6, 3, 3, 2, 1, 1, 1, 1, 2, 2, 3])
        {
            0 => Op::Send { pick: pick(&mut rng), payload: gen_payload(&mut rng, &pools) },
            1 => {
                let k = rng.range(2, 12);
                let frames = if rng.chance(35) {
                    // one sender's signals (and the odd write) in one turn
                    let who = pick(&mut rng);
                    (0..k)
                        .map(|_| {
                            let p = if rng.chance(80) {
                                let topic = rng.pick(&["cursor", "typing"]);
                                let data = small_data(&mut rng);
                                let t = format!(
                                    r#"{{"type":"signal","topic":"{topic}","data":{data}}}"#
                                );
                                Payload::Text(Txt(t))
                            } else {
                                gen_payload(&mut rng, &pools)
                            };
                            (who, p)
                        })
                        .collect()
                } else {
                    (0..k).map(|_| (pick(&mut rng), gen_payload(&mut rng, &pools))).collect()
                };
                Op::Burst(frames)
            }
            2 => {
                let resume = match rng.below(22) {
                    0..=11 => Resume::Correct,
                    12..=13 => Resume::Fresh,
                    14..=17 => Resume::Stale(rng.range(1, 30)),
                    18 => Resume::Future(rng.below(5)),
                    19..=20 => Resume::BogusEpoch,
                    _ => Resume::NoEpoch,
                };
                let exp = rng.chance(15).then(|| rng.range(0, 120_000) as i64 - 2_000);
                Op::Connect { slot: rng.idx(slots), resume, region: rng.idx(3), exp }
            }
            3 => Op::Hijack { slot: rng.idx(slots), victim: rng.idx(slots), region: rng.idx(3) },
            4 => Op::Late { pick: pick(&mut rng), text: Txt(r#"{"type":"ping"}"#.into()) },
            5 => Op::Binary {
                pick: pick(&mut rng),
                len: rng.below(2 * config.max_frame as u64) as usize,
            },
            6 => Op::Drop { pick: pick(&mut rng) },
            7 => Op::RuntimeClose { pick: pick(&mut rng) },
            8 => Op::Read { pick: pick(&mut rng) },
            9 => {
                let mode = rng.pick(&[Mode::Reading, Mode::Lazy, Mode::Silent]);
                Op::SetMode { pick: pick(&mut rng), mode }
            }
            10 => Op::Ping { pick: pick(&mut rng) },
            11 => Op::Evict,
            12 => Op::Advance(match rng.below(100) {
                0..=49 => rng.range(1, 100),
                50..=84 => rng.range(100, 5_000),
                _ => rng.range(5_000, 200_000),
            }),
            13 => Op::TurnEnds,
            14 => Op::RunFor(rng.range(1, 10_000)),
            15 => Op::Settle,
            16 => Op::EarlyAlarm,
            17 => {
                let block = match rng.below(3) {
                    0 => BlockOp::Keep,
                    1 => BlockOp::For(rng.range(1, 300_000)),
                    _ => BlockOp::Lift,
                };
                Op::Kick { user: rng.idx(users), block }
            }
            18 => {
                if rng.chance(60) {
                    Op::Drain
                } else {
                    Op::Delete
                }
            }
            19 => Op::Evict,
            20 => {
                // Echoes of marks, most of them spent (the connection read and echoed what it
                // had first): repeated, interleaved with live ones.
                let who = pick(&mut rng);
                ops.push(Op::Read { pick: who });
                let k = rng.range(5, 200) as usize;
                let frames = (0..k)
                    .map(|_| {
                        let pick = match rng.below(20) {
                            0..=9 => MarkPick::Stale,
                            10..=12 => MarkPick::Oldest,
                            13..=15 => MarkPick::Latest,
                            16..=17 => MarkPick::Foreign,
                            _ => MarkPick::Forged(Txt(format!("{:016x}", rng.next()))),
                        };
                        (who, Payload::Mark(pick))
                    })
                    .collect();
                Op::Burst(frames)
            }
            21 => {
                // Publishes the sending rules answer with a send to a slot's session (or to
                // nobody), from one sender in one turn.
                let who = pick(&mut rng);
                let frames = (0..rng.range(1, 12))
                    .map(|_| {
                        let to = format!("sess-slot{}-g{}", rng.idx(slots), rng.below(2) / 2);
                        // Mostly new ids: a retry gets its ack without asking the rules.
                        let id = format!("poke{}", rng.below(1_000_000));
                        let t = format!(
                            r#"{{"type":"publish","id":"{id}","topic":"{POKE}","data":"{to}"}}"#
                        );
                        (who, Payload::Text(Txt(t)))
                    })
                    .collect();
                Op::Burst(frames)
            }
            _ => {
                let id = if rng.chance(80) {
                    format!("srv{}", rng.below(20))
                } else {
                    let n = name_len(&mut rng).min(66);
                    gen_str(&mut rng, n, false).decoded.unwrap()
                };
                let topic = rng.pick(&["news", "$x", "", "t"]).to_owned();
                Op::ServerPublish { id, topic, data: Txt(small_data(&mut rng)) }
            }
        };
        ops.push(op);
    }
    (Setup { config, rules, users, slot_users, slot_modes }, ops)
}

// ---- the engine target: the model it checks against ----------------------------

/// What one client has seen of the presence.
#[derive(Default, Debug)]
struct View {
    members: BTreeMap<String, Value>,
    large: bool,
    summary: Option<Value>,
}

/// One connection, as its client knows it.
#[derive(Debug)]
struct Rec {
    conn: String,
    slot: Option<usize>,
    session: String,
    user: String,
    since: Option<u64>,
    epoch_sent: Option<String>,
    expires: Option<u64>,
    /// Which incarnation of the room (deletes start a new one) it joined.
    incarnation: u64,
    mode: Mode,
    welcomed: bool,
    refused: bool,
    /// Its close was looked at.
    closed_seen: bool,
    welcome_seq: u64,
    /// The seq it has applied (after its welcome).
    applied: Option<u64>,
    epoch: Option<String>,
    /// A `resync` must come next, with this reason.
    resync: Option<&'static str>,
    /// Marks received and not echoed yet, oldest first; and those echoed.
    marks: Vec<String>,
    echoed: Vec<String>,
    /// Its last frame, or the last ping the runtime answered (ms).
    active: u64,
    view: View,
    /// Its frame budget as the engine keeps it, the frames that budget alone must have
    /// refused (every frame costs but an echo that confirms something new), and the
    /// `rate_limited` answers it got.
    bucket: ModelBucket,
    must_refuse: u64,
    limited: u64,
}

struct Slot {
    user: usize,
    session: String,
    generation: u32,
    rec: Option<usize>,
    mode: Mode,
    /// Where it left off: the seq it applied, in which epoch.
    known: Option<(u64, String)>,
}

/// What the current step did, to judge the closes it caused.
#[derive(Default)]
struct StepCtx {
    start: u64,
    connect: Option<usize>,
    oversize: BTreeSet<usize>,
    kick_user: Option<String>,
    drain: bool,
    delete: bool,
}

/// Coverage and volume of the engine run.
#[derive(Default)]
struct EngineStats {
    cases: u64,
    steps: u64,
    frames: u64,
    connects: u64,
    closes: BTreeMap<u16, u64>,
    refusals: BTreeMap<u16, u64>,
    resumed: u64,
    resync_epoch: u64,
    resync_gap: u64,
    state_frames: u64,
    conflicts: u64,
    rate_limited_frames: u64,
    signals_seen: u64,
    large_resets: u64,
    hijacks_taken: u64,
    marks_echoed: u64,
    evictions: u64,
    /// Evictions not done because the room kept a timer (frames wait for
    /// an echo): the runtime does not hibernate it then.
    evictions_skipped: u64,
    deletes: u64,
    trims: u64,
    server_publishes: u64,
    acks: u64,
    messages: u64,
    catch_ups: u64,
    /// Sends of the rules received, and refusals a connection's own budget owed (checked).
    rule_sends: u64,
    refusals_owed: u64,
    step_refusals_owed: u64,
    /// From the room's own counters (`stats_json`), summed.
    room: BTreeMap<String, u64>,
}

impl EngineStats {
    fn add_room(&mut self, sim: &mut Sim) {
        let v: Value = serde_json::from_str(&sim.room.stats_json()).expect("stats are JSON");
        for key in [
            "batches",
            "signals_dropped",
            "signals_coalesced",
            "deferred_replays",
            "held_replies",
            "rate_limited",
            "refused_opens",
            "expired",
            "backlog_closes",
            "stalled_closes",
            "paced_connects",
            "rule_sends_dropped",
        ] {
            *self.room.entry(key.to_owned()).or_default() += v[key].as_u64().unwrap_or(0);
        }
    }
}

/// The simulated room, the clients and the model the invariants compare with.
struct World<'a> {
    setup: &'a Setup,
    sim: Sim,
    slots: Vec<Slot>,
    recs: Vec<Rec>,
    /// The connections whose close has not been looked at yet (the rest
    /// are closed for good), oldest first.
    live: Vec<usize>,
    incarnation: u64,
    deleted_seen: usize,
    /// (session, id) -> seq acked, this incarnation.
    acks: HashMap<(String, String), u64>,
    /// The retained log as checked so far: seq -> (session, id, user, bytes).
    log: BTreeMap<u64, (String, String, String, u64)>,
    log_keys: HashMap<(String, String), u64>,
    log_bytes: u64,
    log_checked: u64,
    /// user -> blocked until (ms).
    blocks: HashMap<String, u64>,
    /// session -> (user, left no earlier than, left no later than).
    departed: HashMap<String, (String, u64, u64)>,
    /// user -> their connect budget, as the engine keeps it (each load starts afresh).
    connects: HashMap<String, ModelBucket>,
    /// user -> what the rules sent because of them.
    accounts: HashMap<String, Account>,
    /// Times the room was loaded again (evicted).
    loads: u64,
    stats: &'a mut EngineStats,
    trace: bool,
}

fn summary_of(v: &Value) -> Value {
    let mut s = v.clone();
    if let Some(o) = s.as_object_mut() {
        o.remove("type");
    }
    s
}

/// The room's members as `presence_json` lists them, but `own`.
fn members_of(presence: &Value, own: &str) -> BTreeMap<String, Value> {
    presence["members"]
        .as_object()
        .expect("members")
        .iter()
        .filter(|(k, _)| *k != own)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A client's member list, but its own session (its own presence updates
/// are not echoed to it).
fn view_members(view: &View, own: &str) -> BTreeMap<String, Value> {
    view.members.iter().filter(|(k, _)| *k != own).map(|(k, v)| (k.clone(), v.clone())).collect()
}

impl<'a> World<'a> {
    fn presence(&self) -> Value {
        serde_json::from_str(&self.sim.room.presence_json()).expect("presence is JSON")
    }

    /// Whether `r`'s member list and summary are the room's.
    fn view_matches(&self, r: usize, presence: &Value) -> (bool, bool) {
        let rec = &self.recs[r];
        let large = presence["large"] == true;
        let members_ok = rec.view.large == large
            && (large
                || view_members(&rec.view, &rec.session) == members_of(presence, &rec.session));
        let summary_ok = rec.view.summary.as_ref() == Some(&presence["summary"]);
        (members_ok, summary_ok)
    }

    fn new(setup: &'a Setup, stats: &'a mut EngineStats, trace: bool) -> World<'a> {
        let slots = setup
            .slot_users
            .iter()
            .enumerate()
            .map(|(i, &user)| Slot {
                user,
                session: format!("sess-slot{i}-g0"),
                generation: 0,
                rec: None,
                mode: setup.slot_modes[i],
                known: None,
            })
            .collect();
        let sim = match setup.rules {
            Some(rules) => Sim::with_rules(setup.config.clone(), move || Box::new(rules)),
            None => Sim::new(setup.config.clone()),
        };
        World {
            setup,
            sim,
            slots,
            recs: Vec::new(),
            live: Vec::new(),
            incarnation: 0,
            deleted_seen: 0,
            acks: HashMap::new(),
            log: BTreeMap::new(),
            log_keys: HashMap::new(),
            log_bytes: 0,
            log_checked: 0,
            blocks: HashMap::new(),
            departed: HashMap::new(),
            connects: HashMap::new(),
            accounts: HashMap::new(),
            loads: 0,
            stats,
            trace,
        }
    }

    fn config(&self) -> &RoomConfig {
        &self.setup.config
    }

    fn is_open(&self, r: usize) -> bool {
        self.sim.sockets[&self.recs[r].conn].open
    }

    fn open_recs(&self) -> Vec<usize> {
        self.live.iter().copied().filter(|&r| self.is_open(r)).collect()
    }

    fn pick_open(&self, pick: usize) -> Option<usize> {
        let open = self.open_recs();
        (!open.is_empty()).then(|| open[pick % open.len()])
    }

    /// The user a session belongs to, as the room must see it: `Err` when
    /// the model cannot tell (a departure near the end of its window).
    fn owner(&self, session: &str) -> Result<Option<String>, ()> {
        if let Some(r) = self.open_recs().into_iter().find(|&r| self.recs[r].session == session) {
            return Ok(Some(self.recs[r].user.clone()));
        }
        if let Some((_, _, user, _)) = self.log.values().find(|(s, _, _, _)| s == session) {
            return Ok(Some(user.clone()));
        }
        match self.departed.get(session) {
            Some((user, lo, hi)) => {
                let now = self.sim.now;
                if now.saturating_sub(*hi) >= DEPARTED_MS {
                    Ok(None)
                } else if now.saturating_sub(*lo) < DEPARTED_MS {
                    Ok(Some(user.clone()))
                } else {
                    Err(())
                }
            }
            None => Ok(None),
        }
    }

    /// The close code a connect of (`session`, `user`) must get, if any.
    fn expected_refusal(
        &self,
        session: &str,
        user: &str,
        exp: Option<u64>,
    ) -> Result<Option<u16>, ()> {
        let now = self.sim.now;
        if exp.is_some_and(|e| e <= now) {
            return Ok(Some(4401));
        }
        if self.blocks.get(user).is_some_and(|until| *until > now) {
            return Ok(Some(4403));
        }
        if self.owner(session)?.is_some_and(|o| o != user) {
            return Ok(Some(4409));
        }
        let open = self.open_recs();
        let held = open.iter().filter(|&&r| self.recs[r].user == user).count();
        let replaces = usize::from(open.iter().any(|&r| self.recs[r].session == session));
        if held - replaces >= self.config().user_connections {
            return Ok(Some(4429));
        }
        Ok(None)
    }

    #[allow(clippy::too_many_arguments)] // what one connect brings
    fn connect(
        &mut self,
        ctx: &mut StepCtx,
        slot: Option<usize>,
        session: String,
        user: String,
        since: Option<u64>,
        epoch: Option<String>,
        region: usize,
        expires: Option<u64>,
    ) -> usize {
        // Every attempt costs one from the user's connect budget, first.
        let now = self.sim.now;
        let c = self.config();
        let (rate, burst) = (c.user_connects_per_sec, c.user_connect_burst);
        let loads = self.loads;
        self.accounts.entry(user.clone()).or_insert(Account {
            since: now,
            loads_then: loads,
            bytes: 0,
        });
        let paced = !self
            .connects
            .entry(user.clone())
            .or_insert_with(|| ModelBucket::full(burst, now))
            .take(rate, burst, now);
        let expected =
            if paced { Ok(Some(4429)) } else { self.expected_refusal(&session, &user, expires) };
        let previous = self.open_recs().into_iter().find(|&r| self.recs[r].session == session);
        let conn = self.sim.connect_hello(
            &session,
            &user,
            REGIONS[region],
            since,
            epoch.as_deref(),
            expires,
        );
        self.stats.connects += 1;
        let r = self.recs.len();
        let mode = slot.map_or(Mode::Reading, |s| self.slots[s].mode);
        self.recs.push(Rec {
            conn: conn.clone(),
            slot,
            session,
            user,
            since,
            epoch_sent: epoch,
            expires,
            incarnation: self.incarnation,
            mode,
            welcomed: false,
            refused: false,
            closed_seen: false,
            welcome_seq: 0,
            applied: None,
            epoch: None,
            resync: None,
            marks: Vec::new(),
            echoed: Vec::new(),
            active: self.sim.now,
            view: View::default(),
            bucket: ModelBucket::full(self.setup.config.burst, self.sim.now),
            must_refuse: 0,
            limited: 0,
        });
        self.live.push(r);
        ctx.connect = Some(r);
        let socket = &self.sim.sockets[&conn];
        if self.trace {
            let kinds: Vec<String> =
                socket.inbox.iter().map(|f| Txt(f.to_string()).short()).collect();
            println!(
                "    {conn} opened at {}: {kinds:?}, closed {:?}",
                self.sim.now, socket.closed
            );
        }
        let refused = socket.inbox.is_empty() && socket.closed.is_some();
        let code = socket.closed.filter(|_| refused);
        if let Some(code) = code {
            assert!(
                [4401, 4403, 4409, 4429].contains(&code),
                "[open] a connect refused with {code} and no welcome"
            );
            self.recs[r].refused = true;
            self.recs[r].closed_seen = true;
            self.live.retain(|&l| l != r);
            *self.stats.refusals.entry(code).or_default() += 1;
        }
        if let Ok(expected) = expected {
            assert_eq!(code, expected, "[open] refusal of a connect (None: accepted)");
        }
        if let Some(p) = previous {
            let closed = self.sim.sockets[&self.recs[p].conn].closed;
            match code {
                None => assert_eq!(
                    closed,
                    Some(4001),
                    "[supersede] the session's older socket must go with 4001"
                ),
                Some(_) => assert!(self.is_open(p), "[supersede] a refused connect closed {p}"),
            }
        }
        if let Some(s) = slot {
            self.slots[s].rec = Some(r);
            if code == Some(4409) {
                // The client takes a new session (its user's tab id is taken).
                let sl = &mut self.slots[s];
                sl.generation += 1;
                sl.session = format!("sess-slot{s}-g{}", sl.generation);
            }
        }
        r
    }

    fn connect_slot(
        &mut self,
        ctx: &mut StepCtx,
        s: usize,
        resume: Resume,
        region: usize,
        exp: Option<u64>,
    ) {
        // Whatever reached the old socket was read before it closed.
        if let Some(r) = self.slots[s].rec {
            self.read(r, false);
        }
        let known = self.slots[s].known.clone();
        let (since, epoch) = match (resume, known) {
            (Resume::Fresh, _) => (None, None),
            (Resume::Correct, Some((a, e))) => (Some(a), Some(e)),
            (Resume::Stale(k), Some((a, e))) => (Some(a.saturating_sub(k)), Some(e)),
            (Resume::Future(k), Some((a, e))) => (Some(a + k + 1), Some(e)),
            (Resume::Future(k), None) => {
                (Some(self.sim.room.seq() + k + 1), Some(self.sim.room.epoch().to_owned()))
            }
            (Resume::BogusEpoch, k) => (Some(k.map_or(0, |k| k.0)), Some("e-bogus".to_owned())),
            (Resume::NoEpoch, k) => (Some(k.map_or(0, |k| k.0)), None),
            (_, None) => (None, None),
        };
        let user = user_name(self.slots[s].user);
        let session = self.slots[s].session.clone();
        self.connect(ctx, Some(s), session, user, since, epoch, region, exp);
    }

    /// Sends one text on an open connection, as its client does; `free` when it is an echo
    /// of a mark outstanding (the one frame that costs nothing).
    fn send_text(&mut self, ctx: &mut StepCtx, r: usize, text: &str, free: bool) {
        let now = self.sim.now;
        let max = self.config().max_frame;
        let conn = self.recs[r].conn.clone();
        let expired = self.recs[r].expires.is_some_and(|e| e <= now);
        let is_mark = matches!(parse(text), Ok(ClientFrame::Mark { .. }));
        if text.len() > max {
            ctx.oversize.insert(r);
        } else if !free && !expired {
            self.cost(r);
        }
        self.recs[r].active = now;
        self.stats.frames += 1;
        self.sim.send(&conn, text);
        if text.len() > max {
            assert_eq!(self.sim.sockets[&conn].closed, Some(1009), "[1009] a frame over the limit");
        } else if expired && !is_mark {
            assert_eq!(
                self.sim.sockets[&conn].closed,
                Some(4401),
                "[4401] a frame on a connection whose token expired"
            );
        }
    }

    /// (refusals the connections' own budgets owe, refusals the room counted, connections
    /// closed 4029): before and after the frames of one step.
    fn refusals(&mut self) -> (u64, u64, usize) {
        let owed = self.recs.iter().map(|r| r.must_refuse).sum();
        let v: Value = serde_json::from_str(&self.sim.room.stats_json()).expect("stats are JSON");
        let counted = v["rate_limited"].as_u64().expect("rate_limited");
        let closed = self.sim.sockets.values().filter(|s| s.closed == Some(4029)).count();
        (owed, counted, closed)
    }

    /// Every frame but an echo that confirms something new costs against its connection's
    /// budget: the frames of a step that the budgets could not pay for were refused
    /// (`rate_limited`, or the one that closed a flood with 4029).
    fn check_refusals(&mut self, (owed, counted, closed): (u64, u64, usize)) {
        let (owed_now, counted_now, closed_now) = self.refusals();
        let owed = owed_now - owed;
        let refused = counted_now.saturating_sub(counted) + (closed_now - closed) as u64;
        self.stats.step_refusals_owed += owed;
        assert!(
            refused >= owed,
            "[rate] the connections' own budgets could not pay for {owed} frames of this step; the room refused {refused}"
        );
    }

    /// The room was loaded again (after an eviction or a delete): every budget starts
    /// afresh, the connections' and the users'.
    fn fresh_budgets(&mut self) {
        self.loads += 1;
        self.connects.clear();
        let (burst, now) = (self.setup.config.burst, self.sim.now);
        for r in self.open_recs() {
            self.recs[r].bucket = ModelBucket::full(burst, now);
        }
    }

    /// One frame against `r`'s own budget: one its bucket cannot pay for must be refused.
    fn cost(&mut self, r: usize) {
        let (rate, burst) = (self.setup.config.rate_per_sec, self.setup.config.burst);
        let now = self.sim.now;
        if !self.recs[r].bucket.take(rate, burst, now) {
            self.recs[r].must_refuse += 1;
        }
    }

    fn send_payload(&mut self, ctx: &mut StepCtx, pick: usize, payload: &Payload) {
        let Some(r) = self.pick_open(pick) else { return };
        let mut free = false;
        let text = match payload {
            Payload::Text(t) => t.0.clone(),
            Payload::SetCurrent { id, key, value, delta } => {
                let version = self.sim.disk.state.get(key).map_or(0, |(_, v)| *v);
                let v = (version as i64 + delta).max(0);
                format!(
                    r#"{{"type":"set","id":"{id}","key":"{key}","value":{},"if_version":{v}}}"#,
                    value.0
                )
            }
            Payload::Mark(pick) => {
                let rec = &self.recs[r];
                let token = match pick {
                    MarkPick::Latest => rec.marks.last().cloned(),
                    MarkPick::Oldest => rec.marks.first().cloned(),
                    MarkPick::Stale => rec.echoed.last().cloned(),
                    MarkPick::Foreign => self
                        .recs
                        .iter()
                        .filter(|o| o.conn != rec.conn)
                        .find_map(|o| o.marks.first().or(o.echoed.first()).cloned()),
                    MarkPick::Forged(t) => Some(t.0.clone()),
                };
                let token = token.unwrap_or_else(|| "feedfacecafebeef".into());
                if let Some(i) = self.recs[r].marks.iter().position(|m| *m == token) {
                    let echoed: Vec<String> = self.recs[r].marks.drain(..=i).collect();
                    self.recs[r].echoed.extend(echoed);
                    free = true;
                }
                serde_json::json!({"type": "mark", "mark": token}).to_string()
            }
        };
        self.send_text(ctx, r, &text, free);
    }

    /// Reads what reached `r`'s socket, checking it frame by frame; echoes
    /// the marks when `echo` (and the socket is open).
    fn read(&mut self, r: usize, echo: bool) {
        let conn = self.recs[r].conn.clone();
        let frames = std::mem::take(&mut self.sim.sockets.get_mut(&conn).unwrap().inbox);
        let mut marks = Vec::new();
        for f in frames {
            if f["type"] == "mark" {
                let token = f["mark"].as_str().expect("[mark] a token").to_owned();
                assert!(self.recs[r].welcomed, "[mark] before the welcome");
                marks.push(token);
            } else {
                self.apply(r, &f);
            }
        }
        self.recs[r].marks.extend(marks);
        if echo && self.is_open(r) && !self.recs[r].marks.is_empty() {
            let marks = std::mem::take(&mut self.recs[r].marks);
            for m in marks {
                if !self.is_open(r) {
                    break;
                }
                let text = format!(r#"{{"type":"mark","mark":"{m}"}}"#);
                self.stats.marks_echoed += 1;
                self.stats.frames += 1;
                self.recs[r].active = self.sim.now;
                self.sim.send(&conn, &text);
                self.recs[r].echoed.push(m);
            }
        }
    }

    /// Checks one frame a connection received, in order, against the model.
    fn apply(&mut self, r: usize, f: &Value) {
        let current = self.recs[r].incarnation == self.incarnation;
        let kind = f["type"].as_str().expect("[frame] a type").to_owned();
        let who = format!("{} ({})", self.recs[r].conn, self.recs[r].session);
        if !self.recs[r].welcomed {
            assert_eq!(kind, "welcome", "[welcome] {who}: the first frame must be the welcome");
        }
        if self.trace {
            println!("    {who} <- (t={}) {}", self.sim.now, Txt(f.to_string()).short());
        }
        match kind.as_str() {
            "welcome" => {
                let rec = &mut self.recs[r];
                assert!(!rec.welcomed, "[welcome] {who}: a second welcome");
                rec.welcomed = true;
                assert_eq!(f["session"], rec.session.as_str(), "[welcome] {who}: session");
                assert_eq!(f["user"], rec.user.as_str(), "[welcome] {who}: user");
                assert_eq!(f["conn"], rec.conn.as_str(), "[welcome] {who}: conn");
                let seq = f["seq"].as_u64().expect("[welcome] seq");
                let epoch = f["epoch"].as_str().expect("[welcome] epoch").to_owned();
                let resumed = f["resumed"].as_bool().expect("[welcome] resumed");
                let missed = f["missed"].as_u64().expect("[welcome] missed");
                rec.welcome_seq = seq;
                let limit = self.setup.config.replay_limit;
                match rec.since {
                    None => {
                        assert!(!resumed && missed == 0, "[welcome] {who}: resumed without since");
                        rec.applied = Some(seq);
                    }
                    Some(since) => {
                        let epoch_ok = rec.epoch_sent.as_deref() == Some(epoch.as_str());
                        let can = epoch_ok && since <= seq && seq - since <= limit;
                        assert_eq!(resumed, can, "[resume] {who}: since {since}, seq {seq}, limit {limit}, epoch ok {epoch_ok}");
                        if resumed {
                            assert_eq!(missed, seq - since, "[resume] {who}: missed");
                            rec.applied = Some(since);
                            self.stats.resumed += 1;
                        } else {
                            assert_eq!(missed, 0, "[resume] {who}: missed without a replay");
                            let reason = if !epoch_ok || since > seq { "epoch" } else { "gap" };
                            rec.resync = Some(reason);
                            rec.applied = Some(seq);
                        }
                    }
                }
                rec.epoch = Some(epoch);
                let p = &f["presence"];
                rec.view.large = p["large"] == true;
                rec.view.members = p["members"]
                    .as_object()
                    .expect("[welcome] members")
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                rec.view.summary = Some(p["summary"].clone());
                if current {
                    assert!(seq <= self.sim.disk.seq, "[welcome] {who}: seq past the log");
                }
            }
            "resync" => {
                let rec = &mut self.recs[r];
                let reason = rec
                    .resync
                    .take()
                    .expect("[resync] only right after a welcome that did not resume");
                assert_eq!(f["reason"], reason, "[resync] {who}: reason");
                assert_eq!(f["seq"], rec.welcome_seq, "[resync] {who}: seq of the welcome");
                rec.applied = Some(rec.welcome_seq);
                if reason == "epoch" {
                    self.stats.resync_epoch += 1;
                } else {
                    self.stats.resync_gap += 1;
                }
            }
            "state" => {
                let rec = &mut self.recs[r];
                assert!(rec.resync.is_none(), "[state] {who}: before the resync");
                let seq = f["seq"].as_u64().expect("[state] seq");
                let applied = rec.applied.expect("welcomed");
                assert!(seq >= applied, "[state] {who}: state at {seq} after message {applied}");
                rec.applied = Some(seq);
                self.stats.state_frames += 1;
            }
            "message" => {
                let rec = &mut self.recs[r];
                assert!(rec.resync.is_none(), "[resync] {who}: a message before the resync");
                let seq = f["seq"].as_u64().expect("[message] seq");
                let applied = rec.applied.expect("welcomed");
                assert_eq!(seq, applied + 1, "[gap] {who}: message {seq} after {applied}");
                rec.applied = Some(seq);
                self.stats.messages += 1;
                if current {
                    if let Some(e) = self.sim.disk.log.get(&seq) {
                        assert_eq!(
                            (f["session"].as_str(), f["id"].as_str(), f["user"].as_str()),
                            (Some(e.session.as_str()), Some(e.id.as_str()), Some(e.user.as_str())),
                            "[message] {who}: seq {seq} is another write in the log"
                        );
                    }
                }
            }
            "ack" => {
                let rec = &self.recs[r];
                let id = f["id"].as_str().expect("[ack] id").to_owned();
                let seq = f["seq"].as_u64().expect("[ack] seq");
                self.stats.acks += 1;
                if current {
                    self.check_ack(&rec.session.clone(), &rec.user.clone(), &id, seq, &who);
                }
            }
            "signal" => {
                let rec = &self.recs[r];
                assert_ne!(f["session"], rec.session.as_str(), "[signal] {who}: its own signal");
                let topic = f["topic"].as_str().expect("[signal] topic");
                assert!(names::valid_topic(topic), "[signal] {who}: topic {topic:?}");
                self.stats.signals_seen += 1;
                if f["session"] == crate::room::RULES_SESSION {
                    self.rules_sent(f, &who);
                }
            }
            "presence" => {
                let rec = &mut self.recs[r];
                let joins = f["joins"].as_object().expect("[presence] joins");
                let leaves = f["leaves"].as_array().expect("[presence] leaves");
                assert!(
                    !leaves.iter().any(|s| *s == rec.session.as_str()),
                    "[presence] {who}: told of its own leave"
                );
                if f["reset"] == true {
                    rec.view.large = f["large"] == true;
                    rec.view.members.clear();
                    if rec.view.large {
                        self.stats.large_resets += 1;
                        assert!(joins.is_empty(), "[presence] {who}: a large reset with joins");
                    }
                }
                for (s, m) in joins {
                    rec.view.members.insert(s.clone(), m.clone());
                }
                for s in leaves {
                    rec.view.members.remove(s.as_str().expect("[presence] a session"));
                }
            }
            "summary" => {
                self.recs[r].view.summary = Some(summary_of(f));
            }
            "error" => {
                let code = f["code"].as_str().expect("[error] code");
                assert!(ERROR_CODES.contains(&code), "[error] {who}: code {code}");
                match code {
                    "conflict" => {
                        assert!(f["version"].is_u64(), "[error] conflict without version");
                        self.stats.conflicts += 1;
                    }
                    "rate_limited" => {
                        self.stats.rate_limited_frames += 1;
                        self.recs[r].limited += 1;
                    }
                    _ => {}
                }
            }
            "pong" => {}
            other => panic!("[frame] {who}: unexpected frame type {other:?}"),
        }
        if let (Some(s), Some(a), Some(e)) =
            (self.recs[r].slot, self.recs[r].applied, self.recs[r].epoch.clone())
        {
            if self.recs[r].resync.is_none() && self.slots[s].rec == Some(r) {
                self.slots[s].known = Some((a, e));
            }
        }
    }

    /// A send of the rules reached a client: it is paid for by who caused it, within their
    /// reply budget's burst (one per load of the room) and rate.
    fn rules_sent(&mut self, f: &Value, who: &str) {
        self.stats.rule_sends += 1;
        let by = f["data"]["by"].as_str().expect("[rules] a send says who caused it").to_owned();
        if by == crate::room::SERVER_SESSION {
            return; // the operator's backend pays nothing
        }
        let c = &self.setup.config;
        let (burst, rate, now, loads) =
            (c.reply_burst_bytes, c.reply_bytes_per_sec, self.sim.now, self.loads);
        let account = self
            .accounts
            .get_mut(&by)
            .expect("[rules] a send caused by a user who never connected");
        account.bytes += f.to_string().len() as u64;
        let bound = account.bound(burst, rate, now, loads);
        assert!(
            account.bytes <= bound,
            "[rules] {who}: the rules sent {} bytes because of {by}, whose reply budget allows {bound}",
            account.bytes
        );
    }

    fn check_ack(&mut self, session: &str, user: &str, id: &str, seq: u64, who: &str) {
        if let Some(e) = self.sim.disk.log.get(&seq) {
            assert_eq!(
                (e.session.as_str(), e.id.as_str(), e.user.as_str()),
                (session, id, user),
                "[ack] {who}: acked at {seq}, which the log holds for another write"
            );
        } else {
            let first = self.sim.disk.log.keys().next().copied().unwrap_or(u64::MAX);
            assert!(seq < first, "[ack] {who}: acked at {seq}, not in the log");
        }
        let key = (session.to_owned(), id.to_owned());
        if let Some(&before) = self.acks.get(&key) {
            if before != seq {
                assert!(
                    !self.sim.disk.log.contains_key(&before),
                    "[dedup] {who}: ({session}, {id}) acked at {before} and again at {seq} while {before} is retained"
                );
                assert!(seq > before, "[dedup] {who}: re-acked at an older seq");
            }
        }
        self.acks.insert(key, seq);
    }

    /// After a step: reads, closes, and every invariant of the room.
    fn after(&mut self, ctx: &StepCtx) {
        if self.sim.disk.deleted != self.deleted_seen {
            // The adapter drops a deleted room's engine; the next event
            // loads an empty one with a new epoch.
            self.closures(ctx);
            self.stats.add_room(&mut self.sim);
            self.deleted_seen = self.sim.disk.deleted;
            self.stats.deletes += 1;
            self.sim.reload();
            self.incarnation += 1;
            self.acks.clear();
            self.log.clear();
            self.log_keys.clear();
            self.log_bytes = 0;
            self.log_checked = 0;
            self.blocks.clear();
            self.departed.clear();
            self.fresh_budgets();
        }
        // Closed sockets: what reached them before the close.
        for r in self.live.clone() {
            if !self.is_open(r) && !self.sim.sockets[&self.recs[r].conn].inbox.is_empty() {
                self.read(r, false);
            }
        }
        let readers: Vec<usize> =
            self.open_recs().into_iter().filter(|&r| self.recs[r].mode != Mode::Lazy).collect();
        if !readers.is_empty() {
            self.sim.end_turn();
            for r in readers {
                let echo = self.recs[r].mode == Mode::Reading;
                self.read(r, echo);
            }
        }
        self.closures(ctx);
        self.check_room();
    }

    /// Judges every close since the last step.
    fn closures(&mut self, ctx: &StepCtx) {
        let now = self.sim.now;
        if self.trace {
            for &r in &self.live {
                if !self.is_open(r) && !self.recs[r].closed_seen {
                    let code = self.sim.sockets[&self.recs[r].conn].closed;
                    println!("    {} closed by {now}: {code:?}", self.recs[r].conn);
                }
            }
        }
        let ttl = self.config().presence_ttl_ms;
        for r in self.live.clone() {
            if self.recs[r].closed_seen || self.is_open(r) {
                continue;
            }
            self.recs[r].closed_seen = true;
            self.live.retain(|&l| l != r);
            let rec = &self.recs[r];
            let who = format!("{} ({}, {})", rec.conn, rec.session, rec.user);
            let code = self.sim.sockets[&rec.conn].closed;
            if let Some(code) = code {
                *self.stats.closes.entry(code).or_default() += 1;
                assert!(CLOSE_CODES.contains(&code), "[close] {who}: undocumented code {code}");
                match code {
                    1001 => assert!(ctx.drain, "[close] {who}: 1001 without a drain"),
                    1009 => assert!(
                        ctx.oversize.contains(&r),
                        "[close] {who}: 1009 without a large frame"
                    ),
                    4001 => {
                        let by = ctx.connect.map(|c| &self.recs[c]);
                        assert!(
                            by.is_some_and(|b| b.session == rec.session
                                && b.user == rec.user
                                && !b.refused),
                            "[close] {who}: 4001 without a connect of its session by its user"
                        );
                    }
                    4008 => assert!(
                        now.saturating_sub(rec.active) >= ttl - ttl / 2,
                        "[close] {who}: 4008 after {} ms of silence (ttl {ttl})",
                        now.saturating_sub(rec.active)
                    ),
                    4401 => assert!(
                        rec.expires.is_some_and(|e| e <= now),
                        "[close] {who}: 4401 before its token expired"
                    ),
                    4403 => assert!(
                        ctx.kick_user.as_deref() == Some(rec.user.as_str()),
                        "[close] {who}: 4403 without a kick of its user"
                    ),
                    4404 => assert!(ctx.delete, "[close] {who}: 4404 without a delete"),
                    4409 | 4429 => panic!("[close] {who}: {code} after the open"),
                    _ => {}
                }
            }
            // A member left (not a superseded socket): its session stays
            // its user's for a while.
            if code != Some(4001) && !rec.refused {
                let (session, user) = (rec.session.clone(), rec.user.clone());
                self.departed.insert(session, (user, ctx.start, now));
            }
        }
    }

    /// The room against the model: presence, users, the log.
    fn check_room(&mut self) {
        let open = self.open_recs();
        let sessions: BTreeSet<&str> =
            open.iter().map(|&r| self.recs[r].session.as_str()).collect();
        assert_eq!(sessions.len(), open.len(), "[presence] two open sockets of one session");
        assert_eq!(
            (self.sim.room.members(), self.sim.room.connections()),
            (sessions.len(), open.len()),
            "[presence] members and connections against the open sockets"
        );
        let mut per_user: BTreeMap<&str, usize> = BTreeMap::new();
        for &r in &open {
            *per_user.entry(self.recs[r].user.as_str()).or_default() += 1;
        }
        let limit = self.config().user_connections;
        for (user, n) in per_user {
            assert!(n <= limit, "[users] {user} holds {n} connections, limit {limit}");
        }
        self.check_log();
    }

    /// The log on the disk: gapless, within its bounds, each (session, id)
    /// once, each session one user's.
    fn check_log(&mut self) {
        let disk = &self.sim.disk;
        let first = disk.log.keys().next().copied();
        while let Some((&seq, _)) = self.log.first_key_value() {
            if first.is_some_and(|f| seq >= f) {
                break;
            }
            let (s, id, _, bytes) = self.log.remove(&seq).unwrap();
            self.log_keys.remove(&(s, id));
            self.log_bytes -= bytes;
        }
        if disk.seq > self.log_checked {
            for (&seq, e) in disk.log.range(self.log_checked + 1..) {
                let key = (e.session.clone(), e.id.clone());
                if let Some(before) = self.log_keys.get(&key) {
                    panic!(
                        "[log] ({}, {}) is in the log twice: {before} and {seq}",
                        e.session, e.id
                    );
                }
                if let Some((_, (_, _, user, _))) =
                    self.log.iter().find(|(_, (s, ..))| *s == e.session)
                {
                    assert_eq!(user, &e.user, "[log] session {} written by two users", e.session);
                }
                if e.topic == "$state" {
                    let d: Value = serde_json::from_str(e.data.get()).expect("[log] $state data");
                    assert_eq!(d["version"], seq, "[log] a $state version is its seq");
                }
                let bytes = e.data.get().len() as u64;
                self.log_keys.insert(key.clone(), seq);
                self.log.insert(seq, (key.0, key.1, e.user.clone(), bytes));
                self.log_bytes += bytes;
            }
            self.log_checked = disk.seq;
        }
        if disk.seq > 0 {
            let (f, l) = (first.expect("[log] empty at seq > 0"), *disk.log.keys().last().unwrap());
            assert_eq!(l, disk.seq, "[log] the newest entry is the room's seq");
            assert_eq!(disk.log.len() as u64, l - f + 1, "[log] a hole in the log");
            if f > 1 {
                self.stats.trims += 1;
            }
        }
        let c = &self.setup.config;
        let n = disk.log.len() as u64;
        assert!(
            n <= c.log_retain.max(c.replay_limit),
            "[log] {n} entries kept, retain {}",
            c.log_retain
        );
        assert!(
            self.log_bytes <= c.log_retain_bytes || n <= c.replay_limit.max(1),
            "[log] {} bytes kept in {n} entries, bound {}",
            self.log_bytes,
            c.log_retain_bytes
        );
    }

    /// Runs one step.
    fn step(&mut self, op: &Op) {
        let mut ctx = StepCtx { start: self.sim.now, ..Default::default() };
        self.stats.steps += 1;
        match op {
            Op::Connect { slot, resume, region, exp } => {
                let exp = exp.map(|e| (self.sim.now as i64 + e).max(0) as u64);
                self.connect_slot(&mut ctx, *slot, *resume, *region, exp);
            }
            Op::Hijack { slot, victim, region } => {
                let session = self.slots[*victim].session.clone();
                let user = user_name(self.slots[*slot].user);
                let r = self.connect(&mut ctx, None, session, user, None, None, *region, None);
                if !self.recs[r].refused && self.slots[*victim].user != self.slots[*slot].user {
                    self.stats.hijacks_taken += 1;
                }
            }
            Op::Send { pick, payload } => {
                let before = self.refusals();
                self.send_payload(&mut ctx, *pick, payload);
                self.check_refusals(before);
            }
            Op::Burst(frames) => {
                let before = self.refusals();
                for (pick, payload) in frames {
                    self.send_payload(&mut ctx, *pick, payload);
                }
                self.check_refusals(before);
            }
            Op::Late { pick, text } => {
                let closed: Vec<usize> =
                    (0..self.recs.len()).filter(|&r| !self.is_open(r)).collect();
                if !closed.is_empty() {
                    let conn = self.recs[closed[pick % closed.len()]].conn.clone();
                    self.stats.frames += 1;
                    let now = self.sim.now;
                    self.sim
                        .room
                        .handle(now, crate::room::Input::Text { conn: &conn, text: &text.0 });
                    self.sim.pump();
                }
            }
            Op::Binary { pick, len } => {
                if let Some(r) = self.pick_open(*pick) {
                    let conn = self.recs[r].conn.clone();
                    let expired = self.recs[r].expires.is_some_and(|e| e <= self.sim.now);
                    if *len > self.config().max_frame {
                        ctx.oversize.insert(r);
                    } else if !expired {
                        self.cost(r);
                    }
                    self.recs[r].active = self.sim.now;
                    self.stats.frames += 1;
                    self.sim.send_binary(&conn, *len);
                }
            }
            Op::Drop { pick } => {
                if let Some(r) = self.pick_open(*pick) {
                    let conn = self.recs[r].conn.clone();
                    self.read(r, false);
                    self.sim.drop_conn(&conn);
                }
            }
            Op::RuntimeClose { pick } => {
                if !self.recs.is_empty() {
                    let r = pick % self.recs.len();
                    let conn = self.recs[r].conn.clone();
                    self.read(r, false);
                    self.sim.runtime_close(&conn);
                }
            }
            Op::Read { pick } => {
                if let Some(r) = self.pick_open(*pick) {
                    self.sim.end_turn();
                    let echo = self.recs[r].mode != Mode::Silent;
                    self.read(r, echo);
                }
            }
            Op::SetMode { pick, mode } => {
                if let Some(r) = self.pick_open(*pick) {
                    self.recs[r].mode = *mode;
                    if let Some(s) = self.recs[r].slot {
                        self.slots[s].mode = *mode;
                    }
                }
            }
            Op::Ping { pick } => {
                if let Some(r) = self.pick_open(*pick) {
                    let conn = self.recs[r].conn.clone();
                    self.sim.ping_runtime(&conn);
                    self.recs[r].active = self.sim.now;
                }
            }
            Op::Evict => {
                // A pending timer keeps the object in memory (the runtime
                // hibernates only objects with none): it is evicted once
                // nothing waits for a turn's end, a window, a hold or a
                // due summary. Frames waiting for a client's echo keep a
                // timer for as long as they wait: no eviction then (finding
                // 1 was evicting anyway, and lost them).
                self.sim.settle();
                self.closures(&ctx);
                if !self.sim.hibernatable() {
                    // Frames wait for an echo (or a timer asked for work
                    // that went since has not fired yet): not now.
                    self.stats.evictions_skipped += 1;
                    return self.after(&ctx);
                }
                self.stats.add_room(&mut self.sim);
                self.stats.evictions += 1;
                self.sim.evict();
                self.departed.clear();
                self.fresh_budgets();
            }
            Op::Advance(ms) => self.sim.advance(*ms),
            Op::TurnEnds => {
                let now = self.sim.now;
                self.sim.run_until(now);
            }
            Op::RunFor(ms) => {
                let until = self.sim.now + ms;
                self.sim.run_until(until);
            }
            Op::Settle => self.sim.settle(),
            Op::EarlyAlarm => self.sim.fire_alarm(),
            Op::Kick { user, block } => {
                let user = user_name(*user);
                let now = self.sim.now;
                let held =
                    self.open_recs().into_iter().filter(|&r| self.recs[r].user == user).count();
                let block = match block {
                    BlockOp::Keep => Block::Keep,
                    BlockOp::For(ms) => {
                        self.blocks.insert(user.clone(), now + ms);
                        Block::Until(now + ms)
                    }
                    BlockOp::Lift => {
                        self.blocks.remove(&user);
                        Block::Lift
                    }
                };
                ctx.kick_user = Some(user.clone());
                let closed = self.sim.room.kick(now, &user, block);
                self.sim.pump();
                assert_eq!(closed, held, "[kick] closed {closed} of {held} connections");
            }
            Op::Drain => {
                ctx.drain = true;
                let held = self.open_recs().len();
                let now = self.sim.now;
                let closed = self.sim.room.drain(now);
                self.sim.pump();
                assert_eq!(closed, held, "[drain] closed {closed} of {held}");
            }
            Op::Delete => {
                ctx.delete = true;
                let held = self.open_recs().len();
                let now = self.sim.now;
                let closed = self.sim.room.delete(now);
                self.sim.pump();
                assert_eq!(closed, held, "[delete] closed {closed} of {held}");
            }
            Op::ServerPublish { id, topic, data } => {
                let raw = RawValue::from_string(data.0.clone()).expect("generated JSON");
                let retry = self
                    .log_keys
                    .get(&(crate::room::SERVER_SESSION.to_owned(), id.clone()))
                    .copied();
                let valid = names::bounded(id) && names::valid_topic(topic);
                let deep = deeper_than(&data.0, MAX_DEPTH);
                let now = self.sim.now;
                let result = self.sim.room.server_publish(
                    now,
                    id.clone(),
                    topic.to_string(),
                    raw,
                    "EU".into(),
                );
                self.sim.pump();
                self.stats.server_publishes += 1;
                match result {
                    Ok(seq) => {
                        assert!(
                            valid && (retry.is_some() || !deep),
                            "[server_publish] accepted a bad write"
                        );
                        if let Some(before) = retry {
                            assert_eq!(seq, before, "[server_publish] a retry got a new seq");
                        }
                        self.check_ack(
                            crate::room::SERVER_SESSION,
                            crate::room::SERVER_SESSION,
                            id,
                            seq,
                            "server",
                        );
                    }
                    Err(_) => assert!(!valid || deep, "[server_publish] refused a good write"),
                }
            }
        }
        self.after(&ctx);
    }

    /// Advances virtual time to `until` while every open client answers
    /// pings and reads, as live clients do.
    fn live_until(&mut self, until: u64) {
        let step = (self.config().presence_ttl_ms / 4).max(1);
        let ctx = StepCtx { start: self.sim.now, ..Default::default() };
        loop {
            for r in self.open_recs() {
                let conn = self.recs[r].conn.clone();
                self.sim.ping_runtime(&conn);
                self.recs[r].active = self.sim.now;
            }
            let next = match self.sim.wake {
                Some(w) => w.min(self.sim.now + step),
                None if self.sim.now < until => until.min(self.sim.now + step),
                None => break,
            };
            self.sim.run_until(next.max(self.sim.now));
            self.after(&ctx);
            if self.sim.now >= until && self.sim.wake.is_none() {
                break;
            }
        }
    }

    /// The end: blocks lifted, every client reconnects, reads and settles;
    /// each catches up to the room's seq, and sees the room's presence.
    fn finish(&mut self) {
        for rec in &mut self.recs {
            rec.mode = Mode::Reading;
        }
        for slot in &mut self.slots {
            slot.mode = Mode::Reading;
        }
        let now = self.sim.now;
        let blocked: Vec<String> =
            self.blocks.iter().filter(|(_, t)| **t > now).map(|(u, _)| u.clone()).collect();
        for user in blocked {
            let ctx = StepCtx { start: now, kick_user: Some(user.clone()), ..Default::default() };
            self.sim.room.kick(now, &user, Block::Lift);
            self.sim.pump();
            self.blocks.remove(&user);
            self.after(&ctx);
        }
        for s in 0..self.slots.len() {
            self.catch_up(s);
        }
        // Summaries and held presence go out within a few intervals.
        let until = self.sim.now + 3 * self.config().summary_interval_ms + 3_000;
        self.live_until(until);
        let seq = self.sim.room.seq();
        let presence = self.presence();
        for r in self.open_recs() {
            let who = format!("{} ({})", self.recs[r].conn, self.recs[r].session);
            assert_eq!(self.recs[r].applied, Some(seq), "[catch-up] {who} did not catch up");
            let (members_ok, summary_ok) = self.view_matches(r, &presence);
            let view = &self.recs[r].view;
            if !members_ok {
                let want = members_of(&presence, &self.recs[r].session);
                let seen = view_members(view, &self.recs[r].session);
                panic!(
                    "[presence] {who}: its member list against the room's (large: {} / {})\n  seen: {seen:?}\n  room: {want:?}\n  bytes waiting in the room: {}",
                    view.large,
                    presence["large"],
                    waiting_bytes(&mut self.sim)
                );
            }
            if !summary_ok {
                panic!(
                    "[summary] {who}: its last summary against the room's\n  seen: {:?}\n  room: {}\n  bytes waiting in the room: {}; now {}, alarm {:?}, last alarms asked {:?}",
                    view.summary,
                    presence["summary"],
                    waiting_bytes(&mut self.sim),
                    self.sim.now,
                    self.sim.alarm,
                    &self.sim.alarms_set[self.sim.alarms_set.len().saturating_sub(8)..],
                );
            }
        }
        // Every frame but an echo that confirms something new cost against its connection's
        // budget: what that budget alone could not pay for was refused.
        for r in self.open_recs() {
            let rec = &self.recs[r];
            assert!(
                rec.limited >= rec.must_refuse,
                "[rate] {} ({}): its own budget had to refuse {} frames; {} were",
                rec.conn,
                rec.session,
                rec.must_refuse,
                rec.limited
            );
            self.stats.refusals_owed += rec.must_refuse;
        }
        // Every ack of this incarnation is in the log where it said, or trimmed.
        let first = self.sim.disk.log.keys().next().copied().unwrap_or(u64::MAX);
        for ((session, id), seq) in &self.acks {
            if *seq >= first {
                let e = &self.sim.disk.log[seq];
                assert_eq!(
                    (&e.session, &e.id),
                    (session, id),
                    "[ack] the log moved an acked write"
                );
            }
        }
        let stats: Value = serde_json::from_str(&self.sim.room.stats_json()).unwrap();
        let most = stats["most_connections_of_a_user"].as_u64().unwrap_or(0);
        assert!(most as usize <= self.config().user_connections, "[users] most {most}");
        self.stats.add_room(&mut self.sim);
    }

    /// Brings slot `s` back and reads until it has everything.
    fn catch_up(&mut self, s: usize) {
        for _ in 0..16 {
            let open = self.slots[s].rec.is_some_and(|r| self.is_open(r));
            if !open {
                let mut ctx = StepCtx { start: self.sim.now, ..Default::default() };
                let user = user_name(self.slots[s].user);
                // A user at the connection limit lets one of its tabs go.
                let mine: Vec<usize> =
                    self.open_recs().into_iter().filter(|&r| self.recs[r].user == user).collect();
                if mine.len() >= self.config().user_connections {
                    let conn = self.recs[mine[0]].conn.clone();
                    self.read(mine[0], false);
                    self.sim.drop_conn(&conn);
                    self.after(&ctx);
                }
                self.connect_slot(&mut ctx, s, Resume::Correct, 0, None);
                self.after(&ctx);
                // Paced (4429): the client backs off, long enough for a connect to refill.
                let r = self.slots[s].rec.expect("connected above");
                if self.recs[r].refused && self.sim.sockets[&self.recs[r].conn].closed == Some(4429)
                {
                    let wait = 1_000 / self.config().user_connects_per_sec.max(1) + 1;
                    let until = self.sim.now + wait;
                    self.live_until(until);
                }
                continue;
            }
            let r = self.slots[s].rec.unwrap();
            let until = self.sim.now;
            self.live_until(until);
            if self.is_open(r)
                && self.recs[r].applied == Some(self.sim.room.seq())
                && self.sim.wake.is_none()
            {
                self.stats.catch_ups += 1;
                return;
            }
            if self.is_open(r) {
                // Time for a held catch-up (reply budget, storm jitter).
                let until = self.sim.now + 2_500;
                self.live_until(until);
            }
        }
        let r = self.slots[s].rec.map(|r| &self.recs[r]);
        panic!(
            "[catch-up] slot {s} did not catch up to {}: {:?}",
            self.sim.room.seq(),
            r.map(|r| (&r.conn, r.applied, self.sim.sockets[&r.conn].closed))
        );
    }
}

/// Bytes the room holds for connections (their windows are full, or they wait).
fn waiting_bytes(sim: &mut Sim) -> u64 {
    let v: Value = serde_json::from_str(&sim.room.stats_json()).expect("stats are JSON");
    v["waiting_bytes"].as_u64().unwrap_or(0)
}

impl Txt {
    fn short(&self) -> String {
        format!("{self:?}")
    }
}

/// Runs one engine case; panics at the first broken invariant.
fn run_case(setup: &Setup, ops: &[Op], stats: &mut EngineStats, trace: bool) {
    let mut w = World::new(setup, stats, trace);
    for (i, op) in ops.iter().enumerate() {
        if trace {
            println!("  step {i} (t={}): {op:?}", w.sim.now);
        }
        w.step(op);
    }
    if trace {
        println!("  finish (t={})", w.sim.now);
    }
    w.finish();
    w.stats.cases += 1;
}

#[test]
fn fuzz_engine() {
    let s = settings(100 - PARSER_SHARE);
    let start = Instant::now();
    let mut stats = EngineStats::default();
    let (mut first, mut last, mut index) = (None, 0u64, 0u64);
    while stats.frames < s.inputs {
        let seed = s.case.unwrap_or_else(|| case_seed(s.base, 2, index));
        first.get_or_insert(seed);
        last = seed;
        let (setup, ops) = gen_case(seed);
        let trace = s.case.is_some();
        if trace {
            println!("case {seed:#x}: {setup:#?}");
        }
        if let Err(message) = catch(|| run_case(&setup, &ops, &mut stats, trace)) {
            let sig = signature(&message);
            let mut scratch = EngineStats::default();
            let small = shrink(ops.clone(), 4_000, |cand| {
                catch(|| run_case(&setup, cand, &mut scratch, false))
                    .err()
                    .is_some_and(|m| signature(&m) == sig)
            });
            if std::env::var("FUZZ_TRACE").is_ok() {
                println!("trace of the shrunk case:");
                let again = catch(|| run_case(&setup, &small, &mut scratch, true));
                println!("trace result: {again:?}");
            }
            let steps: String =
                small.iter().enumerate().map(|(i, op)| format!("\n    {i:3}: {op:?}")).collect();
            panic!(
                "engine fuzz failure in case #{index}\n  case seed: {seed:#x} (replay: FUZZ_CASE={seed:#x} cargo test --lib fuzz_engine -- --nocapture)\n  \
                 message: {message}\n  config: {:?}\n  users {}, slot users {:?}, slot modes {:?}\n  {} ops, shrunk to {}:{steps}",
                setup.config,
                setup.users,
                setup.slot_users,
                setup.slot_modes,
                ops.len(),
                small.len()
            );
        }
        index += 1;
        if s.case.is_some() {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz_engine: {} frames fed in {} cases, {} steps, {} connects ({secs:.1} s, {:.0} frames/s); base seed {:#x}, case seeds {:#x}..{:#x}\n  \
         closes {:?}\n  refused opens {:?}\n  resumed {}, resync epoch {}, resync gap {}, state {}, conflicts {}, rate-limited {}, \
         signals {}, large resets {}, hijacks taken {}, marks echoed {}, evictions {} (skipped: a timer kept {}), deletes {}, steps with a trimmed log {}, \
         server publishes {}, acks {}, messages {}, catch-ups {}, rule sends {}, refusals owed by a connection's own budget {} (checked at the end) and {} (checked per step)\n  room counters {:?}",
        stats.frames,
        stats.cases,
        stats.steps,
        stats.connects,
        stats.frames as f64 / secs,
        s.base,
        first.unwrap_or(0),
        last,
        stats.closes,
        stats.refusals,
        stats.resumed,
        stats.resync_epoch,
        stats.resync_gap,
        stats.state_frames,
        stats.conflicts,
        stats.rate_limited_frames,
        stats.signals_seen,
        stats.large_resets,
        stats.hijacks_taken,
        stats.marks_echoed,
        stats.evictions,
        stats.evictions_skipped,
        stats.deletes,
        stats.trims,
        stats.server_publishes,
        stats.acks,
        stats.messages,
        stats.catch_ups,
        stats.rule_sends,
        stats.refusals_owed,
        stats.step_refusals_owed,
        stats.room,
    );
    if s.case.is_none() && s.inputs >= 10_000 {
        // Everything the generator is meant to reach was reached.
        for code in CLOSE_CODES.iter().filter(|c| ![4409, 4429].contains(*c)) {
            assert!(stats.closes.contains_key(code), "no close with {code}");
        }
        for code in [4401, 4403, 4409, 4429] {
            assert!(stats.refusals.contains_key(&code), "no connect refused with {code}");
        }
        for key in [
            "batches",
            "signals_dropped",
            "signals_coalesced",
            "deferred_replays",
            "held_replies",
            "backlog_closes",
            "stalled_closes",
            "rate_limited",
            "paced_connects",
            "rule_sends_dropped",
        ] {
            assert!(stats.room.get(key).is_some_and(|n| *n > 0), "room counter {key} never moved");
        }
        let reached = [
            ("resumes", stats.resumed),
            ("resyncs by epoch", stats.resync_epoch),
            ("resyncs by gap", stats.resync_gap),
            ("state replies", stats.state_frames),
            ("conflicts", stats.conflicts),
            ("large-room resets", stats.large_resets),
            ("sessions taken over", stats.hijacks_taken),
            ("evictions", stats.evictions),
            ("deletes", stats.deletes),
            ("trimmed logs", stats.trims),
            ("final catch-ups", stats.catch_ups),
            ("sends of the rules", stats.rule_sends),
            ("refusals owed by a connection's own budget", stats.refusals_owed),
        ];
        for (what, n) in reached {
            assert!(n > 0, "never reached: {what}");
        }
    }
}

// ---- what the fuzzer found --------------------------------------------------

/// Finding 1 (engine fuzz, case seed 0xa031abff4f24b9c3 under the default
/// base seed), fixed: frames that wait in the room for a connection's flow
/// window (it has not echoed its last mark yet) live only in memory, and
/// nothing pending kept the object from hibernating then: they were lost,
/// and the reader's next message came after a gap. The room now keeps a
/// timer while frames wait for an echo (the runtime hibernates only objects
/// with none), and may hibernate once the reader has caught up.
#[test]
fn finding_1_frames_waiting_for_an_echo_keep_the_room_awake() {
    let mut config = RoomConfig { send_window: 4096, ..RoomConfig::default() };
    config.finish(); // a mark every 1,024 bytes
    let mut s = Sim::new(config);
    let p = s.connect_as("sess-publisher", "pub", "EU", None);
    let r = s.connect_as("sess-reader", "ann", "EU", None);
    s.take(&p);
    s.take(&r);
    let pad = "p".repeat(3_000);
    for i in 0..3 {
        s.publish(&p, &format!("m{i}"), &format!(r#""{pad}""#));
    }
    s.take(&p);
    // The reader has not read yet: the first message went out, the others
    // wait for its echo of the mark that followed it.
    assert!(waiting_bytes(&mut s) > 0, "frames wait for the window");
    s.settle();
    assert!(s.waiting_for_echo() && !s.hibernatable(), "a timer keeps the room in memory");
    // The keep-alive goes on firing while they wait (both clients alive,
    // the reader just slow, under the echo deadline), and sends nothing.
    let before = s.sockets[&r].bytes;
    for _ in 0..4 {
        s.ping_runtime(&p);
        s.ping_runtime(&r);
        let t = s.now + 10_000;
        s.run_until(t);
        assert!(s.waiting_for_echo() && !s.hibernatable());
    }
    assert_eq!(s.sockets[&r].bytes, before, "nothing more was handed to the runtime");
    let mut seqs = Vec::new();
    for _ in 0..5 {
        seqs.extend(crate::room::sim::seqs(&s.take(&r))); // reads, echoes every mark
    }
    assert_eq!(seqs, [1, 2, 3]);
    assert!(!s.waiting_for_echo(), "caught up: nothing is owed");
    s.evict(); // once the last keep-alive has fired and found nothing to wait for
    s.publish(&p, "m3", "1");
    seqs.extend(crate::room::sim::seqs(&s.take(&r)));
    assert_eq!(seqs, [1, 2, 3, 4], "every message, in order, without a gap");
}

/// Finding 2 (engine fuzz, case seed 0x54f1a06f1b67a1a2): a `summary` that
/// is due at the end of the summary interval (the trailing edge) is kept
/// only in memory. An eviction in that interval drops it: the restored
/// room neither sends it when its alarm fires nor remembers what it last
/// sent, so members keep the counts of their welcome (or of the last
/// summary) until the membership changes again.
///
/// Fixed: a due summary keeps a timer of its own (not only the storage
/// alarm), so the room goes only once it is sent.
#[test]
fn finding_2_a_due_summary_keeps_the_room_awake_until_it_is_sent() {
    let run = |evict: bool| -> Option<Value> {
        let mut s = Sim::new(RoomConfig::default());
        let a = s.connect_as("sess-aaaa", "ann", "EU", None);
        let b = s.connect_as("sess-bbbb", "bob", "EU", None);
        let w = s.take(&a);
        assert_eq!(w[0]["presence"]["summary"]["members"], 1, "a's welcome: one member");
        s.take(&b);
        if evict {
            assert!(!s.hibernatable(), "the due summary keeps a timer");
            s.evict(); // once it fired
        }
        for _ in 0..5 {
            s.ping_runtime(&a);
            s.ping_runtime(&b);
            let t = s.now + 1_000;
            s.run_until(t);
        }
        let summaries: Vec<Value> =
            s.take(&a).into_iter().filter(|f| f["type"] == "summary").collect();
        summaries.last().map(|f| f["members"].clone())
    };
    assert_eq!(run(false), Some(Value::from(2)), "control: no eviction");
    assert_eq!(run(true), Some(Value::from(2)), "a hears that the room has two members");
}

/// Finding 3 (engine fuzz, found as a summary mismatch after the final
/// reconnects): the room sends a `summary` only when it differs from the
/// last one it broadcast. A member that joined since got the counts of the
/// moment it joined in its welcome; when later changes bring the counts
/// back to the last broadcast ones before the interval ends, nothing is
/// sent and that member keeps counts that are wrong until the next change.
///
/// Fixed: members welcomed with other counts than the last broadcast get
/// the next summary even when it equals that one.
#[test]
fn finding_3_later_joiners_get_a_summary_equal_to_the_last_broadcast() {
    let mut s = Sim::new(RoomConfig::default());
    let live = |s: &mut Sim, conns: &[&String], until: u64| {
        while s.now < until {
            for c in conns {
                if s.sockets[*c].open {
                    s.ping_runtime(c);
                }
            }
            let t = (s.now + 250).min(until);
            s.run_until(t);
        }
    };
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    let c = s.connect_as("sess-cccc", "cat", "EU", None);
    live(&mut s, &[&a, &c], 3_500); // the summary of {a, c} went out at 3,000
    let b = s.connect_as("sess-bbbb", "bob", "EU", None); // inside the interval
    let w = s.take(&b);
    assert_eq!(w[0]["presence"]["summary"]["members"], 3, "b's welcome: three members");
    s.drop_conn(&c); // back to two members, two users: the counts last broadcast
    live(&mut s, &[&a, &b], 20_000);
    let last = s.take(&b).into_iter().rfind(|f| f["type"] == "summary");
    let members =
        last.map_or(w[0]["presence"]["summary"]["members"].clone(), |f| f["members"].clone());
    assert_eq!(members, 2, "b's view of the member count");
}

/// Finding 4 (parser fuzz: a few hundred accepted frames per default run):
/// `parse` accepts `data`, `value` and presence `state` holding lone
/// surrogate escapes (`"\ud800"`) or numbers past f64 (`1e999`). Both are
/// JSON text the room stores and relays byte for byte, but serde_json (the
/// simulated adapter here, the e2e client, any Rust reader) refuses the
/// whole frame that carries one, a `batch` included; browsers read them
/// (as a lone surrogate, as `Infinity`). Like values nested past 32 levels,
/// which the room refuses, it is a value one member can put in front of
/// every other reader.
///
/// Fixed: `parse` refuses such values (`invalid`), as it refuses values
/// nested too deep.
#[test]
fn finding_4_values_strict_readers_refuse_are_refused() {
    for data in [r#""\ud800""#, r#"{"n":1e999}"#, r#"["\udfff",1]"#] {
        let text = format!(r#"{{"type":"publish","id":"m1","topic":"t","data":{data}}}"#);
        assert!(
            matches!(parse(&text), Err(FrameError::Invalid { id: Some(ref id), .. }) if id == "m1"),
            "{data} should be refused"
        );
    }
}

/// Finding 5 (engine fuzz, case seed 0xbc305bc61add8902), a sibling of
/// finding 2: while the room sheds load it holds presence diffs back and
/// owes every member the whole list (a `reset`) with the next summary.
/// That debt is kept only in memory; an eviction drops it, and members'
/// lists miss the joins (or keep the leavers) made while it was owed.
///
/// Fixed: the debt is paid with a summary that is due, which keeps a timer.
#[test]
fn finding_5_presence_held_under_load_keeps_the_room_awake() {
    let run = |evict: bool| -> bool {
        let mut s = Sim::new(RoomConfig { outbound_budget: 1, ..RoomConfig::default() });
        let a = s.connect_as("sess-aaaa", "ann", "EU", None);
        for _ in 0..3 {
            s.send(&a, r#"{"type":"ping"}"#); // the room goes over its budget
        }
        s.take(&a);
        let b = s.connect_as("sess-bbbb", "bob", "NA", None); // a's diff is held
        assert!(s.sockets[&a].inbox.is_empty(), "no diff while shedding");
        s.take(&b);
        if evict {
            assert!(!s.hibernatable(), "the reset owed keeps a timer");
            s.evict();
        }
        for _ in 0..10 {
            s.ping_runtime(&a);
            s.ping_runtime(&b);
            let t = s.now + 1_000;
            s.run_until(t);
        }
        let frames = s.take(&a);
        frames.iter().any(|f| f["type"] == "presence" && f["joins"]["sess-bbbb"].is_object())
    };
    assert!(run(false), "control: no eviction");
    assert!(run(true), "a learns that b joined");
}

/// The room of the flow-control findings: a 4 KiB window (a mark every
/// 1,024 bytes), `max_backlog` bytes of backlog, and rate limits too high to
/// refuse anything (the findings are about the window, not the limits).
fn flow_config(max_backlog: u64) -> RoomConfig {
    let mut config = RoomConfig {
        send_window: 4096,
        max_backlog,
        rate_per_sec: 1_000,
        burst: 1_000,
        user_rate_per_sec: 1_000,
        user_burst: 1_000,
        ..RoomConfig::default()
    };
    config.finish();
    config
}

/// Finding 6 (engine fuzz, case seed 0xd4f47c3b39a7a44b under base seed
/// 12): the welcome is not always a connection's first frame. Opening a
/// connection broadcasts its join; when that pushes a reader that is not
/// confirming over its backlog bound, the room closes it (4013) and
/// broadcasts its leave (and possibly a summary) to everyone, before the
/// new connection's welcome has been emitted. The adapter has already
/// added the new socket, so it receives the leave first (the Durable
/// Object's `Broadcast` goes to every socket in `by_conn`, which `accept`
/// fills before `Input::Open`).
///
/// Fixed: a backlog close is made when the operation that caused it is done.
#[test]
fn finding_6_a_backlog_close_during_an_open_comes_after_the_welcome() {
    let mut s = Sim::new(flow_config(2_000));
    let p = s.connect_as("sess-publisher", "pub", "EU", None);
    let lazy = s.connect_as("sess-lazy", "ann", "EU", None);
    s.sockets.get_mut(&lazy).unwrap().silent = true;
    let mut i = 0;
    // Messages wait 147 bytes apiece once its window is full; the
    // newcomer's join (about 110 bytes) takes it past 2,000.
    while waiting_bytes(&mut s) < 1_900 {
        s.publish(&p, &format!("m{i}"), &format!(r#""{}""#, "x".repeat(20)));
        s.take(&p);
        i += 1;
    }
    assert_eq!(s.sockets[&lazy].closed, None, "still under its backlog bound");
    let n = s.connect_as("sess-newcomer", "bob", "EU", None);
    assert_eq!(s.sockets[&lazy].closed, Some(4013), "the join pushed it over");
    let first = &s.sockets[&n].inbox[0];
    assert_eq!(first["type"], "welcome", "the first frame of {n}: {first}");
}

/// Finding 7 (engine fuzz, case seed 0x66816434beab1aa8 under base seed
/// 21; the simulated adapter's own check "closing c-45 twice"): the room
/// emits a second `Close` for a connection it already closed. A loop that
/// closes several connections (the heartbeat sweep here; a kick works the
/// same way) closes the first; its leave, broadcast to the others, pushes
/// the next one on the list over its backlog bound, and the room closes it
/// (4013); the loop then closes it again (4008). The adapter ignores the
/// second close of a socket it no longer has, but logs `closed_by_room`
/// twice, and `Output::Close` promises a connection the engine had.
///
/// Fixed: backlog closes wait for the end of the operation, and a close of a connection already gone does nothing.
#[test]
fn finding_7_a_cascading_backlog_close_inside_the_sweep_closes_once() {
    // The backlog holds 13 waiting messages (147 bytes each) and 30 bytes
    // more: not the 54 of a leave.
    let config = RoomConfig { presence_ttl_ms: 1_000, ..flow_config(13 * 147 + 30) };
    let mut s = Sim::new(config);
    let p = s.connect_as("sess-publisher", "pub", "EU", None);
    let a = s.connect_as("sess-aaaa", "ann", "EU", None);
    let b = s.connect_as("sess-bbbb", "bob", "EU", None);
    for c in [&a, &b] {
        s.sockets.get_mut(c).unwrap().silent = true;
    }
    let mut i = 0;
    while waiting_bytes(&mut s) < 2 * 13 * 147 {
        s.publish(&p, &format!("m{i}"), &format!(r#""{}""#, "x".repeat(20)));
        s.take(&p);
        i += 1;
    }
    assert_eq!((s.sockets[&a].closed, s.sockets[&b].closed), (None, None));
    // a and b fall silent; the publisher pings. The sweep closes a, whose
    // leave takes b over its bound, then closes b.
    for _ in 0..4 {
        s.ping_runtime(&p);
        let t = s.now + 500;
        s.run_until(t); // "closing c-3 twice" when it happens
    }
    assert_eq!(s.sockets[&a].closed, Some(4008));
    assert!(s.sockets[&b].closed.is_some());
}

/// Finding 8 (engine fuzz, case seeds 0x4da5c0aef8d20aec under base seed
/// 33 and 0x55a411df40dfa43d under 34; reachable since a2d8ed9 keeps a
/// user's budgets past their last connection): a resume whose catch-up
/// must wait for the user's reply budget is held, and a held catch-up
/// larger than `max_backlog` closes the connection at once (4013, "resume
/// now"). The prompt reconnect 4013 asks for finds the budget charged for
/// the failed attempt (at the end of its wait), is held again and closed
/// again: while the client retries promptly it never resumes, and every
/// retry pushes the budget's refill further out. (`RoomConfig::finish`
/// does not keep `max_backlog` above a full replay; the defaults allow a
/// replay of 100 × 64 KiB against a 4 MiB backlog.)
///
/// Fixed: a queued catch-up is allowed on top of the backlog bound (the replay limit bounds it).
#[test]
fn finding_8_a_held_catch_up_over_the_backlog_bound_is_delivered() {
    let run = |max_backlog: u64| -> Option<usize> {
        let mut config = RoomConfig {
            state_max_bytes: 1_000,
            state_max_keys: 10,
            reply_bytes_per_sec: 1_000,
            reply_burst_bytes: 100, // finish() raises it to the largest state: 2,344
            max_backlog,
            ..RoomConfig::default()
        };
        config.finish();
        let mut s = Sim::new(config);
        let a = s.connect_as("sess-aaaa", "ann", "EU", None);
        let r = s.connect_as("sess-reader", "bob", "EU", None);
        s.send(&r, r#"{"type":"get_state"}"#); // bob's reply budget is no longer full
        s.take(&r);
        s.drop_conn(&r);
        for i in 0..3 {
            s.publish(&a, &format!("m{i}"), &format!(r#""{}""#, "x".repeat(2_000)));
        }
        s.take(&a);
        for attempt in 0..20 {
            let c = s.connect_as("sess-reader", "bob", "EU", Some((0, "e-1")));
            s.settle();
            if s.sockets[&c].closed.is_none() {
                return Some(attempt);
            }
            s.advance(100); // the client comes back promptly, as 4013 asks
        }
        None
    };
    assert_eq!(run(4 * 1024 * 1024), Some(0), "control: a backlog bound above the catch-up");
    assert!(run(5_000).is_some(), "a resume of 6 KB with a 5,000-byte backlog bound gets through");
}

/// Finding 9 (engine fuzz, case seed 0xb712cd38c91a859e in the long run):
/// a connection can stall with frames queued and nothing left to echo.
/// When an echo opens its window, the room sends the queued frames that
/// fit in it and keeps the rest; if it stops before a frame that does not
/// fit, and fewer than `mark_every` bytes went out since the last mark, no
/// mark follows them. The client has read and confirmed everything it was
/// sent and has nothing to echo; the room sends nothing more until some
/// other frame for that connection comes. In a quiet room it never does:
/// here a client holds the ack of its write but never gets its message.
///
/// Fixed: frames go while the window is open, the last one may go past it, so a window is left empty or full (with a mark to echo).
#[test]
fn finding_9_a_release_never_stops_short_of_a_mark() {
    let run = |last: usize| -> Vec<u64> {
        let mut config = RoomConfig { send_window: 4096, ..RoomConfig::default() };
        config.finish(); // a mark every 1,024 bytes
        let mut s = Sim::new(config);
        let c = s.connect("sess-alone", "EU", None);
        s.publish(&c, "m1", &format!(r#""{}""#, "x".repeat(4_000))); // fills the window
        s.publish(&c, "m2", "1"); // waits
        s.publish(&c, "m3", &format!(r#""{}""#, "y".repeat(last))); // waits
        let mut seqs = Vec::new();
        for _ in 0..5 {
            s.settle();
            seqs.extend(crate::room::sim::seqs(&s.take(&c))); // reads, echoes every mark
        }
        seqs
    };
    assert_eq!(run(100), [1, 2, 3], "control: the last message fits in the window");
    assert_eq!(run(4_000), [1, 2, 3], "every message reaches the only reader");
}

/// Finding 10 (engine fuzz, case seed 0xe216c48f81566616 under base seed
/// 12, and 0x5bd9bff41104ccf3 under base seed 7): the room's record of the
/// last summary it sent can differ from what members last received. While
/// `flush_summary` broadcasts a summary, a reader that is not confirming
/// goes over its backlog bound and is closed (4013); its leave re-enters
/// the summary code, which sends the newer counts at once (the interval
/// since the previous summary has passed: `sent_at` is not updated yet);
/// then the outer call records its own, older summary as the one sent.
/// Members hold the newer counts; when the room comes back to the older
/// ones, it thinks they know and sends nothing.
///
/// Fixed: the close comes after the flush has recorded what it sent.
#[test]
fn finding_10_a_backlog_close_inside_a_summary_flush_keeps_what_was_sent() {
    // The publisher's last summary and the room's member count, at the end;
    // and the bytes waiting before and after the newcomer's join.
    let run = |max_backlog: u64| -> (Option<Value>, usize, u64, u64) {
        let mut s = Sim::new(flow_config(max_backlog));
        let p = s.connect_as("sess-publisher", "pub", "EU", None);
        let lazy = s.connect_as("sess-lazy", "ann", "EU", None);
        s.sockets.get_mut(&lazy).unwrap().silent = true;
        for i in 0..40 {
            s.publish(&p, &format!("m{i}"), &format!(r#""{}""#, "x".repeat(20)));
            s.take(&p);
        }
        // A quiet interval: the next change sends its summary at once.
        for _ in 0..6 {
            s.ping_runtime(&p);
            let t = s.now + 1_000;
            s.run_until(t);
        }
        s.take(&p);
        let before = waiting_bytes(&mut s);
        // Its join diff and then the summary {publisher, lazy, newcomer} go
        // to the lazy reader's queue.
        let n = s.connect_as("sess-newcomer", "nat", "EU", None);
        let after = waiting_bytes(&mut s);
        let mut last = None;
        for _ in 0..10 {
            for c in [&p, &n] {
                s.ping_runtime(c);
            }
            let t = s.now + 1_000;
            s.run_until(t);
            for f in s.take(&p) {
                if f["type"] == "summary" {
                    last = Some(f["members"].clone());
                }
            }
        }
        (last, s.room.members(), before, after)
    };
    let (last, members, before, after) = run(1 << 20);
    assert_eq!((last, members), (Some(Value::from(3)), 3), "control: the lazy reader stays");
    assert!(after > before, "the newcomer's join reached the lazy reader's queue");
    // A bound that its join diff fits and the summary after it does not: the
    // summary's broadcast closes the lazy reader (4013), inside the flush.
    let (last, members, _, _) = run(after - 1);
    assert_eq!(members, 2, "the lazy reader was closed");
    assert_eq!(
        last,
        Some(Value::from(members)),
        "the publisher's last summary has the room's count"
    );
}
