//! The adapter's background calls (`submitRfp` to each bidder), counted so
//! tests and shutdown can wait for them, and aborted with the adapter.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;
use tokio::task::AbortHandle;

/// Spawned tasks still running, and how to abort them.
#[derive(Clone)]
pub struct Tasks {
    running: Arc<watch::Sender<usize>>,
    handles: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Default for Tasks {
    fn default() -> Self {
        Self {
            running: Arc::new(watch::Sender::new(0)),
            handles: Arc::default(),
        }
    }
}

/// Counts a task down however it ends (done, panicked or aborted).
struct Running(Arc<watch::Sender<usize>>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Tasks {
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.running.send_modify(|n| *n += 1);
        let running = Running(Arc::clone(&self.running));
        let handle = tokio::spawn(async move {
            let _running = running;
            task.await;
        });
        let mut handles = self.handles.lock().unwrap_or_else(PoisonError::into_inner);
        handles.retain(|h| !h.is_finished());
        handles.push(handle.abort_handle());
    }

    /// Waits until no task runs.
    pub async fn settled(&self) {
        let mut running = self.running.subscribe();
        // The sender lives in self, so the wait ends only at zero.
        let _ = running.wait_for(|n| *n == 0).await;
    }

    pub fn abort_all(&self) {
        for handle in self
            .handles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            handle.abort();
        }
    }
}
