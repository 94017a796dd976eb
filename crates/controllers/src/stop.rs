//! When the controllers stop taking new work.
//!
//! kube-runtime's `Controller::shutdown_on_signal` listens to the process's
//! own SIGTERM/SIGINT, which gives a second, private source of shutdown: the
//! manager's `Shutdown` (whose deadline and Lease release the leader loop
//! runs) could not stop the controllers in-process. Every controller instead
//! stops on one [`StopSignal`]: by default the process's signals, and in the
//! manager its shutdown token.

use std::future::Future;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

/// A cloneable future that resolves once, when the controllers must stop
/// taking new work (reconciles in flight still finish).
#[derive(Clone)]
pub struct StopSignal(Shared<BoxFuture<'static, ()>>);

impl std::fmt::Debug for StopSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopSignal").finish_non_exhaustive()
    }
}

impl StopSignal {
    /// Stops when `signal` resolves.
    pub fn on(signal: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(signal.boxed().shared())
    }

    /// Stops on the process's SIGTERM or SIGINT (what kube-runtime's
    /// `shutdown_on_signal` does).
    #[must_use]
    pub fn on_process_signal() -> Self {
        Self::on(async {
            let terminate = async {
                #[cfg(unix)]
                if let Ok(mut sigterm) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                {
                    sigterm.recv().await;
                    return;
                }
                std::future::pending::<()>().await;
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = terminate => {}
            }
        })
    }

    /// Never stops (the controllers run until their future is dropped).
    #[must_use]
    pub fn never() -> Self {
        Self::on(std::future::pending())
    }

    /// The future a `Controller::graceful_shutdown_on` takes.
    pub fn signaled(&self) -> impl Future<Output = ()> + Send + Sync + 'static {
        self.0.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_clone_resolves_once_the_signal_does() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let stop = StopSignal::on(async move {
            let _ = rx.await;
        });
        let first = stop.signaled();
        let second = stop.clone().signaled();
        let mut both = Box::pin(futures::future::join(first, second));
        assert!(futures::poll!(&mut both).is_pending());
        let _ = tx.send(());
        tokio::time::timeout(std::time::Duration::from_secs(5), both)
            .await
            .map_err(|_| "every clone resolved")
            .ok();
        assert!(
            futures::poll!(Box::pin(stop.signaled())).is_ready(),
            "and stays resolved"
        );
    }
}
