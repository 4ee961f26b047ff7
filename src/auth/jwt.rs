//! HS256 JSON Web Tokens: `header.payload.signature`, each part base64url
//! without padding, the signature the HMAC-SHA256 of `header.payload`.
//!
//! What is refused and why: an `alg` other than `HS256` (`none` and the
//! asymmetric ones included: this deployment holds shared secrets only), a
//! `typ` other than `JWT`, a `kid` no secret has, a signature that no live
//! secret makes (compared in constant time, before the payload is read), and
//! an `nbf` still ahead.

use serde::Deserialize;

use super::{is_base64url, mac, signed_claims, AuthError, Claims, Key, Keys, NBF_LEEWAY_SECS};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::Mac;

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    typ: Option<String>,
    #[serde(default)]
    kid: Option<String>,
}

/// Checks a three-part token's header and signature, then decodes its
/// claims (their `exp` and `room` are checked by [`super::verify`]).
pub fn verify(keys: &Keys, token: &str, now_secs: u64) -> Result<Claims, AuthError> {
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
    let header: Header = serde_json::from_slice(&header).map_err(|_| AuthError::Malformed)?;
    if header.alg != "HS256" {
        return Err(AuthError::Algorithm);
    }
    if ![p64, s64].iter().all(|p| is_base64url(p)) {
        return Err(AuthError::Malformed);
    }
    if header.typ.as_deref().is_some_and(|t| !t.eq_ignore_ascii_case("JWT")) {
        return Err(AuthError::Malformed);
    }
    let candidates = keys.for_kid(header.kid.as_deref()).ok_or(AuthError::UnknownKid)?;
    let signed = &token[..h64.len() + 1 + p64.len()];
    let claims = signed_claims(candidates, signed, s64, p64)?;
    if claims.nbf.is_some_and(|nbf| nbf > now_secs + NBF_LEEWAY_SECS) {
        return Err(AuthError::NotYetValid);
    }
    Ok(claims)
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
    use crate::auth::{verify as check, Keys};

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
            eyJyb29tIjoicjEiLCJzdWIiOiJhbGljZSIsImV4cCI6MTc2NDQ2MDA2MCwiaWF0IjoxNzY0NDYwMDAwfQ.\
            7BsoNJvibL0zW3OBdUB9OCmENIcQnlDwouoTd3rBuFQ";
        let claims =
            Claims { iat: Some(1_764_460_000), ..Claims::new("r1", "alice", 1_764_460_060) };
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
}
