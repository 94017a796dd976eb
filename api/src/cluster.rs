//! The Cluster kind: a tenant's rented Kubernetes cluster, the input that NodeClaims hang off.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::MAX_COUNT;
use crate::condition::Condition;
use crate::names::DID_PATTERN;

/// A tenant's Kubernetes cluster. Its nodes are asked for with NodeClaims; all
/// of them together are one Infra in the contract namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[kube(
    group = "socialweb.computer",
    version = "v1alpha1",
    kind = "Cluster",
    namespaced,
    status = "ClusterStatus",
    shortname = "swc",
    category = "socialweb",
    doc = "A tenant's Kubernetes cluster; its nodes are NodeClaims.",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Nodes","type":"integer","jsonPath":".status.nodes"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    // Its name is a label value on the Infra and join Secrets of its nodes.
    validation = kube::core::Rule::new("self.metadata.name.size() <= 63").message(
        "a Cluster's name is at most 63 characters: it labels the Infra and join Secrets of its nodes"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// DID of the tenant account that owns the cluster and pays for its nodes,
    /// shaped `did:<method>:<id>`. NodeClaims without an ownerDid use it.
    #[schemars(pattern(DID_PATTERN))]
    pub account: String,
    /// Whether the cluster should run. Written by the tenant.
    pub running: bool,
}

/// The observed state of a Cluster, written by whoever runs the tenant cluster
/// (the demo in dev mode); `nodes` by the NodeClaim controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Where the cluster is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ClusterPhase>,
    /// URL of the cluster's API server; nodes join here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Base64 PEM of the CA that signs the API server's certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_data: Option<String>,
    /// Number of NodeClaims of the cluster (for the Nodes column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = MAX_COUNT))]
    pub nodes: Option<u32>,
    /// Observations of the cluster's state, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Where a Cluster is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum ClusterPhase {
    /// Being set up; nodes cannot join yet.
    Initializing,
    /// Serving; nodes can join.
    Ready,
    /// Not reachable at the moment.
    Unavailable,
    /// Being taken down; its nodes are being released.
    Draining,
}
