//! The flags and settings of leader election, and why it can fail.

use std::time::Duration;

use crate::shutdown::parse_duration;

/// The default Lease name.
pub const DEFAULT_LEASE_NAME: &str = "socialweb-manager";

/// The field manager of this manager's Lease writes.
pub const LEASE_FIELD_MANAGER_PREFIX: &str = "socialweb/leader-";

/// Leader-election flags of `run`; flatten into its args.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaderArgs {
    /// Elect one leader among the replicas through a Lease; only the leader runs the reconcilers.
    /// `--leader-elect=false` runs them at once (a single replica only!).
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true",
          action = clap::ArgAction::Set, env = "LEADER_ELECT")]
    pub leader_elect: bool,

    /// Name of the coordination.k8s.io Lease.
    #[arg(long, default_value = DEFAULT_LEASE_NAME, env = "LEASE_NAME")]
    pub lease_name: String,

    /// Namespace of the Lease (default: the pod's namespace, POD_NAMESPACE; else the contract namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// How long a hold lasts without renewal; a new leader takes over within this time.
    #[arg(long, default_value = "15s", value_parser = parse_duration, env = "LEASE_DURATION")]
    pub lease_duration: Duration,

    /// How often the leader renews its hold; must be shorter than --lease-duration.
    #[arg(long, default_value = "5s", value_parser = parse_duration, env = "LEASE_RENEW")]
    pub lease_renew: Duration,

    /// This replica's name in the Lease (default: POD_NAME; else the host name plus a random suffix).
    #[arg(long, env = "POD_NAME")]
    pub leader_identity: Option<String>,
}

impl LeaderArgs {
    /// The election these flags describe, or `None` with `--leader-elect=false`.
    ///
    /// # Errors
    ///
    /// [`LeaderError::Config`] when the durations are not whole seconds or renew is not shorter.
    pub fn config(&self, default_namespace: &str) -> Result<Option<LeaderConfig>, LeaderError> {
        if !self.leader_elect {
            return Ok(None);
        }
        let config = LeaderConfig {
            namespace: self
                .lease_namespace
                .clone()
                .unwrap_or_else(|| default_namespace.to_owned()),
            lease_name: self.lease_name.clone(),
            identity: self
                .leader_identity
                .clone()
                .unwrap_or_else(default_identity),
            duration: self.lease_duration,
            renew_period: self.lease_renew,
        };
        config.validate()?;
        Ok(Some(config))
    }
}

/// One replica's leader election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderConfig {
    /// Namespace of the Lease (the manager's own).
    pub namespace: String,
    /// Name of the Lease.
    pub lease_name: String,
    /// This replica's unique name in the Lease (the pod name).
    pub identity: String,
    /// How long a hold lasts without renewal (whole seconds).
    pub duration: Duration,
    /// How often the leader renews (whole seconds, shorter than `duration`).
    pub renew_period: Duration,
}

impl LeaderConfig {
    /// Checks what the Lease API and kube-lease-manager need.
    ///
    /// # Errors
    ///
    /// [`LeaderError::Config`] saying which value to change.
    pub fn validate(&self) -> Result<(), LeaderError> {
        let whole = |d: Duration| d.subsec_nanos() == 0 && d.as_secs() > 0;
        let problem = if self.identity.is_empty() {
            Some("the leader identity is empty".to_owned())
        } else if !whole(self.duration) || !whole(self.renew_period) {
            Some(format!(
                "--lease-duration ({:?}) and --lease-renew ({:?}) must be whole seconds above 0: a Lease counts in seconds",
                self.duration, self.renew_period
            ))
        } else if self.renew_period >= self.duration {
            Some(format!(
                "--lease-renew ({:?}) must be shorter than --lease-duration ({:?})",
                self.renew_period, self.duration
            ))
        } else {
            None
        };
        problem.map_or(Ok(()), |reason| Err(LeaderError::Config(reason)))
    }

    /// How long before its expiry the holder renews (kube-lease-manager's "grace").
    pub(super) fn grace(&self) -> Duration {
        self.duration.saturating_sub(self.renew_period)
    }
}

/// The host name plus a random suffix: unique even when two processes share a host.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "manager".to_owned());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}-{}", &suffix[..8])
}

/// Why leader election failed for good.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The flags do not describe a usable election.
    #[error("invalid leader election settings: {0}")]
    Config(String),
    /// The Lease could not be read, created, renewed or released.
    #[error("lease {lease}: {source}")]
    Lease {
        /// The Lease as `namespace/name`.
        lease: String,
        /// kube-lease-manager's error.
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
    /// The controllers stopped on their own while this replica led and no shutdown was asked for.
    #[error("controllers stopped while leading: {0:#}")]
    Controllers(anyhow::Error),
    /// The controllers' task panicked.
    #[error("controllers task panicked: {0}")]
    Panicked(String),
}
