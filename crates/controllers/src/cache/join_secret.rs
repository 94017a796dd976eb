//! A join Secret as the shared cache keeps it: what the NodeClaim controller
//! reads of one, and nothing else (plan 0017 P3).
//!
//! The controller reads a join Secret's name, uid and version (to delete
//! it), its labels (which Infra, entry and Cluster it serves), its token (a
//! rewrite keeps it) and whether its data is what it would write. A
//! `k8s_openapi` Secret kept for that held a ~540-byte map node for its
//! labels and another for its data (the token and a digest) whatever they
//! held, a `type` string and creation time: 2.0 KiB a node at 10,000 nodes
//! (`cache_weight`). [`CachedJoinSecret`] holds the labels as a sorted vector
//! ([`StringMap`]), the token and a SHA-256 of all the data.
//!
//! # Guarantees
//! - It is a [`Resource`] of the Secret's group, version and kind, so the
//!   shared cache watches Secrets and stores these in their place.
//! - It decodes from a Secret's JSON exactly when a `Secret` does, and is
//!   then [`CachedJoinSecret::from`] that Secret.
//! - Its [`data_digest`](CachedJoinSecret::data_digest) changes with any
//!   key or value of the data, so a Secret whose CA, URL or node name
//!   anyone changed is still rewritten.
//! - Its `Debug` never shows the token.

use std::collections::BTreeMap;
use std::fmt;

use api::StringMap;
use api::names::JOIN_SECRET_TYPE;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use super::Labelled;
use super::projection::{KeptMetadata, projection_of};
use crate::nodeclaim::secrets::TOKEN_KEY;

/// A SHA-256 of a Secret's data ([`data_digest`]).
pub type DataDigest = [u8; 32];

/// What the shared cache keeps of a Secret of the contract namespace that is
/// labelled with a contract entry. See the [module docs](self).
#[derive(Clone, PartialEq)]
pub struct CachedJoinSecret {
    /// Its metadata without the labels (in `labels`), the annotations, the
    /// creation time and the managed fields, which nothing reads.
    pub metadata: ObjectMeta,
    /// Its labels.
    pub labels: StringMap,
    /// Whether its `type` is [`JOIN_SECRET_TYPE`].
    pub is_join_type: bool,
    /// Its `token` value, when it has one in UTF-8.
    pub token: Option<String>,
    /// The SHA-256 of all its data.
    pub data_digest: DataDigest,
}

impl From<Secret> for CachedJoinSecret {
    fn from(secret: Secret) -> Self {
        let Secret {
            metadata,
            data,
            type_,
            ..
        } = secret;
        // Nothing reads a join Secret's annotations.
        let KeptMetadata {
            metadata, labels, ..
        } = metadata.into();
        let data = data.unwrap_or_default();
        Self {
            metadata,
            labels,
            is_join_type: type_.as_deref() == Some(JOIN_SECRET_TYPE),
            token: data
                .get(TOKEN_KEY)
                .and_then(|value| String::from_utf8(value.0.clone()).ok()),
            data_digest: data_digest(&data),
        }
    }
}

impl fmt::Debug for CachedJoinSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedJoinSecret")
            .field("metadata", &self.metadata)
            .field("labels", &self.labels)
            .field("is_join_type", &self.is_join_type)
            .field("has_token", &self.token.is_some())
            .field("data_digest", &hex::encode(self.data_digest))
            .finish()
    }
}

projection_of!(CachedJoinSecret, Secret);

impl Labelled for CachedJoinSecret {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }
}

/// The SHA-256 of `data`: each key and value in key order, each prefixed
/// with its length so that no two different maps hash alike.
#[must_use]
pub fn data_digest(data: &BTreeMap<String, ByteString>) -> DataDigest {
    let mut hash = Sha256::new();
    for (key, value) in data {
        hash.update((key.len() as u64).to_le_bytes());
        hash.update(key.as_bytes());
        hash.update((value.0.len() as u64).to_le_bytes());
        hash.update(&value.0);
    }
    hash.finalize().into()
}

#[cfg(test)]
mod tests;
