//! The parser target: every text through `parse`, `depth`, `deeper_than`, `frame_types` and
//! `carries`, checked against references and the generator's oracle.

#![allow(clippy::wildcard_imports)]
use super::*;

// ---- the parser target ------------------------------------------------------

/// Tallies of the parser run.
#[derive(Default)]
pub(super) struct ParserStats {
    pub(super) inputs: u64,
    pub(super) oracle: u64,
    pub(super) accepted: u64,
    pub(super) bad_frame: u64,
    pub(super) invalid: u64,
    pub(super) mutated: u64,
    pub(super) noise: u64,
    pub(super) values: u64,
    pub(super) server: u64,
    pub(super) deepest: usize,
    pub(super) longest: usize,
    /// Accepted frames whose payload serde_json's `Value` cannot read
    /// (lone surrogates, numbers past f64): the room relays them as is.
    pub(super) unreadable_payloads: u64,
    pub(super) bytes: u64,
}

/// One parser case: a handful of inputs from one seed.
pub(super) fn parser_case(seed: u64, stats: &mut ParserStats, log: &mut Vec<String>) {
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
pub(super) fn fuzz_parser() {
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
