//! The Infra's Ready condition: aggregated over its contracts, naming the
//! first unready ones so `kubectl get infra -o wide` / `describe` says what waits.

use api::{ComputeContractPhase, Condition, ConditionStatus, ContractState, ContractStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::problems::{self, Problems};

/// The condition type aggregated over all contracts.
pub const READY: &str = "Ready";

/// Reason: every contract is Deployed.
pub const REASON_ALL_DEPLOYED: &str = "AllDeployed";
/// Reason: some contract is on its way (Staged, Pending, Bidding, Accepted, …).
pub const REASON_CONTRACTS_NOT_READY: &str = "ContractsNotReady";
/// Reason: a contract failed.
pub const REASON_CONTRACT_FAILED: &str = "ContractFailed";
/// Reason: the Infra is being deleted and contracts are being released.
pub const REASON_RELEASING: &str = "Releasing";
/// Reason: the Infra is being deleted and every contract is Released.
pub const REASON_RELEASED: &str = "Released";

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
            REASON_CONTRACT_FAILED,
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
    said.sort_by_key(|(reason, _)| *reason != problems::REASON_RELEASED_BY_HAND);
    let (status, reason, message) = if let Some((reason, _)) = said.first() {
        let messages: Vec<String> = said.iter().map(|(_, m)| m.clone()).collect();
        (ConditionStatus::False, *reason, messages.join("; "))
    } else if unready.is_empty() {
        (
            ConditionStatus::True,
            REASON_ALL_DEPLOYED,
            format!("all {} contracts are Deployed", live.len()),
        )
    } else {
        (
            ConditionStatus::False,
            REASON_CONTRACTS_NOT_READY,
            format!(
                "{} of {} contracts are not Deployed yet: {}",
                unready.len(),
                live.len(),
                name_first(&unready)
            ),
        )
    };
    Condition::new(READY, status, reason, message, generation, now)
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
            REASON_RELEASED,
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
            REASON_RELEASING,
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
        message,
        generation,
        now,
    )
}
