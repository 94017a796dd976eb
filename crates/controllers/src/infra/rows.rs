//! The rows of an Infra's `status.contracts` and the lookups [`super::decide`]
//! builds them from. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use api::names::{CONTRACT_LABEL, compute_contract_name};
use api::{
    ComputeContractPhase, ContractState, ContractStatus, Infra, InfraPhase, InfraStatus,
    infra_declaration_hash, set_condition,
};

use crate::cache::{CachedContract, Labelled};

/// The ComputeContracts the Infra's status lists that `contracts` (the cache)
/// does not show.
///
/// The cache may lag behind a create. A contract the controller created but
/// cannot see yet must still be released when its entry leaves, the deleting
/// path must not delete before ALL contracts are Released, and the finalizer must
/// not go around a contract. So the controller reads each of these directly (a
/// GET by name, never a list) and adds what it finds to `contracts` before
/// [`decide`]. Once the status stops listing a contract that is gone, nothing is read.
#[must_use]
pub fn unseen_contracts(infra: &Infra, contracts: &[Arc<CachedContract>]) -> Vec<String> {
    let observed = by_name(contracts);
    old_rows(infra)
        .values()
        .map(|r| r.compute_contract.as_str())
        .filter(|name| !observed.contains_key(name))
        .map(str::to_owned)
        .collect()
}

/// The entries of `contracts` that left `spec.contracts` and are not released
/// yet: the ones a live claim may still use ([`super::claims::observe`]).
#[must_use]
pub fn leaving_entries(infra: &Infra, contracts: &[Arc<CachedContract>]) -> BTreeSet<String> {
    if infra.metadata.deletion_timestamp.is_some() {
        return BTreeSet::new();
    }
    let infra_name = infra.metadata.name.clone().unwrap_or_default();
    let live: BTreeSet<String> = infra
        .spec
        .contracts
        .iter()
        .map(|c| compute_contract_name(&infra_name, &c.name))
        .collect();
    by_name(contracts)
        .into_iter()
        .filter(|(name, contract)| !live.contains(*name) && is_unreleased(contract))
        .map(|(name, contract)| entry_of(&infra_name, contract, name))
        .collect()
}

/// The rows the status had for contracts that could not be read (and that no
/// entry already accounts for): kept as they were, so the next reconcile
/// reads them again instead of forgetting them.
pub(super) fn keep_unreadable_rows(
    infra: &Infra,
    unreadable: &BTreeSet<String>,
    accounted: &BTreeSet<String>,
    rows: &mut Vec<ContractStatus>,
) {
    let old = infra.status.iter().flat_map(|s| &s.contracts);
    for row in old.filter(|r| {
        unreadable.contains(&r.compute_contract) && !accounted.contains(&r.compute_contract)
    }) {
        if !rows.iter().any(|r| r.name == row.name) {
            rows.push(row.clone());
        }
    }
}

pub(super) fn phase(contract: &CachedContract) -> Option<ComputeContractPhase> {
    contract.status.as_ref().and_then(|s| s.phase)
}

/// The status row of a contract that matches no entry (being released, or
/// held), keyed by its entry name; a label that collides with a live entry
/// falls back to the object name, so the list-map key stays unique.
pub(super) fn push_row(
    rows: &mut Vec<ContractStatus>,
    entry: String,
    object_name: &str,
    state: ContractState,
    existing: &CachedContract,
) {
    let key = if rows.iter().any(|r| r.name == entry) {
        object_name.to_owned()
    } else {
        entry
    };
    rows.push(row(&key, object_name, state, phase(existing)));
}

/// Whether nobody has released `contract` yet (no release, no delete).
pub(super) fn is_unreleased(contract: &CachedContract) -> bool {
    !contract.spec.release && !contract.is_deleting()
}

pub(super) fn row(
    entry: &str,
    object_name: &str,
    state: ContractState,
    phase: Option<ComputeContractPhase>,
) -> ContractStatus {
    ContractStatus {
        name: entry.to_owned(),
        compute_contract: object_name.to_owned(),
        state,
        phase,
    }
}

/// The entry a contract belongs to: its contract label, else its name without `<infra>-`.
pub(super) fn entry_of(infra_name: &str, contract: &CachedContract, object_name: &str) -> String {
    contract
        .label(CONTRACT_LABEL)
        .map(str::to_owned)
        .or_else(|| {
            object_name
                .strip_prefix(infra_name)
                .and_then(|rest| rest.strip_prefix('-'))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| object_name.to_owned())
}

pub(super) fn by_name(contracts: &[Arc<CachedContract>]) -> BTreeMap<&str, &CachedContract> {
    contracts
        .iter()
        .filter_map(|c| Some((c.name()?, c.as_ref())))
        .collect()
}

pub(super) fn old_rows(infra: &Infra) -> BTreeMap<&str, &ContractStatus> {
    infra
        .status
        .iter()
        .flat_map(|s| &s.contracts)
        .map(|r| (r.name.as_str(), r))
        .collect()
}

/// The full new status, or `None` when it equals the observed one.
pub(super) fn changed_status(
    infra: &Infra,
    phase: InfraPhase,
    rows: Vec<ContractStatus>,
    ready_contracts: usize,
    ready: api::Condition,
) -> Option<InfraStatus> {
    let old = infra.status.clone().unwrap_or_default();
    let mut conditions = old.conditions.clone();
    set_condition(&mut conditions, ready);
    let new = InfraStatus {
        phase: Some(phase),
        contract_count: u32::try_from(rows.len()).unwrap_or(u32::MAX),
        contracts: rows,
        declaration_hash: infra_declaration_hash(&infra.spec).ok(),
        ready_contracts: u32::try_from(ready_contracts).unwrap_or(u32::MAX),
        observed_generation: infra.metadata.generation,
        conditions,
    };
    (infra.status.as_ref() != Some(&new)).then_some(new)
}

/// Whether `new` differs from `old` only in the progress of contracts already
/// listed: their phases, how many are ready, the Ready message, and rows of
/// contracts this controller released that are gone now (`Released` rows
/// that left, with `contractCount`). The Infra's phase, the other rows'
/// names and states, the Ready status and reason stay: what decide and the
/// Events are judged against. Such a status may wait a moment
/// ([`crate::status_pace`]); nothing is decided from what it changes.
///
/// A released row that lingers a moment after its contract went tells an
/// operator nothing false: the contract was released (DESIGN: Releasing /
/// Released, deletes under way), and the phase, Ready and any failure are
/// still written at once. In a scale-down each departing node's row left
/// with its own status write (0.41-0.44 writes per node at 3,000, each of
/// the whole row list); paced, the rows leave together.
#[must_use]
pub fn progress_only(old: Option<&InfraStatus>, new: &InfraStatus) -> bool {
    let Some(old) = old else {
        return false;
    };
    let ready = |s: &InfraStatus| {
        api::find_condition(&s.conditions, super::conditions::READY)
            .map(|c| (c.status, c.reason.clone()))
    };
    let others = |s: &InfraStatus| -> Vec<api::Condition> {
        s.conditions
            .iter()
            .filter(|c| c.type_ != super::conditions::READY)
            .cloned()
            .collect()
    };
    old.phase == new.phase
        && new.contract_count == u32::try_from(new.contracts.len()).unwrap_or(u32::MAX)
        && old.declaration_hash == new.declaration_hash
        && old.observed_generation == new.observed_generation
        && only_released_rows_left(&old.contracts, &new.contracts)
        && ready(old) == ready(new)
        && others(old) == others(new)
}

/// Whether `new` is `old` in the same order with only phases moved and only
/// rows in state `Released` left out.
fn only_released_rows_left(old: &[ContractStatus], new: &[ContractStatus]) -> bool {
    let mut old = old.iter();
    new.iter().all(|b| {
        old.by_ref()
            .find(|a| a.name == b.name || a.state != ContractState::Released)
            .is_some_and(|a| {
                ContractStatus {
                    phase: b.phase,
                    ..a.clone()
                } == *b
            })
    }) && old.all(|a| a.state == ContractState::Released)
}
