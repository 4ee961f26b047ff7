//! HS256 JSON Web Tokens: `header.payload.signature`, each part base64url
//! without padding, the signature the HMAC-SHA256 of `header.payload`.
//!
//! What is refused and why (RFC 7515, 7519 and 8725): an `alg` other than
//! `HS256` (`none` and the asymmetric ones included: this deployment holds
//! shared secrets only), a header that is not a JSON object or repeats a
//! parameter, a `typ` other than `JWT`, a `kid` that is not a string or
//! names no secret, any `crit` (it lists extensions the recipient must
//! understand, and this one understands none: RFC 7515 §4.1.11) and any
//! `b64` (an unencoded payload, RFC 7797, only meaningful under `crit`), a
//! signature that no live secret makes (compared in constant time, before
//! the payload is read). The claims are checked by [`super::Verifier`].

use serde::{Deserialize, Deserializer};

use super::{is_base64url, is_object, mac, signed_claims, AuthError, Claims, Key, Keys};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::Mac;

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    typ: Option<String>,
    #[serde(default, deserialize_with = "given")]
    kid: Option<String>,
    #[serde(default)]
    crit: Present,
    #[serde(default)]
    b64: Present,
}

/// Whether a header parameter is there at all, whatever its value (`null`
/// included): `"crit": null` is a `crit` too.
#[derive(Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Present, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| Present(true))
    }
}

fn given<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

/// Checks a three-part token's header and signature, then decodes its
/// claims (their times, audience, room and kind are checked by
/// [`super::Verifier`]).
pub fn verify(keys: &Keys, token: &str) -> Result<Claims, AuthError> {
    let mut parts = token.split('.');
    let (Some(h64), Some(p64), Some(s64)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(AuthError::Malformed);
    };
    // The header first: an unsigned (`alg: none`, empty signature) or
    // asymmetric token is named for what it is.
    if !is_base64url(h64) {
        return Err(AuthError::Malformed);
    }
    let header = URL_SAFE_NO_PAD.decode(h64).map_err(|_| AuthError::Malformed)?;
    if !is_object(&header) {
        return Err(AuthError::Malformed);
    }
    let header: Header = serde_json::from_slice(&header).map_err(|_| AuthError::Malformed)?;
    if header.alg != "HS256" {
        return Err(AuthError::Algorithm);
    }
    if header.crit.0 || header.b64.0 {
        return Err(AuthError::Critical);
    }
    if ![p64, s64].iter().all(|p| is_base64url(p)) {
        return Err(AuthError::Malformed);
    }
    if header.typ.as_deref().is_some_and(|t| !t.eq_ignore_ascii_case("JWT")) {
        return Err(AuthError::Malformed);
    }
    let candidates = keys.for_kid(header.kid.as_deref()).ok_or(AuthError::UnknownKid)?;
    let signed = &token[..h64.len() + 1 + p64.len()];
    signed_claims(candidates, signed, s64, p64)
}

/// Signs `claims` with `key`: header `{"alg":"HS256","typ":"JWT"}` (plus
/// `"kid"` when the key has one).
pub fn mint(key: &Key, claims: &Claims) -> String {
    let header = match &key.kid {
        Some(kid) => serde_json::json!({"alg": "HS256", "typ": "JWT", "kid": kid}),
        None => serde_json::json!({"alg": "HS256", "typ": "JWT"}),
    };
    let h64 = URL_SAFE_NO_PAD.encode(header.to_string());
    let p64 = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).expect("claims serialize"));
    let signed = format!("{h64}.{p64}");
    let tag = mac(&key.secret, &signed).finalize().into_bytes();
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{Keys, Names, Place, Verifier, NBF_LEEWAY_SECS};

    /// The deployment's checks for `room` of the kind `rooms`, taking tokens
    /// without a `kind` (these tests are about the format; the kind has
    /// tests of its own below).
    fn check(keys: &Keys, token: Option<&str>, room: &str, now: u64) -> Result<Claims, AuthError> {
        let verifier = Verifier { kindless: true, ..Verifier::new(keys.clone()) };
        verifier.verify(token, Place { kind: "rooms", room }, now)
    }

    const NOW: u64 = 1_764_460_000;
    const SECRET: &[u8] = b"homeroom-test-secret-0123456789ab";

    fn keys() -> Keys {
        Keys::one(SECRET)
    }

    /// A token with any header and payload, signed with `secret`.
    fn forged(header: &str, payload: &str, secret: &[u8]) -> String {
        let h64 = URL_SAFE_NO_PAD.encode(header);
        let p64 = URL_SAFE_NO_PAD.encode(payload);
        let signed = format!("{h64}.{p64}");
        let tag = mac(secret, &signed).finalize().into_bytes();
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(tag))
    }

    /// Known answer, computed by the client package's `mintToken()`
    /// (WebCrypto; client/test/token.test.ts cross-checks it with
    /// node:crypto): this side mints the same bytes and accepts them.
    #[test]
    fn known_answer_of_the_client_mint_token() {
        const TOKEN: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.\
            eyJyb29tIjoicjEiLCJraW5kIjoicm9vbXMiLCJzdWIiOiJhbGljZSIsImV4cCI6MTc2NDQ2MDA2MCwiaWF0IjoxNzY0NDYwMDAwfQ.\
            UVgQNpmIyjiyRTbrBHXTphOxDQzj2kiXD-Kkj8EaV6U";
        let claims = Claims {
            iat: Some(1_764_460_000),
            ..Claims::new("r1", "alice", 1_764_460_060).with_kind("rooms")
        };
        assert_eq!(mint(&keys().current, &claims), TOKEN);
        assert_eq!(check(&keys(), Some(TOKEN), "r1", NOW), Ok(claims));
    }

    /// The shape standard libraries make (PyJWT's header is exactly
    /// `{"alg":"HS256","typ":"JWT"}`; others add spaces, drop `typ` or add
    /// claims of their own). The e2e tests sign with PyJWT itself.
    #[test]
    fn a_token_a_standard_library_made_is_accepted() {
        let header = r#"{"alg":"HS256","typ":"JWT"}"#;
        let t = forged(header, r#"{"room":"r1","sub":"alice","exp":1764460060}"#, SECRET);
        let c = check(&keys(), Some(&t), "r1", NOW).unwrap();
        assert_eq!((c.sub.as_str(), c.exp), ("alice", 1_764_460_060));
        // Without typ, with spaces in the JSON, with claims of the issuer's own.
        let t = forged(
            r#"{ "alg": "HS256" }"#,
            r#"{"room":"*","sub":"bob","exp":1764460060,"iss":"me"}"#,
            SECRET,
        );
        assert!(check(&keys(), Some(&t), "any", NOW).is_ok());
    }

    #[test]
    fn the_algorithm_must_be_hs256() {
        let payload = r#"{"room":"r1","sub":"alice","exp":1764460060}"#;
        for header in [
            r#"{"alg":"none"}"#,
            r#"{"alg":"RS256","typ":"JWT"}"#,
            r#"{"alg":"HS512"}"#,
            r#"{"alg":"hs256"}"#,
        ] {
            let t = forged(header, payload, SECRET);
            assert_eq!(check(&keys(), Some(&t), "r1", NOW), Err(AuthError::Algorithm), "{header}");
        }
        // `none` with an empty signature (what an unsigned JWT looks like): named for its alg.
        let h64 = URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#);
        let p64 = URL_SAFE_NO_PAD.encode(payload);
        let t = format!("{h64}.{p64}.");
        assert_eq!(check(&keys(), Some(&t), "r1", NOW), Err(AuthError::Algorithm));
        // An HS256 header with an empty signature is malformed.
        let hs = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256"}"#);
        let t = format!("{hs}.{p64}.");
        assert_eq!(check(&keys(), Some(&t), "r1", NOW), Err(AuthError::Malformed));
        let t = format!("{h64}.{p64}.AAAA");
        assert_eq!(check(&keys(), Some(&t), "r1", NOW), Err(AuthError::Algorithm));
        // Not a JWT type.
        let t = forged(r#"{"alg":"HS256","typ":"JWE"}"#, payload, SECRET);
        assert_eq!(check(&keys(), Some(&t), "r1", NOW), Err(AuthError::Malformed));
    }

    #[test]
    fn a_rotation_accepts_both_secrets_and_a_kid_picks_one() {
        let old = Key {
            secret: b"the-previous-secret-0123456789abcdef".to_vec(),
            kid: Some("k1".into()),
        };
        let new = Key { secret: SECRET.to_vec(), kid: Some("k2".into()) };
        let keys = Keys { current: new.clone(), previous: Some(old.clone()) };
        let c = Claims::new("r1", "alice", NOW + 60);
        assert!(check(&keys, Some(&mint(&new, &c)), "r1", NOW).is_ok());
        assert!(check(&keys, Some(&mint(&old, &c)), "r1", NOW).is_ok(), "the previous secret");
        // Without a kid: either secret.
        let bare = Key { kid: None, ..old.clone() };
        assert!(check(&keys, Some(&mint(&bare, &c)), "r1", NOW).is_ok());
        // A kid that names no secret, or the wrong one.
        let stranger = Key { kid: Some("k9".into()), ..new.clone() };
        assert_eq!(check(&keys, Some(&mint(&stranger, &c)), "r1", NOW), Err(AuthError::UnknownKid));
        let lying = Key { kid: Some("k2".into()), ..old.clone() };
        assert_eq!(check(&keys, Some(&mint(&lying, &c)), "r1", NOW), Err(AuthError::BadSignature));
        // After the rotation: the previous secret is gone.
        let after = Keys { current: new, previous: None };
        assert_eq!(check(&after, Some(&mint(&bare, &c)), "r1", NOW), Err(AuthError::BadSignature));
    }

    #[test]
    fn nbf_exp_room_patterns_and_info() {
        let key = Key { secret: SECRET.to_vec(), kid: None };
        let at = |c: &Claims, room: &str, now: u64| check(&keys(), Some(&mint(&key, c)), room, now);
        let c = Claims { nbf: Some(NOW + 100), ..Claims::new("r1", "alice", NOW + 600) };
        assert_eq!(at(&c, "r1", NOW), Err(AuthError::NotYetValid));
        assert!(at(&c, "r1", NOW + 100 - NBF_LEEWAY_SECS).is_ok(), "within the clock leeway");
        assert_eq!(at(&Claims::new("r1", "alice", NOW), "r1", NOW), Err(AuthError::Expired));
        let p = Claims::new("auction:*", "alice", NOW + 60);
        assert!(at(&p, "auction:lot-1", NOW).is_ok());
        assert_eq!(at(&p, "chat:1", NOW), Err(AuthError::WrongRoom));
        assert_eq!(at(&Claims::new("r1", "alice", NOW + 60), "r2", NOW), Err(AuthError::WrongRoom));
        assert_eq!(
            at(&Claims::new("a*b*", "alice", NOW + 60), "a", NOW),
            Err(AuthError::Malformed)
        );
        let info =
            serde_json::value::to_raw_value(&serde_json::json!({"name": "Alice", "role": "host"}))
                .unwrap();
        let c = Claims { info: Some(info), ..Claims::new("r1", "alice", NOW + 60) };
        assert_eq!(
            at(&c, "r1", NOW).unwrap().info.unwrap().get(),
            r#"{"name":"Alice","role":"host"}"#
        );
        for bad in [serde_json::json!([1]), serde_json::json!({"x": "y".repeat(1100)})] {
            let info = serde_json::value::to_raw_value(&bad).unwrap();
            let c = Claims { info: Some(info), ..Claims::new("r1", "alice", NOW + 60) };
            assert_eq!(at(&c, "r1", NOW), Err(AuthError::Malformed), "{bad}");
        }
    }

    #[test]
    fn a_tampered_payload_or_header_breaks_the_signature() {
        let key = Key { secret: SECRET.to_vec(), kid: None };
        let t = mint(&key, &Claims::new("r1", "alice", NOW + 60));
        let parts: Vec<&str> = t.split('.').collect();
        let other = URL_SAFE_NO_PAD.encode(r#"{"room":"r1","sub":"admin","exp":1764460060}"#);
        let swapped = format!("{}.{other}.{}", parts[0], parts[2]);
        assert_eq!(check(&keys(), Some(&swapped), "r1", NOW), Err(AuthError::BadSignature));
        let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256"}"#);
        let swapped = format!("{header}.{}.{}", parts[1], parts[2]);
        assert_eq!(check(&keys(), Some(&swapped), "r1", NOW), Err(AuthError::BadSignature));
        assert_eq!(check(&keys(), Some("a.b.c.d"), "r1", NOW), Err(AuthError::Malformed));
    }

    const PAYLOAD: &str = r#"{"room":"r1","kind":"rooms","sub":"alice","exp":1764460060}"#;

    /// RFC 7515 §4.1.11: a `crit` lists extensions the recipient must
    /// understand or refuse the token; this verifier understands none. An
    /// unencoded payload (`b64`, RFC 7797) is only meaningful under `crit`.
    #[test]
    fn critical_extensions_are_refused() {
        for header in [
            r#"{"alg":"HS256","crit":["exp"]}"#,
            r#"{"alg":"HS256","crit":["b64"],"b64":false}"#,
            r#"{"alg":"HS256","crit":[]}"#,
            r#"{"alg":"HS256","crit":null}"#,
            r#"{"alg":"HS256","crit":"x","x":1}"#,
            r#"{"alg":"HS256","b64":true}"#,
            r#"{"alg":"HS256","b64":false}"#,
        ] {
            let t = forged(header, PAYLOAD, SECRET);
            assert_eq!(check(&keys(), Some(&t), "r1", NOW), Err(AuthError::Critical), "{header}");
        }
        assert_eq!(AuthError::Critical.code(), "token_crit");
    }

    #[test]
    fn a_header_is_one_json_object_with_each_parameter_once() {
        for header in [
            r#"["HS256"]"#,
            r#""HS256""#,
            r#"{"alg":"HS256","alg":"HS256"}"#,
            r#"{"alg":"none","alg":"HS256"}"#,
            r#"{"alg":"HS256","kid":null}"#,
            r#"{"alg":"HS256","kid":7}"#,
        ] {
            let t = forged(header, PAYLOAD, SECRET);
            assert_eq!(check(&keys(), Some(&t), "r1", NOW), Err(AuthError::Malformed), "{header}");
        }
    }

    /// An optional claim that is there must hold a value of its type: other
    /// verifiers refuse `"nbf": null` or a numeric `jti`.
    #[test]
    fn optional_claims_that_are_given_must_be_well_typed() {
        for payload in [
            r#"{"room":"r1","sub":"alice","exp":1764460060,"nbf":null}"#,
            r#"{"room":"r1","sub":"alice","exp":1764460060,"iat":null}"#,
            r#"{"room":"r1","sub":"alice","exp":1764460060,"iat":"now"}"#,
            r#"{"room":"r1","sub":"alice","exp":1764460060,"jti":5}"#,
            r#"{"room":"r1","sub":"alice","exp":1764460060,"kind":5}"#,
            r#"{"room":"r1","sub":"alice","exp":1764460060,"kind":"a/b"}"#,
            r#"{"room":"r1","sub":"alice","exp":1764460060,"aud":5}"#,
        ] {
            let t = forged(r#"{"alg":"HS256"}"#, payload, SECRET);
            assert_eq!(check(&keys(), Some(&t), "r1", NOW), Err(AuthError::Malformed), "{payload}");
        }
        let t = forged(
            r#"{"alg":"HS256"}"#,
            r#"{"room":"r1","sub":"alice","exp":1764460060,"jti":"t-1"}"#,
            SECRET,
        );
        assert_eq!(check(&keys(), Some(&t), "r1", NOW).unwrap().jti.as_deref(), Some("t-1"));
    }

    #[test]
    fn a_token_issued_in_the_future_is_not_valid_yet() {
        let key = Key::new(SECRET);
        let c = Claims { iat: Some(NOW + NBF_LEEWAY_SECS + 1), ..Claims::new("r1", "a", NOW + 60) };
        assert_eq!(check(&keys(), Some(&mint(&key, &c)), "r1", NOW), Err(AuthError::NotYetValid));
        let c = Claims { iat: Some(NOW + NBF_LEEWAY_SECS), ..c };
        assert!(check(&keys(), Some(&mint(&key, &c)), "r1", NOW).is_ok(), "within the leeway");
    }

    /// RFC 7519 §4.1.3: a recipient that does not identify itself with a
    /// value of `aud` must refuse the token.
    #[test]
    fn an_audience_must_be_this_deployments() {
        let key = Key::new(SECRET);
        let with = |aud: Option<Names>| {
            let c = Claims { aud, ..Claims::new("r1", "alice", NOW + 60).with_kind("rooms") };
            mint(&key, &c)
        };
        let plain = Verifier::new(keys());
        let mine = Verifier { audience: Some("rooms.example.com".into()), ..plain.clone() };
        let at = Place { kind: "rooms", room: "r1" };
        let other = with(Some("api.example.com".into()));
        assert_eq!(plain.verify(Some(&other), at, NOW), Err(AuthError::Audience));
        assert_eq!(mine.verify(Some(&other), at, NOW), Err(AuthError::Audience));
        let ours = with(Some(vec!["api.example.com", "rooms.example.com"].into()));
        assert_eq!(plain.verify(Some(&ours), at, NOW), Err(AuthError::Audience));
        assert!(mine.verify(Some(&ours), at, NOW).is_ok());
        // No audience, or an empty one, is no audience claim: fine without one configured,
        // refused with one (a deployment that names its audience takes only tokens meant for it).
        assert!(plain.verify(Some(&with(None)), at, NOW).is_ok());
        assert!(plain.verify(Some(&with(Some(Names::Many(vec![])))), at, NOW).is_ok());
        assert_eq!(mine.verify(Some(&with(None)), at, NOW), Err(AuthError::Audience));
        assert!(mine.verify(Some(&with(Some("rooms.example.com".into()))), at, NOW).is_ok());
    }

    /// A token opens the kinds of room it names, and no other; one without
    /// a `kind` opens none unless the deployment is in the transition.
    #[test]
    fn a_token_opens_only_the_kinds_it_names() {
        let key = Key::new(SECRET);
        let strict = Verifier::new(keys());
        let at = |kind| Place { kind, room: "r1" };
        let chat = mint(&key, &Claims::new("r1", "alice", NOW + 60).with_kind("chat"));
        assert!(strict.verify(Some(&chat), at("chat"), NOW).is_ok());
        assert_eq!(strict.verify(Some(&chat), at("auction"), NOW), Err(AuthError::WrongKind));
        assert_eq!(AuthError::WrongKind.status(), 403);
        let two =
            mint(&key, &Claims::new("r1", "alice", NOW + 60).with_kind(vec!["chat", "auction"]));
        assert!(strict.verify(Some(&two), at("auction"), NOW).is_ok());
        assert_eq!(strict.verify(Some(&two), at("rooms"), NOW), Err(AuthError::WrongKind));
        let any = mint(&key, &Claims::new("r1", "alice", NOW + 60).with_kind("*"));
        assert!(strict.verify(Some(&any), at("rooms"), NOW).is_ok());
        let none = mint(&key, &Claims::new("r1", "alice", NOW + 60));
        assert_eq!(strict.verify(Some(&none), at("rooms"), NOW), Err(AuthError::WrongKind));
        let transition = Verifier { kindless: true, ..strict.clone() };
        assert!(transition.verify(Some(&none), at("rooms"), NOW).is_ok());
        assert_eq!(transition.verify(Some(&chat), at("auction"), NOW), Err(AuthError::WrongKind));
        let empty = mint(&key, &Claims::new("r1", "alice", NOW + 60).with_kind(Vec::<&str>::new()));
        assert_eq!(transition.verify(Some(&empty), at("rooms"), NOW), Err(AuthError::WrongKind));
    }
}
