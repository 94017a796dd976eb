//! The NodeClaim kind: one node of a tenant Cluster, asked for by the tenant or
//! its cluster provider.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{Guest, Location, MAX_EXACT_INTEGER, Receipt, Resources};
use crate::condition::Condition;
use crate::names::{DID_PATTERN, DNS_LABEL_MAX_LEN};

/// Default of `spec.joinGraceSeconds`: 15 minutes.
pub const DEFAULT_JOIN_GRACE_SECONDS: u32 = 900;
/// Default of `spec.lossGraceSeconds`: 5 minutes.
pub const DEFAULT_LOSS_GRACE_SECONDS: u32 = 300;
/// The largest `spec.joinGraceSeconds` and `spec.lossGraceSeconds`: 7 days.
pub const MAX_GRACE_SECONDS: u32 = 7 * 24 * 3600;

fn default_join_grace_seconds() -> u32 {
    DEFAULT_JOIN_GRACE_SECONDS
}

fn default_loss_grace_seconds() -> u32 {
    DEFAULT_LOSS_GRACE_SECONDS
}

/// One node of a tenant Cluster. The NodeClaim controller makes it a contract
/// entry of the Cluster's Infra and hands the guest its join Secret.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "socialweb.computer",
    version = "v1alpha1",
    kind = "NodeClaim",
    namespaced,
    status = "NodeClaimStatus",
    shortname = "nc",
    category = "socialweb",
    doc = "One node of a tenant Cluster, rented on the compute market.",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Contract","type":"string","jsonPath":".status.infra.computeContract"}"#,
    printcolumn = r#"{"name":"Address","type":"string","jsonPath":".status.guest.address"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimSpec {
    /// Name of the Cluster, in the claim's own namespace, that the node joins
    /// (at most 63 characters, as a Cluster's name).
    /// Immutable: a node cannot move to another cluster.
    #[schemars(length(min = 1, max = DNS_LABEL_MAX_LEN))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "clusterName is immutable"}]))]
    pub cluster_name: String,
    /// The size of the machine to rent. Immutable, as the machine is: to
    /// change it, create a new NodeClaim and delete this one.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "resources is immutable: a rented machine is not resized; create a new NodeClaim with the resources you want and delete this one"}]))]
    pub resources: Resources,
    /// Where the machine must run. Immutable, as the machine is: to change
    /// it, create a new NodeClaim and delete this one.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "location is immutable: a rented machine does not move; create a new NodeClaim with the location you want and delete this one"}]))]
    pub location: Location,
    /// DID of the account the node is rented for, shaped `did:<method>:<id>`.
    /// Defaults to the Cluster's `spec.account`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DID_PATTERN))]
    pub owner_did: Option<String>,
    /// Receipt of an already running guest to take over instead of renting a new one.
    // Boxed: set only to take over a guest, and every node's claim, entry
    // and contract are cached (48 bytes inline each otherwise; plan 0017).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<Box<Receipt>>,
    /// Seconds a Deployed guest may take to join the cluster before the claim fails and its machine is released, at most 604800 (7 days).
    #[serde(default = "default_join_grace_seconds")]
    #[schemars(range(max = MAX_GRACE_SECONDS))]
    pub join_grace_seconds: u32,
    /// Seconds a Deployed guest may be lost before the claim fails and its machine is released, at most 604800 (7 days).
    #[serde(default = "default_loss_grace_seconds")]
    #[schemars(range(max = MAX_GRACE_SECONDS))]
    pub loss_grace_seconds: u32,
}

/// The observed state of a NodeClaim, written by the NodeClaim controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// The Infra entry that serves this claim: how a claim names its contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra: Option<InfraRef>,
    /// Where the claim is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<NodeClaimPhase>,
    /// Observations (InfraComposed, Deployed, Joined, Ready), one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The machine that serves the claim, once booted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<Guest>,
    /// When the guest's grant to join the cluster expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_expires_at: Option<Time>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = MAX_EXACT_INTEGER))]
    pub observed_generation: Option<i64>,
}

/// Where a claim's contract entry lives.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InfraRef {
    /// Namespace of the Infra (the contract namespace).
    pub namespace: String,
    /// Name of the Infra.
    pub name: String,
    /// Name of the contract entry in the Infra.
    #[schemars(length(max = DNS_LABEL_MAX_LEN))]
    pub contract: String,
    /// Name of the ComputeContract that rents the machine.
    pub compute_contract: String,
}

/// Where a NodeClaim is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum NodeClaimPhase {
    /// Accepted; not yet an entry of the Cluster's Infra.
    Pending,
    /// An entry of the Infra; the machine is being rented.
    Requesting,
    /// The machine is running; the node has not joined yet.
    Deployed,
    /// The node joined the cluster.
    Joined,
    /// The machine is being released.
    Releasing,
    /// The machine is released.
    Released,
    /// The claim cannot be served; a condition says why.
    Failed,
}
