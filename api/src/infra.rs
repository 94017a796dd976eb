//! The Infra kind: one deployment of contracts. For a tenant Cluster, one Infra
//! holds one contract entry per NodeClaim.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Location, MAX_COUNT, MAX_EXACT_INTEGER, NodeJoin, Receipt, Resources, Role, SecretRef,
};
use crate::compute_contract::ComputeContractPhase;
use crate::condition::Condition;
use crate::names::{DID_PATTERN, DNS_LABEL_MAX_LEN, DNS_LABEL_PATTERN};

/// A deployment: a set of contract entries, each rented as one ComputeContract
/// that the Infra controller alone writes.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "socialweb.computer",
    version = "v1alpha1",
    kind = "Infra",
    plural = "infras",
    namespaced,
    status = "InfraStatus",
    shortname = "inf",
    category = "socialweb",
    doc = "A deployment of contracts; one per tenant Cluster that has NodeClaims.",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterRef.name"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Contracts","type":"integer","jsonPath":".status.contractCount"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyContracts"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InfraSpec {
    /// What the deployment is for; part of the published declaration.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The machines to rent, keyed by name; part of the published declaration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub contracts: Vec<ContractEntry>,
    /// Per contract entry, the Secret its guest reads (for a node: its join Secret), keyed by contract. Never published.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["contract"]))]
    pub secrets: Vec<SecretEntry>,
    /// Publish the declaration (description and contracts) as an atproto record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<bool>,
    /// The tenant Cluster this Infra serves. Never published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_ref: Option<ClusterRef>,
    /// The entries that are nodes of the tenant Cluster, keyed by contract. Never published.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["contract"]))]
    pub nodes: Vec<NodeEntry>,
}

/// One entry: the size, place and role of one machine, rented as the ComputeContract `<infra>-<name>`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractEntry {
    /// Name of the entry, a DNS-1123 label; its ComputeContract is `<infra>-<name>`.
    #[schemars(pattern(DNS_LABEL_PATTERN), length(max = DNS_LABEL_MAX_LEN))]
    pub name: String,
    /// The size of the machine.
    pub resources: Resources,
    /// Where the machine must run.
    pub location: Location,
    /// The role of the machine.
    #[serde(default)]
    pub role: Role,
}

/// One entry's Secret reference.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretEntry {
    /// Name of the contract entry.
    #[schemars(pattern(DNS_LABEL_PATTERN), length(max = DNS_LABEL_MAX_LEN))]
    pub contract: String,
    /// The Secret, in the Infra's namespace.
    pub secret_ref: SecretRef,
}

/// A reference to the tenant Cluster an Infra serves (across namespaces: by
/// name and a finalizer, never by an ownerReference).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRef {
    /// Namespace of the Cluster.
    pub namespace: String,
    /// Name of the Cluster.
    pub name: String,
    /// Kind of the referent: always `Cluster`.
    #[serde(default)]
    pub kind: ClusterKind,
}

/// The kind a [`ClusterRef`] points to.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum ClusterKind {
    /// A `socialweb.computer` Cluster.
    #[default]
    Cluster,
}

/// One node: the account it is rented for, a guest to adopt, how it joins the
/// cluster and the NodeClaim it serves, all copied to its ComputeContract.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeEntry {
    /// Name of the contract entry this node is.
    #[schemars(pattern(DNS_LABEL_PATTERN), length(max = DNS_LABEL_MAX_LEN))]
    pub contract: String,
    /// DID of the account the node is rented for, shaped `did:<method>:<id>`.
    #[schemars(pattern(DID_PATTERN))]
    pub owner_did: String,
    /// Receipt of a running guest to take over instead of renting a new one.
    // Boxed: set only to take over a guest, and every node's claim, entry
    // and contract are cached (48 bytes inline each otherwise; plan 0017).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<Box<Receipt>>,
    /// How the guest joins the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_join: Option<NodeJoin>,
    /// The NodeClaim the entry serves.
    pub node_claim_ref: NodeClaimRef,
}

/// A reference to one NodeClaim, uid included so a recreated claim is a different one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimRef {
    /// Namespace of the NodeClaim.
    pub namespace: String,
    /// Name of the NodeClaim.
    pub name: String,
    /// UID of the NodeClaim.
    pub uid: String,
}

/// The observed state of an Infra, written by the Infra controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InfraStatus {
    /// Where the deployment is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<InfraPhase>,
    /// One entry per ComputeContract of the Infra, keyed by entry name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub contracts: Vec<ContractStatus>,
    /// sha256 hex of the canonical JSON of the declaration (description and contracts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declaration_hash: Option<String>,
    /// Number of entries in `contracts` (for the Contracts column).
    #[serde(default)]
    #[schemars(range(max = MAX_COUNT))]
    pub contract_count: u32,
    /// Number of contracts that are Deployed (for the Ready column).
    #[serde(default)]
    #[schemars(range(max = MAX_COUNT))]
    pub ready_contracts: u32,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = MAX_EXACT_INTEGER))]
    pub observed_generation: Option<i64>,
    /// Observations; Ready is aggregated over all contracts and names the first unready ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The state of one contract of an Infra.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractStatus {
    /// Name of the contract entry.
    pub name: String,
    /// Name of its ComputeContract.
    pub compute_contract: String,
    /// How far the Infra controller has taken the contract.
    pub state: ContractState,
    /// The ComputeContract's phase as last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ComputeContractPhase>,
}

/// How far the Infra controller has taken one contract.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum ContractState {
    /// Declared in the spec; its ComputeContract is not yet written.
    Staged,
    /// Its ComputeContract is written and runs on the market.
    Requested,
    /// Its ComputeContract is released (the entry left the spec or the Infra is being deleted).
    Released,
    /// Someone other than the Infra controller set its ComputeContract's
    /// spec.release while its entry was live: the entry is not rented again.
    ReleasedByHand,
}

/// Where an Infra is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum InfraPhase {
    /// Some contract is not yet Deployed.
    Requesting,
    /// Every contract is Deployed.
    Deployed,
    /// Contracts are being released (the Infra is being deleted).
    Releasing,
    /// Every contract is released.
    Released,
    /// A contract failed and cannot be retried.
    Failed,
}
