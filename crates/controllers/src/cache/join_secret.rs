//! A join Secret as the shared cache keeps it: what the NodeClaim controller
//! reads of one, and nothing else (plan 0017 P3, P4).
//!
//! The controller reads a join Secret's name, uid and version (to delete
//! it), its labels (which Infra, entry and Cluster it serves), its token (a
//! rewrite keeps it) and whether its data is what it would write. A
//! `k8s_openapi` Secret kept for that held a ~540-byte map node for its
//! labels and another for its data (the token and a digest) whatever they
//! held, a `type` string and creation time: 2.0 KiB a node at 10,000 nodes
//! (`cache_weight`). The watch decodes each into a [`WatchedJoinSecret`]
//! (the labels as a sorted vector, [`StringMap`], the token and a SHA-256 of
//! all the data), and the cache keeps a [`CachedJoinSecret`]: the same
//! without the `ObjectMeta` (360 bytes inline whatever it holds), in a
//! keeper of its own ([`JoinSecrets`]) instead of a kube-runtime store
//! (whose `ObjectRef` key is four more strings): no `Controller` has join
//! Secrets as its primary kind, so none needs them in a store. Its labels
//! are read off its name and shared with its Infra's other Secrets when
//! they are the NodeClaim controller's (`labels`), and its uid is 16 bytes.
//!
//! # Guarantees
//! - [`WatchedJoinSecret`] is a [`Resource`](kube::Resource) of the Secret's
//!   group, version and kind, so the shared cache watches Secrets and its
//!   subscribers get these.
//! - It decodes from a Secret's JSON exactly when a `Secret` does, and is
//!   then [`WatchedJoinSecret::from`] that Secret.
//! - A [`CachedJoinSecret`] keeps every field of it that anything reads
//!   (name, namespace, uid, resourceVersion, labels, type, token, digest),
//!   and gives them back as a [`WatchedJoinSecret`] unchanged.
//! - Its [`data_digest`](CachedJoinSecret::data_digest) changes with any
//!   key or value of the data, so a Secret whose CA, URL or node name
//!   anyone changed is still rewritten.
//! - Neither `Debug` shows the token.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use api::StringMap;
use api::names::JOIN_SECRET_TYPE;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use super::Labelled;
use super::projection::{KeptMetadata, projection_of};
use super::uid::KeptUid;
use crate::nodeclaim::secrets::TOKEN_KEY;
use crate::write::Seen;

mod keeper;
mod labels;

pub use keeper::JoinSecrets;
use labels::SecretLabels;

/// A SHA-256 of a Secret's data ([`data_digest`]).
pub type DataDigest = [u8; 32];

/// A Secret of the contract namespace labelled with a contract entry, as the
/// watch decodes it and the subscribers get it. See the [module docs](self).
#[derive(Clone, PartialEq)]
pub struct WatchedJoinSecret {
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

impl From<Secret> for WatchedJoinSecret {
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

impl fmt::Debug for WatchedJoinSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchedJoinSecret")
            .field("metadata", &self.metadata)
            .field("labels", &self.labels)
            .field("is_join_type", &self.is_join_type)
            .field("has_token", &self.token.is_some())
            .field("data_digest", &hex::encode(self.data_digest))
            .finish()
    }
}

projection_of!(WatchedJoinSecret, Secret);

impl Labelled for WatchedJoinSecret {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }
}

/// What the shared cache keeps of a join Secret: a [`WatchedJoinSecret`]
/// without its `ObjectMeta`. See the [module docs](self).
#[derive(Clone, PartialEq)]
pub struct CachedJoinSecret {
    /// Shared with the keeper's keys.
    name: Arc<str>,
    /// Shared by every Secret of the namespace.
    namespace: Option<Arc<str>>,
    /// 16 bytes when it is a UUID, as the API server makes them.
    uid: Option<KeptUid>,
    resource_version: Option<Box<str>>,
    /// Its labels (read through [`Labelled`]).
    labels: SecretLabels,
    /// Whether its `type` is [`JOIN_SECRET_TYPE`].
    pub is_join_type: bool,
    /// Its `token` value, when it has one in UTF-8.
    pub token: Option<Box<str>>,
    /// The SHA-256 of all its data.
    pub data_digest: DataDigest,
}

/// The keeper holds each Secret in an `Arc` (16 bytes and this), which the
/// allocator serves from a size class: mimalloc's are 192 and 224 bytes
/// here, so 8 bytes more would cost 32 a Secret (plan 0018 R7). What keeps
/// it under: the token boxed.
const _: () = assert!(size_of::<CachedJoinSecret>() <= 176);

impl CachedJoinSecret {
    /// Its name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its uid, if the server gave it one.
    #[must_use]
    pub fn uid(&self) -> Option<String> {
        self.uid.as_ref().map(KeptUid::to_string)
    }

    /// It as read, for a delete that must remove only this Secret.
    #[must_use]
    pub fn seen(&self) -> Seen {
        Seen {
            namespace: self.namespace.as_deref().unwrap_or_default().to_owned(),
            name: self.name.to_string(),
            uid: self.uid(),
            resource_version: self.resource_version.as_deref().map(str::to_owned),
            finalizers: Vec::new(),
        }
    }

    /// Its labels.
    #[must_use]
    pub fn labels(&self) -> StringMap {
        self.labels.map(&self.name)
    }

    /// `watched` as kept, its namespace `namespace` (shared by the keeper).
    fn kept(watched: WatchedJoinSecret, namespace: Option<Arc<str>>) -> Self {
        Self::kept_in(watched, namespace, None, None)
    }

    /// `watched` as kept in the group of Infra `infra` (the keeper's key),
    /// sharing what `sibling` (another Secret of it) holds.
    fn kept_in(
        watched: WatchedJoinSecret,
        namespace: Option<Arc<str>>,
        infra: Option<&Arc<str>>,
        sibling: Option<&Self>,
    ) -> Self {
        let WatchedJoinSecret {
            metadata,
            labels,
            is_join_type,
            token,
            data_digest,
        } = watched;
        let name: Arc<str> = metadata.name.unwrap_or_default().into();
        let labels = SecretLabels::new(labels, &name, infra, sibling.map(|s| &s.labels));
        Self {
            name,
            namespace,
            uid: metadata.uid.map(KeptUid::from),
            resource_version: metadata.resource_version.map(String::into_boxed_str),
            labels,
            is_join_type,
            token: token.map(String::into_boxed_str),
            data_digest,
        }
    }
}

/// A Secret as the cache would keep it (for tests and weights).
impl From<Secret> for CachedJoinSecret {
    fn from(secret: Secret) -> Self {
        let watched = WatchedJoinSecret::from(secret);
        let namespace = watched.metadata.namespace.as_deref().map(Arc::from);
        Self::kept(watched, namespace)
    }
}

/// A kept Secret as the watch delivered it.
impl From<&CachedJoinSecret> for WatchedJoinSecret {
    fn from(kept: &CachedJoinSecret) -> Self {
        Self {
            metadata: ObjectMeta {
                name: Some(kept.name.to_string()),
                namespace: kept.namespace.as_deref().map(str::to_owned),
                uid: kept.uid(),
                resource_version: kept.resource_version.as_deref().map(str::to_owned),
                ..ObjectMeta::default()
            },
            labels: kept.labels(),
            is_join_type: kept.is_join_type,
            token: kept.token.as_deref().map(str::to_owned),
            data_digest: kept.data_digest,
        }
    }
}

impl fmt::Debug for CachedJoinSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CachedJoinSecret")
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("uid", &self.uid)
            .field("resource_version", &self.resource_version)
            .field("labels", &self.labels())
            .field("is_join_type", &self.is_join_type)
            .field("has_token", &self.token.is_some())
            .field("data_digest", &hex::encode(self.data_digest))
            .finish()
    }
}

impl Labelled for CachedJoinSecret {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key, &self.name)
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
