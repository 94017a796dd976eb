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

use api::ComputeContractPhase as Phase;
use chrono::{DateTime, Utc};

use super::decide::known_receipt;
use crate::cache::CachedContract;
use crate::requester::WholeContract;
use crate::requester::conditions as cond;
use crate::time::{from_time, until};

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
pub fn finished_without_guest(contract: &WholeContract) -> bool {
    let Some(status) = contract.status.as_ref() else {
        return false;
    };
    let rented = known_receipt(contract).is_some() || status.winner.is_some();
    let guest_released = api::find_condition(&status.conditions, cond::RELEASED)
        .is_some_and(api::Condition::is_true);
    finished_holding_nothing(status.phase, rented, guest_released)
}

/// [`finished_without_guest`] of a contract as the cache keeps it.
#[must_use]
pub fn cached_finished_without_guest(contract: &CachedContract) -> bool {
    let Some(status) = contract.status.as_ref() else {
        return false;
    };
    let rented = contract.receipt.is_some() || status.won;
    finished_holding_nothing(status.phase, rented, status.guest_released)
}

/// Released; or Failed with nothing rented (no receipt, no winner) or with
/// its guest confirmed gone (`Released=True`).
fn finished_holding_nothing(phase: Option<Phase>, rented: bool, guest_released: bool) -> bool {
    match phase {
        Some(Phase::Released) => true,
        Some(Phase::Failed) => !rented || guest_released,
        _ => false,
    }
}

/// The TTL verdict for `contract` at `now`.
#[must_use]
pub fn verdict(contract: &WholeContract, now: DateTime<Utc>) -> Ttl {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::requester::test_fixtures::{contract, receipt, t0};
    use crate::time::to_time;
    use api::{ConditionStatus, Winner};
    use proptest::prelude::*;

    const PHASES: [Phase; 7] = [
        Phase::Pending,
        Phase::Bidding,
        Phase::Accepted,
        Phase::Deployed,
        Phase::Releasing,
        Phase::Released,
        Phase::Failed,
    ];

    proptest! {
        #[test]
        fn only_finished_ownerless_guestless_contracts_expire_and_only_after_the_deadline(
            phase in proptest::sample::select(PHASES.to_vec()),
            has_receipt in any::<bool>(),
            has_winner in any::<bool>(),
            gone in proptest::option::of(any::<bool>()),
            owned in any::<bool>(),
            ttl in 0_u32..1000,
            completed_after in 0_i64..1000,
            now_after in 0_i64..3000,
        ) {
            let mut c = contract();
            c.spec.ttl_seconds_after_finished = ttl;
            let mut status = api::ComputeContractStatus {
                phase: Some(phase),
                receipt: has_receipt.then(receipt),
                winner: has_winner.then(|| Winner { bidder: "did:web:a".to_owned(), cost: 1, currency: "EUR".to_owned() }),
                completion_time: Some(to_time(t0() + chrono::Duration::seconds(completed_after))),
                ..Default::default()
            };
            if let Some(gone) = gone {
                let s = if gone { ConditionStatus::True } else { ConditionStatus::False };
                api::set_condition(&mut status.conditions, api::Condition::new(cond::RELEASED, s, "R", "", None, to_time(t0())));
            }
            c.status = Some(status);
            if owned {
                c.metadata.owner_references = Some(vec![Default::default()]);
            }
            let now = t0() + chrono::Duration::seconds(now_after);
            let deadline = t0() + chrono::Duration::seconds(completed_after + i64::from(ttl));
            let holds_guest = match phase {
                Phase::Released => false,
                Phase::Failed => (has_receipt || has_winner) && gone != Some(true),
                _ => true,
            };
            let expected = if holds_guest {
                Ttl::NotFinished
            } else if owned {
                Ttl::Owned
            } else if now >= deadline {
                Ttl::Expired
            } else {
                Ttl::Wait(until(deadline, now))
            };
            prop_assert_eq!(verdict(&c, now), expected);
        }
    }
}
