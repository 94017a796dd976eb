//! Finished contracts without an owner are deleted `ttlSecondsAfterFinished`
//! after their completionTime.
//!
//! # Guarantees
//!
//! Only a contract that holds no guest is ever deleted: phase Released, or
//! phase Failed with nothing rented (no receipt, no winner) or with its guest
//! confirmed gone (`Released=True`). A contract with an ownerReference is left
//! to its owner (the Infra controller deletes it).

use std::time::Duration;

use api::{ComputeContract, ComputeContractPhase as Phase};
use chrono::{DateTime, Utc};

use super::conditions::{self as cond, from_time, until};
use super::decide::known_receipt;

/// What the TTL says about a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// Not finished, or finished but still holding a guest.
    NotFinished,
    /// Has an owner, which decides when it goes.
    Owned,
    /// Delete it after this long.
    Wait(Duration),
    /// Delete it now.
    Expired,
}

/// Whether the contract is finished and holds no guest.
#[must_use]
pub fn finished_without_guest(contract: &ComputeContract) -> bool {
    let Some(status) = contract.status.as_ref() else {
        return false;
    };
    match status.phase {
        Some(Phase::Released) => true,
        Some(Phase::Failed) => {
            let nothing_rented = known_receipt(contract).is_none() && status.winner.is_none();
            let guest_gone = api::find_condition(&status.conditions, cond::RELEASED)
                .is_some_and(api::Condition::is_true);
            nothing_rented || guest_gone
        }
        _ => false,
    }
}

/// The TTL verdict for `contract` at `now`.
#[must_use]
pub fn verdict(contract: &ComputeContract, now: DateTime<Utc>) -> Ttl {
    if !finished_without_guest(contract) {
        return Ttl::NotFinished;
    }
    if contract
        .metadata
        .owner_references
        .as_ref()
        .is_some_and(|owners| !owners.is_empty())
    {
        return Ttl::Owned;
    }
    let Some(completed) = contract
        .status
        .as_ref()
        .and_then(|s| s.completion_time.as_ref())
        .map(from_time)
    else {
        return Ttl::NotFinished;
    };
    let deadline =
        completed + chrono::Duration::seconds(i64::from(contract.spec.ttl_seconds_after_finished));
    if now >= deadline {
        Ttl::Expired
    } else {
        Ttl::Wait(until(deadline, now))
    }
}
