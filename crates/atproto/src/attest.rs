//! Inline attestation signatures (`network.attested.signature`), as the
//! market's records carry them in `signatures`.
//!
//! # The algorithm (MARKET.md section 1)
//! The attestation CID of a record for one signature entry is the CIDv1
//! (dag-cbor, sha2-256) of: the record without `signatures`, plus a `$sig`
//! field holding the entry without `cid` and `signature`, plus `repository` =
//! the DID of the repository that holds the record. The signature is ECDSA
//! (secp256k1 or P-256) over SHA-256 of the CID's binary form, 64 bytes
//! `r||s`, low-S, carried as `{"$bytes": base64}`.
//!
//! A receipt binds itself to the accept it answers the same way: its `cid`
//! field is the attestation CID of the accept with `$sig` = the receipt
//! without `cid`, `signature` and `signatures`, and `repository` = the
//! requester's DID ([`receipt_binding_cid`]).
//!
//! Written here because no crate implements this scheme (it is the
//! publicdomainrelay market's); the pieces under it (DAG-CBOR, CID, ECDSA)
//! are the crates'.

use cid::Cid;
use serde_json::{Map, Value};

use crate::data::{self, decode_base64, encode_base64};
use crate::keys::{PublicKey, SigningKey};
use crate::{Error, Result};

/// The `$type` of an inline signature entry.
pub const SIGNATURE_TYPE: &str = "network.attested.signature";

/// The attestation CID of `record` for the signature metadata `entry`
/// (`cid`, `signature` and `repository` in it are ignored), in `repository`.
///
/// # Errors
/// [`Error::Encode`] when the record is not a JSON object or cannot be
/// encoded; [`Error::Invalid`] when `entry` is not an object.
pub fn attestation_cid(record: &Value, entry: &Value, repository: &str) -> Result<Cid> {
    let Value::Object(entry) = entry else {
        return Err(Error::invalid("signature entry", "not an object"));
    };
    let mut sig = entry.clone();
    sig.remove("cid");
    sig.remove("signature");
    bind(record, sig, repository)
}

fn bind(record: &Value, mut sig: Map<String, Value>, repository: &str) -> Result<Cid> {
    let Value::Object(record) = record else {
        return Err(Error::Encode("record is not an object".to_owned()));
    };
    let mut content = record.clone();
    content.remove("signatures");
    sig.insert("repository".to_owned(), Value::from(repository));
    content.insert("$sig".to_owned(), Value::Object(sig));
    data::record_cid(&Value::Object(content))
}

/// Signs `record` (which must have its `$type`) with `key` for `repository`
/// and appends the entry to its `signatures` (created when absent).
///
/// Sign before writing: the record's own CID changes with the entry.
///
/// # Errors
/// [`Error::Encode`] when the record is not an object, has no `$type`, or
/// cannot be encoded.
pub fn sign_record(
    record: &mut Value,
    key: &SigningKey,
    repository: &str,
    issuer: Option<&str>,
) -> Result<Value> {
    if record.get("$type").and_then(Value::as_str).is_none() {
        return Err(Error::Encode("record has no $type".to_owned()));
    }
    let mut entry = Map::new();
    entry.insert("$type".to_owned(), Value::from(SIGNATURE_TYPE));
    entry.insert("key".to_owned(), Value::from(key.public_key().did_key()));
    if let Some(issuer) = issuer {
        entry.insert("issuer".to_owned(), Value::from(issuer));
    }
    let cid = bind(record, entry.clone(), repository)?;
    let signature = key.sign(&cid.to_bytes());
    entry.insert("cid".to_owned(), Value::from(cid.to_string()));
    entry.insert(
        "signature".to_owned(),
        serde_json::json!({ "$bytes": encode_base64(&signature) }),
    );
    let entry = Value::Object(entry);
    let Value::Object(fields) = record else {
        return Err(Error::Encode("record is not an object".to_owned()));
    };
    match fields
        .entry("signatures")
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        Value::Array(list) => list.push(entry.clone()),
        _ => return Err(Error::Encode("signatures is not a list".to_owned())),
    }
    Ok(entry)
}

/// One inline signature that verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedSignature {
    /// The key that signed (from the entry's did:key).
    pub key: PublicKey,
    /// The entry's `issuer`, when it has one.
    pub issuer: Option<String>,
    /// The attestation CID the signature covers.
    pub cid: Cid,
}

/// Verifies every inline signature of `record` held in `repository`.
///
/// Each entry's CID is recomputed and must equal the entry's `cid`, and the
/// signature must verify with the entry's did:key. Entries that are strong
/// references to `network.attested.proof` records are not inline and are
/// skipped (the caller fetches them if it trusts them). Which keys may sign
/// is the caller's policy: the reference binds no key to a DID by default.
///
/// # Errors
/// [`Error::BadSignature`] when there is no inline signature, or one does not
/// verify; [`Error::Encode`] when the record cannot be encoded.
pub fn verify_record(record: &Value, repository: &str) -> Result<Vec<VerifiedSignature>> {
    let entries = record
        .get("signatures")
        .and_then(Value::as_array)
        .ok_or_else(|| Error::BadSignature("record has no signatures".to_owned()))?;
    let mut verified = Vec::new();
    for entry in entries {
        if entry.get("$type").and_then(Value::as_str) != Some(SIGNATURE_TYPE) {
            continue;
        }
        verified.push(verify_entry(record, entry, repository)?);
    }
    if verified.is_empty() {
        return Err(Error::BadSignature(
            "record has no inline signature".to_owned(),
        ));
    }
    Ok(verified)
}

fn verify_entry(record: &Value, entry: &Value, repository: &str) -> Result<VerifiedSignature> {
    let field = |name: &str| {
        entry
            .get(name)
            .ok_or_else(|| Error::BadSignature(format!("signature entry has no {name}")))
    };
    let key_did = field("key")?
        .as_str()
        .ok_or_else(|| Error::BadSignature("key is not a string".to_owned()))?;
    let key = PublicKey::from_did_key(key_did)?;
    let claimed = field("cid")?
        .as_str()
        .ok_or_else(|| Error::BadSignature("cid is not a string".to_owned()))?;
    let signature = field("signature")?
        .get("$bytes")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::BadSignature("signature is not {$bytes}".to_owned()))?;
    let signature = decode_base64(signature)?;
    let cid = attestation_cid(record, entry, repository)?;
    if cid.to_string() != claimed {
        return Err(Error::BadSignature(format!(
            "cid {claimed} does not match the record (recomputed {cid}); was it changed, or signed for another repository than {repository}?"
        )));
    }
    key.verify(&cid.to_bytes(), &signature)?;
    Ok(VerifiedSignature {
        key,
        issuer: entry
            .get("issuer")
            .and_then(Value::as_str)
            .map(str::to_owned),
        cid,
    })
}

/// The CID a receipt must carry in its `cid` field to bind it to `accept`,
/// which is held in the requester's repository `requester`.
///
/// # Errors
/// [`Error::Encode`] when either record is not an object or cannot be encoded.
pub fn receipt_binding_cid(accept: &Value, receipt: &Value, requester: &str) -> Result<Cid> {
    let Value::Object(receipt) = receipt else {
        return Err(Error::Encode("receipt is not an object".to_owned()));
    };
    let mut sig = receipt.clone();
    for field in ["cid", "signature", "signatures"] {
        sig.remove(field);
    }
    bind(accept, sig, requester)
}

/// Checks that `receipt.cid` binds the receipt to `accept`.
///
/// # Errors
/// [`Error::BadSignature`] when the receipt has no `cid` or it differs.
pub fn verify_receipt_binding(accept: &Value, receipt: &Value, requester: &str) -> Result<()> {
    let claimed = receipt
        .get("cid")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::BadSignature("receipt has no cid".to_owned()))?;
    let expected = receipt_binding_cid(accept, receipt, requester)?;
    if expected.to_string() == claimed {
        Ok(())
    } else {
        Err(Error::BadSignature(format!(
            "receipt cid {claimed} does not bind our accept (expected {expected})"
        )))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::keys::Algorithm;
    use serde_json::json;

    #[test]
    fn signed_record_verifies_and_a_changed_one_does_not() {
        for algorithm in [Algorithm::K256, Algorithm::P256] {
            let key = SigningKey::generate(algorithm);
            let mut record = json!({"$type": "com.example.rfp", "n": 1});
            sign_record(&mut record, &key, "did:plc:a", Some("did:plc:a")).unwrap();
            let verified = verify_record(&record, "did:plc:a").unwrap();
            assert_eq!(verified.len(), 1);
            assert_eq!(verified[0].key, key.public_key());
            assert!(
                verify_record(&record, "did:plc:b").is_err(),
                "repository is bound"
            );
            record["n"] = json!(2);
            assert!(
                verify_record(&record, "did:plc:a").is_err(),
                "content is bound"
            );
        }
    }

    #[test]
    fn unsigned_or_untyped_records_are_refused() {
        let key = SigningKey::generate(Algorithm::K256);
        assert!(sign_record(&mut json!({"n": 1}), &key, "did:plc:a", None).is_err());
        assert!(verify_record(&json!({"$type": "x"}), "did:plc:a").is_err());
        assert!(verify_record(&json!({"$type": "x", "signatures": []}), "did:plc:a").is_err());
    }
}
