//! Leader election: of all replicas, only the holder of one `coordination.k8s.io` Lease runs the reconcilers.
//!
//! # Expected flow
//!
//! A replica starts as a follower and waits for the Lease (kube-lease-manager
//! acquires it once it is free or expired). On acquiring it, the replica calls
//! `make_controllers()` and runs that future in its own task. The moment it can
//! no longer prove it holds the Lease, it aborts that task and waits again. On
//! shutdown it lets the controllers finish (until the deadline), releases the
//! Lease so a follower takes over at once, and returns.
//!
//! # Guarantees
//!
//! - Fencing: the controllers' task is aborted, and the abort awaited, before
//!   this replica reports that it stopped leading. It happens when kube-lease-manager
//!   reports the lease lost or fails to renew it, and also when this replica's own
//!   watchdog has not seen a renewal of its hold for `duration - renew_period`
//!   (a hung renewal), i.e. `renew_period` before any other replica may take the Lease.
//! - A new leader takes over within the lease duration after the old one stops renewing.
//! - While shutting down, the lease keeps being renewed until the controllers
//!   have finished, so two leaders never overlap during a rollout.
//!
//! # Assumptions
//!
//! - The future from `make_controllers()` owns every writer it starts: it must
//!   not detach writers with `tokio::spawn` (aborting the task would not stop
//!   them). Join them (`join!`, `JoinSet` owned by the future) instead.
//! - Node clocks are within `renew_period` of each other.

mod config;
mod lease;

pub use config::{
    DEFAULT_LEASE_NAME, LEASE_FIELD_MANAGER_PREFIX, LeaderArgs, LeaderConfig, LeaderError,
};
pub use lease::{KubeLease, LeaseLock, held_until};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use controllers::metrics::Metrics;

use crate::shutdown::Shutdown;

/// How long a follower waits before building its lock again after an API error.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(2);

/// Runs the controllers only while this replica holds the Lease described by `config`.
///
/// Returns after a shutdown (lease released) or when the controllers fail while leading.
///
/// # Errors
///
/// [`LeaderError::Config`] for unusable settings; [`LeaderError::Controllers`] /
/// [`LeaderError::Panicked`] when the controllers end on their own while leading.
/// API errors are retried, never returned.
pub async fn run_while_leader<F, Fut>(
    client: kube::Client,
    config: LeaderConfig,
    metrics: Metrics,
    make_controllers: F,
    shutdown: Shutdown,
) -> Result<(), LeaderError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    config.validate()?;
    tracing::info!(
        lease = %format!("{}/{}", config.namespace, config.lease_name),
        identity = %config.identity,
        "waiting to lead"
    );
    let connect = || KubeLease::connect(client.clone(), &config);
    run_with_lock(connect, metrics, make_controllers, shutdown).await
}

/// Runs the controllers at once, without election (`dev`, `demo`, `--leader-elect=false`).
///
/// # Errors
///
/// [`LeaderError::Controllers`] / [`LeaderError::Panicked`] when they end on their own.
pub async fn run_unelected<Fut>(
    metrics: Metrics,
    controllers: Fut,
    shutdown: Shutdown,
) -> Result<(), LeaderError>
where
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    metrics.set_leader(true);
    let mut task = tokio::spawn(controllers);
    let outcome = tokio::select! {
        joined = &mut task => ended_on_their_own(joined, &shutdown).await,
        () = shutdown.deadline_passed() => {
            abort(task).await;
            Ok(())
        }
    };
    metrics.set_leader(false);
    outcome
}

/// The election loop over any [`LeaseLock`]; `connect` builds a fresh lock for each term.
///
/// # Errors
///
/// As [`run_while_leader`].
pub async fn run_with_lock<L, C, CFut, F, Fut>(
    mut connect: C,
    metrics: Metrics,
    mut make_controllers: F,
    shutdown: Shutdown,
) -> Result<(), LeaderError>
where
    L: LeaseLock + 'static,
    C: FnMut() -> CFut,
    CFut: Future<Output = Result<L, LeaderError>>,
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    metrics.set_leader(false);
    loop {
        // Follower: build a lock and wait for it.
        let lock = tokio::select! {
            biased;
            () = shutdown.signaled() => return Ok(()),
            lock = connect() => lock,
        };
        let lock = match lock {
            Ok(lock) => Arc::new(lock),
            Err(error @ LeaderError::Config(_)) => return Err(error),
            Err(error) => {
                tracing::warn!(%error, "cannot reach the Lease; retrying");
                pause_unless_shutdown(&shutdown).await;
                continue;
            }
        };
        let acquired = tokio::select! {
            biased;
            () = shutdown.signaled() => return release(lock).await,
            changed = lock.changed() => changed,
        };
        match acquired {
            Ok(true) => {}
            Ok(false) => continue,
            Err(error) => {
                tracing::warn!(%error, "waiting for the Lease failed; retrying");
                pause_unless_shutdown(&shutdown).await;
                continue;
            }
        }

        // Leader.
        tracing::info!("became leader: starting the controllers");
        // Built before the gauge says "leader", so whoever sees the gauge also
        // sees what building them set (e.g. not ready until the caches sync).
        let controllers = make_controllers();
        metrics.set_leader(true);
        let term = lead(&*lock, controllers, &shutdown).await;
        metrics.set_leader(false);
        match term {
            Term::Lost => {
                tracing::warn!("stopped leading: controllers aborted; waiting for the Lease again");
            }
            Term::Finished(outcome) => {
                let released = release(lock).await;
                return outcome.and(released);
            }
        }
    }
}

enum Term {
    /// The hold was lost or could not be proven; the controllers are aborted.
    Lost,
    /// Shutdown or the controllers ended; the caller releases the Lease.
    Finished(Result<(), LeaderError>),
}

/// One term as leader. The controllers' task never outlives it.
async fn lead<L, Fut>(lock: &L, controllers: Fut, shutdown: &Shutdown) -> Term
where
    L: LeaseLock,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let mut task = tokio::spawn(controllers);
    let lost = async {
        tokio::select! {
            changed = lock.changed() => match changed {
                Ok(still) => tracing::warn!(still_leading = still, "the Lease changed hands"),
                Err(error) => tracing::warn!(%error, "cannot renew the Lease"),
            },
            () = lock.fenced() => {}
        }
    };
    tokio::pin!(lost);
    // Keep renewing until the controllers end, even while shutting down.
    let term = tokio::select! {
        () = &mut lost => None,
        joined = &mut task => Some(ended_on_their_own(joined, shutdown).await),
        () = shutdown.deadline_passed() => Some(Ok(())),
    };
    match term {
        Some(Ok(())) if !task.is_finished() => {
            // The deadline cut in-flight work short.
            abort(task).await;
            Term::Finished(Ok(()))
        }
        Some(outcome) => Term::Finished(outcome),
        None => {
            abort(task).await;
            Term::Lost
        }
    }
}

/// How long controllers that stopped cleanly may precede the shutdown signal. The manager's
/// controllers stop on the shutdown itself, so they never do; controllers wired to the
/// process's own signals (`StopSignal::on_process_signal`) may see the same SIGTERM first.
const SIGNAL_RACE: Duration = Duration::from_secs(1);

async fn ended_on_their_own(
    joined: Result<anyhow::Result<()>, tokio::task::JoinError>,
    shutdown: &Shutdown,
) -> Result<(), LeaderError> {
    match joined {
        Ok(Ok(())) => {
            let signaled = tokio::time::timeout(SIGNAL_RACE, shutdown.signaled()).await;
            if signaled.is_ok() {
                Ok(())
            } else {
                Err(LeaderError::Controllers(anyhow::anyhow!(
                    "they returned without a shutdown"
                )))
            }
        }
        Ok(Err(error)) => Err(LeaderError::Controllers(error)),
        Err(error) => Err(LeaderError::Panicked(error.to_string())),
    }
}

/// Aborts the controllers' task and waits until it is gone, so nothing of it runs afterwards.
async fn abort(task: tokio::task::JoinHandle<anyhow::Result<()>>) {
    task.abort();
    let _gone = task.await;
}

/// Releases on its own task: kube-lease-manager panics on a 409 from the release patch
/// (`LeaseStateError::LockConflict` has no `LeaseManagerError`), which must not crash the exit.
async fn release<L: LeaseLock + 'static>(lock: Arc<L>) -> Result<(), LeaderError> {
    match tokio::spawn(async move { lock.release().await }).await {
        Ok(Ok(())) => tracing::info!("released the Lease"),
        // It expires on its own after the lease duration; not worth failing the exit for.
        Ok(Err(error)) => tracing::warn!(%error, "cannot release the Lease; it will expire"),
        Err(error) => tracing::warn!(%error, "releasing the Lease failed; it will expire"),
    }
    Ok(())
}

async fn pause_unless_shutdown(shutdown: &Shutdown) {
    tokio::select! {
        () = shutdown.signaled() => {}
        () = tokio::time::sleep(RETRY_AFTER_ERROR) => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use clap::Parser;
    use std::time::SystemTime;

    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        leader: LeaderArgs,
    }

    fn parse(args: &[&str]) -> LeaderArgs {
        Cli::try_parse_from(std::iter::once("manager").chain(args.iter().copied()))
            .unwrap()
            .leader
    }

    #[test]
    fn defaults_elect_with_a_15s_lease_renewed_every_5s() {
        let config = parse(&["--leader-identity", "pod-a"])
            .config("socialweb-system")
            .unwrap()
            .unwrap();
        assert_eq!(
            config,
            LeaderConfig {
                namespace: "socialweb-system".into(),
                lease_name: DEFAULT_LEASE_NAME.into(),
                identity: "pod-a".into(),
                duration: Duration::from_secs(15),
                renew_period: Duration::from_secs(5),
            }
        );
        assert_eq!(config.grace(), Duration::from_secs(10));
    }

    #[test]
    fn election_can_be_turned_off_and_namespace_overridden() {
        assert_eq!(parse(&["--leader-elect=false"]).config("ns").unwrap(), None);
        let config = parse(&["--leader-elect", "--lease-namespace", "ops"])
            .config("ns")
            .unwrap()
            .unwrap();
        assert_eq!(config.namespace, "ops");
        assert!(!config.identity.is_empty());
    }

    #[test]
    fn unusable_durations_are_refused_with_the_flag_names() {
        for args in [
            &["--lease-duration", "5s", "--lease-renew", "5s"][..],
            &["--lease-renew", "1500ms"][..],
            &["--lease-duration", "0s"][..],
        ] {
            let error = parse(args).config("ns").unwrap_err();
            assert!(error.to_string().contains("--lease-"), "{args:?}: {error}");
        }
    }

    proptest::proptest! {
        /// kube-lease-manager panics on a grace of 0 or not below the duration: validate must
        /// accept exactly the settings it takes.
        #[test]
        fn validate_accepts_exactly_whole_seconds_with_renew_below_duration(
            duration_ms in 0_u64..120_000,
            renew_ms in 0_u64..120_000,
        ) {
            let config = LeaderConfig {
                namespace: "ns".into(),
                lease_name: DEFAULT_LEASE_NAME.into(),
                identity: "pod".into(),
                duration: Duration::from_millis(duration_ms),
                renew_period: Duration::from_millis(renew_ms),
            };
            let usable = duration_ms % 1000 == 0
                && renew_ms % 1000 == 0
                && renew_ms > 0
                && renew_ms < duration_ms;
            proptest::prop_assert_eq!(config.validate().is_ok(), usable);
            if usable {
                let grace = config.grace().as_secs();
                proptest::prop_assert!(grace > 0 && grace < config.duration.as_secs());
            }
        }
    }

    fn lease(holder: Option<&str>, renewed: SystemTime, seconds: i32) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                renew_time: Some(MicroTime(renewed.try_into().unwrap())),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn a_hold_lasts_from_the_last_renewal_for_the_lease_duration() {
        let renewed = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let held = lease(Some("me"), renewed, 15);
        assert_eq!(
            held_until(&held, "me"),
            Some(renewed + Duration::from_secs(15))
        );
        assert_eq!(held_until(&held, "other"), None);
        assert_eq!(held_until(&lease(None, renewed, 15), "me"), None);
        assert_eq!(held_until(&Lease::default(), "me"), None);
    }
}
