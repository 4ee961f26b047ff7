//! The token verifier fuzzed natively (issue 17): validly signed tokens, mutated, fed to
//! `homeroom::auth::Verifier::verify` under several deployments' settings. No input may panic,
//! and every token it accepts must be one a reference verifier accepts too: PyJWT (at least
//! 2.12, which refuses an unknown `crit`), asked in one batch at the end
//! (`tests/jwt_reference.py`) at the same fixed clock. Mutations:
//! - of the JSON, re-signed with a live secret (or a dead one): every header parameter and claim
//!   dropped, retyped, duplicated, set to edge values (`alg`, `typ`, `kid`, `crit`, `b64`, `exp`,
//!   `nbf`, `iat`, `aud`, `kind`, `room`, `sub`, `jti`, `info`), whitespace, non-objects;
//! - of the bytes of the compact form, not re-signed: a character changed, inserted, deleted or
//!   doubled, padding, dots, parts swapped or truncated.
//!
//! ```text
//! cargo test --test jwt_fuzz -- --nocapture                         # default: 100k inputs
//! JWT_FUZZ_INPUTS=5000000 cargo test --release --test jwt_fuzz -- --nocapture
//! JWT_FUZZ_SEED=7 ...                                               # another base seed
//! ```
//! `tests/FUZZ.md` records the long runs: inputs, tokens accepted, and PyJWT's count of them.

use std::collections::HashSet;
use std::io::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::{Command, Stdio};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{KeyInit, Mac};
use homeroom::auth::{AuthError, Key, Keys, Place, Verifier, NBF_LEEWAY_SECS};
use serde_json::{json, Value};

/// The fuzzer's clock (unix seconds): tokens are made around it, PyJWT is told it.
const NOW: u64 = 1_800_000_000;
const CURRENT: &str = "fuzz-current-secret-0123456789abcdef";
const PREVIOUS: &str = "fuzz-previous-secret-0123456789abcdef";
const DEAD: &str = "fuzz-dead-secret-nobody-configured-0123";
const AUDIENCE: &str = "rooms.example.com";
const KINDS: &[&str] = &["rooms", "chat", "auction"];
const ROOMS: &[&str] = &["lobby", "r1", "auction:7", "team.a"];

/// SplitMix64: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// The deployments a token is shown to: secrets with or without key ids, an audience or none,
/// the kind transition on or off, the default or a short longest lifetime.
fn verifiers() -> Vec<Verifier> {
    let key = |s: &str, kid: Option<&str>| Key {
        secret: s.as_bytes().to_vec(),
        kid: kid.map(Into::into),
    };
    let mut out = Vec::new();
    for kids in [false, true] {
        for audience in [None, Some(AUDIENCE.to_owned())] {
            for kindless in [false, true] {
                let keys = Keys {
                    current: key(CURRENT, kids.then_some("k1")),
                    previous: Some(key(PREVIOUS, kids.then_some("k0"))),
                };
                let max_ttl_secs = if kindless { 600 } else { 86_400 };
                out.push(Verifier {
                    audience: audience.clone(),
                    kindless,
                    max_ttl_secs,
                    ..Verifier::new(keys)
                });
            }
        }
    }
    out
}

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

fn sign(secret: &str, header: &str, payload: &str) -> String {
    let signing = format!("{}.{}", b64(header.as_bytes()), b64(payload.as_bytes()));
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(signing.as_bytes());
    format!("{signing}.{}", b64(&mac.finalize().into_bytes()))
}

/// A value of some other type or an edge of this one.
fn odd_value(rng: &mut Rng) -> Value {
    match rng.below(16) {
        0 => Value::Null,
        1 => json!(true),
        2 => json!(0),
        3 => json!(-1),
        4 => json!(1.5),
        5 => json!(""),
        6 => json!([]),
        7 => json!({}),
        8 => json!(u64::MAX),
        9 => json!(NOW),
        10 => json!("*"),
        11 => json!(["x"]),
        12 => json!("a".repeat(70)),
        13 => json!(1e300),
        14 => json!("\u{1}"),
        _ => json!(NOW as f64 + 0.5),
    }
}

/// A time claim near the clock, or far from it.
fn time(rng: &mut Rng) -> Value {
    let offsets: &[i64] = &[
        -100_000,
        -3_600,
        -31,
        -30,
        -1,
        0,
        1,
        29,
        30,
        31,
        60,
        600,
        3_600,
        86_400,
        86_401,
        10 * 86_400,
    ];
    json!((NOW as i64 + rng.pick(offsets)) as u64)
}

/// Claims the deployment `v` would accept at `place`, before any mutation (now and then one
/// that another deployment or another place would).
fn good_claims(rng: &mut Rng, v: &Verifier, place: Place<'_>) -> serde_json::Map<String, Value> {
    let mut c = serde_json::Map::new();
    let room = if rng.chance(20) {
        "*"
    } else if rng.chance(90) {
        place.room
    } else {
        *rng.pick(ROOMS)
    };
    c.insert("room".into(), json!(room));
    let kind = match rng.below(10) {
        0 => json!("*"),
        1 => json!(KINDS.to_vec()),
        2 => json!(*rng.pick(KINDS)),
        _ => json!(place.kind),
    };
    c.insert("kind".into(), kind);
    c.insert("sub".into(), json!(*rng.pick(&["ann", "u:42@example.com", "auth0|abc", "bob"])));
    c.insert("exp".into(), json!(NOW + 300));
    if rng.chance(50) {
        c.insert("iat".into(), json!(NOW - 10));
    }
    if rng.chance(20) {
        c.insert("nbf".into(), json!(NOW - 5));
    }
    if v.audience.is_some() != rng.chance(10) {
        c.insert(
            "aud".into(),
            if rng.chance(50) { json!(AUDIENCE) } else { json!(["x", AUDIENCE]) },
        );
    }
    if rng.chance(20) {
        c.insert("info".into(), json!({"name": "Ann"}));
    }
    if rng.chance(10) {
        c.insert("jti".into(), json!("t-1"));
    }
    c
}

/// Mutates the claims: a field dropped, retyped, moved to an edge, or one added.
fn mutate_claims(rng: &mut Rng, c: &mut serde_json::Map<String, Value>) {
    let fields = ["room", "kind", "sub", "exp", "nbf", "iat", "aud", "info", "jti", "iss"];
    for _ in 0..=rng.below(3) {
        let f = *rng.pick(&fields);
        match rng.below(6) {
            0 => {
                c.remove(f);
            }
            1 => {
                c.insert(f.into(), odd_value(rng));
            }
            2 if matches!(f, "exp" | "nbf" | "iat") => {
                c.insert(f.into(), time(rng));
            }
            2 => {
                c.insert(
                    f.into(),
                    json!(*rng.pick(&["other", "*", "chat", AUDIENCE, "a/b", "x*"])),
                );
            }
            3 if f == "info" => {
                let odd = [
                    json!([1]),
                    json!({"x": "y".repeat(1100)}),
                    json!("name"),
                    json!({"deep": [[[[[[1]]]]]]}),
                ];
                c.insert(f.into(), rng.pick(&odd).clone());
            }
            3 => {
                c.insert(f.into(), json!([*rng.pick(KINDS), *rng.pick(&[AUDIENCE, "lobby", "*"])]));
            }
            4 => {
                c.insert(format!("x{}", rng.below(3)), odd_value(rng));
            }
            _ => {}
        }
    }
}

/// The header of a token signed with `secret` for the deployment `v`, mutated or not.
fn header(rng: &mut Rng, v: &Verifier, secret: &str, mutate: bool) -> String {
    let mut h = serde_json::Map::new();
    h.insert("alg".into(), json!("HS256"));
    if rng.chance(80) {
        h.insert("typ".into(), json!("JWT"));
    }
    let kids = v.keys.current.kid.is_some();
    if kids && rng.chance(60) || rng.chance(5) {
        h.insert("kid".into(), json!(if secret == PREVIOUS { "k0" } else { "k1" }));
    }
    if mutate {
        for _ in 0..=rng.below(2) {
            match rng.below(10) {
                0 => {
                    h.insert(
                        "alg".into(),
                        json!(*rng.pick(&["none", "HS512", "RS256", "hs256", "", "HS256 "])),
                    );
                }
                1 => {
                    h.insert("typ".into(), json!(*rng.pick(&["jwt", "JWE", "at+jwt", ""])));
                }
                2 => {
                    h.insert("kid".into(), odd_value(rng));
                }
                3 => {
                    h.insert("kid".into(), json!(*rng.pick(&["k9", "", "k1", "k0"])));
                }
                4 => {
                    let crit = rng
                        .pick(&[
                            json!(["exp"]),
                            json!([]),
                            Value::Null,
                            json!("b64"),
                            json!(["b64"]),
                            json!(["x"]),
                        ])
                        .clone();
                    h.insert("crit".into(), crit);
                }
                5 => {
                    h.insert(
                        "b64".into(),
                        rng.pick(&[json!(false), json!(true), Value::Null]).clone(),
                    );
                }
                6 => {
                    h.insert("cty".into(), json!("JWT"));
                }
                7 => {
                    h.remove("alg");
                }
                8 => {
                    h.insert("x".into(), odd_value(rng));
                }
                _ => {}
            }
        }
    }
    let text = Value::Object(h).to_string();
    if mutate && rng.chance(10) {
        return match rng.below(4) {
            0 => r#"["HS256"]"#.into(),
            1 => text.replacen('{', r#"{"alg":"none","#, 1),
            2 => format!(" {text}\n"),
            _ => text.replacen(r#""alg":"HS256""#, r#""alg":"HS256","alg":"HS256""#, 1),
        };
    }
    text
}

/// The claims as JSON text, sometimes reshaped (whitespace, a duplicate key, not an object).
fn payload_text(rng: &mut Rng, c: &serde_json::Map<String, Value>, mutate: bool) -> String {
    let text = Value::Object(c.clone()).to_string();
    if !mutate || !rng.chance(15) {
        return text;
    }
    match rng.below(5) {
        0 => format!("\t{text} "),
        1 => text.replacen('{', r#"{"sub":"mallory","#, 1),
        2 => format!("[{text}]"),
        3 => text.replacen('}', r#","exp":1}"#, 1),
        _ => text.replace("\"ann\"", "\"\\u0061nn\""),
    }
}

/// The compact form with its bytes changed (not re-signed).
fn mutate_bytes(rng: &mut Rng, token: &str) -> String {
    let mut b = token.as_bytes().to_vec();
    let alphabet = b"ABCabcxyz0129-_.=+/ ";
    for _ in 0..=rng.below(3) {
        if b.is_empty() {
            break;
        }
        let i = rng.below(b.len() as u64) as usize;
        match rng.below(7) {
            0 => b[i] = *rng.pick(alphabet),
            1 => b.insert(i, *rng.pick(alphabet)),
            2 => {
                b.remove(i);
            }
            3 => b.truncate(i),
            4 => b.push(b'='),
            5 => {
                let c = b[i];
                b.insert(i, c);
            }
            _ => b[i] ^= 0x20,
        }
    }
    let s = String::from_utf8_lossy(&b).into_owned();
    if rng.chance(5) {
        let parts: Vec<&str> = s.split('.').collect();
        if parts.len() == 3 {
            return format!("{}.{}.{}", parts[1], parts[0], parts[2]);
        }
    }
    s
}

/// One input: a token and the deployment it is shown to, with where.
fn input(rng: &mut Rng, verifiers: &[Verifier]) -> (String, usize, Place<'static>) {
    let vi = rng.below(verifiers.len() as u64) as usize;
    let v = &verifiers[vi];
    let (kind, room) = (*rng.pick::<&str>(KINDS), *rng.pick::<&str>(ROOMS));
    let place = Place { kind, room };
    let mut claims = good_claims(rng, v, place);
    let json_mutation = rng.chance(70);
    if json_mutation && rng.chance(60) {
        mutate_claims(rng, &mut claims);
    }
    let secret = match rng.below(20) {
        0 => DEAD,
        1..=5 => PREVIOUS,
        _ => CURRENT,
    };
    let mutate_header = json_mutation && rng.chance(30);
    let head = header(rng, v, secret, mutate_header);
    let body = payload_text(rng, &claims, json_mutation);
    let token = sign(secret, &head, &body);
    let token = if !json_mutation && rng.chance(70) { mutate_bytes(rng, &token) } else { token };
    (token, vi, place)
}

fn inputs_wanted() -> u64 {
    std::env::var("JWT_FUZZ_INPUTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000)
}

/// What PyJWT said of the accepted tokens.
fn reference(accepted: &[(String, usize)], verifiers: &[Verifier]) -> Value {
    let lib = std::env::var("HOMEROOM_PYTHON").unwrap_or_else(|_| {
        format!("{}/.cache/homeroom/tools/python", std::env::var("HOME").unwrap_or_default())
    });
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/jwt_reference.py");
    let mut child = Command::new("python3")
        .arg(script)
        .env("PYTHONPATH", &lib)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let lines: Vec<String> = accepted
        .iter()
        .map(|(token, v)| {
            let v = &verifiers[*v];
            let secrets: Vec<String> = std::iter::once(&v.keys.current)
                .chain(v.keys.previous.as_ref())
                .map(|k| String::from_utf8(k.secret.clone()).expect("utf-8 secrets"))
                .collect();
            json!({"token": token, "secrets": secrets, "audience": v.audience, "now": NOW,
                "leeway": NBF_LEEWAY_SECS})
            .to_string()
        })
        .collect();
    let writer = std::thread::spawn(move || {
        for line in lines {
            writeln!(stdin, "{line}").expect("write to python");
        }
    });
    let out = child.wait_with_output().expect("python3 ends");
    writer.join().expect("writer");
    assert!(
        out.status.success(),
        "tests/jwt_reference.py failed (scripts/setup installs PyJWT into {lib}): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the reference prints JSON")
}

#[test]
fn every_token_the_verifier_accepts_pyjwt_accepts() {
    let seed: u64 =
        std::env::var("JWT_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x6a77_7466);
    let mut rng = Rng(seed);
    let verifiers = verifiers();
    let wanted = inputs_wanted();
    let started = std::time::Instant::now();
    let mut accepted: Vec<(String, usize)> = Vec::new();
    let mut seen = HashSet::new();
    let mut codes = std::collections::BTreeMap::<&str, u64>::new();
    let mut accepted_count = 0u64;
    for n in 0..wanted {
        let (token, v, place) = input(&mut rng, &verifiers);
        let verifier = &verifiers[v];
        let verdict = catch_unwind(AssertUnwindSafe(|| verifier.verify(Some(&token), place, NOW)));
        let verdict =
            verdict.unwrap_or_else(|_| panic!("input {n} panicked the verifier: {token}"));
        match verdict {
            Ok(claims) => {
                assert_eq!(token.matches('.').count(), 2, "only JWTs are made here: {token}");
                assert!(
                    claims.opens_kind(place.kind) || verifier.kindless && claims.kind.is_none()
                );
                accepted_count += 1;
                // Deduplicated, bounded: enough for the reference to see every shape.
                if accepted.len() < 500_000 && seen.insert((token.clone(), v)) {
                    accepted.push((token, v));
                }
            }
            Err(e) => *codes.entry(AuthError::code(&e)).or_default() += 1,
        }
    }
    let native = started.elapsed();
    let reference = reference(&accepted, &verifiers);
    eprintln!(
        "jwt fuzz: {wanted} inputs in {native:?}, {accepted_count} accepted ({} distinct), \
         PyJWT {} accepted {} of {} checked; refusals by code: {codes:?}",
        accepted.len(),
        reference["version"],
        reference["accepted"],
        reference["checked"]
    );
    assert_eq!(reference["checked"], accepted.len() as u64);
    assert_eq!(
        reference["accepted"],
        accepted.len() as u64,
        "tokens homeroom accepts and PyJWT refuses: {}",
        reference["refused"]
    );
    // The generator reaches both sides and every refusal worth having.
    assert!(accepted_count > wanted / 20, "too few accepted: {accepted_count}");
    for code in [
        "token_crit",
        "token_alg",
        "token_bad_signature",
        "token_malformed",
        "token_audience",
        "token_wrong_kind",
        "token_wrong_room",
        "token_expired",
        "token_not_yet_valid",
        "token_unknown_kid",
        "token_lifetime",
    ] {
        assert!(
            codes.get(code).copied().unwrap_or(0) > 0,
            "no input was refused with {code}: {codes:?}"
        );
    }
}
