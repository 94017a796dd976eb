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

use super::index::{Key, object_key};

/// Reads what a shared cache keeps of kind `K`.
pub trait Kept<K: Resource<DynamicType = ()>> {
    /// The object `key` as kept, if it is.
    fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>>;

    /// Every object kept.
    fn state(&self) -> Vec<Arc<K>>;

    /// Every object kept, one at a time: a keeper that builds its objects
    /// at each read builds each only when the iteration reaches it.
    ///
    /// The shared cache tells its subscribers of every object after each
    /// list through this. Built at once ([`Kept::state`]), the 10,000 claims
    /// of a manager started on a running fleet were about 14 MiB of heap at
    /// one instant (heaptrack, plan 0018 R10).
    fn each(&self) -> Box<dyn Iterator<Item = Arc<K>> + Send>
    where
        K: Send + Sync + 'static;

    /// Whether nothing is kept.
    fn is_empty(&self) -> bool;

    /// The key ([`object_key`]) of each object kept. A re-list compares
    /// them with the keys it delivered; a keeper that builds its objects at
    /// each read gives them without building any.
    fn keys(&self) -> Vec<Key>
    where
        K: Send + Sync + 'static,
    {
        self.each()
            .map(|object| object_key(object.as_ref()))
            .collect()
    }

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

    fn is_empty(&self) -> bool {
        Store::is_empty(self)
    }

    /// The store holds each object shared: its state is a copy of pointers.
    fn each(&self) -> Box<dyn Iterator<Item = Arc<K>> + Send>
    where
        K: Send + Sync + 'static,
    {
        Box::new(Store::state(self).into_iter())
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

    fn is_empty(&self) -> bool {
        self.store.is_empty()
    }

    fn each(&self) -> Box<dyn Iterator<Item = Arc<K>> + Send>
    where
        K: Send + Sync + 'static,
    {
        self.store.each()
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

/// `key` as the allocation `map` already holds for it, else a new one: a
/// keeper's maps share each name and group key instead of copying it.
pub(crate) fn shared_key<V>(map: &std::collections::HashMap<Arc<str>, V>, key: &str) -> Arc<str> {
    match map.get_key_value(key) {
        Some((kept, _)) => kept.clone(),
        None => Arc::from(key),
    }
}

/// `shared` when it holds a value equal to `value`: so that equal values
/// of neighbouring objects (the claims of one Cluster, the Secrets of one
/// Infra) share one allocation.
pub(crate) fn equal_shared<T: ?Sized + PartialEq>(
    shared: Option<&Arc<T>>,
    value: &T,
) -> Option<Arc<T>> {
    shared.filter(|shared| ***shared == *value).cloned()
}

/// What a keeper of the cache's own keeps, as one value the events change
/// ([`super::JoinSecrets`]' groups, [`super::Claims`]' namespaces).
pub(crate) trait Holding<K>: Default {
    /// Takes `object` applied: it replaces the one of its namespace and name.
    fn insert(&mut self, object: K);
    /// Takes `object` deleted.
    fn remove(&mut self, object: &K);
}

/// A keeper's [`Holding`] shared by its handles, and the re-list under way.
///
/// It takes watch events as kube-runtime's store writer does: a re-list is
/// read into a holding of its own and replaces the shared one only when it
/// is done, so readers see the old state until then and never half of one
/// event.
pub(crate) struct Held<H> {
    kept: Arc<std::sync::RwLock<H>>,
    /// A re-list under way (the reflector's handle only: clones start without one).
    relisting: H,
}

impl<H: Default> Default for Held<H> {
    fn default() -> Self {
        Self {
            kept: Arc::default(),
            relisting: H::default(),
        }
    }
}

impl<H: Default> Clone for Held<H> {
    /// Another handle on the same holding (a re-list under way stays with the reflector's).
    fn clone(&self) -> Self {
        Self {
            kept: self.kept.clone(),
            relisting: H::default(),
        }
    }
}

impl<H> Held<H> {
    /// The holding, to read.
    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, H> {
        // Every change completes or does nothing: a panic cannot leave half of one.
        self.kept
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, H> {
        self.kept
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes one watch event.
    pub(crate) fn apply<K: Clone>(&mut self, event: &watcher::Event<K>)
    where
        H: Holding<K>,
    {
        match event {
            watcher::Event::Apply(object) => self.write().insert(object.clone()),
            watcher::Event::Delete(object) => self.write().remove(object),
            watcher::Event::Init => self.relisting = H::default(),
            watcher::Event::InitApply(object) => self.relisting.insert(object.clone()),
            watcher::Event::InitDone => *self.write() = std::mem::take(&mut self.relisting),
        }
    }
}
