//! `spec.market.atproto` of a Requester: the public atproto compute market
//! (publicdomainrelay's `com.publicdomainrelay.temp.market.*` records).
//!
//! The Requester's account publishes requests for proposal, accepts and
//! releases in its own repository on its PDS; bidders are found by DID and/or
//! through a relay's index, and answer by calling the manager's
//! `submitBid`/`submitEvent` endpoints at `publicUrl`. The account's app
//! password and the key that signs the market records are read from Secrets of
//! the Requester's namespace, never from the spec.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::{DID_PATTERN, DNS_LABEL_PATTERN};

/// Default of `scope`.
pub const DEFAULT_SCOPE: &str = "default";
/// Default of `plcUrl`: the public PLC directory.
pub const DEFAULT_PLC_URL: &str = "https://plc.directory";
/// Default of `timeouts.requestSeconds` (the reference market's client timeout).
pub const DEFAULT_REQUEST_TIMEOUT_SECONDS: u32 = 10;
/// Default of `timeouts.provisioningSeconds`: 15 minutes (the reference
/// provider gives up after 10 and tells nobody).
pub const DEFAULT_PROVISIONING_TIMEOUT_SECONDS: u32 = 900;
/// Default of `timeouts.acceptResendSeconds`.
pub const DEFAULT_ACCEPT_RESEND_SECONDS: u32 = 120;
/// The largest `timeouts.requestSeconds`.
pub const MAX_REQUEST_TIMEOUT_SECONDS: u32 = 300;
/// The largest `timeouts.provisioningSeconds` and `timeouts.acceptResendSeconds`: one day.
pub const MAX_MARKET_TIMEOUT_SECONDS: u32 = 86_400;
/// The most bidders a Requester names.
pub const MAX_ATPROTO_BIDDERS: u32 = 256;
/// The longest URL the schema accepts.
pub const MAX_URL_LEN: u32 = 2048;

/// Schema pattern of an `http(s)` URL with a host (https in production; http
/// for a market on loopback, as `manager dev --market atproto-fake` runs one).
pub const HTTP_URL_PATTERN: &str = r"^https?://[^/?#\s]+(/[^\s]*)?$";
/// Schema pattern of an account: a DID, or an atproto handle (a domain name).
pub const ACCOUNT_PATTERN: &str = r"^(did:[a-z0-9]+:([A-Za-z0-9._%-]*:)*[A-Za-z0-9._%-]+|([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)$";
/// Schema pattern of a Secret key (as Kubernetes validates Secret data keys).
pub const SECRET_KEY_PATTERN: &str = r"^[-._a-zA-Z0-9]+$";

fn default_scope() -> String {
    DEFAULT_SCOPE.to_owned()
}

fn default_plc_url() -> String {
    DEFAULT_PLC_URL.to_owned()
}

const fn default_request_seconds() -> u32 {
    DEFAULT_REQUEST_TIMEOUT_SECONDS
}

const fn default_provisioning_seconds() -> u32 {
    DEFAULT_PROVISIONING_TIMEOUT_SECONDS
}

const fn default_accept_resend_seconds() -> u32 {
    DEFAULT_ACCEPT_RESEND_SECONDS
}

/// The public atproto compute market, reached through the Requester's own
/// account. At least one of `bidders` and `relayUrl` says where bidders are found.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "(has(self.bidders) && size(self.bidders) > 0) || has(self.relayUrl)", "message": "name at least one bidder in bidders, or a relayUrl to discover them"}]))]
pub struct AtprotoMarket {
    /// URL of the PDS that hosts the account, for example `https://bsky.social`.
    #[schemars(pattern(HTTP_URL_PATTERN), length(max = MAX_URL_LEN))]
    pub pds_url: String,
    /// The account that publishes requests and accepts: a DID (`did:plc:...`)
    /// or a handle (`market.example.org`).
    #[schemars(pattern(ACCOUNT_PATTERN), length(max = 253))]
    pub account: String,
    /// The Secret key holding the account's app password (not its main password).
    pub app_password_secret_ref: SecretKeyRef,
    /// The Secret key holding the private key that signs the market records,
    /// as 64 hex digits; its curve is `signingKeyAlgorithm`.
    pub signing_key_secret_ref: SecretKeyRef,
    /// The curve of the signing key: `Secp256k1` (the reference's) or `P256`.
    #[serde(default)]
    pub signing_key_algorithm: SigningKeyAlgorithm,
    /// URL of the PLC directory that resolves `did:plc` identities.
    #[serde(default = "default_plc_url")]
    #[schemars(pattern(HTTP_URL_PATTERN), length(max = MAX_URL_LEN))]
    pub plc_url: String,
    /// DIDs of the bidders asked for bids, besides those the relay lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "set"), length(max = MAX_ATPROTO_BIDDERS), inner(pattern(DID_PATTERN), length(max = MAX_URL_LEN)))]
    pub bidders: Vec<String>,
    /// URL of a relay whose index lists the bidders (every repository with an
    /// offering record); bidders are then discovered, not configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(HTTP_URL_PATTERN), length(max = MAX_URL_LEN))]
    pub relay_url: Option<String>,
    /// The public base URL at which bidders reach this manager's `submitBid`
    /// and `submitEvent` endpoints (the Service or Ingress in front of the
    /// manager's market port), for example `https://market.example.org`.
    #[schemars(pattern(HTTP_URL_PATTERN), length(max = MAX_URL_LEN))]
    pub public_url: String,
    /// Tells this installation's market records from those of another that
    /// uses the same account (a DNS label): every record key is derived from
    /// it and the contract. Immutable: the records of running contracts are
    /// found again by it.
    #[serde(default = "default_scope")]
    #[schemars(pattern(DNS_LABEL_PATTERN), length(min = 1, max = 63))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "scope is immutable: the records of running contracts are found by it"}]))]
    pub scope: String,
    /// How long the market is waited for.
    #[serde(default)]
    pub timeouts: AtprotoTimeouts,
}

/// A key of a Secret in the Requester's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Key in the Secret's data.
    #[schemars(pattern(SECRET_KEY_PATTERN), length(min = 1, max = 253))]
    pub key: String,
}

/// The curve of the key that signs the market records.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum SigningKeyAlgorithm {
    /// secp256k1 (ES256K), what the reference market signs with.
    #[default]
    Secp256k1,
    /// NIST P-256 (ES256).
    P256,
}

/// How long the atproto market is waited for.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AtprotoTimeouts {
    /// Seconds one call to a PDS, the PLC directory, the relay or a bidder may
    /// take, 1 to 300.
    #[serde(default = "default_request_seconds")]
    #[schemars(range(min = 1, max = MAX_REQUEST_TIMEOUT_SECONDS))]
    pub request_seconds: u32,
    /// Seconds from the accept until the provider reports the machine on the
    /// network, 60 to 86400; silence past it fails the contract (and releases
    /// the machine): the reference provider tells nobody when it gives up.
    #[serde(default = "default_provisioning_seconds")]
    #[schemars(range(min = 60, max = MAX_MARKET_TIMEOUT_SECONDS))]
    pub provisioning_seconds: u32,
    /// Seconds after an unanswered accept before it is sent again, 10 to 86400,
    /// once no receipt for it appeared in the bidder's repository (every
    /// accept the bidder processes starts a machine, so never sooner).
    #[serde(default = "default_accept_resend_seconds")]
    #[schemars(range(min = 10, max = MAX_MARKET_TIMEOUT_SECONDS))]
    pub accept_resend_seconds: u32,
}

impl Default for AtprotoTimeouts {
    fn default() -> Self {
        Self {
            request_seconds: DEFAULT_REQUEST_TIMEOUT_SECONDS,
            provisioning_seconds: DEFAULT_PROVISIONING_TIMEOUT_SECONDS,
            accept_resend_seconds: DEFAULT_ACCEPT_RESEND_SECONDS,
        }
    }
}
