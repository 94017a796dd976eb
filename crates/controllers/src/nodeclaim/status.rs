//! One claim's status, from where its composition ended and its contract:
//! each condition decided by its own file in [`super::conditions`], the
//! phase from the contract, `Ready` derived once at the end.

use api::{ComputeContractPhase, Infra, InfraRef, NodeClaimPhase};
use chrono::{DateTime, Utc};

use super::compose::Problem;
use super::conditions::composed::{self, Composition};
use super::conditions::joined::{self, Graces};
use super::conditions::{DEPLOYED, Failure, JOINED, deployed, ready};
use super::root;
use super::status_write::StatusWrite;
use crate::cache::{CachedClaim, CachedClaimStatus, CachedContract, CachedContractStatus};
use crate::time::to_time;

/// What one claim's status is decided from.
#[derive(Clone, Copy)]
pub(super) struct ClaimView<'a> {
    pub claim: &'a CachedClaim,
    /// Its status as read.
    pub previous: &'a CachedClaimStatus,
    /// Its entry's contract, if there is one.
    pub contract: Option<&'a CachedContract>,
    pub now: DateTime<Utc>,
}

/// Where the claim's composition ended.
pub(super) enum Outcome<'a> {
    /// The claim is Failed from before: Failed is final, only its Deployed
    /// condition follows the machine on its way out.
    FailedBefore,
    /// Not composed; `stopped` when no live Requester runs the namespace and
    /// the claim is live (`infra_gone`: its Infra is gone too).
    Refused {
        problem: &'a Problem,
        stopped: Option<bool>,
    },
    /// Composed as `entry` of `infra_ref`; the Infra as read (for a hand release).
    Composed {
        entry: &'a str,
        infra_ref: InfraRef,
        infra: Option<&'a Infra>,
    },
}

/// The claim's new status, whether it keeps its entry and when to look again.
pub(super) struct ClaimDecision {
    /// What its status becomes.
    pub status: StatusWrite,
    /// The claim stays an entry of the Infra.
    pub keeps_entry: bool,
    /// The next instant a grace of the claim runs out.
    pub deadline: Option<DateTime<Utc>>,
}

/// Decides one claim's status. See the module docs.
pub(super) fn decide(view: ClaimView<'_>, outcome: Outcome<'_>) -> ClaimDecision {
    let ClaimView {
        claim,
        previous,
        contract,
        now,
    } = view;
    let generation = claim.metadata.generation;
    let stamp = to_time(now);
    let mut decision = ClaimDecision {
        status: StatusWrite::keeping(previous, generation),
        keeps_entry: false,
        deadline: None,
    };
    let status = &mut decision.status;
    let failure: Option<Failure> = match outcome {
        Outcome::FailedBefore => {
            if let Some(deployed) =
                deployed::after_failure(&previous.conditions, contract, generation, &stamp)
            {
                status.conditions.push(deployed);
            }
            return decision;
        }
        Outcome::Refused { problem, stopped } => {
            let verdict = composed::decide(Composition::Refused(problem), generation, &stamp);
            status.conditions.push(verdict.condition);
            status.phase = Some(uncomposed_phase(previous, contract));
            if let Some(guest) = contract.and_then(|c| c.status.as_ref()?.guest.as_ref()) {
                status.guest = Some(guest.into());
            }
            if let Some(infra_gone) = stopped {
                for condition in
                    root::stopped_status(status, infra_gone, contract, generation, &stamp)
                {
                    status.conditions.push(condition);
                }
            }
            None
        }
        Outcome::Composed {
            entry,
            infra_ref,
            infra,
        } => {
            let graces = Graces {
                join: claim.spec.join_grace_seconds,
                loss: claim.spec.loss_grace_seconds,
            };
            let contract_status = contract.and_then(|c| c.status.as_ref());
            let previous_deployed = previous.condition(DEPLOYED);
            let observed = deployed::observe(
                previous_deployed,
                contract_status,
                graces.loss,
                generation,
                now,
            );
            let since = joined::deployed_since(previous_deployed, &observed.condition);
            let deployed =
                deployed::released_by_hand(infra, entry, generation, &stamp).unwrap_or(observed);
            let joined = joined::observe(
                previous.condition(JOINED),
                since,
                contract_status,
                graces,
                generation,
                now,
            );
            status.conditions.push(deployed.condition);
            status.conditions.push(joined.condition);
            if let Some(guest) = contract_status.and_then(|s| s.guest.as_ref()) {
                status.guest = Some(guest.into());
            }
            if let Some(at) = joined::grant_expires_at(since, graces) {
                status.grant_expires_at = Some(to_time(at));
            }
            let failure = deployed.failure.or(joined.failure);
            let composition = match &failure {
                Some(failure) => {
                    status.phase = Some(NodeClaimPhase::Failed);
                    Composition::Failed {
                        entry,
                        infra: &infra_ref,
                        failure,
                    }
                }
                None => {
                    status.phase = Some(composed_phase(contract));
                    decision.keeps_entry = true;
                    decision.deadline = crate::time::earliest(deployed.deadline, joined.deadline);
                    Composition::Composed {
                        entry,
                        infra: &infra_ref,
                    }
                }
            };
            let verdict = composed::decide(composition, generation, &stamp);
            status.conditions.push(verdict.condition);
            status.infra = Some(infra_ref);
            failure
        }
    };
    // Every path here set InfraComposed (False unless composed), and a
    // composed claim Deployed and Joined too: what Ready derives from is
    // in the conditions set now, not in the messages the cache digested.
    let ready = ready(&status.conditions, failure.as_ref(), generation, &stamp);
    status.conditions.push(ready);
    decision
}

/// How long a deleted claim goes without a status write, from when this
/// controller first saw it deleted (its deletion, or later when the claim
/// queued: [`super::first_seen`]). Its release is usually over (the claim
/// gone) well within it: the Releasing write then told nobody anything its
/// deletionTimestamp did not, and was one write per node (plan 0012 S6). A
/// claim still held after it (a slow market, a failing release, no
/// Requester) shows Releasing and why.
pub const RELEASING_SHOWN_AFTER: chrono::TimeDelta = chrono::TimeDelta::seconds(10);

/// How long a new claim goes without its first status when that only says
/// it is being rented (Requesting), from when this controller first saw it
/// (its creation, or later when the claim queued): a claim whose node joins within it is
/// written once, Joined, with everything Requesting would have said (plan
/// 0012 S6). A problem (Pending, Failed) or a machine that runs without its
/// node (Deployed, which starts the join grace) is written at once.
pub const REQUESTING_SHOWN_AFTER: chrono::TimeDelta = chrono::TimeDelta::seconds(10);

/// Until when a claim's new status is not written: a deleted claim until its
/// deletion is [`RELEASING_SHOWN_AFTER`] old; a claim never written whose new
/// status is Requesting until it is [`REQUESTING_SHOWN_AFTER`] old. Either
/// counts from `first_seen` instead when that is later (when this controller
/// first saw the claim so, [`super::first_seen`]): the time a claim queued
/// before the controller could act is not a pending release or rent. `None`:
/// write it now.
pub(super) fn held_until(
    claim: &CachedClaim,
    previous: &CachedClaimStatus,
    new: &StatusWrite,
    first_seen: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let (stamp, hold) = if let Some(deleted) = &claim.metadata.deletion_timestamp {
        (crate::time::from_time(deleted), RELEASING_SHOWN_AFTER)
    } else if previous.phase.is_none() && new.phase == Some(NodeClaimPhase::Requesting) {
        (
            crate::time::from_time(claim.metadata.creation_timestamp.as_ref()?),
            REQUESTING_SHOWN_AFTER,
        )
    } else {
        return None;
    };
    let shown_at = first_seen.map_or(stamp, |seen| seen.max(stamp)) + hold;
    (now < shown_at).then_some(shown_at)
}

/// The phase of a composed claim, from its contract.
fn composed_phase(contract: Option<&CachedContract>) -> NodeClaimPhase {
    let status = contract.and_then(|c| c.status.as_ref());
    if status.is_some_and(CachedContractStatus::renting_retried) {
        return NodeClaimPhase::Requesting;
    }
    match status.and_then(|s| s.phase) {
        None
        | Some(
            ComputeContractPhase::Pending
            | ComputeContractPhase::Bidding
            | ComputeContractPhase::Accepted,
        ) => NodeClaimPhase::Requesting,
        Some(ComputeContractPhase::Deployed) => {
            let joined = status
                .and_then(|s| s.guest.as_ref())
                .is_some_and(|g| g.node_id().is_some());
            if joined {
                NodeClaimPhase::Joined
            } else {
                NodeClaimPhase::Deployed
            }
        }
        Some(ComputeContractPhase::Releasing) => NodeClaimPhase::Releasing,
        Some(ComputeContractPhase::Released) => NodeClaimPhase::Released,
        Some(ComputeContractPhase::Failed) => NodeClaimPhase::Failed,
    }
}

/// The phase of a claim that is not (or no longer) composed: its machine, if
/// any, is on its way out.
fn uncomposed_phase(
    previous: &CachedClaimStatus,
    contract: Option<&CachedContract>,
) -> NodeClaimPhase {
    match contract.and_then(|c| c.status.as_ref()?.phase) {
        Some(ComputeContractPhase::Released) => NodeClaimPhase::Released,
        Some(_) => NodeClaimPhase::Releasing,
        None if contract.is_some() => NodeClaimPhase::Releasing,
        None if previous.infra.is_some() => NodeClaimPhase::Released,
        None => NodeClaimPhase::Pending,
    }
}
