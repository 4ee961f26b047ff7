//! Room tokens and the admin key (PROTOCOL.md "Auth").
//!
//! A token is
//! `base64url(payload) "." base64url(HMAC-SHA256(secret, base64url(payload)))`,
//! base64url without padding, where the payload is the JSON object
//! `{"room": room or "*", "sub": user, "exp": unix seconds}`. The MAC covers
//! the base64url text of the payload exactly as sent, so a token has one
//! spelling: a re-encoded payload is a different token with a bad signature.
//!
//! Everything here is pure (the clock comes in as `now_secs`) and builds
//! natively and for wasm32. The secret is the UTF-8 bytes of `AUTH_SECRET` as
//! configured, used as the HMAC key as is; `scripts/mint-token` signs the same
//! way.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::protocol::names;

type HmacSha256 = Hmac<Sha256>;

/// The `room` claim of a token good in every room.
pub const ANY_ROOM: &str = "*";

/// Longest token accepted, in bytes; a longer one is [`AuthError::Malformed`]
/// before any decoding. Real tokens are about 150 bytes.
pub const MAX_TOKEN_LEN: usize = 2048;

/// Longest `sub`, in characters.
pub const MAX_USER: usize = 64;

/// The shortest `AUTH_SECRET` the Worker accepts, in bytes: a short secret
/// falls to an offline brute force from a single token anyone holds.
pub const MIN_SECRET_BYTES: usize = 32;

/// What a valid token says. Serialized in this field order by [`mint`].
/// Unknown payload fields are ignored, so issuers may add their own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The room the token is good for, or `"*"` ([`ANY_ROOM`]) for every room.
    pub room: String,
    /// The user: becomes the connection's `user`, shown to other clients.
    pub sub: String,
    /// Expiry in unix seconds; the token is refused from this second on.
    pub exp: u64,
}

/// Why a token was refused. Each has a stable [`code`](AuthError::code) and
/// an HTTP [`status`](AuthError::status) for the refusal body
/// `{"error": code, "message": text}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    /// No token was given (absent or empty).
    Missing,
    /// Too long, not two base64url parts, bad JSON or missing fields, or a bad `sub`/`room` claim.
    Malformed,
    /// The signature does not match the payload under this deployment's secret.
    BadSignature,
    /// The token's `exp` is not after now.
    Expired,
    /// A valid token for another room.
    WrongRoom,
    /// The token's `exp` is further ahead than the deployment's longest
    /// token lifetime (`TOKEN_MAX_TTL_SECS`).
    TooLongLived,
}

impl AuthError {
    /// HTTP status of the refusal: 403 for [`AuthError::WrongRoom`], else 401.
    pub fn status(&self) -> u16 {
        match self {
            AuthError::WrongRoom => 403,
            _ => 401,
        }
    }

    /// Stable error code for the refusal body and logs.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::Missing => "token_missing",
            AuthError::Malformed => "token_malformed",
            AuthError::BadSignature => "token_bad_signature",
            AuthError::Expired => "token_expired",
            AuthError::WrongRoom => "token_wrong_room",
            AuthError::TooLongLived => "token_lifetime",
        }
    }

    /// Human-readable explanation for the refusal body.
    pub fn message(&self) -> String {
        match self {
            AuthError::Missing => {
                "this deployment requires a token: pass ?token=<room token> (PROTOCOL.md \"Auth\")"
                    .into()
            }
            AuthError::Malformed => format!(
                "the token is not base64url(payload).base64url(signature) with a JSON payload \
                 {{\"room\", \"sub\", \"exp\"}} (room: a room name or \"*\"; sub: 1-{MAX_USER} \
                 characters of A-Z a-z 0-9 . _ - : @ + |; at most {MAX_TOKEN_LEN} bytes)"
            ),
            AuthError::BadSignature => {
                "the token's signature does not match: it was altered or signed with another secret"
                    .into()
            }
            AuthError::Expired => "the token has expired; get a new one".into(),
            AuthError::WrongRoom => "the token is for another room".into(),
            AuthError::TooLongLived => {
                "the token's exp is further ahead than this deployment accepts \
                 (TOKEN_MAX_TTL_SECS, default 24 h): mint shorter-lived tokens"
                    .into()
            }
        }
    }
}

impl std::fmt::Display for AuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code(), self.message())
    }
}

impl std::error::Error for AuthError {}

/// A user id as a token's `sub` may carry it: 1-64 characters of
/// `A-Z a-z 0-9 . _ - : @ + |`.
///
/// Wide enough for opaque ids, e-mail addresses and provider-prefixed ids
/// (`github:123`, `auth0|abc`); it excludes whitespace, quotes, `<>&`,
/// backslash, `/`, `%`, non-ASCII and control characters, since the user id is
/// shown to every other client of the room and written into logs.
pub fn valid_user(sub: &str) -> bool {
    (1..=MAX_USER).contains(&sub.len())
        && sub.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':' | b'@' | b'+' | b'|')
        })
}

/// Checks `token` (the `token` query parameter, if any) for `room` at
/// `now_secs` (unix seconds) and returns its claims.
///
/// In order: absent or empty → [`Missing`](AuthError::Missing); longer than
/// [`MAX_TOKEN_LEN`] or not two non-empty base64url parts →
/// [`Malformed`](AuthError::Malformed); signature not the HMAC-SHA256 of the
/// first part (compared in constant time, before the payload is decoded) →
/// [`BadSignature`](AuthError::BadSignature); payload not base64url JSON with
/// `room` (a valid room name or `"*"`), `sub` ([`valid_user`]) and integer
/// `exp` → `Malformed`; `exp <= now_secs` → [`Expired`](AuthError::Expired);
/// `room` claim neither `room` nor `"*"` → [`WrongRoom`](AuthError::WrongRoom).
pub fn verify(
    secret: &[u8],
    token: Option<&str>,
    room: &str,
    now_secs: u64,
) -> Result<Claims, AuthError> {
    let token = token.filter(|t| !t.is_empty()).ok_or(AuthError::Missing)?;
    if token.len() > MAX_TOKEN_LEN {
        return Err(AuthError::Malformed);
    }
    let (payload_b64, sig_b64) = token.split_once('.').ok_or(AuthError::Malformed)?;
    if !is_base64url(payload_b64) || !is_base64url(sig_b64) {
        return Err(AuthError::Malformed);
    }
    // Valid characters that do not decode (bad length, non-zero trailing bits)
    // cannot be this payload's MAC either.
    let sig = URL_SAFE_NO_PAD.decode(sig_b64).map_err(|_| AuthError::BadSignature)?;
    mac(secret, payload_b64).verify_slice(&sig).map_err(|_| AuthError::BadSignature)?;

    let payload = URL_SAFE_NO_PAD.decode(payload_b64).map_err(|_| AuthError::Malformed)?;
    // An object (serde would also take a positional array), without
    // duplicate fields (parsers disagree on which one wins).
    if payload.iter().find(|b| !b" \t\n\r".contains(b)) != Some(&b'{') {
        return Err(AuthError::Malformed);
    }
    let claims: Claims = serde_json::from_slice(&payload).map_err(|_| AuthError::Malformed)?;
    if !valid_user(&claims.sub) || !(claims.room == ANY_ROOM || names::valid_room(&claims.room)) {
        return Err(AuthError::Malformed);
    }
    if claims.exp <= now_secs {
        return Err(AuthError::Expired);
    }
    if claims.room != ANY_ROOM && claims.room != room {
        return Err(AuthError::WrongRoom);
    }
    Ok(claims)
}

/// Signs `claims` into a token (tests, `scripts/mint-token`'s Rust twin).
/// The payload is `{"room":…,"sub":…,"exp":…}` in that order, byte for byte
/// what `scripts/mint-token` produces. It does not validate the claims.
pub fn mint(secret: &[u8], claims: &Claims) -> String {
    let json = serde_json::to_vec(claims).expect("claims serialize to JSON");
    let payload = URL_SAFE_NO_PAD.encode(json);
    let tag = mac(secret, &payload).finalize().into_bytes();
    format!("{payload}.{}", URL_SAFE_NO_PAD.encode(tag))
}

/// Whether an `Authorization` header value (`given`, raw) is
/// `Bearer <expected>`. The scheme is matched case-insensitively (RFC 9110)
/// and may be followed by several spaces; the key itself is compared in
/// constant time (both sides are reduced to HMAC-SHA256 tags first, so neither
/// the content nor the length of `expected` leaks through timing). An empty
/// `expected` matches nothing.
pub fn admin_key_matches(expected: &str, given: Option<&str>) -> bool {
    const DOMAIN: &[u8] = b"homeroom admin key comparison";
    let Some(given) = given else { return false };
    let Some((scheme, key)) = given.trim().split_once(' ') else {
        return false;
    };
    let key = key.trim_start_matches(' ');
    if expected.is_empty() || key.is_empty() || !scheme.eq_ignore_ascii_case("bearer") {
        return false;
    }
    let want = mac(DOMAIN, expected).finalize().into_bytes();
    mac(DOMAIN, key).verify_slice(&want).is_ok()
}

fn mac(key: &[u8], msg: &str) -> HmacSha256 {
    let mut m =
        <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(msg.as_bytes());
    m
}

fn is_base64url(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"homeroom-test-secret";
    const NOW: u64 = 1_764_460_000;

    fn claims(room: &str, sub: &str, exp: u64) -> Claims {
        Claims { room: room.into(), sub: sub.into(), exp }
    }

    fn token(room: &str, sub: &str, exp: u64) -> String {
        mint(SECRET, &claims(room, sub, exp))
    }

    /// The signature part re-encoded from its bytes after `f` changed them.
    fn with_sig(token: &str, f: impl FnOnce(&mut Vec<u8>)) -> String {
        let (p, s) = token.split_once('.').unwrap();
        let mut sig = URL_SAFE_NO_PAD.decode(s).unwrap();
        f(&mut sig);
        format!("{p}.{}", URL_SAFE_NO_PAD.encode(sig))
    }

    /// Known answers, computed independently of this crate: `scripts/mint-token`
    /// (node's crypto.createHmac) and checked with
    /// `printf %s "$payload" | openssl dgst -sha256 -hmac homeroom-test-secret`.
    ///
    /// ```sh
    /// AUTH_SECRET=homeroom-test-secret scripts/mint-token --sub alice --room r1 --exp 1764460000
    /// AUTH_SECRET=homeroom-test-secret scripts/mint-token --sub u:42@example.com --exp 2000000000
    /// ```
    const KAT_R1_ALICE: &str = "eyJyb29tIjoicjEiLCJzdWIiOiJhbGljZSIsImV4cCI6MTc2NDQ2MDAwMH0.-apwOfHV5TEtCp1m4pUb38GP9I54uKyb1VSrWyu34nw";
    const KAT_ANY_ROOM: &str = "eyJyb29tIjoiKiIsInN1YiI6InU6NDJAZXhhbXBsZS5jb20iLCJleHAiOjIwMDAwMDAwMDB9.WWxKPaxEh4kT0MW3U4AhesSWPl_gUt9A1IgDrzzIHQk";

    #[test]
    fn known_answer_vectors() {
        assert_eq!(token("r1", "alice", 1_764_460_000), KAT_R1_ALICE);
        assert_eq!(token("*", "u:42@example.com", 2_000_000_000), KAT_ANY_ROOM);
        assert_eq!(
            verify(SECRET, Some(KAT_R1_ALICE), "r1", 1_764_459_999),
            Ok(claims("r1", "alice", 1_764_460_000))
        );
        assert_eq!(
            verify(SECRET, Some(KAT_ANY_ROOM), "lobby", NOW),
            Ok(claims("*", "u:42@example.com", 2_000_000_000))
        );
        // The MAC as hex, from openssl.
        let (_, sig) = KAT_R1_ALICE.split_once('.').unwrap();
        let hex: String =
            URL_SAFE_NO_PAD.decode(sig).unwrap().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, "f9aa7039f1d5e5312d0a9d66e2951bdfc18ff48e78b8ac9bd554ab5b2bb7e27c");
    }

    #[test]
    fn round_trip() {
        let c = claims("r1", "alice", NOW + 60);
        let t = mint(SECRET, &c);
        assert!(!t.contains('='), "no padding: {t}");
        assert_eq!(verify(SECRET, Some(&t), "r1", NOW), Ok(c));
    }

    #[test]
    fn missing() {
        assert_eq!(verify(SECRET, None, "r1", NOW), Err(AuthError::Missing));
        assert_eq!(verify(SECRET, Some(""), "r1", NOW), Err(AuthError::Missing));
    }

    #[test]
    fn wrong_room_is_403() {
        let t = token("roomA", "alice", NOW + 60);
        let err = verify(SECRET, Some(&t), "roomB", NOW).unwrap_err();
        assert_eq!(err, AuthError::WrongRoom);
        assert_eq!(err.status(), 403);
        assert_eq!(err.code(), "token_wrong_room");
        // A prefix of the room is another room too.
        assert_eq!(verify(SECRET, Some(&t), "roomA2", NOW), Err(AuthError::WrongRoom));
    }

    #[test]
    fn any_room_works_anywhere() {
        let t = token("*", "alice", NOW + 60);
        for room in ["r1", "lobby", "team.a:b_c-d"] {
            assert_eq!(verify(SECRET, Some(&t), room, NOW).unwrap().room, "*");
        }
    }

    #[test]
    fn expired_at_and_after_exp() {
        let t = token("r1", "alice", NOW);
        assert_eq!(verify(SECRET, Some(&t), "r1", NOW), Err(AuthError::Expired));
        assert_eq!(verify(SECRET, Some(&t), "r1", NOW + 1), Err(AuthError::Expired));
        assert!(verify(SECRET, Some(&t), "r1", NOW - 1).is_ok());
        // Expiry is reported before the room: either way a new token is needed.
        assert_eq!(verify(SECRET, Some(&t), "other", NOW), Err(AuthError::Expired));
        assert_eq!(AuthError::Expired.status(), 401);
    }

    #[test]
    fn flipped_signature_byte() {
        let t = token("r1", "alice", NOW + 60);
        for i in [0, 15, 31] {
            let bad = with_sig(&t, |s| s[i] ^= 0x01);
            assert_eq!(
                verify(SECRET, Some(&bad), "r1", NOW),
                Err(AuthError::BadSignature),
                "byte {i}"
            );
        }
        // Any other base64url character anywhere in the signature text,
        // including the last one (whose low bits must be zero).
        let dot = t.find('.').unwrap();
        for i in dot + 1..t.len() {
            let mut b = t.clone().into_bytes();
            b[i] = if b[i] == b'A' { b'B' } else { b'A' };
            let bad = String::from_utf8(b).unwrap();
            assert_eq!(
                verify(SECRET, Some(&bad), "r1", NOW),
                Err(AuthError::BadSignature),
                "char {i}"
            );
        }
        // Truncated or extended signature.
        let short = with_sig(&t, |s| {
            s.pop();
        });
        let long = with_sig(&t, |s| s.push(0));
        for bad in [short, long] {
            assert_eq!(verify(SECRET, Some(&bad), "r1", NOW), Err(AuthError::BadSignature));
        }
    }

    #[test]
    fn tampered_payload_keeps_old_signature() {
        let t = token("r1", "alice", NOW + 60);
        let (_, sig) = t.split_once('.').unwrap();
        for forged in [
            claims("r1", "mallory", NOW + 60),
            claims("*", "alice", NOW + 60),
            claims("r1", "alice", NOW + 1_000_000),
        ] {
            let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
            let bad = format!("{payload}.{sig}");
            assert_eq!(verify(SECRET, Some(&bad), "r1", NOW), Err(AuthError::BadSignature));
        }
    }

    #[test]
    fn wrong_secret() {
        let t = mint(b"another secret", &claims("r1", "alice", NOW + 60));
        assert_eq!(verify(SECRET, Some(&t), "r1", NOW), Err(AuthError::BadSignature));
        assert_eq!(verify(b"", Some(&t), "r1", NOW), Err(AuthError::BadSignature));
    }

    #[test]
    fn garbage_is_malformed() {
        let good = token("r1", "alice", NOW + 60);
        let (p, s) = good.split_once('.').unwrap();
        for bad in [
            "garbage".to_string(),
            ".".into(),
            format!("{p}."),
            format!(".{s}"),
            format!("{p}.{s}.{s}"),
            format!("{p}={s}"),
            format!("{p}.{s}="),
            format!("{p}=.{s}"),
            format!("{p} .{s}"),
            format!("{p}.+{s}"),
            format!("{p}.{s}/"),
            "ünïcödé.ünïcödé".into(),
            "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl".into(),
        ] {
            assert_eq!(verify(SECRET, Some(&bad), "r1", NOW), Err(AuthError::Malformed), "{bad}");
        }
    }

    #[test]
    fn too_long_is_malformed_before_anything_else() {
        // Correctly signed, but its sub makes it longer than the bound.
        let long = token("r1", &"a".repeat(1600), NOW + 60);
        assert!(long.len() > MAX_TOKEN_LEN);
        assert_eq!(verify(SECRET, Some(&long), "r1", NOW), Err(AuthError::Malformed));
        let huge = "A".repeat(1 << 20);
        assert_eq!(verify(SECRET, Some(&huge), "r1", NOW), Err(AuthError::Malformed));
    }

    /// A correctly signed token around an arbitrary payload text.
    fn signed(payload_json: &str) -> String {
        let payload = URL_SAFE_NO_PAD.encode(payload_json);
        let tag = mac(SECRET, &payload).finalize().into_bytes();
        format!("{payload}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    #[test]
    fn signed_but_bad_payloads_are_malformed() {
        let exp = NOW + 60;
        for json in [
            format!(r#"{{"sub":"alice","exp":{exp}}}"#),
            format!(r#"{{"room":"r1","exp":{exp}}}"#),
            r#"{"room":"r1","sub":"alice"}"#.to_string(),
            format!(r#"{{"room":"r1","sub":"alice","exp":"{exp}"}}"#),
            format!(r#"{{"room":"r1","sub":"alice","exp":{exp}.5}}"#),
            r#"{"room":"r1","sub":"alice","exp":-1}"#.into(),
            format!(r#"{{"room":"r1","sub":null,"exp":{exp}}}"#),
            format!(r#"{{"room":"r1","sub":"alice","sub":"bob","exp":{exp}}}"#),
            format!(r#"{{"room":"r1","sub":"","exp":{exp}}}"#),
            format!(r#"{{"room":"r1","sub":"al ice","exp":{exp}}}"#),
            format!(r#"{{"room":"r1","sub":"<script>","exp":{exp}}}"#),
            format!(r#"{{"room":"r1","sub":"{}","exp":{exp}}}"#, "a".repeat(65)),
            format!(r#"{{"room":"a/b","sub":"alice","exp":{exp}}}"#),
            format!(r#"{{"room":"","sub":"alice","exp":{exp}}}"#),
            r#"["r1","alice",1]"#.into(),
            "not json".into(),
            String::new(),
        ] {
            let t = if json.is_empty() {
                // An empty payload part is structurally malformed.
                format!(".{}", token("r1", "alice", exp).split_once('.').unwrap().1)
            } else {
                signed(&json)
            };
            assert_eq!(verify(SECRET, Some(&t), "r1", NOW), Err(AuthError::Malformed), "{json}");
        }
        // Whitespace around the object is JSON too.
        let t = signed(&format!("\n {{\"room\":\"r1\",\"sub\":\"alice\",\"exp\":{exp}}} "));
        assert_eq!(verify(SECRET, Some(&t), "r1", NOW), Ok(claims("r1", "alice", exp)));
        // Unknown fields are ignored.
        let t = signed(&format!(r#"{{"room":"r1","sub":"alice","exp":{exp},"iat":1,"x":{{}}}}"#));
        assert_eq!(verify(SECRET, Some(&t), "r1", NOW), Ok(claims("r1", "alice", exp)));
    }

    #[test]
    fn user_rule() {
        for ok in ["alice", "u1", "github:123", "auth0|abc", "a.b+c@example.com", "s-abc_123"] {
            assert!(valid_user(ok), "{ok}");
        }
        assert!(valid_user(&"a".repeat(64)));
        for bad in ["", "a b", "a\"b", "a<b", "a/b", "a%20", "é", "a\nb", "a\\b"] {
            assert!(!valid_user(bad), "{bad:?}");
        }
        assert!(!valid_user(&"a".repeat(65)));
    }

    #[test]
    fn codes_and_statuses() {
        let all = [
            (AuthError::Missing, "token_missing", 401),
            (AuthError::Malformed, "token_malformed", 401),
            (AuthError::BadSignature, "token_bad_signature", 401),
            (AuthError::Expired, "token_expired", 401),
            (AuthError::WrongRoom, "token_wrong_room", 403),
        ];
        for (e, code, status) in all {
            assert_eq!(e.code(), code);
            assert_eq!(e.status(), status);
            assert!(!e.message().is_empty());
            assert!(e.to_string().starts_with(code));
        }
    }

    #[test]
    fn admin_key() {
        let key = "k-3f9a0c";
        assert!(admin_key_matches(key, Some("Bearer k-3f9a0c")));
        assert!(admin_key_matches(key, Some("bearer k-3f9a0c")));
        assert!(admin_key_matches(key, Some("BEARER   k-3f9a0c ")));
        // wrong
        assert!(!admin_key_matches(key, Some("Bearer k-3f9a0d")));
        assert!(!admin_key_matches(key, Some("Bearer k-3f9a0")));
        assert!(!admin_key_matches(key, Some("Bearer k-3f9a0c0")));
        assert!(!admin_key_matches(key, Some("Bearer K-3F9A0C")));
        // missing
        assert!(!admin_key_matches(key, None));
        assert!(!admin_key_matches(key, Some("")));
        assert!(!admin_key_matches(key, Some("Bearer")));
        assert!(!admin_key_matches(key, Some("Bearer ")));
        // no or another scheme
        assert!(!admin_key_matches(key, Some("k-3f9a0c")));
        assert!(!admin_key_matches(key, Some("Basic k-3f9a0c")));
        assert!(!admin_key_matches(key, Some("Bearerk-3f9a0c")));
        // an unset (empty) key matches nothing
        assert!(!admin_key_matches("", Some("Bearer ")));
        assert!(!admin_key_matches("", Some("Bearer x")));
        assert!(!admin_key_matches("", None));
    }
}
