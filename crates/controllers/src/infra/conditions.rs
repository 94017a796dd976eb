//! The Infra's Ready condition: aggregated over its contracts, naming the
//! first unready ones so `kubectl get infra -o wide` / `describe` says what waits.

use api::{ComputeContractPhase, Condition, ConditionStatus, ContractState, ContractStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::problems::Problems;
use crate::message::cap;

/// The condition type aggregated over all contracts.
pub const READY: &str = "Ready";

/// The reasons the Infra's Ready condition gives (PascalCase values, one
/// constant each): how its contracts stand, then the problems of
/// [`super::problems`], the most urgent first.
pub mod reason {
    /// Every contract is Deployed.
    pub const ALL_DEPLOYED: &str = "AllDeployed";
    /// Some contract is on its way (Staged, Pending, Bidding, Accepted, …).
    pub const CONTRACTS_NOT_READY: &str = "ContractsNotReady";
    /// A contract failed.
    pub const CONTRACT_FAILED: &str = "ContractFailed";
    /// The Infra is being deleted and contracts are being released.
    pub const RELEASING: &str = "Releasing";
    /// The Infra is being deleted and every contract is Released.
    pub const RELEASED: &str = "Released";
    /// A contract of a live entry was released by hand (spec.release).
    pub const RELEASED_BY_HAND: &str = "ContractReleasedByHand";
    /// A node entry names a NodeClaim that does not exist.
    pub const NODE_CLAIM_NOT_FOUND: &str = "NodeClaimNotFound";
    /// A node entry names a NodeClaim whose machine another Infra rents.
    pub const NODE_CLAIM_OF_ANOTHER_INFRA: &str = "NodeClaimOfAnotherInfra";
    /// An entry left the spec but a live NodeClaim still uses its contract.
    pub const RELEASE_HELD: &str = "ReleaseHeld";
    /// An entry asks for another machine than its contract was rented with.
    pub const MACHINE_IMMUTABLE: &str = "MachineImmutable";
}

// The names tests/infra_decide*.rs import, until they name `reason::` too.
pub use reason::{
    ALL_DEPLOYED as REASON_ALL_DEPLOYED, CONTRACT_FAILED as REASON_CONTRACT_FAILED,
    CONTRACTS_NOT_READY as REASON_CONTRACTS_NOT_READY, RELEASED as REASON_RELEASED,
    RELEASING as REASON_RELEASING,
};

/// How many unready contracts a message names.
const NAMED_IN_MESSAGE: usize = 3;

/// How a contract row reads in a message: `name (Phase)` once the Requester wrote a
/// phase, else `name (Staged)` / `name (Requested)` / `name (Released)` by state.
fn describe(row: &ContractStatus) -> String {
    match (row.state, row.phase) {
        (ContractState::Staged, _) => format!("{} (Staged)", row.name),
        (state, None) => format!("{} ({state:?})", row.name),
        (_, Some(phase)) => format!("{} ({phase:?})", row.name),
    }
}

/// "a (Bidding), b (Staged), c (Failed) and 2 more".
fn name_first(unready: &[&ContractStatus]) -> String {
    let named: Vec<String> = unready
        .iter()
        .take(NAMED_IN_MESSAGE)
        .map(|row| describe(row))
        .collect();
    let rest = unready.len().saturating_sub(NAMED_IN_MESSAGE);
    if rest == 0 {
        named.join(", ")
    } else {
        format!("{} and {rest} more", named.join(", "))
    }
}

/// Whether a row of a live entry counts as ready.
#[must_use]
pub fn is_ready(row: &ContractStatus) -> bool {
    row.state == ContractState::Requested && row.phase == Some(ComputeContractPhase::Deployed)
}

/// The Ready condition of a live Infra from its live entries' rows (sorted
/// by name) and its [`Problems`]: with a problem, the most urgent reason and
/// every problem's message; without, what waits.
#[must_use]
pub fn ready_live(
    live: &[&ContractStatus],
    problems: &Problems,
    generation: Option<i64>,
    now: Time,
) -> Condition {
    let unready: Vec<&ContractStatus> = live.iter().copied().filter(|r| !is_ready(r)).collect();
    let failed: Vec<&ContractStatus> = live
        .iter()
        .copied()
        .filter(|r| {
            r.phase == Some(ComputeContractPhase::Failed)
                && r.state != ContractState::ReleasedByHand
        })
        .collect();
    let mut said = Vec::new();
    if !failed.is_empty() {
        said.push((
            reason::CONTRACT_FAILED,
            format!(
                "{} of {} contracts failed: {}; remove the entry (or its NodeClaim) to release it, \
                 `kubectl describe computecontract` says why",
                failed.len(),
                live.len(),
                name_first(&failed)
            ),
        ));
    }
    said.extend(problems.said());
    // A hand release is the most urgent: a person took a machine away.
    said.sort_by_key(|(reason, _)| *reason != reason::RELEASED_BY_HAND);
    let (status, reason, message) = if let Some((reason, _)) = said.first() {
        let messages: Vec<String> = said.iter().map(|(_, m)| m.clone()).collect();
        (ConditionStatus::False, *reason, messages.join("; "))
    } else if unready.is_empty() {
        (
            ConditionStatus::True,
            reason::ALL_DEPLOYED,
            format!("all {} contracts are Deployed", live.len()),
        )
    } else {
        (
            ConditionStatus::False,
            reason::CONTRACTS_NOT_READY,
            format!(
                "{} of {} contracts are not Deployed yet: {}",
                unready.len(),
                live.len(),
                name_first(&unready)
            ),
        )
    };
    Condition::new(READY, status, reason, cap(&message), generation, now)
}

/// The Ready condition of an Infra being deleted, from the rows of its remaining contracts.
#[must_use]
pub fn ready_deleting(rows: &[ContractStatus], generation: Option<i64>, now: Time) -> Condition {
    let unreleased: Vec<&ContractStatus> = rows
        .iter()
        .filter(|r| r.phase != Some(ComputeContractPhase::Released))
        .collect();
    let (reason, message) = if unreleased.is_empty() {
        (
            reason::RELEASED,
            if rows.is_empty() {
                "the Infra is being deleted; every contract is released and deleted".to_owned()
            } else {
                format!(
                    "the Infra is being deleted; every contract is Released, deleting {}",
                    rows.len()
                )
            },
        )
    } else {
        (
            reason::RELEASING,
            format!(
                "the Infra is being deleted; waiting for {} of {} contracts to be Released: {}",
                unreleased.len(),
                rows.len(),
                name_first(&unreleased)
            ),
        )
    };
    Condition::new(
        READY,
        ConditionStatus::False,
        reason,
        cap(&message),
        generation,
        now,
    )
}
