//! The Lease itself: the lock the election loop holds, kube-lease-manager
//! underneath, and a watchdog that reads the Lease back.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube_lease_manager::{LeaseCreateMode, LeaseManager, LeaseManagerBuilder};

use super::config::{LEASE_FIELD_MANAGER_PREFIX, LeaderConfig, LeaderError};

/// One replica's hold on the Lease: the seam between the fencing loop and the API.
///
/// [`KubeLease`] is the real one; tests drive [`run_with_lock`] with a fake.
pub trait LeaseLock: Send + Sync {
    /// Resolves when this replica's hold changes, with the new state; while held it keeps renewing.
    fn changed(&self) -> impl Future<Output = Result<bool, LeaderError>> + Send;
    /// Resolves when this replica can no longer prove it holds the Lease (only polled while leading).
    fn fenced(&self) -> impl Future<Output = ()> + Send;
    /// Gives the Lease up so another replica can take it at once.
    fn release(&self) -> impl Future<Output = Result<(), LeaderError>> + Send;
}

/// The real lock: kube-lease-manager for acquiring and renewing, plus a watchdog reading the Lease.
pub struct KubeLease {
    manager: LeaseManager,
    api: Api<Lease>,
    config: LeaderConfig,
}

impl KubeLease {
    /// Reads (or creates) the Lease.
    ///
    /// # Errors
    ///
    /// [`LeaderError::Lease`] when the API server refuses or cannot be reached.
    pub async fn connect(client: kube::Client, config: &LeaderConfig) -> Result<Self, LeaderError> {
        config.validate()?;
        let manager = LeaseManagerBuilder::new(client.clone(), &config.lease_name)
            .with_namespace(&config.namespace)
            .with_create_mode(LeaseCreateMode::AutoCreate)
            .with_identity(&config.identity)
            .with_field_manager(format!("{LEASE_FIELD_MANAGER_PREFIX}{}", config.identity))
            .with_duration(config.duration.as_secs())
            .with_grace(config.grace().as_secs())
            .build()
            .await
            .map_err(|source| lease_error(config, source))?;
        Ok(Self {
            manager,
            api: Api::namespaced(client, &config.namespace),
            config: config.clone(),
        })
    }
}

fn lease_error(
    config: &LeaderConfig,
    source: kube_lease_manager::LeaseManagerError,
) -> LeaderError {
    LeaderError::Lease {
        lease: format!("{}/{}", config.namespace, config.lease_name),
        source,
    }
}

impl LeaseLock for KubeLease {
    async fn changed(&self) -> Result<bool, LeaderError> {
        self.manager
            .changed()
            .await
            .map_err(|source| lease_error(&self.config, source))
    }

    async fn fenced(&self) {
        // Acquired just now: the hold is good for `duration`; fence `renew_period` early.
        let margin = self.config.renew_period;
        let mut fence_at = SystemTime::now() + self.config.grace();
        let poll = self.config.renew_period / 2;
        loop {
            match tokio::time::timeout(poll, self.api.get(&self.config.lease_name)).await {
                Ok(Ok(lease)) => match held_until(&lease, &self.config.identity) {
                    Some(until) => fence_at = until.checked_sub(margin).unwrap_or(fence_at),
                    None => {
                        tracing::warn!(lease = %self.config.lease_name, "the Lease names another holder");
                        return;
                    }
                },
                Ok(Err(error)) => {
                    tracing::warn!(%error, "cannot read the Lease to confirm the hold")
                }
                Err(_) => tracing::warn!("reading the Lease timed out"),
            }
            let left = fence_at
                .duration_since(SystemTime::now())
                .unwrap_or(Duration::ZERO);
            if left.is_zero() {
                tracing::warn!(lease = %self.config.lease_name, "no renewal of the hold seen in time");
                return;
            }
            tokio::time::sleep(left.min(poll)).await;
        }
    }

    async fn release(&self) -> Result<(), LeaderError> {
        self.manager
            .release()
            .await
            .map_err(|source| lease_error(&self.config, source))
    }
}

/// Until when `lease` is held by `identity`, by the holder's clock (renewTime + duration);
/// `None` when someone else (or nobody) holds it.
#[must_use]
pub fn held_until(lease: &Lease, identity: &str) -> Option<SystemTime> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let renewed: SystemTime = spec.renew_time.as_ref()?.0.into();
    let seconds = u64::try_from(spec.lease_duration_seconds?).ok()?;
    renewed.checked_add(Duration::from_secs(seconds))
}
