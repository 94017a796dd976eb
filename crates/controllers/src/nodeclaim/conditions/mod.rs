//! The NodeClaim's conditions, one file each (Karpenter's layout):
//! [`composed`] owns `InfraComposed`, [`deployed`] owns `Deployed` (and the
//! loss grace of a running guest), [`joined`] owns `Joined` (the join grace and
//! the loss grace of a joined node). Each returns its condition, the next
//! instant it changes by itself and the failure it found ([`Verdict`]).
//! `Ready` is derived once, at the end of a claim's decision ([`ready`]).
//!
//! A new condition is a file here returning a [`Verdict`], its type below, and
//! one line in [`derive_ready`]'s list when it gates Ready. Reasons are
//! PascalCase constants; messages say what to do.

pub mod composed;
pub mod deployed;
pub mod joined;

use crate::cache::{CachedContractStatus, CachedGuest};
use api::{ComputeContractPhase, Condition, ConditionStatus, find_condition};
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The claim is an entry of its Cluster's Infra.
pub const INFRA_COMPOSED: &str = "InfraComposed";
/// The claim's machine is running.
pub const DEPLOYED: &str = "Deployed";
/// The claim's machine registered as a node of the Cluster.
pub const JOINED: &str = "Joined";
/// Derived: composed, deployed and joined.
pub const READY: &str = "Ready";

/// Reasons of the conditions, PascalCase.
pub mod reason {
    /// InfraComposed True: the claim is an entry of the Infra.
    pub const COMPOSED: &str = "Composed";
    /// `spec.clusterName` is not a plain name (it cannot name another namespace).
    pub const CLUSTER_NAME_INVALID: &str = "ClusterNameInvalid";
    /// `spec.clusterName` is longer than a label value (63): no write for it can succeed.
    pub const CLUSTER_NAME_TOO_LONG: &str = "ClusterNameTooLong";
    /// No Cluster of that name in the claim's namespace.
    pub const CLUSTER_NOT_FOUND: &str = "ClusterNotFound";
    /// The Cluster is being deleted.
    pub const CLUSTER_DELETING: &str = "ClusterDeleting";
    /// The claim's ownerReference names another Cluster than `spec.clusterName`.
    pub const CLUSTER_OWNER_MISMATCH: &str = "ClusterOwnerMismatch";
    /// The Cluster has no `status.url` yet.
    pub const CLUSTER_NOT_READY: &str = "ClusterURLMissing";
    /// A resource amount is zero or beyond what any machine offers.
    pub const IMPOSSIBLE_RESOURCES: &str = "ImpossibleResources";
    /// The owner DID (claim's or Cluster's account) is not a DID.
    pub const INVALID_OWNER_DID: &str = "InvalidOwnerDid";
    /// The previous Infra of the Cluster is still being deleted.
    pub const INFRA_DELETING: &str = "InfraDeleting";
    /// The guest named in `spec.adopt` is held by another contract.
    pub const GUEST_HELD: &str = "GuestHeld";
    /// The claim is being deleted.
    pub const CLAIM_DELETING: &str = "ClaimDeleting";
    /// The claim failed; its entry was removed.
    pub const CLAIM_FAILED: &str = "ClaimFailed";
    /// The Requester of the contract namespace is being deleted: nothing composes.
    pub const REQUESTER_DELETING: &str = "RequesterDeleting";
    /// No Requester runs the contract namespace: nothing composes until one is applied.
    pub const NO_REQUESTER: &str = "NoRequester";

    /// Deployed True: the guest runs.
    pub const GUEST_RUNNING: &str = "GuestRunning";
    /// Deployed False: the market is still renting the machine.
    pub const RENTING: &str = "Renting";
    /// Deployed False: no bid came; the market is asked again (the claim waits).
    pub const RENT_RETRYING: &str = "RentRetrying";
    /// Deployed False: the entry is not composed, so nothing is rented.
    pub const NOT_RENTED: &str = "NotRented";
    /// Deployed False: the machine is being released.
    pub const RELEASING: &str = "Releasing";
    /// Deployed False: the machine is released.
    pub const RELEASED: &str = "Released";
    /// Deployed False: a Deployed guest is gone; within the loss grace.
    pub const GUEST_UNREACHABLE: &str = "GuestUnreachable";
    /// Deployed False, final: the guest stayed gone past the loss grace.
    pub const GUEST_LOST: &str = "GuestLost";
    /// Deployed False, final: the ComputeContract failed.
    pub const CONTRACT_FAILED: &str = "ContractFailed";
    /// Deployed False, final: someone other than the Infra controller set the
    /// ComputeContract's spec.release.
    pub const CONTRACT_RELEASED_BY_HAND: &str = "ContractReleasedByHand";

    /// Joined True: the guest reported its node identity.
    pub const NODE_JOINED: &str = "NodeJoined";
    /// Joined False: the guest is not deployed yet.
    pub const NOT_DEPLOYED: &str = "NotDeployed";
    /// Joined False: deployed, waiting for the node to register; within the join grace.
    pub const WAITING_FOR_NODE: &str = "WaitingForNode";
    /// Joined False: a joined node's identity is gone; within the loss grace.
    pub const NODE_LOST: &str = "NodeLost";
    /// Joined False, final: the node did not join within the join grace.
    pub const JOIN_TIMEOUT: &str = "JoinTimeout";

    /// Ready True.
    pub const NODE_READY: &str = "NodeReady";
}

/// Why a claim failed for good.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// PascalCase reason (JoinTimeout, GuestLost, ContractFailed).
    pub reason: &'static str,
    /// What happened and what to do.
    pub message: String,
}

/// What one condition's file decided for a claim.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    /// The condition.
    pub condition: Condition,
    /// The next instant the condition changes by itself (a grace runs out).
    pub deadline: Option<DateTime<Utc>>,
    /// Set when a grace ran out or the machine is gone for good: the claim goes Failed.
    pub failure: Option<Failure>,
}

impl Verdict {
    /// A condition that neither waits for a deadline nor fails the claim.
    #[must_use]
    pub fn settled(condition: Condition) -> Self {
        Self {
            condition,
            deadline: None,
            failure: None,
        }
    }

    /// A condition of `type_` that fails the claim: False, with the
    /// failure's reason and message.
    #[must_use]
    pub fn failed(
        type_: &str,
        reason: &'static str,
        message: String,
        generation: Option<i64>,
        now: &Time,
    ) -> Self {
        Self {
            condition: condition(
                type_,
                ConditionStatus::False,
                reason,
                message.clone(),
                generation,
                now,
            ),
            deadline: None,
            failure: Some(Failure { reason, message }),
        }
    }
}

/// The guest of a contract whose machine runs (Deployed, a guest reported).
#[must_use]
pub fn running_guest(status: Option<&CachedContractStatus>) -> Option<&CachedGuest> {
    status
        .filter(|s| s.phase == Some(ComputeContractPhase::Deployed))
        .and_then(|s| s.guest.as_ref())
}

/// A condition of `type_` for generation `generation`, stamped at `now`
/// (`set_condition` keeps an older stamp when the status did not change).
#[must_use]
pub fn condition(
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let message = crate::message::cap(&message.into());
    Condition::new(type_, status, reason, message, generation, now.clone())
}

/// Ready, derived: True when InfraComposed, Deployed and Joined are all True;
/// otherwise False with the reason and message of the first that is not.
#[must_use]
pub fn derive_ready(conditions: &[Condition], generation: Option<i64>, now: &Time) -> Condition {
    let first_unready = [INFRA_COMPOSED, DEPLOYED, JOINED]
        .into_iter()
        .map(|t| (t, find_condition(conditions, t)))
        .find(|(_, c)| !c.is_some_and(Condition::is_true));
    match first_unready {
        None => condition(
            READY,
            ConditionStatus::True,
            reason::NODE_READY,
            "the node joined the cluster",
            generation,
            now,
        ),
        Some((_, Some(c))) => condition(
            READY,
            ConditionStatus::False,
            &c.reason,
            c.message.clone(),
            generation,
            now,
        ),
        Some((type_, None)) => condition(
            READY,
            ConditionStatus::Unknown,
            "Unknown",
            format!("{type_} is not reported yet"),
            generation,
            now,
        ),
    }
}

/// Ready, once per claim decision: the failure's reason and message when
/// the claim failed now, otherwise [`derive_ready`].
#[must_use]
pub fn ready(
    conditions: &[Condition],
    failure: Option<&Failure>,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    match failure {
        Some(failure) => condition(
            READY,
            ConditionStatus::False,
            failure.reason,
            failure.message.clone(),
            generation,
            now,
        ),
        None => derive_ready(conditions, generation, now),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(s: i64) -> Time {
        Time(Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn ready_copies_first_unready_reason() {
        let now = at(5);
        let conds = vec![
            condition(
                INFRA_COMPOSED,
                ConditionStatus::True,
                reason::COMPOSED,
                "",
                None,
                &now,
            ),
            condition(
                DEPLOYED,
                ConditionStatus::False,
                reason::RENTING,
                "renting",
                None,
                &now,
            ),
            condition(
                JOINED,
                ConditionStatus::False,
                reason::NOT_DEPLOYED,
                "",
                None,
                &now,
            ),
        ];
        let ready = derive_ready(&conds, Some(2), &now);
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.reason, reason::RENTING);
        assert_eq!(ready.message, "renting");
    }

    #[test]
    fn ready_true_only_when_all_true() {
        let now = at(5);
        let mut conds: Vec<_> = [INFRA_COMPOSED, DEPLOYED, JOINED]
            .into_iter()
            .map(|t| condition(t, ConditionStatus::True, "Ok", "", None, &now))
            .collect();
        assert!(derive_ready(&conds, None, &now).is_true());
        conds.pop();
        assert_eq!(
            derive_ready(&conds, None, &now).status,
            ConditionStatus::Unknown
        );
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary_with_the_one_cap() {
        let c = condition(
            READY,
            ConditionStatus::False,
            "X",
            "é".repeat(1000),
            None,
            &at(0),
        );
        assert!(c.message.len() <= crate::message::MAX_MESSAGE_LEN);
        let kept = c
            .message
            .strip_suffix("...")
            .expect("a cut message says so");
        assert!(kept.chars().all(|ch| ch == 'é'));
    }
}
