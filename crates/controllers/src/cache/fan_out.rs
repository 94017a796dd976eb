//! What the subscribers of a shared cache hear of each watch event.
//!
//! An applied object goes out as the keeper holds it, a deleted one with its
//! last state. The end of a list tells every object listed, and after a
//! re-list (the watch was down, or its resourceVersion expired) every object
//! that vanished meanwhile as well: its deletion was never watched.
//!
//! # Why one object at a time
//!
//! A list ends with every object of the kind: a keeper that builds its
//! objects at each read ([`super::Claims`], [`super::JoinSecrets`]) builds
//! each as it goes out ([`Kept::each`]), and the fan-out's buffer holds at
//! most [`super::FAN_OUT_BUFFER`] of them. Built at once, the 10,000 claims of
//! a manager started on a running fleet were about 14 MiB of heap at one
//! instant (heaptrack, plan 0018 R10). For the same reason a re-list
//! remembers the keys it delivered, not a copy of every object kept before
//! it (held until the re-list was done): the keeper still holds those until
//! the list is done, and the few that vanished are read from it then.

use std::collections::HashSet;
use std::sync::Arc;

use kube::Resource;
use kube::runtime::watcher;

use super::index::{Key, key_ref, object_key};
use super::keep::Kept;

/// The keys a re-list delivered, to tell which kept objects it did not.
#[derive(Default)]
pub(super) struct Relist {
    /// The keys listed so far; `None` outside a re-list, and while nothing
    /// was kept when it began (the first list: nothing can vanish).
    listed: Option<HashSet<Key>>,
}

impl Relist {
    /// Takes `event` before `kept` does. At the end of a re-list, returns the
    /// objects `kept` holds that the list did not deliver, with their last
    /// state (which `kept` drops when it takes the event).
    pub(super) fn observe<K>(
        &mut self,
        event: &watcher::Event<K>,
        kept: &impl Kept<K>,
    ) -> Vec<Arc<K>>
    where
        K: Resource<DynamicType = ()> + Send + Sync + 'static,
    {
        match event {
            watcher::Event::Init => {
                self.listed = (!kept.is_empty()).then(HashSet::new);
                Vec::new()
            }
            watcher::Event::InitApply(object) => {
                if let Some(listed) = &mut self.listed {
                    listed.insert(object_key(object));
                }
                Vec::new()
            }
            // Only the few that vanished are built (or read) from the keeper.
            watcher::Event::InitDone => match self.listed.take() {
                Some(listed) => (kept.keys().into_iter())
                    .filter(|key| !listed.contains(key))
                    .filter_map(|key| kept.get(&key_ref(&key)))
                    .collect(),
                None => Vec::new(),
            },
            watcher::Event::Apply(_) | watcher::Event::Delete(_) => Vec::new(),
        }
    }
}

/// The objects one watch event tells the subscribers about, `kept` having
/// taken it; `vanished` is what [`Relist::observe`] returned for it.
pub(super) fn fan_out_of<K>(
    event: watcher::Event<K>,
    kept: &impl Kept<K>,
    vanished: Vec<Arc<K>>,
) -> Told<K>
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
{
    match event {
        // The keeper's own copy (kube-runtime's writer clones each object it
        // takes): a second copy per event would live as long as the slowest
        // subscriber, up to FAN_OUT_BUFFER of them per kind in a scale-up.
        watcher::Event::Apply(object) => Told::One(Some(kept.for_subscribers(object))),
        watcher::Event::Delete(object) => Told::One(Some(Arc::new(object))),
        watcher::Event::Init | watcher::Event::InitApply(_) => Told::One(None),
        watcher::Event::InitDone => Told::Every(Box::new(kept.each().chain(vanished))),
    }
}

/// What the subscribers hear of one event, one object at a time.
pub(super) enum Told<K> {
    /// One object, or none (without a boxed iterator for each event).
    One(Option<Arc<K>>),
    /// Every object kept, and those that vanished.
    Every(Box<dyn Iterator<Item = Arc<K>> + Send>),
}

impl<K> Iterator for Told<K> {
    type Item = Arc<K>;

    fn next(&mut self) -> Option<Arc<K>> {
        match self {
            Told::One(object) => object.take(),
            Told::Every(objects) => objects.next(),
        }
    }
}

/// A keeper of the cache's own beside a kube-runtime store, each with its
/// re-list: for tests that they tell the subscribers the same.
#[cfg(test)]
pub(super) struct Beside<K: Resource<DynamicType = ()> + Clone + 'static, S> {
    pub(super) kube: super::keep::KubeStore<K>,
    pub(super) keep: S,
    relists: (Relist, Relist),
}

#[cfg(test)]
impl<K, S> Beside<K, S>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
    S: super::keep::Keep<K>,
{
    pub(super) fn new() -> Self {
        Self {
            kube: super::keep::KubeStore::default(),
            keep: S::default(),
            relists: (Relist::default(), Relist::default()),
        }
    }

    /// Takes `event` as the reflector does, in both; returns what the
    /// subscribers of each hear, rendered and sorted (kube's, then the keeper's).
    pub(super) fn take(&mut self, event: &watcher::Event<K>) -> (Vec<String>, Vec<String>) {
        use super::keep::Keep as _;
        let vanished_kube = self.relists.0.observe(event, &self.kube);
        let vanished_keep = self.relists.1.observe(event, &self.keep);
        self.kube.apply(event);
        self.keep.apply(event);
        let heard = |told: Told<K>| {
            let mut heard: Vec<String> = told.map(|o| format!("{o:?}")).collect();
            heard.sort();
            heard
        };
        (
            heard(fan_out_of(event.clone(), &self.kube, vanished_kube)),
            heard(fan_out_of(event.clone(), &self.keep, vanished_keep)),
        )
    }
}
