//! The join and loss graces: what a composed claim's contract says about its
//! machine, as the Deployed and Joined conditions, a failure once a grace ran
//! out, and the next deadline to requeue at.
//!
//! # Expected flow
//! Renting -> Deployed (GuestRunning; the join grace starts at the Deployed
//! condition's lastTransitionTime) -> Joined (the guest reported its node
//! identity). A Deployed guest that goes away (the contract leaves Deployed,
//! or its guest or node identity disappears) starts the loss grace.
//!
//! # Guarantees
//! Pure. A grace fires exactly at `start + grace` (`now >= deadline`); before
//! that the deadline is returned so the caller requeues at `deadline - now`.
//! The starts are the conditions' own `lastTransitionTime`s, so a restart
//! keeps counting from the same instant.

use api::{
    ComputeContract, ComputeContractPhase, ComputeContractStatus, Condition, ConditionStatus,
    ContractState, Guest, Infra, find_condition,
};
use chrono::{DateTime, Duration, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::{DEPLOYED, JOINED, condition, reason};
use crate::time::{earliest, from_time, to_time};

/// Why a claim failed for good.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// PascalCase reason (JoinTimeout, GuestLost, ContractFailed).
    pub reason: &'static str,
    /// What happened and what to do.
    pub message: String,
}

/// What the contract says about a composed claim.
#[derive(Clone, Debug, PartialEq)]
pub struct Observation {
    /// The Deployed condition.
    pub deployed: Condition,
    /// The Joined condition.
    pub joined: Condition,
    /// Set when a grace ran out or the contract failed: the claim goes Failed.
    pub failure: Option<Failure>,
    /// The next instant a grace runs out, if one is running.
    pub deadline: Option<DateTime<Utc>>,
    /// The guest, as the contract reports it.
    pub guest: Option<Guest>,
    /// When the guest's grant to join expires: Deployed + joinGraceSeconds.
    pub grant_expires_at: Option<DateTime<Utc>>,
}

/// The graces of one claim, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Graces {
    /// `spec.joinGraceSeconds`.
    pub join: u32,
    /// `spec.lossGraceSeconds`.
    pub loss: u32,
}

/// Observes a composed claim's contract against its previous conditions.
#[must_use]
pub fn observe(
    previous: &[Condition],
    contract: Option<&ComputeContract>,
    graces: Graces,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Observation {
    let stamp = to_time(now);
    let prev_deployed = find_condition(previous, DEPLOYED);
    let prev_joined = find_condition(previous, JOINED);
    let status = contract.and_then(|c| c.status.as_ref());
    let phase = status.and_then(|s| s.phase);
    let guest = status.and_then(|s| s.guest.clone());
    let running = phase == Some(ComputeContractPhase::Deployed) && guest.is_some();
    let node_id = guest
        .as_ref()
        .filter(|_| running)
        .and_then(|g| g.node_id.clone());
    let was_deployed =
        prev_deployed.is_some_and(|c| c.is_true() || c.reason == reason::GUEST_UNREACHABLE);
    // A start kept from the previous condition when it already had this reason.
    let since = |prev: Option<&Condition>, reason: &str| {
        prev.filter(|c| c.reason == reason)
            .map_or(now, |c| from_time(&c.last_transition_time))
    };
    let cond = |type_: &str, status: ConditionStatus, reason: &str, message: String| {
        condition(type_, status, reason, message, generation, &stamp)
    };

    let mut failure = None;
    let mut deadline = None;
    let mut grant_expires_at = None;

    let deployed = if status.is_some_and(renting_retried) {
        let why = status
            .and_then(|s| s.message.clone())
            .unwrap_or_else(|| "no reason given".to_owned());
        cond(
            DEPLOYED,
            ConditionStatus::False,
            reason::RENT_RETRYING,
            format!(
                "no machine is rented yet and the market is asked again ({why}); to ask for other resources or another location, delete and recreate the NodeClaim"
            ),
        )
    } else if phase == Some(ComputeContractPhase::Failed) {
        let why = status
            .and_then(|s| s.message.clone())
            .unwrap_or_else(|| "no reason given".to_owned());
        let message = format!(
            "the ComputeContract failed ({why}); delete and recreate the NodeClaim to rent another machine"
        );
        failure = Some(Failure {
            reason: reason::CONTRACT_FAILED,
            message: message.clone(),
        });
        cond(
            DEPLOYED,
            ConditionStatus::False,
            reason::CONTRACT_FAILED,
            message,
        )
    } else if running {
        let address = guest
            .as_ref()
            .and_then(|g| g.address.clone())
            .unwrap_or_else(|| "(no address yet)".to_owned());
        let provider = guest.as_ref().map_or("", |g| g.provider.as_str());
        cond(
            DEPLOYED,
            ConditionStatus::True,
            reason::GUEST_RUNNING,
            format!("guest {address} of provider {provider} is running"),
        )
    } else if was_deployed {
        let start = since(prev_deployed, reason::GUEST_UNREACHABLE);
        let due = start + Duration::seconds(i64::from(graces.loss));
        let what = match phase {
            Some(p) => format!("the contract is {p:?} and reports no running guest"),
            None => "the contract is gone".to_owned(),
        };
        if now >= due {
            let message = format!(
                "the guest was lost for {}s (lossGraceSeconds): {what}; its machine is released, delete and recreate the NodeClaim to rent another",
                graces.loss
            );
            failure = Some(Failure {
                reason: reason::GUEST_LOST,
                message: message.clone(),
            });
            cond(
                DEPLOYED,
                ConditionStatus::False,
                reason::GUEST_LOST,
                message,
            )
        } else {
            deadline = Some(due);
            cond(
                DEPLOYED,
                ConditionStatus::False,
                reason::GUEST_UNREACHABLE,
                format!(
                    "{what}; the claim fails at {} unless the guest comes back",
                    due.to_rfc3339()
                ),
            )
        }
    } else {
        let (reason, message) = match phase {
            Some(ComputeContractPhase::Releasing) => (
                reason::RELEASING,
                "the machine is being released".to_owned(),
            ),
            Some(ComputeContractPhase::Released) => {
                (reason::RELEASED, "the machine is released".to_owned())
            }
            Some(p) => (
                reason::RENTING,
                format!("the market is renting a machine (contract {p:?})"),
            ),
            None => (
                reason::RENTING,
                "waiting for the Infra controller to write the ComputeContract".to_owned(),
            ),
        };
        cond(DEPLOYED, ConditionStatus::False, reason, message)
    };

    let joined = if let Some(id) = &node_id {
        cond(
            JOINED,
            ConditionStatus::True,
            reason::NODE_JOINED,
            format!("node {id} joined the cluster"),
        )
    } else if running {
        let was_joined = prev_joined.is_some_and(|c| c.is_true() || c.reason == reason::NODE_LOST);
        if was_joined {
            let due =
                since(prev_joined, reason::NODE_LOST) + Duration::seconds(i64::from(graces.loss));
            if now >= due && failure.is_none() {
                let message = format!(
                    "the node left the cluster and did not come back within {}s (lossGraceSeconds); its machine is released, delete and recreate the NodeClaim to rent another",
                    graces.loss
                );
                failure = Some(Failure {
                    reason: reason::GUEST_LOST,
                    message: message.clone(),
                });
                cond(JOINED, ConditionStatus::False, reason::GUEST_LOST, message)
            } else {
                deadline = earliest(deadline, Some(due));
                cond(
                    JOINED,
                    ConditionStatus::False,
                    reason::NODE_LOST,
                    format!(
                        "the guest no longer reports a node identity; the claim fails at {} unless it rejoins",
                        due.to_rfc3339()
                    ),
                )
            }
        } else {
            let deployed_since = from_time(&deployed_since(prev_deployed, &deployed));
            let due = deployed_since + Duration::seconds(i64::from(graces.join));
            grant_expires_at = Some(due);
            if now >= due {
                let message = format!(
                    "the guest did not join within {}s (joinGraceSeconds) of being deployed; check that the Cluster's API server is reachable from the guest, then delete and recreate the NodeClaim",
                    graces.join
                );
                failure = Some(Failure {
                    reason: reason::JOIN_TIMEOUT,
                    message: message.clone(),
                });
                cond(
                    JOINED,
                    ConditionStatus::False,
                    reason::JOIN_TIMEOUT,
                    message,
                )
            } else {
                deadline = earliest(deadline, Some(due));
                cond(
                    JOINED,
                    ConditionStatus::False,
                    reason::WAITING_FOR_NODE,
                    format!(
                        "waiting for the guest to register as a node; the claim fails at {} if it has not",
                        due.to_rfc3339()
                    ),
                )
            }
        }
    } else {
        cond(
            JOINED,
            ConditionStatus::False,
            reason::NOT_DEPLOYED,
            "the node joins once its machine is deployed".to_owned(),
        )
    };
    if running && grant_expires_at.is_none() {
        let start = from_time(&deployed_since(prev_deployed, &deployed));
        grant_expires_at = Some(start + Duration::seconds(i64::from(graces.join)));
    }

    Observation {
        deployed,
        joined,
        failure,
        deadline,
        guest,
        grant_expires_at,
    }
}

/// Whether the contract failed to rent a machine and will try again (no
/// bid came; the Requester asks the market again at `nextAttemptAt`): the
/// claim waits, it has not failed.
#[must_use]
pub fn renting_retried(status: &ComputeContractStatus) -> bool {
    status.phase == Some(ComputeContractPhase::Failed)
        && status.receipt.is_none()
        && status.next_attempt_at.is_some()
}

/// The Deployed condition of a Failed claim whose machine ran when it
/// failed (a join timeout, a lost node), as the machine goes: Releasing, then
/// Released. `None` keeps the condition as it is (the machine still runs, or
/// the condition already says why the claim failed).
#[must_use]
pub fn after_failure(
    previous: &[Condition],
    contract: Option<&ComputeContract>,
    generation: Option<i64>,
    now: &Time,
) -> Option<Condition> {
    let deployed = find_condition(previous, DEPLOYED)?;
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

/// What a composed claim sees once the Infra controller marked its entry's
/// contract ReleasedByHand (someone else set its spec.release or deleted
/// it): the machine is gone for good and its entry is never rented again,
/// so the claim fails at once instead of waiting out the loss grace for a
/// guest that cannot come back.
#[must_use]
pub fn released_by_hand(
    mut seen: Observation,
    infra: Option<&Infra>,
    entry: &str,
    generation: Option<i64>,
    now: &Time,
) -> Observation {
    let row = infra
        .and_then(|i| i.status.as_ref())
        .and_then(|s| s.contracts.iter().find(|r| r.name == entry))
        .filter(|r| r.state == ContractState::ReleasedByHand);
    let Some(row) = row else { return seen };
    let message = format!(
        "ComputeContract {} was released by hand (its spec.release set by someone other than the Infra controller); its machine is not rented again: delete and recreate the NodeClaim to rent another",
        row.compute_contract
    );
    seen.deployed = condition(
        DEPLOYED,
        ConditionStatus::False,
        reason::CONTRACT_RELEASED_BY_HAND,
        message.clone(),
        generation,
        now,
    );
    seen.failure = Some(Failure {
        reason: reason::CONTRACT_RELEASED_BY_HAND,
        message,
    });
    seen.deadline = None;
    seen
}

/// When the Deployed condition became True: kept from before, or now.
fn deployed_since(previous: Option<&Condition>, current: &Condition) -> Time {
    previous
        .filter(|c| c.is_true() && current.is_true())
        .map_or_else(
            || current.last_transition_time.clone(),
            |c| c.last_transition_time.clone(),
        )
}
