//! The token format before JWTs (PROTOCOL.md "Auth", version 1):
//! `base64url(payload) "." base64url(HMAC-SHA256(secret, base64url(payload)))`,
//! payload `{"room","sub","exp"}`. Still accepted, with either live secret,
//! while deployments move to JWTs (README, "Tokens"); a JWT is what
//! [`super::mint`] makes. The MAC covers the base64url text of the payload
//! exactly as sent, so a token has one spelling.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::Mac;

use super::{is_base64url, mac, signed_claims, AuthError, Claims, Keys};

/// Checks a two-part token's signature with each live secret (compared in
/// constant time, before the payload is decoded), then decodes its claims.
pub fn verify(keys: &Keys, token: &str) -> Result<Claims, AuthError> {
    let (payload_b64, sig_b64) = token.split_once('.').ok_or(AuthError::Malformed)?;
    if !is_base64url(payload_b64) || !is_base64url(sig_b64) {
        return Err(AuthError::Malformed);
    }
    let secrets = std::iter::once(&keys.current).chain(keys.previous.as_ref());
    let claims = signed_claims(secrets, payload_b64, sig_b64, payload_b64)?;
    // This format never had these: a token that carries them is a JWT's
    // claims put in the wrong wrapper.
    if claims.nbf.is_some() || claims.info.is_some() {
        return Err(AuthError::Malformed);
    }
    Ok(claims)
}

/// Signs `claims` in this format (tests of the transition; the
/// `scripts/mint-token --legacy` twin). The payload is
/// `{"room":…,"sub":…,"exp":…}` in that order.
pub fn mint(secret: &[u8], claims: &Claims) -> String {
    let json = serde_json::to_vec(claims).expect("claims serialize to JSON");
    let payload = URL_SAFE_NO_PAD.encode(json);
    let tag = mac(secret, &payload).finalize().into_bytes();
    format!("{payload}.{}", URL_SAFE_NO_PAD.encode(tag))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{
        admin_key_matches, valid_user, AuthError, Claims, Keys, Verifier, MAX_TOKEN_LEN,
    };

    const SECRET: &[u8] = b"homeroom-test-secret";

    /// The deployment's checks for `room` of the kind `rooms`, taking tokens
    /// without a `kind` (this format's tokens are minted without one here)
    /// and of any lifetime (the known answers expire in 2033).
    fn verify(
        secret: &[u8],
        token: Option<&str>,
        room: &str,
        now: u64,
    ) -> Result<Claims, AuthError> {
        let verifier =
            Verifier { kindless: true, max_ttl_secs: u64::MAX, ..Verifier::new(Keys::one(secret)) };
        verifier.verify(token, crate::auth::Place { kind: "rooms", room }, now)
    }

    fn mint(secret: &[u8], claims: &Claims) -> String {
        super::mint(secret, claims)
    }
    const NOW: u64 = 1_764_460_000;

    fn claims(room: &str, sub: &str, exp: u64) -> Claims {
        Claims::new(room, sub, exp)
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
        ] {
            assert_eq!(verify(SECRET, Some(&bad), "r1", NOW), Err(AuthError::Malformed), "{bad}");
        }
        // Three parts are a JWT: this one's signature is no secret's.
        let jwt = "eyJhbGciOiJIUzI1NiJ9.e30.c2lnbmF0dXJl";
        assert_eq!(verify(SECRET, Some(jwt), "r1", NOW), Err(AuthError::BadSignature));
    }

    #[test]
    fn too_long_is_malformed_before_anything_else() {
        // Correctly signed, but its sub makes it longer than the bound.
        let long = token("r1", &"a".repeat(3100), NOW + 60);
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
        let t = signed(&format!(r#"{{"room":"r1","sub":"alice","exp":{exp},"iss":1,"x":{{}}}}"#));
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
