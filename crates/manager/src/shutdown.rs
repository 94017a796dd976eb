//! Graceful shutdown: SIGTERM or SIGINT starts it, a deadline ends it.
//!
//! # Expected flow
//!
//! 1. [`Shutdown::listen_for_signals`] turns the first SIGTERM/SIGINT into [`Shutdown::trigger`].
//! 2. The controllers get [`Shutdown::signaled`] (kube-runtime
//!    `Controller::graceful_shutdown_on(shutdown.signaled())`): they stop taking new
//!    work and let reconciles in flight finish.
//! 3. The leader loop keeps renewing the lease while they finish, then releases it
//!    so the next leader need not wait for it to expire.
//! 4. [`with_deadline`] gives up waiting `--shutdown-deadline` (default 25 s, under
//!    the pod's 30 s `terminationGracePeriodSeconds`) after the signal; the process
//!    then exits 0 anyway, and the next leader redoes what was cut short (every
//!    reconcile is idempotent). A second SIGTERM/SIGINT ends the wait at once:
//!    whoever sends it does not want to wait.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// The default of `--shutdown-deadline`.
pub const DEFAULT_SHUTDOWN_DEADLINE: Duration = Duration::from_secs(25);

/// Flags of the shutdown; flatten into a subcommand's args.
#[derive(Debug, Clone, clap::Args)]
pub struct ShutdownArgs {
    /// How long reconciles in flight may take after SIGTERM/SIGINT before the process exits anyway
    /// (e.g. 25s, 1m, 500ms). Keep it under the pod's terminationGracePeriodSeconds.
    #[arg(long, default_value = "25s", value_parser = parse_duration, env = "SHUTDOWN_DEADLINE")]
    pub shutdown_deadline: Duration,
}

impl ShutdownArgs {
    /// The shutdown these flags describe.
    #[must_use]
    pub fn shutdown(&self) -> Shutdown {
        Shutdown::new(self.shutdown_deadline)
    }
}

/// The process-wide shutdown signal and its deadline. Clones share one signal.
#[derive(Clone, Debug)]
pub struct Shutdown {
    token: CancellationToken,
    /// Cancelled by a second signal: the deadline is now.
    forced: CancellationToken,
    deadline: Duration,
}

impl Shutdown {
    /// A shutdown not yet triggered, with `deadline` between the signal and giving up.
    #[must_use]
    pub fn new(deadline: Duration) -> Self {
        Self {
            token: CancellationToken::new(),
            forced: CancellationToken::new(),
            deadline,
        }
    }

    /// Starts the shutdown (what a signal does; also for tests and fatal errors in the wiring).
    pub fn trigger(&self) {
        self.token.cancel();
    }

    /// Whether the shutdown has started.
    #[must_use]
    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves once the shutdown has started; `'static`, so it can be handed to
    /// `Controller::graceful_shutdown_on` and to the HTTP server.
    pub fn signaled(&self) -> WaitForCancellationFutureOwned {
        self.token.clone().cancelled_owned()
    }

    /// The underlying token, for code that speaks tokio-util.
    #[must_use]
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// The time allowed between the signal and giving up.
    #[must_use]
    pub const fn deadline(&self) -> Duration {
        self.deadline
    }

    /// Ends the wait for work in flight now (what a second signal does).
    pub fn force(&self) {
        self.trigger();
        self.forced.cancel();
    }

    /// Resolves `deadline` after the shutdown started, or once it is forced;
    /// never before it started.
    pub async fn deadline_passed(&self) {
        self.token.cancelled().await;
        tokio::select! {
            () = tokio::time::sleep(self.deadline) => {}
            () = self.forced.cancelled() => {}
        }
    }

    /// Spawns a task that triggers the shutdown on the first SIGTERM or
    /// SIGINT, and forces it on the second.
    ///
    /// # Errors
    ///
    /// When the signal handlers cannot be installed.
    pub fn listen_for_signals(&self) -> std::io::Result<tokio::task::JoinHandle<()>> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        let shutdown = self.clone();
        Ok(tokio::spawn(async move {
            let name = tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = interrupt.recv() => "SIGINT",
                () = shutdown.token.cancelled() => return,
            };
            tracing::info!(
                signal = name,
                deadline_seconds = shutdown.deadline.as_secs_f64(),
                "shutting down: letting reconciles in flight finish"
            );
            shutdown.trigger();
            let name = tokio::select! {
                _ = terminate.recv() => "SIGTERM",
                _ = interrupt.recv() => "SIGINT",
            };
            tracing::warn!(
                signal = name,
                "second signal: not waiting for reconciles in flight"
            );
            shutdown.force();
        }))
    }
}

/// Runs `work` to its end, or until the deadline after the shutdown started.
///
/// Returns `None` when the deadline cut `work` short (it is dropped, so nothing
/// of it runs afterwards); the caller then exits anyway.
pub async fn with_deadline<F: Future>(shutdown: &Shutdown, work: F) -> Option<F::Output> {
    tokio::select! {
        output = work => Some(output),
        () = shutdown.deadline_passed() => {
            tracing::warn!(
                deadline_seconds = shutdown.deadline.as_secs_f64(),
                "shutdown deadline passed with work still running; exiting anyway"
            );
            None
        }
    }
}

/// Work meant to run until the shutdown ended while none had started.
#[derive(Debug, thiserror::Error)]
#[error("the controllers stopped without a shutdown")]
pub struct StoppedWithoutShutdown;

/// Runs `controllers` (which stop taking work on this shutdown) until the
/// shutdown starts, then lets them finish within its deadline.
///
/// # Errors
///
/// [`StoppedWithoutShutdown`] when they ended with no shutdown started.
pub async fn run_until_shutdown<F>(
    shutdown: &Shutdown,
    controllers: F,
) -> Result<(), StoppedWithoutShutdown>
where
    F: Future<Output = ()>,
{
    tokio::pin!(controllers);
    let ended_first = tokio::select! {
        biased;
        () = shutdown.signaled() => false,
        () = &mut controllers => true,
    };
    if ended_first {
        // They run inside this task's poll, and the signal's task, on another
        // thread, may start the shutdown after the first branch found it
        // pending: the controllers then stop on it within that same poll.
        // That is the shutdown; only an end with none started is a fault.
        return if shutdown.is_triggered() {
            Ok(())
        } else {
            Err(StoppedWithoutShutdown)
        };
    }
    if with_deadline(shutdown, controllers).await.is_none() {
        tracing::warn!("stopped before every reconcile in flight finished");
    }
    Ok(())
}

/// Parses a duration flag: a number with `ms`, `s`, `m` or `h` (`25s`, `1m`, `500ms`); a bare number is seconds.
///
/// # Errors
///
/// A message naming the bad value, for clap to show.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 25s, 1m or 500ms"))?;
    let seconds = match unit.trim() {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?}: use ms, s, m or h"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|error| format!("{text:?}: {error}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn durations_parse_with_units_and_reject_nonsense() {
        assert_eq!(parse_duration("25s"), Ok(Duration::from_secs(25)));
        assert_eq!(parse_duration("25"), Ok(Duration::from_secs(25)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    proptest::proptest! {
        #[test]
        fn every_unit_means_what_it_says(amount in 0_u32..100_000) {
            let n = u64::from(amount);
            proptest::prop_assert_eq!(parse_duration(&format!("{n}ms")), Ok(Duration::from_millis(n)));
            proptest::prop_assert_eq!(parse_duration(&format!("{n}s")), Ok(Duration::from_secs(n)));
            proptest::prop_assert_eq!(parse_duration(&format!("{n}")), Ok(Duration::from_secs(n)));
            proptest::prop_assert_eq!(parse_duration(&format!("{n}m")), Ok(Duration::from_secs(n * 60)));
            proptest::prop_assert_eq!(parse_duration(&format!("{n}h")), Ok(Duration::from_secs(n * 3600)));
        }

        #[test]
        fn nothing_panics_on_any_text(text in ".{0,12}") {
            let _ = parse_duration(&text);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn work_that_finishes_in_time_returns_its_output() {
        let shutdown = Shutdown::new(Duration::from_secs(25));
        shutdown.trigger();
        let output = with_deadline(&shutdown, async {
            tokio::time::sleep(Duration::from_secs(24)).await;
            7
        })
        .await;
        assert_eq!(output, Some(7));
    }

    #[tokio::test]
    async fn controllers_that_stop_on_a_shutdown_started_mid_poll_end_cleanly() {
        let shutdown = Shutdown::new(Duration::from_secs(25));
        let signal = shutdown.clone();
        // What the signal's task on another thread can do: start the shutdown
        // after the first branch was polled, while the controllers are polled.
        let controllers = async move {
            signal.trigger();
        };
        assert!(run_until_shutdown(&shutdown, controllers).await.is_ok());
    }

    #[tokio::test]
    async fn controllers_that_end_with_no_shutdown_are_a_fault() {
        let shutdown = Shutdown::new(Duration::from_secs(25));
        let ended = run_until_shutdown(&shutdown, async {}).await;
        assert!(ended.is_err());
        assert!(!shutdown.is_triggered());
    }

    #[tokio::test]
    async fn controllers_run_until_the_shutdown_and_then_finish_their_work() {
        let shutdown = Shutdown::new(Duration::from_secs(25));
        let (finished_tx, finished_rx) = tokio::sync::oneshot::channel();
        let stop = shutdown.signaled();
        let controllers = async move {
            stop.await;
            tokio::task::yield_now().await; // a reconcile in flight finishing
            let _ = finished_tx.send(());
        };
        let trigger = shutdown.clone();
        tokio::spawn(async move { trigger.trigger() });
        assert!(run_until_shutdown(&shutdown, controllers).await.is_ok());
        assert!(
            finished_rx.await.is_ok(),
            "the work after the signal ran to its end"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_counts_from_the_signal_not_from_the_start() {
        let shutdown = Shutdown::new(Duration::from_secs(25));
        let signal_later = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(100)).await;
            signal_later.trigger();
        });
        let started = tokio::time::Instant::now();
        let output = with_deadline(&shutdown, std::future::pending::<()>()).await;
        assert_eq!(output, None);
        assert_eq!(started.elapsed(), Duration::from_secs(125));
    }

    #[tokio::test(start_paused = true)]
    async fn forcing_ends_the_wait_before_the_deadline() {
        let shutdown = Shutdown::new(Duration::from_secs(25));
        let force_later = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            force_later.force();
        });
        let started = tokio::time::Instant::now();
        let output = with_deadline(&shutdown, std::future::pending::<()>()).await;
        assert_eq!(output, None);
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        assert!(shutdown.is_triggered(), "forcing also starts the shutdown");
    }

    #[tokio::test]
    async fn signaled_resolves_for_every_clone_once_triggered() {
        let shutdown = Shutdown::new(DEFAULT_SHUTDOWN_DEADLINE);
        let waiter = tokio::spawn(shutdown.clone().signaled());
        assert!(!shutdown.is_triggered());
        shutdown.clone().trigger();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(shutdown.is_triggered());
    }
}
