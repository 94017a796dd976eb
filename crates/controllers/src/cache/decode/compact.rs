//! What the caches keep of an object beyond dropping who wrote which field:
//! the parts no reconcile reads are dropped as the object is decoded, since
//! each cached object lives as long as the manager (plan 0016 C2).
//!
//! # Guarantees
//! - A join Secret (type [`JOIN_SECRET_TYPE`]) is cached with its token and
//!   the SHA-256 of all its data under [`DATA_DIGEST_KEY`], and nothing else
//!   of its data (the Cluster's CA and URL, the node name): the NodeClaim
//!   controller re-applies the token and compares that digest with the data
//!   it would write, so a Secret whose data anyone changed is still rewritten.
//! - [`data_digest_of`] gives the same digest for a Secret cached this way
//!   and for the same Secret whole.
//! - Every other object, and a join Secret whose data does not decode (the
//!   decoder reports it), is left as it came.

use std::any::Any;
use std::collections::BTreeMap;

use api::names::JOIN_SECRET_TYPE;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use sha2::{Digest, Sha256};

use crate::nodeclaim::secrets::TOKEN_KEY;

/// The key under which a cached join Secret keeps the digest of its data. A
/// `/` is not allowed in a Secret's keys, so no stored Secret has this one.
pub const DATA_DIGEST_KEY: &str = "socialweb.computer/data-sha256";

/// Drops what no reconcile reads from a freshly decoded `object`.
pub(super) fn compact<K: Any>(object: &mut K) {
    let object: &mut dyn Any = object;
    if let Some(secret) = object.downcast_mut::<Secret>() {
        compact_join_secret(secret);
    }
}

/// A join Secret's data reduced to its token and the digest of the whole.
fn compact_join_secret(secret: &mut Secret) {
    if secret.type_.as_deref() != Some(JOIN_SECRET_TYPE) {
        return;
    }
    let Some(data) = secret.data.as_mut() else {
        return;
    };
    if data.contains_key(DATA_DIGEST_KEY) {
        return;
    }
    let digest = data_digest(data);
    data.retain(|key, _| key == TOKEN_KEY);
    data.insert(DATA_DIGEST_KEY.to_owned(), digest);
}

/// The SHA-256 of `data`: each key and value in key order, each prefixed
/// with its length so that no two different maps hash alike.
#[must_use]
pub fn data_digest(data: &BTreeMap<String, ByteString>) -> ByteString {
    let mut hash = Sha256::new();
    for (key, value) in data {
        hash.update((key.len() as u64).to_le_bytes());
        hash.update(key.as_bytes());
        hash.update((value.0.len() as u64).to_le_bytes());
        hash.update(&value.0);
    }
    ByteString(hash.finalize().to_vec())
}

/// The digest of `secret`'s data, whether the cache reduced it or not.
#[must_use]
pub fn data_digest_of(secret: &Secret) -> ByteString {
    let empty = BTreeMap::new();
    let data = secret.data.as_ref().unwrap_or(&empty);
    match data.get(DATA_DIGEST_KEY) {
        Some(digest) => digest.clone(),
        None => data_digest(data),
    }
}

#[cfg(test)]
mod tests;
