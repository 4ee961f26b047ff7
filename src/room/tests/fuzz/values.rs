//! The fuzzer's JSON and string generators: names, values at and past the depth limit, data.

#![allow(clippy::wildcard_imports)]
use super::*;

// ---- JSON and string generators ---------------------------------------------

pub(super) const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// A generated JSON string literal and what it decodes to.
#[derive(Clone, Debug)]
pub(super) struct GStr {
    /// The literal, quotes included.
    pub(super) lit: String,
    /// The decoded text; `None` when it holds a lone surrogate escape.
    pub(super) decoded: Option<String>,
    /// False when it holds a raw control character (not JSON).
    pub(super) syntax_ok: bool,
}

/// A string literal of `chars` characters; with `bad`, lone surrogate
/// escapes and raw control characters too.
pub(super) fn gen_str(rng: &mut Rng, chars: usize, bad: bool) -> GStr {
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
pub(super) fn name_len(rng: &mut Rng) -> usize {
    if rng.chance(50) {
        rng.pick(&[0, 1, 2, 8, 63, 64, 65, 70])
    } else {
        rng.range(1, 20) as usize
    }
}

pub(super) const NUMBERS: &[&str] = &[
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
pub(super) const HUGE_NUMBERS: &[&str] = &["1e999", "-1e999", "1.5e400"];

pub(super) fn ws(rng: &mut Rng, out: &mut String) {
    if rng.chance(15) {
        out.push_str(rng.pick(&[" ", "\n", "\t", "\r\n  ", "  "]));
    }
}

pub(super) fn scalar(rng: &mut Rng, out: &mut String, relayable: bool) {
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
pub(super) fn gen_value(rng: &mut Rng, out: &mut String, budget: usize, relayable: bool) -> usize {
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
pub(super) fn nest(
    rng: &mut Rng,
    levels: usize,
    inner: &str,
    inner_depth: usize,
) -> (String, usize) {
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
pub(super) fn gen_data(rng: &mut Rng, relayable: bool) -> (String, usize) {
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
pub(super) const HEAVY_PER_MILLE: u64 = if cfg!(debug_assertions) { 1 } else { 20 };

pub(super) fn heavy(rng: &mut Rng) -> bool {
    rng.below(1000) < HEAVY_PER_MILLE
}

/// A reference depth, independent of `protocol::json`: of a parsed value.
pub(super) fn value_depth(v: &Value) -> usize {
    match v {
        Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Another reference depth for any text: a char-level walk that decodes
/// string escapes as a JSON reader does (unclosed brackets still count).
pub(super) fn scan_depth(text: &str) -> usize {
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
