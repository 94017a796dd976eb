//! Signing and verifying keys: secp256k1 (k256) and P-256, ECDSA over
//! SHA-256 with 64-byte `r||s` low-S signatures, and their `did:key` and
//! `publicKeyMultibase` forms.
//!
//! The curve arithmetic is RustCrypto's (`k256`, `p256`); only the atproto
//! conventions around it are here: the multicodec prefixes of did:key, the
//! low-S rule (k256 signs low-S already, p256 does not, and atproto verifiers
//! reject high-S from both, so a signature is normalized on signing and
//! checked on verifying).

use std::fmt;

use k256::ecdsa::signature::{Signer, Verifier};

use crate::{Error, Result, Secret};

/// The multicodec varint of a compressed secp256k1 public key (0xe7).
const SECP256K1_PUB: [u8; 2] = [0xe7, 0x01];
/// The multicodec varint of a compressed P-256 public key (0x1200).
const P256_PUB: [u8; 2] = [0x80, 0x24];

/// The two curves atproto signs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// secp256k1, JWT `alg` ES256K.
    K256,
    /// NIST P-256, JWT `alg` ES256.
    P256,
}

impl Algorithm {
    /// The JWT `alg` header value.
    #[must_use]
    pub const fn jwt_alg(self) -> &'static str {
        match self {
            Self::K256 => "ES256K",
            Self::P256 => "ES256",
        }
    }

    /// The algorithm of a JWT `alg` header value.
    #[must_use]
    pub fn from_jwt_alg(alg: &str) -> Option<Self> {
        match alg {
            "ES256K" => Some(Self::K256),
            "ES256" => Some(Self::P256),
            _ => None,
        }
    }
}

/// A private signing key. `Debug` is redacted; the bytes leave only through
/// [`SigningKey::to_hex`], as a [`Secret`].
#[derive(Clone)]
pub enum SigningKey {
    /// A secp256k1 key.
    K256(k256::ecdsa::SigningKey),
    /// A P-256 key.
    P256(p256::ecdsa::SigningKey),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({:?}, <redacted>)", self.algorithm())
    }
}

impl SigningKey {
    /// A new random key.
    #[must_use]
    pub fn generate(algorithm: Algorithm) -> Self {
        loop {
            // rand 0.9's generator, not rand_core 0.6's OsRng that k256 0.13
            // speaks: one random source for the workspace. A 32-byte string
            // is a valid scalar except with probability ~2^-128; retry then.
            let bytes: [u8; 32] = rand::random();
            if let Ok(key) = Self::from_bytes(algorithm, &bytes) {
                return key;
            }
        }
    }

    /// A key from its 32 private bytes.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the bytes are not a valid scalar.
    pub fn from_bytes(algorithm: Algorithm, bytes: &[u8]) -> Result<Self> {
        match algorithm {
            Algorithm::K256 => k256::ecdsa::SigningKey::from_slice(bytes)
                .map(Self::K256)
                .map_err(|_| Error::invalid("signing key", "not a secp256k1 private key")),
            Algorithm::P256 => p256::ecdsa::SigningKey::from_slice(bytes)
                .map(Self::P256)
                .map_err(|_| Error::invalid("signing key", "not a p-256 private key")),
        }
    }

    /// A key from 64 hex characters (the PDS's `*_PRIVATE_KEY_HEX` form).
    ///
    /// # Errors
    /// [`Error::Invalid`] when it is not hex of a valid scalar (the message
    /// never contains the input).
    pub fn from_hex(algorithm: Algorithm, hex_key: &Secret<String>) -> Result<Self> {
        let bytes = hex::decode(hex_key.expose().trim())
            .map_err(|_| Error::invalid("signing key", "not hex"))?;
        Self::from_bytes(algorithm, &bytes)
    }

    /// The private key as 64 hex characters.
    #[must_use]
    pub fn to_hex(&self) -> Secret<String> {
        Secret::new(match self {
            Self::K256(key) => hex::encode(key.to_bytes()),
            Self::P256(key) => hex::encode(key.to_bytes()),
        })
    }

    /// The curve.
    #[must_use]
    pub const fn algorithm(&self) -> Algorithm {
        match self {
            Self::K256(_) => Algorithm::K256,
            Self::P256(_) => Algorithm::P256,
        }
    }

    /// The public half.
    #[must_use]
    pub fn public_key(&self) -> PublicKey {
        match self {
            Self::K256(key) => PublicKey::K256(*key.verifying_key()),
            Self::P256(key) => PublicKey::P256(*key.verifying_key()),
        }
    }

    /// ECDSA over SHA-256 of `message`: 64 bytes `r||s`, low-S.
    #[must_use]
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        match self {
            Self::K256(key) => {
                let signature: k256::ecdsa::Signature = key.sign(message);
                let signature = signature.normalize_s().unwrap_or(signature);
                signature.to_bytes().into()
            }
            Self::P256(key) => {
                let signature: p256::ecdsa::Signature = key.sign(message);
                let signature = signature.normalize_s().unwrap_or(signature);
                signature.to_bytes().into()
            }
        }
    }
}

/// A public key that verifies [`SigningKey::sign`] signatures.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PublicKey {
    /// A secp256k1 key.
    K256(k256::ecdsa::VerifyingKey),
    /// A P-256 key.
    P256(p256::ecdsa::VerifyingKey),
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.did_key())
    }
}

impl PublicKey {
    /// The curve.
    #[must_use]
    pub const fn algorithm(&self) -> Algorithm {
        match self {
            Self::K256(_) => Algorithm::K256,
            Self::P256(_) => Algorithm::P256,
        }
    }

    /// The SEC1 compressed point (33 bytes).
    #[must_use]
    pub fn compressed(&self) -> Vec<u8> {
        match self {
            Self::K256(key) => key.to_encoded_point(true).as_bytes().to_vec(),
            Self::P256(key) => key.to_encoded_point(true).as_bytes().to_vec(),
        }
    }

    /// A key from a SEC1 point (compressed or not).
    ///
    /// # Errors
    /// [`Error::Invalid`] when the bytes are not a point of the curve.
    pub fn from_sec1(algorithm: Algorithm, bytes: &[u8]) -> Result<Self> {
        match algorithm {
            Algorithm::K256 => k256::ecdsa::VerifyingKey::from_sec1_bytes(bytes)
                .map(Self::K256)
                .map_err(|_| Error::invalid("public key", "not a secp256k1 point")),
            Algorithm::P256 => p256::ecdsa::VerifyingKey::from_sec1_bytes(bytes)
                .map(Self::P256)
                .map_err(|_| Error::invalid("public key", "not a p-256 point")),
        }
    }

    /// The multibase form used by DID documents' `Multikey` entries and by
    /// did:key: `z` + base58btc(multicodec prefix + compressed point).
    #[must_use]
    pub fn multibase(&self) -> String {
        let prefix = match self {
            Self::K256(_) => SECP256K1_PUB,
            Self::P256(_) => P256_PUB,
        };
        let mut bytes = prefix.to_vec();
        bytes.extend(self.compressed());
        multibase::encode(multibase::Base::Base58Btc, bytes)
    }

    /// Parses the multibase form of [`PublicKey::multibase`].
    ///
    /// # Errors
    /// [`Error::Invalid`] for another base, an unknown multicodec or a bad point.
    pub fn from_multibase(value: &str) -> Result<Self> {
        let (base, bytes) =
            multibase::decode(value).map_err(|e| Error::invalid("multibase key", e))?;
        if base != multibase::Base::Base58Btc {
            return Err(Error::invalid("multibase key", "not base58btc"));
        }
        match bytes.get(..2) {
            Some(prefix) if prefix == SECP256K1_PUB => {
                Self::from_sec1(Algorithm::K256, &bytes[2..])
            }
            Some(prefix) if prefix == P256_PUB => Self::from_sec1(Algorithm::P256, &bytes[2..]),
            _ => Err(Error::invalid(
                "multibase key",
                "neither a secp256k1 nor a p-256 public key",
            )),
        }
    }

    /// `did:key:z...`.
    #[must_use]
    pub fn did_key(&self) -> String {
        format!("did:key:{}", self.multibase())
    }

    /// Parses a `did:key:z...`.
    ///
    /// # Errors
    /// [`Error::Invalid`] when it is not a did:key of a secp256k1 or P-256 key.
    pub fn from_did_key(did: &str) -> Result<Self> {
        let encoded = did
            .strip_prefix("did:key:")
            .ok_or_else(|| Error::invalid("did:key", "does not start with did:key:"))?;
        Self::from_multibase(encoded)
    }

    /// Verifies a 64-byte `r||s` signature over SHA-256 of `message`,
    /// rejecting high-S signatures as atproto verifiers do.
    ///
    /// # Errors
    /// [`Error::BadSignature`] when it does not verify.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> Result<()> {
        let bad = |why: &str| Error::BadSignature(why.to_owned());
        match self {
            Self::K256(key) => {
                let signature = k256::ecdsa::Signature::from_slice(signature)
                    .map_err(|_| bad("not a 64-byte r||s signature"))?;
                if signature.normalize_s().is_some() {
                    return Err(bad("high-s signature"));
                }
                key.verify(message, &signature)
                    .map_err(|_| bad("does not verify with the key"))
            }
            Self::P256(key) => {
                let signature = p256::ecdsa::Signature::from_slice(signature)
                    .map_err(|_| bad("not a 64-byte r||s signature"))?;
                if signature.normalize_s().is_some() {
                    return Err(bad("high-s signature"));
                }
                key.verify(message, &signature)
                    .map_err(|_| bad("does not verify with the key"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn did_key_round_trips_and_has_the_known_prefixes() {
        let k = SigningKey::generate(Algorithm::K256).public_key();
        assert!(k.did_key().starts_with("did:key:zQ3s"), "{}", k.did_key());
        assert_eq!(PublicKey::from_did_key(&k.did_key()).unwrap(), k);
        let p = SigningKey::generate(Algorithm::P256).public_key();
        assert!(p.did_key().starts_with("did:key:zDn"), "{}", p.did_key());
        assert_eq!(PublicKey::from_did_key(&p.did_key()).unwrap(), p);
    }

    #[test]
    fn known_did_key_from_the_test_vectors_decodes() {
        let key =
            PublicKey::from_did_key("did:key:zQ3shVccyeD7zq2BSdRqcp2pozYzsGsJmc88gAy1m8SUX93LE")
                .unwrap();
        assert_eq!(key.algorithm(), Algorithm::K256);
    }

    #[test]
    fn rejects_a_did_key_of_another_type() {
        // An ed25519 did:key (multicodec 0xed).
        let ed = "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK";
        assert!(PublicKey::from_did_key(ed).is_err());
        assert!(PublicKey::from_did_key("did:web:example.com").is_err());
    }

    #[test]
    fn high_s_is_rejected_for_both_curves() {
        for algorithm in [Algorithm::K256, Algorithm::P256] {
            let key = SigningKey::generate(algorithm);
            let signature = key.sign(b"message");
            key.public_key().verify(b"message", &signature).unwrap();
            let high = match algorithm {
                Algorithm::K256 => {
                    let s = k256::ecdsa::Signature::from_slice(&signature).unwrap();
                    let (r, s) = (s.r(), s.s());
                    k256::ecdsa::Signature::from_scalars(r, -*s)
                        .unwrap()
                        .to_bytes()
                        .to_vec()
                }
                Algorithm::P256 => {
                    let s = p256::ecdsa::Signature::from_slice(&signature).unwrap();
                    let (r, s) = (s.r(), s.s());
                    p256::ecdsa::Signature::from_scalars(r, -*s)
                        .unwrap()
                        .to_bytes()
                        .to_vec()
                }
            };
            let err = key.public_key().verify(b"message", &high).unwrap_err();
            assert!(err.to_string().contains("high-s"), "{err}");
        }
    }

    #[test]
    fn debug_of_a_signing_key_hides_it() {
        let key = SigningKey::generate(Algorithm::K256);
        let hex_key = key.to_hex();
        assert!(!format!("{key:?}").contains(hex_key.expose().as_str()));
        let again = SigningKey::from_hex(Algorithm::K256, &hex_key).unwrap();
        assert_eq!(again.public_key(), key.public_key());
    }

    proptest! {
        #[test]
        fn signatures_verify_and_fail_on_another_message(msg in proptest::collection::vec(any::<u8>(), 0..64), p256 in any::<bool>()) {
            let key = SigningKey::generate(if p256 { Algorithm::P256 } else { Algorithm::K256 });
            let signature = key.sign(&msg);
            prop_assert!(key.public_key().verify(&msg, &signature).is_ok());
            let mut other = msg.clone();
            other.push(1);
            prop_assert!(key.public_key().verify(&other, &signature).is_err());
        }
    }
}
