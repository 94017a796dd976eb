//! The contract reconciler: runs each ComputeContract of the contract
//! namespace against its Requester's market (Pending -> Bidding -> Accepted
//! -> Deployed -> Releasing -> Released, or Failed) and writes its status.
//!
//! - [`decide`]: the pure lifecycle, unit- and property-tested
//!   (`tests/requester_decide`); `lifecycle` is its vocabulary (timing, the
//!   market as decide sees it, commands and observations), `observe` the
//!   half that reads the market's answer, `events` the Events and release
//!   metrics a status change deserves.
//! - `act`: performs what decide says: annotation, status, market call, Event,
//!   the TTL delete and the release finalizer's removal.
//! - [`ttl`]: finished ownerless contracts are deleted after their TTL.
//! - `guest_watch`: one market call per round for the guests of the
//!   Deployed contracts, waking only those whose guest changed.
//! - [`whole`]: the whole contract as a reconcile reads it from the API
//!   server and decides from it (the cache keeps a read model).

pub mod decide;
pub mod ttl;
pub mod whole;

pub(super) mod act;
mod events;
pub(super) mod guest_watch;
mod lifecycle;
mod observe;
