//! [`Admission`]: how many keys a controller's queue holds at once.
//!
//! kube-runtime's `Controller` takes every trigger into its scheduler at
//! once, and the scheduler's tables (a map of the keys scheduled, a delay
//! queue, a set of those pending) grow to the most keys they ever held and
//! never shrink. A manager started on 10,000 Deployed contracts triggers the
//! Requester's contract controller for each of them at once (the contracts'
//! initial list, and the Requester's, which maps to every contract), and its
//! scheduler kept about 7 MiB of tables for the rest of the process's life
//! (heaptrack, plan 0018 R10): a manager restarted on a fleet held 67 to 71
//! MiB where the same manager after the scale-up held 63.
//!
//! An `Admission` stands in front of the scheduler: it takes every trigger as
//! it comes (it never holds back the shared cache's fan-out, which every
//! controller reads), keeps each waiting key once, and hands the controller
//! at most a window of keys it has not finished yet. What it holds in a
//! burst, it gives back once the burst is through.
//!
//! # Guarantees
//! - Every key triggered reaches the controller: at once while fewer than
//!   the window are admitted and unfinished, else once some finish, in the
//!   order first triggered. A key triggered again while it waits is kept once
//!   (the reconcile reads the cache's latest object, not the trigger's).
//! - A key triggered while it is admitted goes to the controller at once:
//!   kube-runtime then reconciles it again after the reconcile running, as it
//!   would without an admission.
//!
//! # Assumptions
//! - Every reconcile of an admitted key ends with an outcome the controller's
//!   run stream reports with the key (a success, a failure, or the object no
//!   longer found), and that outcome is handed to [`Admission::finished`].
//!
//! # What it tells
//! How many keys wait for the window, on the gauge it is given
//! (`socialweb_reconcile_waiting`): after a restart on a fleet, how far
//! behind the controller is. 0 once the controller stops (a replica that
//! no longer leads is behind on nothing).

use std::collections::{HashSet, VecDeque};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::task::AtomicWaker;
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use prometheus_client::metrics::gauge::Gauge;

use crate::cache::index::{Key, key_of, key_ref};

/// How many keys a gated controller holds at once by default: a few times
/// the Requester's concurrency (64), so its runner never waits on the window.
pub const DEFAULT_WINDOW: usize = 256;

/// Hands a controller its triggers, at most a window of unfinished keys at
/// a time. Clones share one window.
#[derive(Clone)]
pub struct Admission {
    shared: Arc<Shared>,
}

struct Shared {
    window: usize,
    keys: Mutex<Keys>,
    /// How many keys wait: set at each poll of the admitted stream, the only
    /// place the waiting keys change in number, and to 0 when it is dropped.
    waiting: Gauge,
    /// The admitted stream, woken when a key finishes.
    waker: AtomicWaker,
}

#[derive(Default)]
struct Keys {
    /// Triggered and not yet handed out, in the order first triggered.
    waiting: VecDeque<Key>,
    /// The same keys, to keep each once.
    waiting_set: HashSet<Key>,
    /// Handed to the controller and not yet finished.
    admitted: HashSet<Key>,
}

impl Keys {
    /// Takes a trigger of `key`; returns it when it goes to the controller at once.
    fn offer(&mut self, key: Key) -> Option<Key> {
        if self.admitted.contains(&key) {
            return Some(key);
        }
        if self.waiting_set.insert(key.clone()) {
            self.waiting.push_back(key);
        }
        None
    }

    /// The next waiting key, if the window has room for it.
    fn admit(&mut self, window: usize) -> Option<Key> {
        if self.admitted.len() >= window {
            return None;
        }
        let key = self.waiting.pop_front()?;
        self.waiting_set.remove(&key);
        self.admitted.insert(key.clone());
        if self.waiting.is_empty() {
            self.give_back(window);
        }
        Some(key)
    }

    /// Returns what a burst grew the waiting keys' tables to.
    fn give_back(&mut self, window: usize) {
        if self.waiting.capacity() > window {
            self.waiting = VecDeque::new();
        }
        if self.waiting_set.capacity() > window {
            self.waiting_set = HashSet::new();
        }
    }
}

impl Admission {
    /// An admission of at most `window` unfinished keys (at least one),
    /// setting `waiting` to the number of keys waiting for it.
    #[must_use]
    pub fn new(window: usize, waiting: Gauge) -> Self {
        Self {
            shared: Arc::new(Shared {
                window: window.max(1),
                keys: Mutex::new(Keys::default()),
                waiting,
                waker: AtomicWaker::new(),
            }),
        }
    }

    /// The controller's triggers: every key of `triggers`, handed out as the
    /// window allows (for `Controller::reconcile_on`). Ends when `triggers` ends
    /// and nothing waits.
    pub fn admit<K>(&self, triggers: BoxStream<'static, Key>) -> BoxStream<'static, ObjectRef<K>>
    where
        K: Resource<DynamicType = ()> + 'static,
    {
        Admitted {
            shared: Arc::clone(&self.shared),
            triggers: Some(triggers),
        }
        .map(|key| key_ref(&key))
        .boxed()
    }

    /// Takes the end of a reconcile of `name` in `namespace`: its key leaves
    /// the window.
    pub fn finished(&self, name: &str, namespace: Option<&str>) {
        let key = key_of(name, namespace);
        let removed = self.keys().admitted.remove(&key);
        if removed {
            self.shared.waker.wake();
        }
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, Keys> {
        self.shared.keys()
    }
}

impl Shared {
    fn keys(&self) -> std::sync::MutexGuard<'_, Keys> {
        // Each change completes or does nothing: a panic cannot leave half of one.
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The stream [`Admission::admit`] returns, before its keys become references.
struct Admitted {
    shared: Arc<Shared>,
    /// `None` once they ended.
    triggers: Option<BoxStream<'static, Key>>,
}

impl Stream for Admitted {
    type Item = Key;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Key>> {
        // Registered before the window is read, so a key finishing after the
        // read wakes this poll again.
        self.shared.waker.register(cx.waker());
        // Every trigger there is, so none waits in the cache's fan-out.
        while let Some(triggers) = self.triggers.as_mut() {
            match triggers.poll_next_unpin(cx) {
                Poll::Ready(Some(key)) => {
                    if let Some(now) = self.shared.keys().offer(key) {
                        return Poll::Ready(Some(now));
                    }
                }
                Poll::Ready(None) => self.triggers = None,
                Poll::Pending => break,
            }
        }
        let mut keys = self.shared.keys();
        let admitted = keys.admit(self.shared.window);
        self.shared
            .waiting
            .set(i64::try_from(keys.waiting.len()).unwrap_or(i64::MAX));
        if let Some(key) = admitted {
            return Poll::Ready(Some(key));
        }
        if self.triggers.is_none() && keys.waiting.is_empty() {
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

/// A controller that stops (its leader's term over, the manager shutting
/// down) has nothing waiting: a follower must not go on saying it is behind.
impl Drop for Admitted {
    fn drop(&mut self) {
        self.shared.waiting.set(0);
    }
}

#[cfg(test)]
mod tests;
