//! The join Secret of a composed claim: the grant token, the Cluster's API
//! server URL and CA, and the node name, in the contract namespace.
//!
//! # Guarantees
//! The token is generated once (by `act`, when the Secret does not exist yet)
//! and kept from then on: [`desired_join_secret`] takes it from the cached
//! Secret. A [`JoinSecret`]'s `Debug` never prints a value.

use std::collections::BTreeMap;

use api::Cluster;
use api::names::{
    CLUSTER_LABEL, CLUSTER_NAMESPACE_LABEL, CONTRACT_LABEL, INFRA_NAME_LABEL, JOIN_SECRET_TYPE,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;

use super::compose::{ClusterKey, ComposedEntry};
use crate::cache::Labelled;
use crate::cache::join_secret::{CachedJoinSecret, data_digest};

/// Key of the grant token in a join Secret.
pub const TOKEN_KEY: &str = "token";
/// Key of the Cluster's API server URL.
pub const API_SERVER_KEY: &str = "apiServer";
/// Key of the Cluster's CA (base64 PEM, as in `Cluster.status.caData`).
pub const CA_DATA_KEY: &str = "caData";
/// Key of the name the node registers under.
pub const NODE_NAME_KEY: &str = "nodeName";

/// A join Secret to write.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinSecret {
    /// Name of the Secret (`join-<entry>`).
    pub name: String,
    /// The contract namespace.
    pub namespace: String,
    /// The Infra's name (label).
    pub infra: String,
    /// The Cluster (labels), so a Secret's events reach its Cluster even once the Infra is gone.
    pub cluster: ClusterKey,
    /// The contract entry (label).
    pub entry: String,
    /// The API server URL.
    pub api_server: String,
    /// The CA, if the Cluster reports one.
    pub ca_data: Option<String>,
    /// The node name.
    pub node_name: String,
    /// The token kept from the existing Secret; `None`: the Secret is new and
    /// `act` generates one (and creates rather than applies, so a stale cache
    /// can never replace a token).
    pub token: Option<String>,
}

impl std::fmt::Debug for JoinSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values stay out of logs (invariant 6): only names are printed.
        f.debug_struct("JoinSecret")
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("entry", &self.entry)
            .field("new_token", &self.token.is_none())
            .finish_non_exhaustive()
    }
}

impl JoinSecret {
    /// The Secret object with `token`.
    #[must_use]
    pub fn to_secret(&self, token: &str) -> Secret {
        let mut data = BTreeMap::from([
            (TOKEN_KEY.to_owned(), ByteString(token.as_bytes().to_vec())),
            (
                API_SERVER_KEY.to_owned(),
                ByteString(self.api_server.as_bytes().to_vec()),
            ),
            (
                NODE_NAME_KEY.to_owned(),
                ByteString(self.node_name.as_bytes().to_vec()),
            ),
        ]);
        if let Some(ca) = &self.ca_data {
            data.insert(CA_DATA_KEY.to_owned(), ByteString(ca.as_bytes().to_vec()));
        }
        Secret {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                labels: Some(BTreeMap::from([
                    (INFRA_NAME_LABEL.to_owned(), self.infra.clone()),
                    (CONTRACT_LABEL.to_owned(), self.entry.clone()),
                    (CLUSTER_LABEL.to_owned(), self.cluster.name.clone()),
                    (
                        CLUSTER_NAMESPACE_LABEL.to_owned(),
                        self.cluster.namespace.clone(),
                    ),
                ])),
                ..ObjectMeta::default()
            },
            type_: Some(JOIN_SECRET_TYPE.to_owned()),
            data: Some(data),
            ..Secret::default()
        }
    }
}

/// The join Secret an entry needs, or `None` when the existing one already is
/// it (or cannot be written: no URL, which only an entry composed earlier has).
#[must_use]
pub fn desired_join_secret(
    key: &ClusterKey,
    contract_namespace: &str,
    cluster: &Cluster,
    entry: &ComposedEntry,
    existing: Option<&CachedJoinSecret>,
) -> Option<JoinSecret> {
    let status = cluster.status.as_ref();
    let api_server = status
        .and_then(|s| s.url.clone())
        .filter(|u| !u.is_empty())?;
    let node_name = entry
        .node
        .node_join
        .as_ref()
        .map(|j| j.node_name.clone())
        .unwrap_or_default();
    let token = existing
        .and_then(|s| s.token.as_deref().map(str::to_owned))
        .filter(|t| !t.is_empty());
    let desired = JoinSecret {
        name: entry.secret.secret_ref.name.clone(),
        namespace: contract_namespace.to_owned(),
        infra: key.infra_name(),
        cluster: key.clone(),
        entry: entry.contract.name.clone(),
        api_server,
        ca_data: status.and_then(|s| s.ca_data.clone()),
        node_name,
        token,
    };
    match (existing, &desired.token) {
        (Some(current), Some(token)) if unchanged_by(current, &desired.to_secret(token)) => None,
        _ => Some(desired),
    }
}

/// Whether applying `desired` over `current` would change nothing: the same
/// type, labels and data. The cache keeps a join Secret's data only as its
/// digest (and token), so the data are compared by digest.
fn unchanged_by(current: &CachedJoinSecret, desired: &Secret) -> bool {
    current.is_join_type == (desired.type_.as_deref() == Some(JOIN_SECRET_TYPE))
        && desired
            .metadata
            .labels
            .iter()
            .flatten()
            .all(|(k, v)| current.label(k) == Some(v.as_str()))
        && current.data_digest == data_digest(desired.data.as_ref().unwrap_or(&BTreeMap::new()))
}

/// A new grant token: 32 random bytes, hex.
#[must_use]
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    hex::encode(bytes)
}
