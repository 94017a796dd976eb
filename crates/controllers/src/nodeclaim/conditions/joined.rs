//! `Joined`: whether the claim's machine registered as a node, the join
//! grace of a running guest and the loss grace of a joined node.
//!
//! # Expected flow
//! NotDeployed -> WaitingForNode (the join grace starts at the Deployed
//! condition's lastTransitionTime) -> NodeJoined (the guest reported its node
//! identity). A joined node whose identity disappears is NodeLost for
//! `lossGraceSeconds`, counted from that condition's own lastTransitionTime.
//!
//! # Guarantees
//! Pure. Each grace fires exactly at `start + grace`; before that its instant
//! is the verdict's deadline. A join timeout and a lost node fail the claim.

use crate::cache::{CachedCondition, CachedContractStatus};
use api::{Condition, ConditionStatus};
use chrono::{DateTime, Duration, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{JOINED, Verdict, condition, reason, running_guest};
use crate::time::{from_time, to_time};

/// The graces of one claim, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Graces {
    /// `spec.joinGraceSeconds`.
    pub join: u32,
    /// `spec.lossGraceSeconds`.
    pub loss: u32,
}

/// The Joined condition of a composed claim whose contract reports
/// `status`, its Deployed condition decided now being `deployed`.
#[must_use]
pub fn observe(
    previous: Option<&CachedCondition>,
    deployed_since: Option<DateTime<Utc>>,
    status: Option<&CachedContractStatus>,
    graces: Graces,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> Verdict {
    let stamp = to_time(now);
    let waiting = |reason: &str, message: String, due: DateTime<Utc>| Verdict {
        condition: condition(
            JOINED,
            ConditionStatus::False,
            reason,
            message,
            generation,
            &stamp,
        ),
        deadline: Some(due),
        failure: None,
    };
    let Some(guest) = running_guest(status) else {
        return Verdict::settled(not_deployed(generation, &stamp));
    };
    if let Some(id) = guest.node_id() {
        return Verdict::settled(condition(
            JOINED,
            ConditionStatus::True,
            reason::NODE_JOINED,
            format!("node {id} joined the cluster"),
            generation,
            &stamp,
        ));
    }
    let was_joined = previous.is_some_and(|c| c.is_true() || c.reason == reason::NODE_LOST);
    if was_joined {
        // The start is kept from the previous condition when it already said lost.
        let start = previous
            .filter(|c| c.reason == reason::NODE_LOST)
            .map_or(now, |c| from_time(&c.last_transition_time()));
        let due = start + Duration::seconds(i64::from(graces.loss));
        if now >= due {
            let message = format!(
                "the node left the cluster and did not come back within {}s (lossGraceSeconds); its machine is released, delete and recreate the NodeClaim to rent another",
                graces.loss
            );
            return Verdict::failed(JOINED, reason::GUEST_LOST, message, generation, &stamp);
        }
        return waiting(
            reason::NODE_LOST,
            format!(
                "the guest no longer reports a node identity; the claim fails at {} unless it rejoins",
                due.to_rfc3339()
            ),
            due,
        );
    }
    let due = deployed_since.unwrap_or(now) + Duration::seconds(i64::from(graces.join));
    if now >= due {
        let message = format!(
            "the guest did not join within {}s (joinGraceSeconds) of being deployed; check that the Cluster's API server is reachable from the guest, then delete and recreate the NodeClaim",
            graces.join
        );
        return Verdict::failed(JOINED, reason::JOIN_TIMEOUT, message, generation, &stamp);
    }
    waiting(
        reason::WAITING_FOR_NODE,
        format!(
            "waiting for the guest to register as a node; the claim fails at {} if it has not",
            due.to_rfc3339()
        ),
        due,
    )
}

/// When the Deployed condition became True: kept from the previous one
/// while both are True, otherwise the current one's transition; `None`
/// while the guest does not run. The join grace and the guest's grant
/// (`status.grantExpiresAt`) count from it.
#[must_use]
pub fn deployed_since(
    previous: Option<&CachedCondition>,
    current: &Condition,
) -> Option<DateTime<Utc>> {
    if !current.is_true() {
        return None;
    }
    let since = previous.filter(|c| c.is_true()).map_or_else(
        || current.last_transition_time.clone(),
        CachedCondition::last_transition_time,
    );
    Some(from_time(&since))
}

/// When a running guest's grant to join expires: Deployed + joinGraceSeconds.
#[must_use]
pub fn grant_expires_at(
    deployed_since: Option<DateTime<Utc>>,
    graces: Graces,
) -> Option<DateTime<Utc>> {
    deployed_since.map(|since| since + Duration::seconds(i64::from(graces.join)))
}

/// Joined of a claim whose machine is not deployed.
#[must_use]
pub fn not_deployed(generation: Option<i64>, now: &Time) -> Condition {
    condition(
        JOINED,
        ConditionStatus::False,
        reason::NOT_DEPLOYED,
        "the node joins once its machine is deployed",
        generation,
        now,
    )
}
