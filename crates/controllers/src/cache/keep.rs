//! Where a shared cache keeps the objects of its kind: kube-runtime's store,
//! or a keeper of its own for a kind no `Controller` has as its primary.
//!
//! A kube-runtime `Store` holds each object as its type, whose `ObjectMeta`
//! alone is 360 bytes whatever it holds, keyed by an `ObjectRef` of four more
//! strings: about 650 bytes an object before any field of its own (plan
//! 0017). A `Controller` needs one for its primary kind; a kind that only
//! wakes controllers and is read by reconciles (the join Secrets) can be kept
//! in a smaller form by a keeper of its own ([`super::JoinSecrets`]), and
//! one a `Controller` reconciles only a few of (the claims whose Cluster is
//! missing) by a keeper ([`super::Claims`]) beside a store of those few.
//!
//! # Guarantees
//! - The reflector applies every event to its keeper before any index or
//!   subscriber hears of it, as it does to a kube-runtime store.
//! - [`Kept::get`] and [`Kept::state`] give the objects as the watch
//!   delivered them, in every field the kind's type keeps: a keeper that
//!   keeps less gives them rebuilt from what it keeps, so an object the
//!   decoder keeps at its last readable version is kept unchanged.

use std::sync::Arc;

use kube::Resource;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

/// Reads what a shared cache keeps of kind `K`.
pub trait Kept<K: Resource<DynamicType = ()>> {
    /// The object `key` as kept, if it is.
    fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>>;

    /// Every object kept.
    fn state(&self) -> Vec<Arc<K>>;

    /// `object`, just applied, as the subscribers get it: the kept copy where
    /// the keeper holds one, so no second copy lives in the fan-out.
    fn for_subscribers(&self, object: K) -> Arc<K> {
        self.get(&ObjectRef::from_obj(&object))
            .unwrap_or_else(|| Arc::new(object))
    }
}

/// Keeps the objects of kind `K` for a shared cache's reflector.
pub trait Keep<K: Resource<DynamicType = ()>>: Kept<K> + Default + Send + 'static {
    /// What the reconciles read: shares what this keeps.
    type Reader: Clone + Send + Sync + 'static;

    /// A read handle.
    fn reader(&self) -> Self::Reader;

    /// Takes one (decoded) watch event.
    fn apply(&mut self, event: &watcher::Event<K>);
}

/// A kube-runtime store and its writer: for the kinds a `Controller` has as
/// its primary (it reads each reconcile's object from one).
pub struct KubeStore<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    writer: Writer<K>,
    store: Store<K>,
}

impl<K> Default for KubeStore<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn default() -> Self {
        let writer = Writer::default();
        Self {
            store: writer.as_reader(),
            writer,
        }
    }
}

impl<K> Kept<K> for Store<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        Store::get(self, key)
    }

    fn state(&self) -> Vec<Arc<K>> {
        Store::state(self)
    }
}

impl<K> Kept<K> for KubeStore<K>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        self.store.get(key)
    }

    fn state(&self) -> Vec<Arc<K>> {
        self.store.state()
    }
}

impl<K> Keep<K> for KubeStore<K>
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    type Reader = Store<K>;

    fn reader(&self) -> Store<K> {
        self.store.clone()
    }

    fn apply(&mut self, event: &watcher::Event<K>) {
        self.writer.apply_watcher_event(event);
    }
}
