//! The atproto market's configuration: plain data, read once, no I/O.

use std::time::Duration;

pub use atproto::{Algorithm, Secret};

/// How long the adapter waits, and for what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts {
    /// Every HTTP call (the reference's client uses 10 s).
    pub call: Duration,
    /// From our accept to the provider's `vm.onNetwork`: past it the guest
    /// is reported Failed, so the caller releases it. The reference gives
    /// up provisioning after 10 minutes and tells nobody.
    pub provisioning: Duration,
    /// How long after sending `submitAccept` (or, after a restart, after the
    /// accept's `createdAt`) the adapter waits for a receipt to appear
    /// before it sends the accept again. Each `submitAccept` the bidder
    /// processes starts a machine, so this is the guard against a second one.
    pub accept_resend_after: Duration,
    /// How much a provider's clock may differ from ours: an event of a
    /// released guest counts as "still running" only when it is this much
    /// newer than our `vm.delete`.
    pub clock_skew: Duration,
    /// How long the list of discovered bidders is used before it is read again.
    pub discovery_refresh: Duration,
    /// How often a bidder's repository is listed for a guest's events when
    /// no pushed event settles its status.
    pub repo_read_interval: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            call: Duration::from_secs(10),
            provisioning: Duration::from_secs(15 * 60),
            accept_resend_after: Duration::from_secs(2 * 60),
            clock_skew: Duration::from_secs(2 * 60),
            discovery_refresh: Duration::from_secs(5 * 60),
            repo_read_interval: Duration::from_secs(10),
        }
    }
}

/// Everything the atproto market needs to rent machines for one account.
#[derive(Debug, Clone)]
pub struct AtprotoMarketConfig {
    /// The PDS that holds our repository, e.g. `https://pds.example`.
    pub pds_url: String,
    /// Our account: a handle or a DID.
    pub identifier: String,
    /// The account's app password.
    pub app_password: Secret<String>,
    /// The attestation key that signs our records, 64 hex characters.
    pub signing_key: Secret<String>,
    /// The curve of `signing_key`.
    pub signing_key_algorithm: Algorithm,
    /// The PLC directory that resolves did:plc.
    pub plc_url: String,
    /// Bidders asked on every request, by DID (in addition to discovery).
    pub bidders: Vec<String>,
    /// A relay whose `listReposByCollection` of offerings discovers bidders.
    pub relay_url: Option<String>,
    /// Where bidders reach our `submitBid` and `submitEvent`
    /// (`https://host[:port]`): the server that mounts [`super::router`].
    pub public_url: String,
    /// Part of every record key the adapter derives: one value per manager
    /// installation sharing an account, so two never claim each other's records.
    pub scope: String,
    /// Timeouts.
    pub timeouts: Timeouts,
}

impl AtprotoMarketConfig {
    /// Whether `key` is a signing key of `algorithm` (64 hex digits of a
    /// valid scalar), checked before a market is built so that a bad key is
    /// said as such; the error never contains the key.
    ///
    /// # Errors
    /// Why the key does not parse.
    pub fn check_signing_key(algorithm: Algorithm, key: &Secret<String>) -> Result<(), String> {
        atproto::SigningKey::from_hex(algorithm, key)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// The public PLC directory.
    pub const PUBLIC_PLC: &'static str = atproto::DidResolver::PUBLIC_PLC;

    /// A configuration with the defaults: the public PLC, no fixed bidders,
    /// no relay, scope `default`, [`Timeouts::default`].
    #[must_use]
    pub fn new(
        pds_url: impl Into<String>,
        identifier: impl Into<String>,
        app_password: Secret<String>,
        signing_key: Secret<String>,
        public_url: impl Into<String>,
    ) -> Self {
        Self {
            pds_url: pds_url.into(),
            identifier: identifier.into(),
            app_password,
            signing_key,
            signing_key_algorithm: Algorithm::K256,
            plc_url: Self::PUBLIC_PLC.to_owned(),
            bidders: Vec::new(),
            relay_url: None,
            public_url: public_url.into(),
            scope: "default".to_owned(),
            timeouts: Timeouts::default(),
        }
    }
}
