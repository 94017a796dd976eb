//! `Deployed`: whether the claim's machine runs, from its contract, and the
//! loss grace of a guest that ran and went away.
//!
//! # Expected flow
//! Renting (or RentRetrying while no bid came) -> GuestRunning. A running
//! guest that goes away (the contract leaves Deployed or reports no guest)
//! is GuestUnreachable for `lossGraceSeconds`, counted from that condition's
//! own lastTransitionTime (so a restart keeps counting), then GuestLost.
//!
//! # Guarantees
//! Pure. The grace fires exactly at `start + grace`; before that its instant
//! is the verdict's deadline. A failed contract, a lost guest and a contract
//! released by hand fail the claim.

use api::{ComputeContractPhase, Condition, ConditionStatus, ContractState, Infra};
use chrono::{DateTime, Duration, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{DEPLOYED, Verdict, condition, reason, running_guest};
use crate::cache::{CachedCondition, CachedContract, CachedContractStatus, find_cached_condition};
use crate::time::{from_time, to_time};

/// The Deployed condition of a composed claim whose contract reports `status`.
#[must_use]
pub fn observe(
    previous: Option<&CachedCondition>,
    status: Option<&CachedContractStatus>,
    loss_grace: u32,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Verdict {
    let stamp = to_time(now);
    let phase = status.and_then(|s| s.phase);
    let settled = |status: ConditionStatus, reason: &str, message: String| {
        Verdict::settled(condition(
            DEPLOYED, status, reason, message, generation, &stamp,
        ))
    };
    let why = || {
        status
            .and_then(|s| s.message.as_ref().map(api::Text::to_string))
            .unwrap_or_else(|| "no reason given".to_owned())
    };
    let was_deployed =
        previous.is_some_and(|c| c.is_true() || c.reason == reason::GUEST_UNREACHABLE);

    if status.is_some_and(CachedContractStatus::renting_retried) {
        return settled(
            ConditionStatus::False,
            reason::RENT_RETRYING,
            format!(
                "no machine is rented yet and the market is asked again ({}); to ask for other resources or another location, delete and recreate the NodeClaim",
                why()
            ),
        );
    }
    if phase == Some(ComputeContractPhase::Failed) {
        let message = format!(
            "the ComputeContract failed ({}); delete and recreate the NodeClaim to rent another machine",
            why()
        );
        return Verdict::failed(
            DEPLOYED,
            reason::CONTRACT_FAILED,
            message,
            generation,
            &stamp,
        );
    }
    if let Some(guest) = running_guest(status) {
        let address = guest.address().unwrap_or("(no address yet)");
        let provider = guest.provider.as_str();
        return settled(
            ConditionStatus::True,
            reason::GUEST_RUNNING,
            format!("guest {address} of provider {provider} is running"),
        );
    }
    if was_deployed {
        // The start is kept from the previous condition when it already said unreachable.
        let start = previous
            .filter(|c| c.reason == reason::GUEST_UNREACHABLE)
            .map_or(now, |c| from_time(&c.last_transition_time()));
        let due = start + Duration::seconds(i64::from(loss_grace));
        let what = match phase {
            Some(p) => format!("the contract is {p:?} and reports no running guest"),
            None => "the contract is gone".to_owned(),
        };
        if now >= due {
            let message = format!(
                "the guest was lost for {loss_grace}s (lossGraceSeconds): {what}; its machine is released, delete and recreate the NodeClaim to rent another"
            );
            return Verdict::failed(DEPLOYED, reason::GUEST_LOST, message, generation, &stamp);
        }
        let mut verdict = settled(
            ConditionStatus::False,
            reason::GUEST_UNREACHABLE,
            format!(
                "{what}; the claim fails at {} unless the guest comes back",
                due.to_rfc3339()
            ),
        );
        verdict.deadline = Some(due);
        return verdict;
    }
    let (reason, message) = match phase {
        Some(ComputeContractPhase::Releasing) => (
            reason::RELEASING,
            "the machine is being released".to_owned(),
        ),
        Some(ComputeContractPhase::Released) => {
            (reason::RELEASED, "the machine is released".to_owned())
        }
        // One message for every step of a rent that goes on, from the
        // entry composed (no contract status yet) to the guest accepted, so a
        // contract's steps are not each a write of the claim (its own phase
        // says how far it is).
        None
        | Some(
            ComputeContractPhase::Pending
            | ComputeContractPhase::Bidding
            | ComputeContractPhase::Accepted,
        ) => (
            reason::RENTING,
            "a machine is being rented (the ComputeContract's phase says how far)".to_owned(),
        ),
        Some(p) => (
            reason::RENTING,
            format!("the market is renting a machine (contract {p:?})"),
        ),
    };
    settled(ConditionStatus::False, reason, message)
}

/// What a composed claim sees once the Infra controller marked its entry's
/// contract ReleasedByHand (someone else set its spec.release or deleted
/// it): the machine is gone for good and its entry is never rented again,
/// so the claim fails at once instead of waiting out the loss grace for a
/// guest that cannot come back. `None` when the entry was not released by hand.
#[must_use]
pub fn released_by_hand(
    infra: Option<&Infra>,
    entry: &str,
    generation: Option<i64>,
    now: &Time,
) -> Option<Verdict> {
    let row = infra
        .and_then(|i| i.status.as_ref())
        .and_then(|s| s.contracts.iter().find(|r| r.name == entry))
        .filter(|r| r.state == ContractState::ReleasedByHand)?;
    let message = format!(
        "ComputeContract {} was released by hand (its spec.release set by someone other than the Infra controller); its machine is not rented again: delete and recreate the NodeClaim to rent another",
        row.compute_contract
    );
    Some(Verdict::failed(
        DEPLOYED,
        reason::CONTRACT_RELEASED_BY_HAND,
        message,
        generation,
        now,
    ))
}

/// The Deployed condition of a Failed claim whose machine ran when it
/// failed (a join timeout, a lost node), as the machine goes: Releasing, then
/// Released. `None` keeps the condition as it is (the machine still runs, or
/// the condition already says why the claim failed).
#[must_use]
pub fn after_failure(
    previous: &[CachedCondition],
    contract: Option<&CachedContract>,
    generation: Option<i64>,
    now: &Time,
) -> Option<Condition> {
    let deployed = find_cached_condition(previous, DEPLOYED)?;
    if !(deployed.is_true() || deployed.reason == reason::RELEASING) {
        return None;
    }
    let phase = contract.map(|c| c.status.as_ref().and_then(|s| s.phase));
    let (why, message) = match phase {
        Some(Some(ComputeContractPhase::Releasing)) => (
            reason::RELEASING,
            "the claim failed: its machine is being released",
        ),
        // Released, or the contract is gone (deleted only once Released).
        None | Some(Some(ComputeContractPhase::Released)) => (
            reason::RELEASED,
            "the claim failed: its machine is released",
        ),
        Some(_) => return None,
    };
    Some(condition(
        DEPLOYED,
        ConditionStatus::False,
        why,
        message,
        generation,
        now,
    ))
}

/// Deployed of a live claim whose entry is not composed while no Requester
/// runs the namespace and its contract is gone: nothing is rented.
#[must_use]
pub fn not_rented(generation: Option<i64>, now: &Time) -> Condition {
    condition(
        DEPLOYED,
        ConditionStatus::False,
        reason::NOT_RENTED,
        "the entry is not composed, so no machine is rented",
        generation,
        now,
    )
}
