//! Service-auth JWTs: what a caller sends as `Authorization: Bearer` to
//! another atproto service, and the receiver's checks.
//!
//! A token is `{typ: "JWT", alg: ES256K|ES256}` . `{iss, aud, lxm, exp, iat,
//! jti}`, signed with the issuer's `#atproto` key: 64-byte `r||s` low-S
//! ECDSA over SHA-256 of `header.payload`, base64url without padding.
//!
//! Hand-written (about 150 lines over [`crate::keys`]) because the usual
//! crate, jsonwebtoken, has no ES256K, and the receiver's checks are
//! atproto's, not generic JWT validation.
//!
//! # The receiver's checks (MARKET.md section 4)
//! [`verify`]: the signature against the key the caller resolved for `iss`,
//! `lxm` equal to the procedure called, `exp` in the future, `aud` one of
//! [`Audience::accepted`]. [`check_issuer_is_author`] then compares `iss` with
//! the authority of the record the call refers to (403, not 401).

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::keys::{Algorithm, PublicKey, SigningKey};
use crate::{Error, Result, Secret};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The lifetime the reference gives its tokens (60 s).
pub const DEFAULT_TTL_SECONDS: u64 = 60;

/// The claims of a service-auth JWT.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The caller's DID.
    pub iss: String,
    /// The receiver: `did:web:<host[:port]>`, a DID, or either with `#serviceId`.
    pub aud: String,
    /// The procedure NSID the token is good for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lxm: Option<String>,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    /// Issue time, seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    /// A unique id (replay protection is the receiver's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    alg: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    typ: Option<String>,
}

/// The system clock in seconds since the epoch: the `now` of [`issue`] and
/// [`verify`] for callers that do not inject time (tests pass their own).
#[must_use]
pub fn unix_seconds_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Issues a token for `lxm` at `aud`, valid `ttl_seconds` from `now`.
///
/// # Errors
/// Never in practice; [`Error::Encode`] if the claims cannot be serialized.
pub fn issue(
    key: &SigningKey,
    iss: &str,
    aud: &str,
    lxm: &str,
    now: u64,
    ttl_seconds: u64,
) -> Result<Secret<String>> {
    let claims = Claims {
        iss: iss.to_owned(),
        aud: aud.to_owned(),
        lxm: Some(lxm.to_owned()),
        exp: now + ttl_seconds,
        iat: Some(now),
        jti: Some(hex::encode(rand::random::<[u8; 16]>())),
    };
    sign_claims(key, &claims)
}

/// Signs arbitrary claims (tests and fakes use it to mint bad tokens).
///
/// # Errors
/// [`Error::Encode`] if the claims cannot be serialized.
pub fn sign_claims(key: &SigningKey, claims: &Claims) -> Result<Secret<String>> {
    let header = Header {
        alg: key.algorithm().jwt_alg().to_owned(),
        typ: Some("JWT".to_owned()),
    };
    let header = serde_json::to_vec(&header).map_err(|e| Error::Encode(e.to_string()))?;
    let claims = serde_json::to_vec(claims).map_err(|e| Error::Encode(e.to_string()))?;
    let signing_input = format!("{}.{}", B64.encode(header), B64.encode(claims));
    let signature = key.sign(signing_input.as_bytes());
    Ok(Secret::new(format!(
        "{signing_input}.{}",
        B64.encode(signature)
    )))
}

/// A token split and decoded, not yet verified: read `iss` to find the key.
#[derive(Debug, Clone)]
pub struct Unverified {
    algorithm: Algorithm,
    signing_input: String,
    signature: Vec<u8>,
    /// The claims as sent (not yet trusted).
    pub claims: Claims,
}

/// Splits and decodes a token without checking anything but its shape.
///
/// # Errors
/// [`Error::Unauthorized`] for a malformed token, an unknown `alg`, or a
/// `typ` that marks another kind of token (access, refresh, DPoP).
pub fn decode(token: &str) -> Result<Unverified> {
    let unauthorized = |why: &str| Error::Unauthorized(why.to_owned());
    let mut parts = token.split('.');
    let (Some(header_part), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(unauthorized("not a jwt"));
    };
    let header: Header = B64
        .decode(header_part)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| unauthorized("jwt header is not base64url json"))?;
    let algorithm = Algorithm::from_jwt_alg(&header.alg)
        .ok_or_else(|| unauthorized("jwt alg is neither ES256K nor ES256"))?;
    if let Some(typ) = header.typ.as_deref()
        && matches!(typ, "at+jwt" | "refresh+jwt" | "dpop+jwt")
    {
        return Err(unauthorized("jwt is not a service-auth token"));
    }
    let claims: Claims = B64
        .decode(payload)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or_else(|| unauthorized("jwt payload lacks iss, aud or exp"))?;
    let signature = B64
        .decode(signature)
        .map_err(|_| unauthorized("jwt signature is not base64url"))?;
    Ok(Unverified {
        algorithm,
        signing_input: format!("{header_part}.{payload}"),
        signature,
        claims,
    })
}

impl Unverified {
    /// The curve named by the header.
    #[must_use]
    pub const fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

/// Who a receiver is, for the `aud` check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audience {
    /// The host (with its port, if any) callers reach us at, e.g. `bidder.example:8443`.
    pub host: String,
    /// Our own DID, when we have one.
    pub did: Option<String>,
    /// The service id callers name, without `#` (e.g. `pdr_temp_market`).
    pub service_id: Option<String>,
}

impl Audience {
    /// Every `aud` this receiver accepts: `did:web:<host>` (the port raw or
    /// as `%3A`), the same with `#serviceId`, our DID, and our DID with
    /// `#serviceId`.
    #[must_use]
    pub fn accepted(&self) -> Vec<String> {
        let mut bases = vec![format!("did:web:{}", self.host)];
        if self.host.contains(':') {
            bases.push(format!("did:web:{}", self.host.replace(':', "%3A")));
        }
        bases.extend(self.did.clone());
        let mut all = bases.clone();
        if let Some(id) = &self.service_id {
            all.extend(bases.iter().map(|base| format!("{base}#{id}")));
        }
        all
    }
}

/// The `aud` a caller sends to a service at `url`: `did:web:` + its host,
/// with the port raw when the URL has one (`did:web:host:8443`), as the
/// reference market does.
///
/// Bluesky's PDS refuses to mint a token for that form (a raw `:port` is a
/// did:web path, which atproto forbids), and for any did:web with a port but
/// `localhost`'s ([`did_web_for_url`]). With such a PDS, name the receiver by
/// its DID (`did:plc:...#pdr_temp_market`), which the reference's receivers
/// accept too. Our [`Audience::accepted`] takes every form.
///
/// # Errors
/// [`Error::Invalid`] when the URL has no host.
pub fn audience_for_url(url: &str) -> Result<String> {
    let (host, port) = host_and_port(url)?;
    Ok(match port {
        Some(port) => format!("did:web:{host}:{port}"),
        None => format!("did:web:{host}"),
    })
}

/// The did:web of a service at `url` as the did:web method spells it (the
/// port percent-encoded, `did:web:host%3A8443`). Bluesky's PDS accepts it as
/// `aud` only without a port or for `localhost`.
///
/// # Errors
/// [`Error::Invalid`] when the URL has no host.
pub fn did_web_for_url(url: &str) -> Result<String> {
    let (host, port) = host_and_port(url)?;
    Ok(match port {
        Some(port) => format!("did:web:{host}%3A{port}"),
        None => format!("did:web:{host}"),
    })
}

fn host_and_port(url: &str) -> Result<(String, Option<u16>)> {
    let parsed = reqwest::Url::parse(url).map_err(|e| Error::invalid("url", e))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| Error::invalid("url", "no host"))?;
    Ok((host.to_owned(), parsed.port()))
}

/// Verifies a decoded token with the issuer's key for a call of `lxm` at
/// `now` (seconds since the epoch).
///
/// # Errors
/// [`Error::Unauthorized`] naming the first check that failed: key curve,
/// signature, lxm, expiry, audience.
pub fn verify(
    token: &Unverified,
    issuer_key: &PublicKey,
    lxm: &str,
    audience: &Audience,
    now: u64,
) -> Result<Claims> {
    if issuer_key.algorithm() != token.algorithm {
        return Err(Error::Unauthorized(
            "jwt alg does not match the issuer's key".to_owned(),
        ));
    }
    issuer_key
        .verify(token.signing_input.as_bytes(), &token.signature)
        .map_err(|_| {
            Error::Unauthorized("jwt signature does not verify with the issuer's key".to_owned())
        })?;
    let claims = &token.claims;
    if claims.lxm.as_deref() != Some(lxm) {
        return Err(Error::Unauthorized(format!(
            "jwt lxm {:?} is not {lxm}",
            claims.lxm
        )));
    }
    if claims.exp <= now {
        return Err(Error::Unauthorized("jwt expired".to_owned()));
    }
    if !audience.accepted().contains(&claims.aud) {
        return Err(Error::Unauthorized(format!(
            "jwt aud {} is not this service",
            claims.aud
        )));
    }
    Ok(claims.clone())
}

/// The 403 check: the token's issuer must be the authority (DID) of the
/// record the call refers to (`at://<did>/...`).
///
/// # Errors
/// [`Error::Forbidden`] when they differ; [`Error::Invalid`] for a bad URI.
pub fn check_issuer_is_author(claims: &Claims, record_uri: &str) -> Result<()> {
    let uri: crate::AtUri = record_uri.parse()?;
    if uri.did == claims.iss {
        Ok(())
    } else {
        Err(Error::Forbidden(format!(
            "jwt issuer {} is not the author of {record_uri}",
            claims.iss
        )))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;

    const LXM: &str = "com.publicdomainrelay.temp.market.submitRfp";
    const NOW: u64 = 1_783_489_824;

    fn audience() -> Audience {
        Audience {
            host: "bidder.example:8443".to_owned(),
            did: Some("did:plc:bidder".to_owned()),
            service_id: Some("pdr_temp_market".to_owned()),
        }
    }

    fn token(key: &SigningKey, aud: &str, lxm: &str, now: u64) -> Unverified {
        let token = issue(key, "did:plc:requester", aud, lxm, now, DEFAULT_TTL_SECONDS).unwrap();
        decode(token.expose()).unwrap()
    }

    #[test]
    fn accepts_each_audience_form_with_the_port() {
        let key = SigningKey::generate(Algorithm::K256);
        for aud in [
            "did:web:bidder.example:8443",
            "did:web:bidder.example%3A8443",
            "did:web:bidder.example:8443#pdr_temp_market",
            "did:plc:bidder",
            "did:plc:bidder#pdr_temp_market",
        ] {
            let claims = verify(
                &token(&key, aud, LXM, NOW),
                &key.public_key(),
                LXM,
                &audience(),
                NOW + 1,
            );
            assert!(claims.is_ok(), "{aud}: {claims:?}");
        }
        assert_eq!(
            audience_for_url("https://bidder.example:8443/xrpc").unwrap(),
            "did:web:bidder.example:8443"
        );
        assert_eq!(
            audience_for_url("https://bidder.example").unwrap(),
            "did:web:bidder.example"
        );
        assert_eq!(
            did_web_for_url("https://bidder.example:8443").unwrap(),
            "did:web:bidder.example%3A8443"
        );
        assert_eq!(
            did_web_for_url("https://bidder.example").unwrap(),
            "did:web:bidder.example"
        );
    }

    #[test]
    fn rejections_name_the_failed_check() {
        let key = SigningKey::generate(Algorithm::K256);
        let aud = "did:web:bidder.example:8443";
        let cases = [
            (
                "wrong lxm",
                verify(
                    &token(&key, aud, "com.example.other", NOW),
                    &key.public_key(),
                    LXM,
                    &audience(),
                    NOW,
                ),
                "lxm",
            ),
            (
                "expired",
                verify(
                    &token(&key, aud, LXM, NOW),
                    &key.public_key(),
                    LXM,
                    &audience(),
                    NOW + DEFAULT_TTL_SECONDS,
                ),
                "expired",
            ),
            (
                "wrong aud",
                verify(
                    &token(&key, "did:web:bidder.example", LXM, NOW),
                    &key.public_key(),
                    LXM,
                    &audience(),
                    NOW,
                ),
                "aud",
            ),
            (
                "wrong key",
                verify(
                    &token(&key, aud, LXM, NOW),
                    &SigningKey::generate(Algorithm::K256).public_key(),
                    LXM,
                    &audience(),
                    NOW,
                ),
                "signature",
            ),
            (
                "other curve",
                verify(
                    &token(&key, aud, LXM, NOW),
                    &SigningKey::generate(Algorithm::P256).public_key(),
                    LXM,
                    &audience(),
                    NOW,
                ),
                "alg",
            ),
        ];
        for (name, result, needle) in cases {
            let err = result.unwrap_err();
            assert!(matches!(err, Error::Unauthorized(_)), "{name}: {err}");
            assert!(err.to_string().contains(needle), "{name}: {err}");
        }
    }

    #[test]
    fn issuer_must_be_the_record_author() {
        let claims = Claims {
            iss: "did:plc:requester".to_owned(),
            aud: "did:plc:bidder".to_owned(),
            lxm: Some(LXM.to_owned()),
            exp: NOW,
            iat: None,
            jti: None,
        };
        check_issuer_is_author(
            &claims,
            "at://did:plc:requester/com.publicdomainrelay.temp.market.rfp/3mq4ger7lvs23",
        )
        .unwrap();
        let err = check_issuer_is_author(
            &claims,
            "at://did:plc:mallory/com.publicdomainrelay.temp.market.rfp/3mq4ger7lvs23",
        )
        .unwrap_err();
        assert!(matches!(err, Error::Forbidden(_)), "{err}");
    }

    #[test]
    fn malformed_tokens_and_other_token_types_are_refused() {
        let key = SigningKey::generate(Algorithm::K256);
        assert!(decode("a.b").is_err());
        assert!(decode("a.b.c.d").is_err());
        let good = issue(&key, "did:plc:a", "did:plc:b", LXM, NOW, 60).unwrap();
        let (_, rest) = good.expose().split_once('.').unwrap();
        let access = format!(
            "{}.{rest}",
            B64.encode(br#"{"alg":"ES256K","typ":"at+jwt"}"#)
        );
        assert!(decode(&access).is_err());
        let none = format!("{}.{rest}", B64.encode(br#"{"alg":"none"}"#));
        assert!(decode(&none).is_err());
    }

    #[test]
    fn a_tampered_payload_does_not_verify() {
        let key = SigningKey::generate(Algorithm::P256);
        let good = issue(&key, "did:plc:a", "did:plc:bidder", LXM, NOW, 60).unwrap();
        let parts: Vec<&str> = good.expose().split('.').collect();
        let mut claims = decode(good.expose()).unwrap().claims;
        claims.iss = "did:plc:mallory".to_owned();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            B64.encode(serde_json::to_vec(&claims).unwrap()),
            parts[2]
        );
        let err = verify(
            &decode(&forged).unwrap(),
            &key.public_key(),
            LXM,
            &audience(),
            NOW,
        )
        .unwrap_err();
        assert!(err.to_string().contains("signature"), "{err}");
    }

    proptest! {
        #[test]
        fn issued_tokens_round_trip(p256 in any::<bool>(), iss in "did:plc:[a-z2-7]{24}", lxm in "[a-z]{1,8}\\.[a-z]{1,8}\\.[a-zA-Z]{1,12}", now in 0u64..4_000_000_000, ttl in 1u64..3600) {
            let key = SigningKey::generate(if p256 { Algorithm::P256 } else { Algorithm::K256 });
            let token = issue(&key, &iss, "did:plc:bidder", &lxm, now, ttl).unwrap();
            let decoded = decode(token.expose()).unwrap();
            prop_assert_eq!(&decoded.claims.iss, &iss);
            let claims = verify(&decoded, &key.public_key(), &lxm, &audience(), now).unwrap();
            prop_assert_eq!(claims.exp, now + ttl);
            prop_assert_eq!(claims.lxm.as_deref(), Some(lxm.as_str()));
        }
    }
}
