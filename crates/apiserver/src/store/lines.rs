//! Watch event lines rendered once per change and form, shared by every watcher that
//! sends the same line: with many watchers of one resource, a change is parsed, defaulted
//! and serialized once instead of once per watcher.
//!
//! The cache is a small ring indexed by resourceVersion (every write has its own), so its
//! size is fixed whatever the number of objects: a watcher that lags more than the ring
//! renders its line itself. A live change also carries the first line rendered for it
//! ([`FirstLine`]), which the watchers that send that same line read without a lock.

use std::sync::{Arc, OnceLock, Weak};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::registry::Resource;

/// How many recent resourceVersions keep their lines.
const SLOTS: usize = 256;

/// What makes two watchers' lines for one change the same.
#[derive(Debug, Clone, Copy)]
pub struct LineKey<'a> {
    /// The event type (ADDED, MODIFIED, DELETED).
    pub event: &'static str,
    /// The rendering (full object, metadata only); the caller numbers them.
    pub form: u8,
    /// The served resource (group, version, conversion).
    pub resource: &'a Arc<Resource>,
}

/// The first line rendered for a live change, kept with the change the fan-out hands to
/// every watcher. Most watchers of a change send the same line, and read it here without
/// a lock: the ring's slot lock, taken by every watcher for every change, is contended
/// between the server's threads.
#[derive(Default)]
pub struct FirstLine(OnceLock<(Kept, Bytes)>);

impl FirstLine {
    /// The line, if it is the one for `key`.
    #[must_use]
    pub fn get(&self, key: &LineKey<'_>) -> Option<&Bytes> {
        self.0
            .get()
            .and_then(|(kept, line)| kept.is(key).then_some(line))
    }

    /// Keeps `line` as the line for `key`, unless a line is kept already.
    pub fn offer(&self, key: &LineKey<'_>, line: &Bytes) {
        let _ = self.0.set((Kept::of(key), line.clone()));
    }
}

/// A [`LineKey`] kept in the ring. It holds the resource weakly: a descriptor freed
/// meanwhile keeps its address reserved, so a new one is never mistaken for it.
struct Kept {
    event: &'static str,
    form: u8,
    resource: Weak<Resource>,
}

impl Kept {
    fn of(key: &LineKey<'_>) -> Self {
        Self {
            event: key.event,
            form: key.form,
            resource: Arc::downgrade(key.resource),
        }
    }

    fn is(&self, key: &LineKey<'_>) -> bool {
        self.event == key.event
            && self.form == key.form
            && std::ptr::eq(self.resource.as_ptr(), Arc::as_ptr(key.resource))
    }
}

#[derive(Default)]
struct Slot {
    rv: u64,
    lines: Vec<(Kept, Bytes)>,
}

/// The ring.
pub struct LineCache {
    slots: Vec<Mutex<Slot>>,
}

impl Default for LineCache {
    fn default() -> Self {
        Self {
            slots: (0..SLOTS).map(|_| Mutex::default()).collect(),
        }
    }
}

impl LineCache {
    /// Hands the line for (`rv`, `key`) to `take`, rendered by `render` if no watcher
    /// rendered it yet. `take` runs under the slot's lock: it should copy, not wait.
    pub fn with_line<R>(
        &self,
        rv: u64,
        key: &LineKey<'_>,
        render: impl FnOnce() -> Bytes,
        take: impl FnOnce(&Bytes) -> R,
    ) -> R {
        let index = usize::try_from(rv % SLOTS as u64).unwrap_or_default();
        let Some(slot) = self.slots.get(index) else {
            return take(&render());
        };
        let mut slot = slot.lock();
        if slot.rv > rv {
            // Long gone from the ring: this watcher lags; render without caching.
            drop(slot);
            return take(&render());
        }
        if slot.rv < rv {
            slot.rv = rv;
            slot.lines.clear();
        }
        if let Some((_, line)) = slot.lines.iter().find(|(kept, _)| kept.is(key)) {
            return take(line);
        }
        // Rendered under the slot's lock: the other watchers of this change need the same
        // line and would otherwise render it too.
        let line = render();
        let taken = take(&line);
        slot.lines.push((Kept::of(key), line));
        taken
    }

    /// The line for (`rv`, `key`), rendered by `render` if no watcher rendered it yet.
    pub fn line(&self, rv: u64, key: &LineKey<'_>, render: impl FnOnce() -> Bytes) -> Bytes {
        self.with_line(rv, key, render, Bytes::clone)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::registry::Registry;

    #[test]
    fn renders_once_per_change_and_key_and_never_serves_an_old_ring_entry() {
        let registry = Registry::with_builtins();
        let configmaps = registry.get("", "v1", "configmaps").unwrap();
        let secrets = registry.get("", "v1", "secrets").unwrap();
        let key = |event, resource| LineKey {
            event,
            form: 0,
            resource,
        };
        let cache = LineCache::default();
        let renders = Cell::new(0);
        let render = |text: &str| {
            renders.set(renders.get() + 1);
            Bytes::copy_from_slice(text.as_bytes())
        };
        let a = key("ADDED", &configmaps);
        assert_eq!(cache.line(5, &a, || render("a5")), "a5");
        assert_eq!(cache.line(5, &a, || render("again")), "a5");
        assert_eq!(renders.get(), 1);
        assert_eq!(
            cache.line(5, &key("DELETED", &configmaps), || render("d5")),
            "d5"
        );
        assert_eq!(
            cache.line(5, &key("ADDED", &secrets), || render("s5")),
            "s5"
        );
        let later = 5 + SLOTS as u64;
        assert_eq!(cache.line(later, &a, || render("a-later")), "a-later");
        assert_eq!(cache.line(5, &a, || render("a5-again")), "a5-again");
        assert_eq!(renders.get(), 5);
    }

    #[test]
    fn a_first_line_is_served_only_for_its_own_key() {
        let registry = Registry::with_builtins();
        let configmaps = registry.get("", "v1", "configmaps").unwrap();
        let secrets = registry.get("", "v1", "secrets").unwrap();
        let added = LineKey {
            event: "ADDED",
            form: 0,
            resource: &configmaps,
        };
        let first = FirstLine::default();
        assert!(first.get(&added).is_none());
        first.offer(&added, &Bytes::from_static(b"a"));
        first.offer(&added, &Bytes::from_static(b"again"));
        assert_eq!(first.get(&added).unwrap(), "a");
        for other in [
            LineKey {
                event: "DELETED",
                ..added
            },
            LineKey { form: 1, ..added },
            LineKey {
                resource: &secrets,
                ..added
            },
        ] {
            assert!(first.get(&other).is_none());
        }
    }
}
