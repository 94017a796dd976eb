//! The atproto data model: records as JSON on the wire, DAG-CBOR for hashing.
//!
//! JSON maps to IPLD as the atproto data model says: `{"$bytes": base64}` is a
//! byte string, `{"$link": cid}` a CID link, integers stay integers, and the
//! encoding (map keys sorted by length, then bytes; minimal integers) is
//! `serde_ipld_dagcbor`'s. CIDs are CIDv1, codec dag-cbor (0x71), sha2-256,
//! printed base32 (`bafyrei...`).

use base64::Engine as _;
use cid::Cid;
use ipld_core::ipld::Ipld;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// The multicodec of DAG-CBOR.
pub const DAG_CBOR: u64 = 0x71;
/// The multihash code of sha2-256.
const SHA2_256: u64 = 0x12;

/// Converts a JSON record to IPLD by the atproto data model.
///
/// # Errors
/// [`Error::Encode`] for a `$bytes` that is not base64 or a `$link` that is not
/// a CID.
pub fn to_ipld(value: &Value) -> Result<Ipld> {
    convert(value, true)
}

fn convert(value: &Value, typed: bool) -> Result<Ipld> {
    Ok(match value {
        Value::Null => Ipld::Null,
        Value::Bool(b) => Ipld::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Ipld::Integer(i.into())
            } else if let Some(u) = n.as_u64() {
                Ipld::Integer(u.into())
            } else {
                // The atproto data model has no floats, but market lexicons
                // declare `cost: number`; encode as the reference's dag-cbor
                // encoder does (a 64-bit float) rather than refuse the record.
                Ipld::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        Value::String(s) => Ipld::String(s.clone()),
        Value::Array(items) => Ipld::List(
            items
                .iter()
                .map(|item| convert(item, typed))
                .collect::<Result<_>>()?,
        ),
        Value::Object(map) => {
            if typed && map.len() == 1 {
                if let Some(Value::String(encoded)) = map.get("$bytes") {
                    return decode_base64(encoded).map(Ipld::Bytes);
                }
                if let Some(Value::String(link)) = map.get("$link") {
                    let cid = Cid::try_from(link.as_str())
                        .map_err(|e| Error::Encode(format!("$link is not a cid: {e}")))?;
                    return Ok(Ipld::Link(cid));
                }
            }
            Ipld::Map(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), convert(v, typed)?)))
                    .collect::<Result<_>>()?,
            )
        }
    })
}

/// Base64 as atproto writes it (standard alphabet, padding optional).
pub(crate) fn decode_base64(encoded: &str) -> Result<Vec<u8>> {
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(encoded.trim_end_matches('='))
        .map_err(|e| Error::Encode(format!("$bytes is not base64: {e}")))
}

/// Base64 as the reference writes `$bytes` (standard alphabet, padded).
pub(crate) fn encode_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The DAG-CBOR bytes of a JSON record.
///
/// # Errors
/// [`Error::Encode`] as [`to_ipld`], or when the encoder fails.
pub fn encode(value: &Value) -> Result<Vec<u8>> {
    encode_ipld(&to_ipld(value)?)
}

fn encode_ipld(ipld: &Ipld) -> Result<Vec<u8>> {
    serde_ipld_dagcbor::to_vec(ipld).map_err(|e| Error::Encode(e.to_string()))
}

/// The CIDv1 (dag-cbor, sha2-256) of some DAG-CBOR bytes.
#[must_use]
pub fn cid_of_dag_cbor(bytes: &[u8]) -> Cid {
    let digest = Sha256::digest(bytes);
    // A 32-byte digest always fits the 64-byte multihash.
    let hash = cid::multihash::Multihash::<64>::wrap(SHA2_256, &digest)
        .unwrap_or_else(|_| unreachable_digest());
    Cid::new_v1(DAG_CBOR, hash)
}

#[cold]
fn unreachable_digest() -> cid::multihash::Multihash<64> {
    // A sha256 digest (32 bytes) is below the 64-byte bound; this is never
    // called. Returning the default keeps library code free of `expect`.
    cid::multihash::Multihash::default()
}

/// The CID of a record as a standard PDS computes it (`$bytes` as bytes,
/// `$link` as links).
///
/// # Errors
/// [`Error::Encode`] as [`encode`].
pub fn record_cid(value: &Value) -> Result<Cid> {
    Ok(cid_of_dag_cbor(&encode(value)?))
}

/// The CID of a record with `$bytes`/`$link` objects hashed as plain maps,
/// as the reference market's PDS (hono-pds) computes it. Only for reading the
/// reference's published CIDs; never write with it.
///
/// # Errors
/// [`Error::Encode`] when the encoder fails.
pub fn record_cid_plain_json(value: &Value) -> Result<Cid> {
    Ok(cid_of_dag_cbor(&encode_ipld(&convert(value, false)?)?))
}

/// Parses a CID string.
///
/// # Errors
/// [`Error::Invalid`] when it is not a CID.
pub fn parse_cid(value: &str) -> Result<Cid> {
    Cid::try_from(value).map_err(|e| Error::invalid("cid", e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn keys_sort_by_length_then_bytes() {
        let bytes = encode(&json!({"bb": 1, "a": 2, "c": 3, "aaa": 4})).unwrap();
        // map(4), then "a", "c", "bb", "aaa".
        let keys: Vec<&[u8]> = vec![b"a", b"c", b"bb", b"aaa"];
        let mut at = 1;
        for key in keys {
            assert_eq!(bytes[at] as usize, 0x60 + key.len());
            assert_eq!(&bytes[at + 1..at + 1 + key.len()], key);
            at += 1 + key.len() + 1;
        }
    }

    #[test]
    fn bytes_and_links_are_typed() {
        let link = "bafyreiehbqq5z3qm2v3lh5xjpmhp2nanomtnifqip6qrsdkstzwpigyx4q";
        let ipld = to_ipld(&json!({"b": {"$bytes": "AQID"}, "l": {"$link": link}})).unwrap();
        let Ipld::Map(map) = ipld else { panic!() };
        assert_eq!(map["b"], Ipld::Bytes(vec![1, 2, 3]));
        assert_eq!(map["l"], Ipld::Link(parse_cid(link).unwrap()));
        assert!(to_ipld(&json!({"b": {"$bytes": "***"}})).is_err());
    }

    #[test]
    fn cid_prints_as_base32_cidv1_dag_cbor() {
        let cid = record_cid(&json!({"$type": "x"})).unwrap();
        assert!(cid.to_string().starts_with("bafyrei"), "{cid}");
        assert_eq!(parse_cid(&cid.to_string()).unwrap(), cid);
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z$]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-zA-Z]{0,5}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever the keys, the encoder writes them shortest first, then
        /// bytewise (serde_json's map iterates them bytewise only).
        #[test]
        fn map_keys_are_in_dag_cbor_order(keys in proptest::collection::btree_set("[a-zA-Z$]{0,6}", 0..20)) {
            let value = Value::Object(keys.iter().map(|k| (k.clone(), Value::Null)).collect());
            let bytes = encode(&value).unwrap();
            prop_assert_eq!(bytes[0] as usize, 0xa0 + keys.len());
            let mut at = 1;
            let mut written = Vec::new();
            while at < bytes.len() {
                let len = bytes[at] as usize - 0x60;
                written.push(bytes[at + 1..at + 1 + len].to_vec());
                prop_assert_eq!(bytes[at + 1 + len], 0xf6);
                at += len + 2;
            }
            let mut expected: Vec<Vec<u8>> = keys.iter().map(|k| k.as_bytes().to_vec()).collect();
            expected.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
            prop_assert_eq!(written, expected);
        }

        /// What is encoded decodes back to the same value.
        #[test]
        fn encoding_round_trips(value in arb_json()) {
            let bytes = encode(&value).unwrap();
            let back: Ipld = serde_ipld_dagcbor::from_slice(&bytes).unwrap();
            prop_assert_eq!(back, to_ipld(&value).unwrap());
        }
    }
}
