//! The ComputeContract kind: one machine rented on the market. Its spec is
//! written only by the Infra controller, its status only by the Requester.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{
    Guest, Location, MAX_COUNT, MAX_EXACT_INTEGER, NodeJoin, Receipt, Resources, Role, SecretRef,
    Winner,
};
use crate::condition::Condition;
use crate::names::DID_PATTERN;
use crate::text::Text;

/// Default of `spec.ttlSecondsAfterFinished`: 8 days.
pub const DEFAULT_TTL_SECONDS_AFTER_FINISHED: u32 = 691_200;
/// The largest `spec.ttlSecondsAfterFinished`: 366 days.
pub const MAX_TTL_SECONDS_AFTER_FINISHED: u32 = 366 * 24 * 3600;

fn default_ttl_seconds_after_finished() -> u32 {
    DEFAULT_TTL_SECONDS_AFTER_FINISHED
}

/// One machine rented on the compute market, from request for proposal to release.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "socialweb.computer",
    version = "v1alpha1",
    kind = "ComputeContract",
    namespaced,
    status = "ComputeContractStatus",
    shortname = "cc",
    category = "socialweb",
    doc = "One machine rented on the compute market; spec by the Infra controller, status by the Requester.",
    printcolumn = r#"{"name":"Infra","type":"string","jsonPath":".metadata.labels.infra\\.socialweb\\.computer/name"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Winner","type":"string","jsonPath":".status.winner.bidder"}"#,
    printcolumn = r#"{"name":"Cost","type":"integer","jsonPath":".status.winner.cost"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ComputeContractSpec {
    /// The size of the machine.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "resources is immutable: the machine is rented with them; give the Infra a new entry with the resources you want and remove this one"}]))]
    pub resources: Resources,
    /// Where the machine must run.
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "location is immutable: the machine is rented there; give the Infra a new entry with the location you want and remove this one"}]))]
    pub location: Location,
    /// The role of the machine.
    #[serde(default)]
    pub role: Role,
    /// The Secret the guest reads (for a node: its join Secret), in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_ref: Option<SecretRef>,
    /// DID of the account the machine is rented for, shaped `did:<method>:<id>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DID_PATTERN))]
    pub owner_did: Option<String>,
    /// Receipt of a running guest to take over instead of renting a new one.
    // Boxed: set only to take over a guest, and every node's claim, entry
    // and contract are cached (48 bytes inline each otherwise; plan 0017).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<Box<Receipt>>,
    /// How the guest joins its Kubernetes cluster, when it is a cluster node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_join: Option<NodeJoin>,
    /// Set to true to release the machine; the contract is deleted only once Released.
    #[serde(default)]
    pub release: bool,
    /// Seconds after the contract finished (Released or Failed) before an ownerless contract is deleted, at most 366 days.
    #[serde(default = "default_ttl_seconds_after_finished")]
    #[schemars(range(max = MAX_TTL_SECONDS_AFTER_FINISHED))]
    pub ttl_seconds_after_finished: u32,
}

/// The observed state of a ComputeContract, written by the Requester controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComputeContractStatus {
    /// Where the contract is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ComputeContractPhase>,
    /// The bid that won.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<Winner>,
    /// The market receipt of the accepted bid (also kept in the receipt annotation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Receipt>,
    /// The machine the provider booted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<Guest>,
    /// When the current bid window opened, to the microsecond (the Bidding
    /// condition's lastTransitionTime keeps whole seconds); set only while
    /// the Bidding condition is True. The window closes `bidWindowSeconds`
    /// after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bid_window_opened_at: Option<MicroTime>,
    /// When the contract finished (Released or Failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Observations, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// A human-readable account of the last failure or step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Text>,
    /// Failed attempts of the current step (publishing, releasing), for backoff.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = MAX_COUNT))]
    pub attempts: Option<u32>,
    /// When the current step is tried again after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Time>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = MAX_EXACT_INTEGER))]
    pub observed_generation: Option<i64>,
}

/// Where a ComputeContract is in its life.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema,
)]
#[schemars(transform = crate::common::drop_description)]
pub enum ComputeContractPhase {
    /// Not yet published.
    Pending,
    /// The request for proposal is out; bids are being collected.
    Bidding,
    /// A bid won and its receipt is verified; the machine is booting.
    Accepted,
    /// The machine is running and reachable.
    Deployed,
    /// The release was sent; waiting for the market to confirm the guest is gone.
    Releasing,
    /// The guest is gone.
    Released,
    /// No bid came, the provider failed, or the contract cannot go on; `message` says why.
    Failed,
}

impl ComputeContractPhase {
    /// Whether the contract is finished (Released or Failed).
    #[must_use]
    pub const fn is_finished(self) -> bool {
        matches!(self, Self::Released | Self::Failed)
    }
}
