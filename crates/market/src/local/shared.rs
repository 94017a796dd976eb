//! What every guest of a market repeats, kept once: its contract's
//! namespace, its owner's DID, its location and its bidder's bid.
//!
//! A market rents each tenant's nodes in few namespaces and locations, and
//! the local market's few bidders each bid one price: as the `String`s of an
//! [`Agreement`](super::Agreement) these were about 250 bytes a guest, eight
//! allocations of them, repeated in every one of the 10,000 guests the
//! development market holds for a fleet of that size (the benchmark's
//! manager holds its market, so its memory is the manager's; plan 0018
//! R12).
//!
//! # Why our own
//! The interning crates (`internment`, `lasso`) keep every value they ever
//! saw; the values here come from requests (a tenant's DID and location), so
//! the tables stop growing at [`MOST_SHARED`] values each and a value past
//! that is kept apart, as the `api` crate's `intern` does for texts. A set of
//! `Arc`s is a few lines.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use crate::{Bid, Location};

/// Values each table keeps at most.
const MOST_SHARED: usize = 1024;

/// A bounded table of shared values.
struct Table<T: ?Sized>(HashSet<Arc<T>>);

impl<T: ?Sized + Hash + Eq> Table<T> {
    /// The shared copy of a value equal to `value`, if the table has one.
    fn get(&self, value: &T) -> Option<Arc<T>> {
        self.0.get(value).map(Arc::clone)
    }

    /// `shared`, kept for the next equal value while the table has room.
    fn keep(&mut self, shared: Arc<T>) -> Arc<T> {
        if self.0.len() < MOST_SHARED {
            self.0.insert(Arc::clone(&shared));
        }
        shared
    }
}

/// Locks `table`; every change to it is one insert, so it stays whole
/// whatever panicked while holding it.
fn lock<T: ?Sized>(table: &Mutex<Table<T>>) -> std::sync::MutexGuard<'_, Table<T>> {
    table.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `value`, shared with every equal one of `table`.
fn share<T: Hash + Eq>(table: &Mutex<Table<T>>, value: T) -> Arc<T> {
    let mut table = lock(table);
    match table.get(&value) {
        Some(shared) => shared,
        None => table.keep(Arc::new(value)),
    }
}

static TEXTS: LazyLock<Mutex<Table<str>>> = LazyLock::new(|| Mutex::new(Table(HashSet::new())));
static LOCATIONS: LazyLock<Mutex<Table<Location>>> =
    LazyLock::new(|| Mutex::new(Table(HashSet::new())));
static BIDS: LazyLock<Mutex<Table<Bid>>> = LazyLock::new(|| Mutex::new(Table(HashSet::new())));

/// `text` (a namespace, a DID), shared with every equal one.
pub(crate) fn text(text: &str) -> Arc<str> {
    let mut table = lock(&TEXTS);
    match table.get(text) {
        Some(shared) => shared,
        None => table.keep(Arc::from(text)),
    }
}

/// `location`, shared with every equal one.
pub(crate) fn location(location: Location) -> Arc<Location> {
    share(&LOCATIONS, location)
}

/// `bid`, shared with every equal one.
pub(crate) fn bid(bid: Bid) -> Arc<Bid> {
    share(&BIDS, bid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Price;

    #[test]
    fn equal_values_share_one_allocation() {
        assert!(Arc::ptr_eq(&text("did:owner"), &text("did:owner")));
        let de = || Location {
            country: "DE".to_owned(),
            region: None,
        };
        assert!(Arc::ptr_eq(&location(de()), &location(de())));
        let bid = || Bid::new("did:bidder", Price::hourly(10, "EUR"));
        assert!(Arc::ptr_eq(&super::bid(bid()), &super::bid(bid())));
        assert_eq!(*super::bid(bid()), bid(), "shared, not changed");
    }

    #[test]
    fn a_full_table_keeps_new_values_apart() {
        let table = Mutex::new(Table(HashSet::new()));
        for n in 0..MOST_SHARED {
            share(&table, n);
        }
        let first = share(&table, MOST_SHARED);
        let second = share(&table, MOST_SHARED);
        assert_eq!(first, second);
        assert!(
            !Arc::ptr_eq(&first, &second),
            "past the bound, each is apart"
        );
        assert_eq!(lock(&table).0.len(), MOST_SHARED);
    }
}
