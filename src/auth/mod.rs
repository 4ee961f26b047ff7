//! Room tokens and the admin key (PROTOCOL.md "Auth", README "Tokens").
//!
//! A token is a compact JWT signed with HMAC-SHA256 (`alg` `HS256`, nothing
//! else): `base64url(header) "." base64url(payload) "." base64url(signature)`,
//! with the claims `room` (a room name, `"*"` for every room, or a prefix
//! ending in `*`), `sub`, `exp`, and optionally `nbf`, `iat` and `info` (a JSON
//! object of at most 1 KiB the room shows as the member's `info` and gives to
//! its rules). Any JWT library mints them ([`jwt`]). The format before JWTs,
//! `base64url(payload) "." base64url(signature)`, is still accepted during
//! the transition ([`legacy`]).
//!
//! Two secrets may be live at once ([`Keys`]): `AUTH_SECRET` and
//! `AUTH_SECRET_PREVIOUS`, so a secret rotates without a flag day. A token
//! whose header names a `kid` is checked with the secret of that id only.
//!
//! Everything here is pure (the clock comes in as `now_secs`) and builds
//! natively and for wasm32. A secret is the UTF-8 bytes of its variable as
//! configured, used as the HMAC key as is. HS256 is a few lines over the
//! RustCrypto `hmac` and `sha2` crates: a general JWT crate would bring RSA
//! and elliptic-curve code the Worker never runs into its Wasm.

pub mod jwt;
pub mod legacy;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::Sha256;

use crate::protocol::names;

type HmacSha256 = Hmac<Sha256>;

/// The `room` claim of a token good in every room.
pub const ANY_ROOM: &str = "*";

/// Longest token accepted, in bytes; a longer one is [`AuthError::Malformed`]
/// before any decoding. Real tokens are about 200 bytes, 1.6 KiB with a
/// full `info`.
pub const MAX_TOKEN_LEN: usize = 4096;

/// Longest `sub`, in characters.
pub const MAX_USER: usize = 64;

/// Largest `info` claim, in bytes of JSON.
pub const MAX_INFO: usize = 1024;

/// The shortest `AUTH_SECRET` the Worker accepts, in bytes: a short secret
/// falls to an offline brute force from a single token anyone holds.
pub const MIN_SECRET_BYTES: usize = 32;

/// How far ahead of the Worker's clock a token's `nbf` may be (the clocks of
/// the backend that mints and of the edge are not the same clock), seconds.
pub const NBF_LEEWAY_SECS: u64 = 30;

/// What a valid token says. Unknown payload fields are ignored, so issuers
/// may add their own.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Claims {
    /// The room the token is good for: a room name, `"*"` ([`ANY_ROOM`]) for
    /// every room, or a prefix ending in `*` (`"auction:*"`) for every room
    /// whose name starts with it.
    pub room: String,
    /// The user: becomes the connection's `user`, shown to other clients.
    pub sub: String,
    /// Expiry in unix seconds; the token is refused from this second on.
    pub exp: u64,
    /// Not before, unix seconds (JWT tokens only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// Issued at, unix seconds (informational).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// Verified information about the user (a JSON object of at most
    /// [`MAX_INFO`] bytes): the member's `info` in presence, `who.info` for
    /// the room's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<Box<RawValue>>,
}

impl PartialEq for Claims {
    fn eq(&self, other: &Self) -> bool {
        (&self.room, &self.sub, self.exp, self.nbf, self.iat)
            == (&other.room, &other.sub, other.exp, other.nbf, other.iat)
            && self.info.as_ref().map(|i| i.get()) == other.info.as_ref().map(|i| i.get())
    }
}

impl Eq for Claims {}

impl Claims {
    /// Claims for `sub` in `room` until `exp` (unix seconds), nothing else.
    pub fn new(room: &str, sub: &str, exp: u64) -> Claims {
        Claims { room: room.into(), sub: sub.into(), exp, ..Claims::default() }
    }
}

/// One signing secret, with the key id (`kid`) tokens signed with it may name.
#[derive(Debug, Clone)]
pub struct Key {
    pub secret: Vec<u8>,
    pub kid: Option<String>,
}

impl Key {
    /// A secret without a key id.
    pub fn new(secret: &[u8]) -> Key {
        Key { secret: secret.to_vec(), kid: None }
    }
}

/// The secrets a deployment accepts tokens from: the current one and,
/// while a rotation is under way, the previous one.
#[derive(Debug, Clone)]
pub struct Keys {
    pub current: Key,
    pub previous: Option<Key>,
}

impl Keys {
    /// One secret, no key id.
    pub fn one(secret: &[u8]) -> Keys {
        Keys { current: Key::new(secret), previous: None }
    }

    /// The secrets a token may be signed with: the one its `kid` names, or,
    /// without a `kid`, each of them. `None` when no secret has that `kid`.
    fn for_kid(&self, kid: Option<&str>) -> Option<Vec<&Key>> {
        let all: Vec<&Key> = std::iter::once(&self.current).chain(self.previous.as_ref()).collect();
        match kid {
            None => Some(all),
            Some(kid) => {
                let named: Vec<&Key> =
                    all.into_iter().filter(|k| k.kid.as_deref() == Some(kid)).collect();
                (!named.is_empty()).then_some(named)
            }
        }
    }
}
/// Why a token was refused. Each has a stable [`code`](AuthError::code) and
/// an HTTP [`status`](AuthError::status) for the refusal body
/// `{"error": code, "message": text}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthError {
    /// No token was given (absent or empty).
    Missing,
    /// Too long, not base64url parts, bad JSON or missing fields, or a bad
    /// `sub`, `room` or `info` claim.
    Malformed,
    /// The header's `alg` is not `HS256` (`none`, `RS256`, ...).
    Algorithm,
    /// The header names a `kid` no configured secret has.
    UnknownKid,
    /// The token's `nbf` is still ahead.
    NotYetValid,
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
            AuthError::Algorithm => "token_alg",
            AuthError::UnknownKid => "token_unknown_kid",
            AuthError::NotYetValid => "token_not_yet_valid",
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
                "the token is not an HS256 JWT with the claims {{\"room\", \"sub\", \"exp\"}} \
                 (room: a room name, \"*\" or a prefix ending in *; sub: 1-{MAX_USER} characters \
                 of A-Z a-z 0-9 . _ - : @ + |; info: an object of at most {MAX_INFO} bytes; at \
                 most {MAX_TOKEN_LEN} bytes)"
            ),
            AuthError::Algorithm => "the token's alg must be HS256".into(),
            AuthError::UnknownKid => "the token's kid names no secret of this deployment".into(),
            AuthError::NotYetValid => "the token is not valid yet (nbf)".into(),
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
/// `now_secs` (unix seconds) against `keys` and returns its claims.
///
/// Absent or empty → [`Missing`](AuthError::Missing); longer than
/// [`MAX_TOKEN_LEN`] → [`Malformed`](AuthError::Malformed). Three parts are
/// a JWT ([`jwt::verify`]), two the format before it ([`legacy::verify`]).
/// Then, for both, the claims: `exp <= now_secs` →
/// [`Expired`](AuthError::Expired); `room` that does not cover `room` →
/// [`WrongRoom`](AuthError::WrongRoom).
///
/// ```
/// use homeroom::auth::{mint, verify, Claims, Keys};
/// let keys = Keys::one(b"a-secret-of-at-least-32-bytes-....");
/// let token = mint(&keys.current, &Claims::new("lobby", "ann", 2_000_000_000));
/// assert_eq!(verify(&keys, Some(&token), "lobby", 1_900_000_000).unwrap().sub, "ann");
/// ```
pub fn verify(
    keys: &Keys,
    token: Option<&str>,
    room: &str,
    now_secs: u64,
) -> Result<Claims, AuthError> {
    let token = token.filter(|t| !t.is_empty()).ok_or(AuthError::Missing)?;
    if token.len() > MAX_TOKEN_LEN {
        return Err(AuthError::Malformed);
    }
    let claims = match token.matches('.').count() {
        2 => jwt::verify(keys, token, now_secs)?,
        1 => legacy::verify(keys, token)?,
        _ => return Err(AuthError::Malformed),
    };
    if claims.exp <= now_secs {
        return Err(AuthError::Expired);
    }
    if !room_covers(&claims.room, room) {
        return Err(AuthError::WrongRoom);
    }
    Ok(claims)
}

/// Signs `claims` into an HS256 JWT with `key` (its `kid` in the header when
/// it has one): what [`verify`] and every JWT library accept. It does not
/// validate the claims.
pub fn mint(key: &Key, claims: &Claims) -> String {
    jwt::mint(key, claims)
}

/// Whether a token's `room` claim covers `room`: the same name, `"*"`, or a
/// prefix ending in `*` that `room` starts with.
pub fn room_covers(claim: &str, room: &str) -> bool {
    match claim.strip_suffix('*') {
        Some(prefix) => room.starts_with(prefix),
        None => claim == room,
    }
}

/// Whether a `room` claim is one a token may carry: a room name, `"*"`, or
/// a room-name prefix ending in `*`.
fn valid_room_claim(claim: &str) -> bool {
    match claim.strip_suffix('*') {
        Some("") => true,
        Some(prefix) => names::valid_room(&format!("{prefix}x")) && !prefix.contains('*'),
        None => names::valid_room(claim),
    }
}

/// Checks that `sig_b64` is the HMAC-SHA256 of `signed` under one of
/// `keys` (both formats), then decodes and checks the claims of `payload_b64`.
/// Every key is tried, each compared in constant time (no early exit): the
/// time taken says nothing about which secret, if any, matched.
fn signed_claims<'k>(
    keys: impl IntoIterator<Item = &'k Key>,
    signed: &str,
    sig_b64: &str,
    payload_b64: &str,
) -> Result<Claims, AuthError> {
    // Valid characters that do not decode (bad length, non-zero trailing
    // bits) cannot be a MAC.
    let sig = URL_SAFE_NO_PAD.decode(sig_b64).map_err(|_| AuthError::BadSignature)?;
    let matched = keys
        .into_iter()
        .map(|k| mac(&k.secret, signed).verify_slice(&sig).is_ok())
        .fold(false, |any, ok| any | ok);
    if !matched {
        return Err(AuthError::BadSignature);
    }
    let payload = URL_SAFE_NO_PAD.decode(payload_b64).map_err(|_| AuthError::Malformed)?;
    claims_of(&payload)
}

/// Decodes and checks a payload's claims (both formats): an object, no
/// duplicate fields, a valid `sub`, `room` and `info`.
fn claims_of(payload: &[u8]) -> Result<Claims, AuthError> {
    // An object (serde would also take a positional array); duplicate fields
    // are refused by serde (parsers disagree on which one wins).
    if payload.iter().find(|b| !b" \t\n\r".contains(b)) != Some(&b'{') {
        return Err(AuthError::Malformed);
    }
    let claims: Claims = serde_json::from_slice(payload).map_err(|_| AuthError::Malformed)?;
    if !valid_user(&claims.sub) || !valid_room_claim(&claims.room) {
        return Err(AuthError::Malformed);
    }
    if let Some(info) = &claims.info {
        let text = info.get();
        let object = text.trim_start().starts_with('{');
        let readable = crate::protocol::client::check_value(info, "info").is_ok();
        if !object || text.len() > MAX_INFO || !readable {
            return Err(AuthError::Malformed);
        }
    }
    Ok(claims)
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

pub(crate) fn mac(key: &[u8], msg: &str) -> HmacSha256 {
    let mut m =
        <HmacSha256 as KeyInit>::new_from_slice(key).expect("HMAC takes keys of any length");
    m.update(msg.as_bytes());
    m
}

pub(crate) fn is_base64url(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}
