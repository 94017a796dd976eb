//! [`SecretLabels`]: a join Secret's labels as the cache keeps them.
//!
//! The NodeClaim controller labels each join Secret `join-<entry>` with its
//! Infra, its entry and its Cluster's name and namespace, and nothing else:
//! as a map that was four entries and four strings (about 280 bytes a
//! Secret). Here the entry is read off the name and the three others are
//! shared with the Secret's Infra group in the keeper (its key) and with
//! another Secret of it (the Cluster's): 48 bytes and nothing allocated.
//! Any other labels are kept as they came.

use std::sync::Arc;

use api::StringMap;

use crate::cache::keep::equal_shared;
use api::names::{
    CLUSTER_LABEL, CLUSTER_NAMESPACE_LABEL, CONTRACT_LABEL, INFRA_NAME_LABEL, JOIN_SECRET_PREFIX,
};

/// A join Secret's labels as kept. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum SecretLabels {
    /// Exactly these four, and [`CONTRACT_LABEL`]: the name after `join-`.
    Join {
        /// [`INFRA_NAME_LABEL`].
        infra: Arc<str>,
        /// [`CLUSTER_LABEL`].
        cluster: Arc<str>,
        /// [`CLUSTER_NAMESPACE_LABEL`].
        cluster_namespace: Arc<str>,
    },
    /// Any others.
    Kept(StringMap),
}

/// `text` as an `Arc`: `shared`'s when it is the same text.
fn shared_or_new(text: &str, shared: Option<&Arc<str>>) -> Arc<str> {
    equal_shared(shared, text).unwrap_or_else(|| Arc::from(text))
}

impl SecretLabels {
    /// `labels` of the Secret `name`, as kept: sharing `infra` (the keeper's
    /// group key) and what `sibling` (another Secret of the group) holds.
    pub(super) fn new(
        labels: StringMap,
        name: &str,
        infra: Option<&Arc<str>>,
        sibling: Option<&Self>,
    ) -> Self {
        let entry = name.strip_prefix(JOIN_SECRET_PREFIX);
        let (Some(infra_label), Some(cluster), Some(cluster_namespace)) = (
            labels.get(INFRA_NAME_LABEL),
            labels.get(CLUSTER_LABEL),
            labels.get(CLUSTER_NAMESPACE_LABEL),
        ) else {
            return Self::Kept(labels);
        };
        if labels.len() != 4 || entry.is_none() || labels.get(CONTRACT_LABEL) != entry {
            return Self::Kept(labels);
        }
        let (sibling_cluster, sibling_namespace) = match sibling {
            Some(Self::Join {
                cluster,
                cluster_namespace,
                ..
            }) => (Some(cluster), Some(cluster_namespace)),
            _ => (None, None),
        };
        Self::Join {
            infra: shared_or_new(infra_label, infra),
            cluster: shared_or_new(cluster, sibling_cluster),
            cluster_namespace: shared_or_new(cluster_namespace, sibling_namespace),
        }
    }

    /// The value of label `key` of the Secret `name`.
    pub(super) fn get<'a>(&'a self, key: &str, name: &'a str) -> Option<&'a str> {
        match self {
            Self::Kept(labels) => labels.get(key),
            Self::Join {
                infra,
                cluster,
                cluster_namespace,
            } => match key {
                INFRA_NAME_LABEL => Some(infra),
                CONTRACT_LABEL => name.strip_prefix(JOIN_SECRET_PREFIX),
                CLUSTER_LABEL => Some(cluster),
                CLUSTER_NAMESPACE_LABEL => Some(cluster_namespace),
                _ => None,
            },
        }
    }

    /// The labels of the Secret `name` as a map.
    pub(super) fn map(&self, name: &str) -> StringMap {
        match self {
            Self::Kept(labels) => labels.clone(),
            Self::Join { .. } => [
                INFRA_NAME_LABEL,
                CONTRACT_LABEL,
                CLUSTER_LABEL,
                CLUSTER_NAMESPACE_LABEL,
            ]
            .into_iter()
            .filter_map(|key| Some((key.to_owned(), self.get(key, name)?.to_owned())))
            .collect(),
        }
    }
}
