//! Value types shared by several kinds: resources, location, receipts, guests,
//! node join parameters and references.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::COUNTRY_PATTERN;
use crate::string_map::StringMap;

/// The largest integer every JSON reader holds exactly (2^53 - 1, JavaScript's
/// `Number.MAX_SAFE_INTEGER`; kubectl and the schema validators read numbers as
/// doubles). The bound of amounts that have no natural limit: costs, seeds,
/// generations. Every bound in the schemas is at most this, so validation
/// compares exact values and no stored number is out of reach of its Rust type.
pub const MAX_EXACT_INTEGER: u64 = (1 << 53) - 1;
/// The largest `cpus` of a machine.
pub const MAX_CPUS: u32 = 1024;
/// The largest `memory` of a machine, in MiB (16 TiB).
pub const MAX_MEMORY_MIB: u64 = 16 * 1024 * 1024;
/// The largest `disk` of a machine, in GiB (1 PiB).
pub const MAX_DISK_GIB: u64 = 1024 * 1024;
/// The largest `network` bandwidth of a machine, in Mbit/s (1 Tbit/s).
pub const MAX_NETWORK_MBPS: u32 = 1_000_000;
/// The largest count a status reports (its Rust type's maximum).
pub const MAX_COUNT: u32 = u32::MAX;

/// The size of a machine. Every amount is a positive integer in the unit named.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// Virtual CPUs (cores), 1 to 1024.
    #[schemars(range(min = 1, max = MAX_CPUS))]
    pub cpus: u32,
    /// Memory in MiB, 1 to 16777216 (16 TiB).
    #[schemars(range(min = 1, max = MAX_MEMORY_MIB))]
    pub memory: u64,
    /// Disk in GiB, 1 to 1048576 (1 PiB).
    #[schemars(range(min = 1, max = MAX_DISK_GIB))]
    pub disk: u64,
    /// Network bandwidth in Mbit/s, 1 to 1000000 (1 Tbit/s).
    #[schemars(range(min = 1, max = MAX_NETWORK_MBPS))]
    pub network: u32,
}

/// Where a machine must run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Location {
    /// ISO 3166-1 alpha-2 country code in upper case, for example `DE`.
    #[schemars(pattern(COUNTRY_PATTERN))]
    pub country: String,
    /// An optional region inside the country, as the market names it (for example `BY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
}

/// A market receipt: proof that a provider accepted a contract, and the handle
/// to release its guest later.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// Where the receipt is published (for example an `at://` URI).
    pub uri: String,
    /// Content identifier of the receipt at `uri`.
    pub cid: String,
}

/// The machine a provider booted for a contract.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Guest {
    /// DID of the provider that runs the guest.
    pub provider: String,
    /// Network address of the guest, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// Node identity the guest reported after it joined its cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<String>,
}

/// The bid that won a contract.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Winner {
    /// DID of the winning bidder.
    pub bidder: String,
    /// Price per hour, in minor units of `currency` (for example cents).
    #[schemars(range(max = MAX_EXACT_INTEGER))]
    pub cost: u64,
    /// ISO 4217 currency code of `cost`, for example `EUR`.
    pub currency: String,
}

/// The role a node plays in its cluster.
#[derive(
    Serialize,
    Deserialize,
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    JsonSchema,
)]
#[schemars(transform = crate::common::drop_description)]
pub enum Role {
    /// Runs workloads (the default).
    #[default]
    Worker,
    /// Runs the cluster's control plane.
    ControlPlane,
}

/// What a guest needs to join a Kubernetes cluster as a node. Holds no secret:
/// the join token and CA live only in the join Secret.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeJoin {
    /// URL of the cluster's API server the node registers with.
    pub api_server: String,
    /// Name the node registers under.
    pub node_name: String,
    /// Labels the node registers with.
    #[serde(default, skip_serializing_if = "StringMap::is_empty")]
    pub labels: StringMap,
    /// Taints the node registers with.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
}

/// A node taint, as in the Kubernetes Node API.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// Taint key.
    pub key: String,
    /// Taint value, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// What happens to pods that do not tolerate the taint.
    pub effect: TaintEffect,
}

/// The effect of a taint on pods that do not tolerate it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum TaintEffect {
    /// New pods are not scheduled on the node.
    NoSchedule,
    /// The scheduler tries to avoid the node.
    PreferNoSchedule,
    /// Running pods are evicted and new ones are not scheduled.
    NoExecute,
}

/// A reference to a Secret in the same namespace as the referring object.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Name of the Secret.
    pub name: String,
}

/// Checks a DID against the shape the schemas enforce (`did:<method>:<id>`).
#[must_use]
pub fn is_did(value: &str) -> bool {
    let Some(rest) = value.strip_prefix("did:") else {
        return false;
    };
    let Some((method, id)) = rest.split_once(':') else {
        return false;
    };
    let id_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '%');
    !method.is_empty()
        && method
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && !id.is_empty()
        && !id.ends_with(':')
        && id.chars().all(|c| id_char(c) || c == ':')
}

/// Schema transform for enums: drops the enum's own description so that the
/// field's description is the one `kubectl explain` shows. kube's `OptionalEnum`
/// transform hoists an optional enum's schema over the field's and would
/// otherwise replace the field's description with the enum's.
pub(crate) fn drop_description(schema: &mut schemars::Schema) {
    schema.remove("description");
}
