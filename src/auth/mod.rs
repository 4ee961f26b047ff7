//! Room tokens and the admin key (PROTOCOL.md "Auth", README "Tokens").
//!
//! A token is a compact JWT signed with HMAC-SHA256 (`alg` `HS256`, nothing
//! else): `base64url(header) "." base64url(payload) "." base64url(signature)`,
//! with the claims `room` (a room name, `"*"` for every room, or a prefix
//! ending in `*`), `kind` (the kinds of room it opens), `sub`, `exp`, and
//! optionally `nbf`, `iat`, `aud` and `info` (a JSON object of at most 1 KiB
//! the room shows as the member's `info` and gives to its rules). Any JWT
//! library mints them ([`jwt`]). The format before JWTs,
//! `base64url(payload) "." base64url(signature)`, is still accepted during
//! the transition ([`legacy`]).
//!
//! Two secrets may be live at once ([`Keys`]): `AUTH_SECRET` and
//! `AUTH_SECRET_PREVIOUS`, so a secret rotates without a flag day. A token
//! whose header names a `kid` is checked with the secret of that id only.
//! A [`Verifier`] holds the keys and what else the deployment asks of a
//! token (its audience, its longest lifetime, whether a token without a
//! `kind` is still taken).
//!
//! Everything here is pure (the clock comes in as `now_secs`) and builds
//! natively and for wasm32. A secret is the UTF-8 bytes of its variable as
//! configured, used as the HMAC key as is. HS256 is a few lines over the
//! RustCrypto `hmac` and `sha2` crates: a general JWT crate would bring RSA
//! and elliptic-curve code the Worker never runs into its Wasm. What the
//! verifier refuses follows RFC 7515, 7519 and 8725 (see [`jwt`]); every
//! token it accepts is one PyJWT accepts too (`tests/jwt_fuzz.rs` checks it).

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

/// Longest token lifetime a [`Verifier`] accepts by default
/// (`TOKEN_MAX_TTL_SECS`), seconds: 24 hours.
pub const DEFAULT_MAX_TTL_SECS: u64 = 24 * 3600;

/// Most names a `kind` or `aud` claim may list.
pub const MAX_NAMES: usize = 16;

/// A claim that is one name or a list of them (`kind`, `aud`), as JWTs
/// write `aud` (RFC 7519 §4.1.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Names {
    One(String),
    Many(Vec<String>),
}

impl Names {
    /// The names, in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        let (one, many) = match self {
            Names::One(n) => (Some(n.as_str()), &[][..]),
            Names::Many(ns) => (None, ns.as_slice()),
        };
        one.into_iter().chain(many.iter().map(String::as_str))
    }

    /// Whether `name` is one of them.
    pub fn contains(&self, name: &str) -> bool {
        self.iter().any(|n| n == name)
    }

    fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

impl From<&str> for Names {
    fn from(name: &str) -> Names {
        Names::One(name.to_owned())
    }
}

/// The `kind` claim of a token good in every kind of room.
pub const ANY_KIND: &str = "*";

/// What a valid token says. Unknown payload fields are ignored, so issuers
/// may add their own.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Claims {
    /// The room the token is good for: a room name, `"*"` ([`ANY_ROOM`]) for
    /// every room, or a prefix ending in `*` (`"auction:*"`) for every room
    /// whose name starts with it.
    pub room: String,
    /// The kinds of room the token opens: a kind's path segment (`"chat"`
    /// opens `/chat/{room}/...`), a list of them, or `"*"` ([`ANY_KIND`])
    /// for every kind. A token without it opens no kind, unless the
    /// deployment still takes such tokens ([`Verifier::kindless`]).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "given")]
    pub kind: Option<Names>,
    /// The user: becomes the connection's `user`, shown to other clients.
    pub sub: String,
    /// Expiry in unix seconds; the token is refused from this second on.
    pub exp: u64,
    /// Not before, unix seconds (JWT tokens only).
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "given")]
    pub nbf: Option<u64>,
    /// Issued at, unix seconds: refused when further ahead than the clock
    /// leeway, as [`nbf`](Claims::nbf) is.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "given")]
    pub iat: Option<u64>,
    /// The audience (RFC 7519 §4.1.3): a token that names one must name
    /// this deployment's ([`Verifier::audience`]), or it is refused.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "given")]
    pub aud: Option<Names>,
    /// The token's id, if the issuer gives one (a string: other verifiers
    /// refuse anything else, so this one does too). Not used.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "given")]
    pub jti: Option<String>,
    /// Verified information about the user (a JSON object of at most
    /// [`MAX_INFO`] bytes): the member's `info` in presence, `who.info` for
    /// the room's rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<Box<RawValue>>,
}

/// An optional claim that, when present, must hold a value of its type:
/// `"nbf": null` is refused, not read as absent (other verifiers refuse it,
/// and a token any of them refuses must not pass here).
fn given<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

impl PartialEq for Claims {
    fn eq(&self, other: &Self) -> bool {
        (&self.room, &self.kind, &self.sub, self.exp, self.nbf, self.iat, &self.aud, &self.jti)
            == (
                &other.room,
                &other.kind,
                &other.sub,
                other.exp,
                other.nbf,
                other.iat,
                &other.aud,
                &other.jti,
            )
            && self.info.as_ref().map(|i| i.get()) == other.info.as_ref().map(|i| i.get())
    }
}

impl Eq for Claims {}

impl Claims {
    /// Claims for `sub` in `room` until `exp` (unix seconds), nothing else:
    /// no kind, which a deployment refuses by default (see
    /// [`Claims::with_kind`]).
    pub fn new(room: &str, sub: &str, exp: u64) -> Claims {
        Claims { room: room.into(), sub: sub.into(), exp, ..Claims::default() }
    }

    /// These claims, for the kind (or kinds, or `"*"`) `kind`.
    ///
    /// ```
    /// use homeroom::auth::Claims;
    /// let c = Claims::new("lobby", "ann", 2_000_000_000).with_kind("chat");
    /// assert!(c.kind.unwrap().contains("chat"));
    /// ```
    pub fn with_kind(mut self, kind: impl Into<Names>) -> Claims {
        self.kind = Some(kind.into());
        self
    }

    /// Whether these claims open the kind of room `kind`.
    pub fn opens_kind(&self, kind: &str) -> bool {
        self.kind.as_ref().is_some_and(|k| k.contains(kind) || k.contains(ANY_KIND))
    }
}

impl From<Vec<&str>> for Names {
    fn from(names: Vec<&str>) -> Names {
        Names::Many(names.into_iter().map(str::to_owned).collect())
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
    /// Too long, not base64url parts, a header or payload that is not a
    /// JSON object, bad JSON or missing fields, or a bad `sub`, `room`,
    /// `kind`, `aud`, `jti` or `info` claim.
    Malformed,
    /// The header's `alg` is not `HS256` (`none`, `RS256`, ...).
    Algorithm,
    /// The header names extensions that must be understood (`crit`, or an
    /// unencoded payload, `b64`): this verifier understands none (RFC 7515
    /// §4.1.11).
    Critical,
    /// The header names a `kid` no configured secret has.
    UnknownKid,
    /// The token's `nbf` or `iat` is still ahead.
    NotYetValid,
    /// The signature does not match the payload under this deployment's secret.
    BadSignature,
    /// The token's `exp` is not after now.
    Expired,
    /// The token names an audience (`aud`) that is not this deployment's,
    /// or none when the deployment has one (`TOKEN_AUDIENCE`).
    Audience,
    /// A valid token for another room.
    WrongRoom,
    /// A valid token for another kind of room, or for none (no `kind`).
    WrongKind,
    /// The token's `exp` is further ahead than the deployment's longest
    /// token lifetime (`TOKEN_MAX_TTL_SECS`).
    TooLongLived,
}

impl AuthError {
    /// HTTP status of the refusal: 403 for [`AuthError::WrongRoom`] and
    /// [`AuthError::WrongKind`], else 401.
    pub fn status(&self) -> u16 {
        match self {
            AuthError::WrongRoom | AuthError::WrongKind => 403,
            _ => 401,
        }
    }

    /// Stable error code for the refusal body and logs.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::Missing => "token_missing",
            AuthError::Malformed => "token_malformed",
            AuthError::Algorithm => "token_alg",
            AuthError::Critical => "token_crit",
            AuthError::UnknownKid => "token_unknown_kid",
            AuthError::NotYetValid => "token_not_yet_valid",
            AuthError::BadSignature => "token_bad_signature",
            AuthError::Expired => "token_expired",
            AuthError::Audience => "token_audience",
            AuthError::WrongRoom => "token_wrong_room",
            AuthError::WrongKind => "token_wrong_kind",
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
                "the token is not an HS256 JWT with the claims {{\"room\", \"kind\", \"sub\", \"exp\"}} \
                 (room: a room name, \"*\" or a prefix ending in *; kind: a kind of room, a list \
                 of them or \"*\"; sub: 1-{MAX_USER} characters of A-Z a-z 0-9 . _ - : @ + |; \
                 nbf, iat: unix seconds; info: an object of at most {MAX_INFO} bytes; at most \
                 {MAX_TOKEN_LEN} bytes)"
            ),
            AuthError::Algorithm => "the token's alg must be HS256".into(),
            AuthError::Critical => {
                "the token's header asks for extensions this deployment does not support (crit, b64)"
                    .into()
            }
            AuthError::UnknownKid => "the token's kid names no secret of this deployment".into(),
            AuthError::NotYetValid => "the token is not valid yet (nbf or iat ahead)".into(),
            AuthError::BadSignature => {
                "the token's signature does not match: it was altered or signed with another secret"
                    .into()
            }
            AuthError::Expired => "the token has expired; get a new one".into(),
            AuthError::Audience => "the token's aud is not this deployment's audience \
                 (TOKEN_AUDIENCE: a token must name it when it is set, and may name none when not)"
                .into(),
            AuthError::WrongRoom => "the token is for another room".into(),
            AuthError::WrongKind => "the token is not for this kind of room: its `kind` claim \
                 must name it (\"kind\": \"chat\", a list of kinds, or \"*\")"
                .into(),
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

/// Where a token is shown: the kind of room (the path segment) and the room.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    pub kind: &'a str,
    pub room: &'a str,
}

/// Checks tokens as a deployment does: its secrets, and what it asks of a
/// token beyond a valid signature.
#[derive(Debug, Clone)]
pub struct Verifier {
    pub keys: Keys,
    /// `TOKEN_AUDIENCE`: every token must carry an `aud` claim naming this
    /// one (a deployment that names its audience takes only tokens meant
    /// for it, RFC 8725 §3.9); a deployment without it refuses every token
    /// that names an audience (it cannot be the one meant, RFC 7519 §4.1.3).
    pub audience: Option<String>,
    /// `ALLOW_TOKENS_WITHOUT_KIND`: a token without a `kind` claim opens
    /// every kind of room, as before kinds were bound. Off by default; for a
    /// transition only (the Worker logs that it is on).
    pub kindless: bool,
    /// `TOKEN_MAX_TTL_SECS`: the furthest ahead a token's `exp` may be.
    pub max_ttl_secs: u64,
}

impl Verifier {
    /// A verifier of `keys` with the defaults: no audience, a `kind` claim
    /// required, tokens living at most [`DEFAULT_MAX_TTL_SECS`].
    pub fn new(keys: Keys) -> Verifier {
        Verifier { keys, audience: None, kindless: false, max_ttl_secs: DEFAULT_MAX_TTL_SECS }
    }

    /// Checks `token` (the `token` query parameter, if any) for the room
    /// `at` at `now_secs` (unix seconds) and returns its claims.
    ///
    /// Absent or empty → [`Missing`](AuthError::Missing); longer than
    /// [`MAX_TOKEN_LEN`] → [`Malformed`](AuthError::Malformed). Three parts
    /// are a JWT ([`jwt::verify`]), two the format before it
    /// ([`legacy::verify`]). Then, for both: `nbf` or `iat` ahead →
    /// [`NotYetValid`](AuthError::NotYetValid); `exp <= now_secs` →
    /// [`Expired`](AuthError::Expired); `exp` further ahead than
    /// [`max_ttl_secs`](Verifier::max_ttl_secs) →
    /// [`TooLongLived`](AuthError::TooLongLived); an `aud` that is not
    /// [`audience`](Verifier::audience) → [`Audience`](AuthError::Audience);
    /// a `room` that does not cover the room →
    /// [`WrongRoom`](AuthError::WrongRoom); a `kind` that does not name the
    /// kind (or none) → [`WrongKind`](AuthError::WrongKind).
    ///
    /// ```
    /// use homeroom::auth::{mint, AuthError, Claims, Keys, Place, Verifier};
    /// let verifier = Verifier::new(Keys::one(b"a-secret-of-at-least-32-bytes-...."));
    /// let now = 1_900_000_000;
    /// let claims = Claims::new("lobby", "ann", now + 600).with_kind("chat");
    /// let token = mint(&verifier.keys.current, &claims);
    /// let chat = Place { kind: "chat", room: "lobby" };
    /// assert_eq!(verifier.verify(Some(&token), chat, now).unwrap().sub, "ann");
    /// let auction = Place { kind: "auction", room: "lobby" };
    /// assert_eq!(verifier.verify(Some(&token), auction, now), Err(AuthError::WrongKind));
    /// ```
    pub fn verify(
        &self,
        token: Option<&str>,
        at: Place<'_>,
        now_secs: u64,
    ) -> Result<Claims, AuthError> {
        let claims = self.decode(token, now_secs)?;
        if claims.exp > now_secs.saturating_add(self.max_ttl_secs) {
            return Err(AuthError::TooLongLived);
        }
        if !room_covers(&claims.room, at.room) {
            return Err(AuthError::WrongRoom);
        }
        if !(claims.opens_kind(at.kind) || self.kindless && claims.kind.is_none()) {
            return Err(AuthError::WrongKind);
        }
        Ok(claims)
    }

    /// A token's claims, checked for everything but where it is shown: its
    /// format, signature, time claims and audience.
    pub fn decode(&self, token: Option<&str>, now_secs: u64) -> Result<Claims, AuthError> {
        let token = token.filter(|t| !t.is_empty()).ok_or(AuthError::Missing)?;
        if token.len() > MAX_TOKEN_LEN {
            return Err(AuthError::Malformed);
        }
        let claims = match token.matches('.').count() {
            2 => jwt::verify(&self.keys, token)?,
            1 => legacy::verify(&self.keys, token)?,
            _ => return Err(AuthError::Malformed),
        };
        let ahead = |at: Option<u64>| at.is_some_and(|t| t > now_secs + NBF_LEEWAY_SECS);
        if ahead(claims.nbf) || ahead(claims.iat) {
            return Err(AuthError::NotYetValid);
        }
        if claims.exp <= now_secs {
            return Err(AuthError::Expired);
        }
        let aud = claims.aud.as_ref().filter(|a| !a.is_empty());
        let meant = match (&self.audience, aud) {
            (None, aud) => aud.is_none(),
            (Some(mine), aud) => aud.is_some_and(|a| a.contains(mine)),
        };
        if !meant {
            return Err(AuthError::Audience);
        }
        Ok(claims)
    }
}

/// Signs `claims` into an HS256 JWT with `key` (its `kid` in the header when
/// it has one): what [`Verifier::verify`] and every JWT library accept. It does not
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

/// Whether a `kind` claim's entry is a kind's path segment (1-64
/// characters of `A-Za-z0-9._-`) or `"*"`.
fn valid_kind_claim(kind: &str) -> bool {
    kind == ANY_KIND
        || (1..=64).contains(&kind.len())
            && kind.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// A list claim: at most [`MAX_NAMES`] names, each one `valid` takes (an
/// empty list names nothing: a `kind` of `[]` opens no kind).
fn valid_names(names: &Names, valid: impl Fn(&str) -> bool) -> bool {
    let n = names.iter().count();
    n <= MAX_NAMES && names.iter().all(valid)
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

/// Whether a JSON text is an object (serde would also take a positional
/// array for a struct).
fn is_object(json: &[u8]) -> bool {
    json.iter().find(|b| !b" \t\n\r".contains(b)) == Some(&b'{')
}

/// Decodes and checks a payload's claims (both formats): an object, no
/// duplicate fields, a valid `sub`, `room`, `kind`, `aud` and `info`.
fn claims_of(payload: &[u8]) -> Result<Claims, AuthError> {
    // Duplicate fields are refused by serde (parsers disagree on which one
    // wins).
    if !is_object(payload) {
        return Err(AuthError::Malformed);
    }
    let claims: Claims = serde_json::from_slice(payload).map_err(|_| AuthError::Malformed)?;
    if !valid_user(&claims.sub) || !valid_room_claim(&claims.room) {
        return Err(AuthError::Malformed);
    }
    if claims.kind.as_ref().is_some_and(|k| !valid_names(k, valid_kind_claim)) {
        return Err(AuthError::Malformed);
    }
    if claims.aud.as_ref().is_some_and(|a| !valid_names(a, |n| n.len() <= 256)) {
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
