//! The Requester kind: the root of a contract namespace. It runs every
//! ComputeContract of its namespace against one market.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::atproto_market::AtprotoMarket;
use crate::common::{MAX_COUNT, MAX_EXACT_INTEGER};
use crate::condition::Condition;
use crate::names::DID_PATTERN;

/// Default of `spec.bidWindowSeconds`.
pub const DEFAULT_BID_WINDOW_SECONDS: u32 = 5;
/// Default of `spec.maxInFlight`.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 10;
/// Default of a local bidder's `bootDelayMillis`.
pub const DEFAULT_BOOT_DELAY_MILLIS: u32 = 2000;
/// Upper bound of a local bidder's `failureRate` (per mille).
pub const MAX_FAILURE_RATE: u32 = 1000;
/// The largest `spec.bidWindowSeconds`: one hour.
pub const MAX_BID_WINDOW_SECONDS: u32 = 3600;
/// The largest `spec.maxInFlight`.
pub const MAX_MAX_IN_FLIGHT: u32 = 10_000;
/// The largest `capacity` of a local bidder.
pub const MAX_BIDDER_CAPACITY: u32 = 100_000;
/// The largest `bootDelayMillis` of a local bidder: one hour.
pub const MAX_BOOT_DELAY_MILLIS: u32 = 3_600_000;

fn default_bid_window_seconds() -> u32 {
    DEFAULT_BID_WINDOW_SECONDS
}

fn default_max_in_flight() -> u32 {
    DEFAULT_MAX_IN_FLIGHT
}

fn default_boot_delay_millis() -> u32 {
    DEFAULT_BOOT_DELAY_MILLIS
}

/// The root of a contract namespace: publishes requests for proposal, accepts
/// bids and sends releases for every ComputeContract of its namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "socialweb.computer",
    version = "v1alpha1",
    kind = "Requester",
    namespaced,
    status = "RequesterStatus",
    shortname = "req",
    category = "socialweb",
    doc = "The root of a contract namespace: runs its ComputeContracts against one market.",
    printcolumn = r#"{"name":"Market","type":"string","jsonPath":".status.market"}"#,
    printcolumn = r#"{"name":"Contracts","type":"integer","jsonPath":".status.contracts"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct RequesterSpec {
    /// The market contracts are rented on: exactly one kind of market is set.
    pub market: Market,
    /// Seconds bids are collected after a request for proposal is published, 1 to 3600.
    #[serde(default = "default_bid_window_seconds")]
    #[schemars(range(min = 1, max = MAX_BID_WINDOW_SECONDS))]
    pub bid_window_seconds: u32,
    /// Most contracts in Bidding or Accepted at once, 1 to 10000; more wait in Pending.
    #[serde(default = "default_max_in_flight")]
    #[schemars(range(min = 1, max = MAX_MAX_IN_FLIGHT))]
    pub max_in_flight: u32,
}

/// The market a Requester uses: exactly one field is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "[has(self.local), has(self.atproto)].filter(x, x).size() == 1", "message": "set exactly one market: local or atproto"}]))]
pub struct Market {
    /// The embedded simulated market: seeded, deterministic bidders in this process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalMarket>,
    /// The public atproto compute market, through the Requester's own account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atproto: Option<AtprotoMarket>,
}

/// The kind of market a Requester uses (for the Market column).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum MarketKind {
    /// The embedded simulated market.
    Local,
    /// The public atproto compute market.
    Atproto,
}

impl Market {
    /// The kind of market that is set, if any (local first, should a spec
    /// that skipped validation set both).
    #[must_use]
    pub fn kind(&self) -> Option<MarketKind> {
        if self.local.is_some() {
            Some(MarketKind::Local)
        } else if self.atproto.is_some() {
            Some(MarketKind::Atproto)
        } else {
            None
        }
    }
}

/// The embedded simulated market.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalMarket {
    /// Seed of the market's random choices (failures), so runs repeat exactly; at most 2^53 - 1.
    #[serde(default)]
    #[schemars(range(max = MAX_EXACT_INTEGER))]
    pub seed: u64,
    /// The simulated bidders.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["did"]))]
    pub bidders: Vec<LocalBidder>,
    /// Directory where the market keeps its state across restarts; in memory when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_dir: Option<String>,
}

/// One simulated bidder of the local market.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalBidder {
    /// DID of the bidder (the provider of the machines it wins), shaped `did:<method>:<id>`.
    #[schemars(pattern(DID_PATTERN))]
    pub did: String,
    /// Price per hour it bids, in minor units of `currency`; at most 2^53 - 1.
    #[schemars(range(max = MAX_EXACT_INTEGER))]
    pub cost: u64,
    /// ISO 4217 currency code of `cost`, for example `EUR`.
    pub currency: String,
    /// Most machines it runs at once, at most 100000; it does not bid when full.
    #[schemars(range(max = MAX_BIDDER_CAPACITY))]
    pub capacity: u32,
    /// Milliseconds from acceptance until its guest is Deployed, at most 3600000 (one hour).
    #[serde(default = "default_boot_delay_millis")]
    #[schemars(range(max = MAX_BOOT_DELAY_MILLIS))]
    pub boot_delay_millis: u32,
    /// Chance, per mille (0 to 1000), that a machine it boots fails.
    #[serde(default)]
    #[schemars(range(max = MAX_FAILURE_RATE))]
    pub failure_rate: u32,
}

/// The observed state of a Requester, written by the Requester controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RequesterStatus {
    /// The kind of market in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub market: Option<MarketKind>,
    /// Number of ComputeContracts in the namespace (for the Contracts column).
    #[serde(default)]
    #[schemars(range(max = MAX_COUNT))]
    pub contracts: u32,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = MAX_EXACT_INTEGER))]
    pub observed_generation: Option<i64>,
    /// Observations, one per type.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}
