//! Where a claim's time goes on its way out, read from the server's objects
//! as the driver's watch sees them (as [`crate::stages`] does for the way
//! in): from the claim's delete, its contract marked `spec.release`, the
//! contract Releasing, Released, its delete requested, gone; its join Secret
//! gone; the claim gone.

use std::collections::HashMap;
use std::time::Instant;

use api::{ComputeContract, ComputeContractPhase as Phase};

use crate::stages::rows_text;

/// The steps of a deleted claim, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Departure {
    /// The Infra controller set the contract's `spec.release` (its entry left the Infra).
    ReleaseMarked,
    /// The Requester sent the release; the market has not confirmed it yet.
    Releasing,
    /// The market confirmed the guest gone.
    Released,
    /// The Infra controller deleted the Released contract (its finalizer holds it).
    ContractDeleting,
    /// The Requester removed its finalizer and the contract is gone.
    ContractGone,
    /// The NodeClaim controller deleted the claim's join Secret.
    SecretGone,
    /// The NodeClaim controller removed the claim's finalizer and the claim is gone.
    ClaimGone,
}

impl Departure {
    pub const ALL: [Self; 7] = [
        Self::ReleaseMarked,
        Self::Releasing,
        Self::Released,
        Self::ContractDeleting,
        Self::ContractGone,
        Self::SecretGone,
        Self::ClaimGone,
    ];

    /// The contract's steps, which imply each other in this order.
    const CONTRACT: [Self; 5] = [
        Self::ReleaseMarked,
        Self::Releasing,
        Self::Released,
        Self::ContractDeleting,
        Self::ContractGone,
    ];

    const fn label(self) -> &'static str {
        match self {
            Self::ReleaseMarked => "spec.release set",
            Self::Releasing => "Releasing",
            Self::Released => "Released",
            Self::ContractDeleting => "contract delete sent",
            Self::ContractGone => "contract gone",
            Self::SecretGone => "join Secret gone",
            Self::ClaimGone => "claim gone",
        }
    }
}

/// The first time each entry reached each step of its departure.
#[derive(Default)]
pub struct Departures {
    seen: HashMap<String, [Option<Instant>; Departure::ALL.len()]>,
}

impl Departures {
    fn mark(&mut self, entry: &str, step: Departure, now: Instant) {
        let times = self.seen.entry(entry.to_owned()).or_default();
        // A later step of the contract seen implies its earlier ones (a watch may skip a version).
        if let Some(at) = Departure::CONTRACT.iter().position(|s| *s == step) {
            for earlier in &Departure::CONTRACT[..at] {
                times[*earlier as usize].get_or_insert(now);
            }
        }
        times[step as usize].get_or_insert(now);
    }

    /// Records how far a contract of entry `entry` got on its way out.
    pub fn contract(&mut self, entry: &str, contract: &ComputeContract, now: Instant) {
        let phase = contract.status.as_ref().and_then(|s| s.phase);
        let step = if contract.metadata.deletion_timestamp.is_some() {
            Departure::ContractDeleting
        } else {
            match phase {
                Some(Phase::Released) => Departure::Released,
                Some(Phase::Releasing) => Departure::Releasing,
                _ if contract.spec.release => Departure::ReleaseMarked,
                _ => return,
            }
        };
        self.mark(entry, step, now);
    }

    /// Records that the object of entry `entry` for `step` (a contract, a
    /// join Secret or a claim) is gone.
    pub fn gone(&mut self, entry: &str, step: Departure, now: Instant) {
        self.mark(entry, step, now);
    }

    /// One line per step: claim delete answered -> step, p50 and p99 over
    /// the claims, and when the last one got there (since the first delete).
    pub fn report(&self, deleted: &[(String, Instant)], started: Instant) -> String {
        let rows = Departure::ALL.map(|step| {
            (step.label(), move |entry: &str| {
                self.seen.get(entry).and_then(|t| t[step as usize])
            })
        });
        format!(
            "  the way out of the {} claims, first seen by the driver's watch (claim delete \
             answered -> step p50 / p99; the last claim to reach it, since the first delete):\n{}",
            deleted.len(),
            rows_text("claim delete answered", deleted, started, &rows)
        )
    }
}
