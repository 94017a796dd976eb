//! The pure decision of the Infra controller: an Infra and the ComputeContracts
//! labelled with its name in, an [`InfraPlan`] out. No I/O, no clock reads.
//!
//! # Expected flow
//!
//! Live Infra ([`decide_live`]): every entry of `spec.contracts` gets its
//! ComputeContract `<infra>-<entry>` applied when missing or different
//! (Staged -> Requested). A contract that matches no entry (the entry left, or
//! its claim was recreated under a new entry name) is released, and deleted
//! once its status says Released, unless a live NodeClaim still uses it
//! (held: an edit of the Infra never costs a claim's running machine).
//! A contract of a live entry whose `spec.release` someone else set is
//! ReleasedByHand: never created again while the entry stays (a contract
//! deleted directly is replaced once gone, plan 0004). A node entry
//! whose NodeClaim does not exist (or is another Infra's) is not rented.
//!
//! Deleting Infra ([`decide_deleting`], the Infra delete order of
//! docs/infra-lifecycle.md, once numbered "plan 0028"): release every
//! contract; wait until ALL are Released; delete them; wait until they are gone;
//! then the plan is `finalized` and the finalizer may go.
//!
//! # Guarantees
//!
//! - A contract is in [`InfraPlan::delete`] only if its observed status.phase is
//!   Released (and the delete carries its uid and resourceVersion as preconditions,
//!   so it cannot hit a newer object).
//! - A contract whose `spec.release` is true is never applied with `release: false`.
//! - A contract is created only for an entry whose status row says it never
//!   had one (none, or Staged), or whose contract a direct read found gone
//!   (never only because the cache lacks it) while a direct read of the Infra
//!   after it found the Infra live, and never for an entry whose contract
//!   was released by hand.
//! - An existing contract's resources and location never change: the machine is rented.
//! - Every applied contract carries [`CONTRACT_RELEASE_FINALIZER`] from its
//!   creation on (so no delete, however it comes, removes a contract before the
//!   Requester released its guest); it is left out only for a contract already
//!   being deleted without it, where adding a finalizer is refused.
//! - Stateless: the plan depends only on the observed objects, so a restart
//!   re-derives it; once converged the plan is empty (no writes, invariant 8).
//! - Events are only for failures a person acts on (a Failed contract, a hand
//!   release), once each, judged against the Infra's recorded status.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use api::names::compute_contract_name;
use api::{
    ComputeContract, ComputeContractPhase, ContractState, ContractStatus, EntrySpecs, Infra,
    InfraPhase, InfraStatus,
};
use chrono::{DateTime, Utc};

use super::claims::ClaimsSeen;
use super::conditions::{self, is_ready};
use super::events::InfraEvent;
use super::objects::{
    contract_object, is_current, keep_finalizer_as_is_when_deleting, keep_machine,
};
use super::problems::Problems;
use super::rows::{
    by_name, changed_status, entry_of, is_unreleased, keep_unreadable_rows, old_rows, phase,
    push_row, row,
};
pub use super::rows::{leaving_entries, unseen_contracts};
use crate::cache::CachedContract;
use crate::time::to_time;

/// How long to wait before looking again while contracts are in flight. Contract
/// changes wake the controller anyway (it owns them); this only covers a missed event.
pub const IN_FLIGHT_RESYNC: Duration = Duration::from_secs(300);

/// How soon to look again while a deleted contract may still be in the cache.
/// The shared caches tell the controller about deletions, but one that
/// happens while the watch is down comes only with the next re-list, so it
/// looks again instead of waiting for that.
pub const DELETION_SETTLE: Duration = Duration::from_secs(1);

/// How soon to read again a contract whose direct read failed.
pub const UNREADABLE_RETRY: Duration = Duration::from_secs(2);

/// How soon to look again while a contract is held for a live claim: the
/// NodeClaim controller restores its entry, or the claim's change wakes this
/// controller; this only covers a missed event.
pub const HOLD_RECHECK: Duration = Duration::from_secs(5);

/// What one reconcile of an Infra observed.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// The Infra.
    pub infra: &'a Infra,
    /// The ComputeContracts of its namespace labelled with its name: the
    /// cache, plus those its status lists that were read directly.
    pub contracts: &'a [Arc<CachedContract>],
    /// Contracts its status lists that the cache lacks and whose direct read
    /// failed: unknown, not gone. Never created, released or counted as
    /// gone; read again soon. A contract the status lists that is in neither
    /// `contracts` nor here was read directly and found gone.
    pub unreadable: &'a BTreeSet<String>,
    /// What the NodeClaims say about the entries ([`super::claims`]).
    pub claims: &'a ClaimsSeen,
    /// Whether a direct read of the Infra, made after the contracts it lists
    /// were read, found it live (no deletionTimestamp). A contract the status
    /// lists that was read and found gone is created again only then: the
    /// garbage collector removes an Infra's contracts during its foreground
    /// deletion, and a cache that does not show that deletion yet would
    /// otherwise rent them again.
    pub infra_confirmed_live: bool,
    /// The time of this reconcile.
    pub now: DateTime<Utc>,
}

/// A ComputeContract to delete, with the preconditions that pin the observed object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deletion {
    /// Name of the ComputeContract.
    pub name: String,
    /// Its uid as observed (delete precondition).
    pub uid: Option<String>,
    /// Its resourceVersion as observed, when it was seen Released (delete precondition).
    pub resource_version: Option<String>,
}

/// A ComputeContract to release, as `act` finds it: its object name and entry.
///
/// The cache keeps less of a contract than its spec, and the release is a
/// server-side apply of the whole spec, so `act` reads the contract first
/// (once, when it releases it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Release {
    /// Name of the ComputeContract.
    pub name: String,
    /// The entry it belongs to (its contract label).
    pub entry: String,
}

/// What one reconcile of an Infra writes.
#[derive(Clone, Debug, Default)]
pub struct InfraPlan {
    /// ComputeContracts to server-side apply (create or update), full objects with
    /// labels, the controller ownerReference and the spec from the api mapping.
    pub apply: Vec<ComputeContract>,
    /// ComputeContracts to release: `act` reads each whole and server-side
    /// applies it with `spec.release: true` ([`super::objects::released_object`]).
    pub release: Vec<Release>,
    /// Released ComputeContracts to delete.
    pub delete: Vec<Deletion>,
    /// The Infra's new status; `Some` only when it differs from the observed one.
    pub status: Option<InfraStatus>,
    /// Events to publish (failures a person acts on, once each).
    pub events: Vec<InfraEvent>,
    /// When to look again without a change (`None`: wait for a change).
    pub requeue: Option<Duration>,
    /// Deleting path only: every contract is gone; the release finalizer may be removed.
    pub finalized: bool,
    /// A contract the status lists was found gone and is not created again
    /// until a direct read of the Infra says it is not being deleted
    /// ([`Observed::infra_confirmed_live`]): read it, then decide again.
    pub confirm_infra: bool,
    /// The new status only moves the progress of contracts already listed
    /// ([`super::rows::progress_only`]) and no Event hangs on it: it may wait
    /// for [`crate::status_pace`].
    pub progress_only: bool,
    /// The cached resourceVersion of each existing contract that `apply` or
    /// `release` writes over, by name: what [`super::OwnWrites::applies`] records.
    pub read_versions: BTreeMap<String, String>,
}

impl InfraPlan {
    /// Whether the plan writes nothing (no object, no status, no event).
    #[must_use]
    pub fn writes_nothing(&self) -> bool {
        self.apply.is_empty()
            && self.release.is_empty()
            && self.delete.is_empty()
            && self.status.is_none()
            && self.events.is_empty()
    }
}

/// The plan for the observed Infra: [`decide_deleting`] once it has a
/// deletionTimestamp, else [`decide_live`].
#[must_use]
pub fn decide(observed: &Observed<'_>) -> InfraPlan {
    let mut plan = if observed.infra.metadata.deletion_timestamp.is_some() {
        decide_deleting(observed)
    } else {
        decide_live(observed)
    };
    plan.progress_only = plan.events.is_empty()
        && plan
            .status
            .as_ref()
            .is_some_and(|new| super::rows::progress_only(observed.infra.status.as_ref(), new));
    let cached = by_name(observed.contracts);
    plan.read_versions = plan
        .apply
        .iter()
        .filter_map(|c| {
            let name = c.metadata.name.as_deref()?;
            let version = cached.get(name)?.resource_version()?.to_owned();
            Some((name.to_owned(), version))
        })
        .collect();
    plan
}

/// The plan of a live Infra: apply each entry's contract, release and then
/// delete the contracts that match no entry.
#[must_use]
pub fn decide_live(observed_input: &Observed<'_>) -> InfraPlan {
    let Observed {
        infra,
        contracts,
        unreadable,
        claims,
        now,
        infra_confirmed_live,
    } = *observed_input;
    let infra_name = infra.metadata.name.clone().unwrap_or_default();
    let observed = by_name(contracts);
    let old_rows = old_rows(infra);
    let mut plan = InfraPlan::default();
    let mut problems = Problems::default();
    let mut live_rows = Vec::new();
    let mut matched = BTreeSet::new();

    for (entry, spec) in EntrySpecs::of(&infra.spec).iter() {
        let object_name = compute_contract_name(&infra_name, entry);
        let old = old_rows.get(entry);
        let released_by_us = old.is_some_and(|r| r.state == ContractState::Released)
            || observed
                .get(object_name.as_str())
                .is_some_and(|c| c.spec.released_by_infra);
        let row = match observed.get(object_name.as_str()) {
            None if unreadable.contains(&object_name) => {
                // It may well exist: creating it blindly could rent a second
                // machine. Keep what the status remembers and read again soon.
                matched.insert(object_name.clone());
                old.map_or_else(
                    || row(entry, &object_name, ContractState::Requested, None),
                    |r| (*r).clone(),
                )
            }
            None if old.is_some_and(|r| r.state == ContractState::ReleasedByHand) => {
                // Released by hand, and now gone too (a direct read found
                // nothing): renting again would swap the machine behind the
                // claim's back. (A contract deleted without a hand release
                // is replaced: its finalizer released it, plan 0004.)
                hand_released(&mut plan, &mut problems, old, &object_name);
                let last_phase = old.and_then(|r| r.phase);
                row(
                    entry,
                    &object_name,
                    ContractState::ReleasedByHand,
                    last_phase,
                )
            }
            None if claims.unserved.contains_key(entry) => {
                if let Some(why) = claims.unserved.get(entry) {
                    problems.unserved.push((entry.to_owned(), why.clone()));
                }
                row(entry, &object_name, ContractState::Staged, None)
            }
            None if !infra_confirmed_live && old.is_some() => {
                // Listed, read directly and found gone: maybe the garbage
                // collector removed it because the Infra is being deleted,
                // which this copy of the Infra does not show yet. Keep the
                // row and make sure of the Infra before renting again.
                plan.confirm_infra = true;
                old.map_or_else(
                    || row(entry, &object_name, ContractState::Staged, None),
                    |r| (*r).clone(),
                )
            }
            None => {
                // Not observed: create it.
                plan.apply
                    .push(contract_object(infra, &object_name, entry, spec));
                row(entry, &object_name, ContractState::Staged, None)
            }
            Some(existing) if existing.spec.release && !released_by_us => {
                // spec.release set while its entry is live, and not by this
                // controller. The release goes on (the market may already
                // have been told); the contract stays while the entry does,
                // and the entry is not rented again.
                matched.insert(object_name.clone());
                hand_released(&mut plan, &mut problems, old, &object_name);
                row(
                    entry,
                    &object_name,
                    ContractState::ReleasedByHand,
                    phase(existing),
                )
            }
            Some(existing) if existing.spec.release => {
                // An earlier contract of the same entry is being released: never
                // un-release it; finish it, and create the new one once it is gone.
                matched.insert(object_name.clone());
                release_or_delete(existing, entry, &mut plan);
                row(
                    entry,
                    &object_name,
                    ContractState::Released,
                    phase(existing),
                )
            }
            Some(existing) => {
                matched.insert(object_name.clone());
                let mut desired = contract_object(infra, &object_name, entry, spec);
                keep_finalizer_as_is_when_deleting(*existing, &mut desired);
                if keep_machine(existing, &mut desired) {
                    problems
                        .machine_kept
                        .push((entry.to_owned(), object_name.clone()));
                }
                if !is_current(existing, &desired) {
                    plan.apply.push(desired);
                }
                let phase = phase(existing);
                if phase == Some(ComputeContractPhase::Failed)
                    && old.is_none_or(|r| r.phase != Some(ComputeContractPhase::Failed))
                {
                    plan.events.push(InfraEvent::ContractFailed {
                        contract: object_name.clone(),
                    });
                }
                row(entry, &object_name, ContractState::Requested, phase)
            }
        };
        live_rows.push(row);
    }

    let mut rows = live_rows.clone();
    for (object_name, existing) in &observed {
        if matched.contains(*object_name) {
            continue;
        }
        let entry = entry_of(&infra_name, existing, object_name);
        let in_use_by = claims.in_use.get(&entry);
        if let Some(claim) = in_use_by.filter(|_| is_unreleased(existing)) {
            // Its claim still uses it: an edit of the Infra (kubectl edit)
            // must not cost the running machine. The NodeClaim controller
            // puts the entry back; a claim that lets go wakes this one.
            problems
                .held
                .push(((*object_name).to_owned(), claim.clone()));
            push_row(
                &mut rows,
                entry,
                object_name,
                ContractState::Requested,
                existing,
            );
            continue;
        }
        release_or_delete(existing, &entry, &mut plan);
        push_row(
            &mut rows,
            entry,
            object_name,
            ContractState::Released,
            existing,
        );
    }
    keep_unreadable_rows(infra, unreadable, &matched, &mut rows);
    rows.sort_by(|a, b| a.name.cmp(&b.name));

    let live: Vec<&ContractStatus> = live_rows.iter().collect();
    let infra_phase = if problems.blocks_deployment()
        || live
            .iter()
            .any(|r| r.phase == Some(ComputeContractPhase::Failed))
    {
        InfraPhase::Failed
    } else if live.iter().all(|r| is_ready(r)) {
        InfraPhase::Deployed
    } else {
        InfraPhase::Requesting
    };
    let ready_contracts = live.iter().filter(|r| is_ready(r)).count();
    let ready = conditions::ready_live(&live, &problems, infra.metadata.generation, to_time(now));
    let in_flight = rows.len() > live_rows.len()
        || live_rows.iter().any(|r| {
            !is_ready(r)
                && r.phase != Some(ComputeContractPhase::Failed)
                && r.state != ContractState::ReleasedByHand
        });
    plan.requeue = in_flight.then_some(IN_FLIGHT_RESYNC);
    if !problems.held.is_empty() {
        plan.requeue = Some(plan.requeue.map_or(HOLD_RECHECK, |r| r.min(HOLD_RECHECK)));
    }
    settle_deletions(&mut plan, &observed);
    retry_unreadable(&mut plan, unreadable);
    if plan.confirm_infra {
        // Decided again at once after the Infra's read; this covers a failed read.
        plan.requeue = Some(
            plan.requeue
                .map_or(UNREADABLE_RETRY, |r| r.min(UNREADABLE_RETRY)),
        );
    }
    plan.status = changed_status(infra, infra_phase, rows, ready_contracts, ready);
    plan
}

/// The plan of an Infra being deleted (the Infra delete order): release every contract,
/// delete nothing until ALL are Released, then delete them all, and report
/// `finalized` once none is left. A contract that could not be read counts as
/// neither Released nor gone.
#[must_use]
pub fn decide_deleting(observed_input: &Observed<'_>) -> InfraPlan {
    let Observed {
        infra,
        contracts,
        unreadable,
        now,
        ..
    } = *observed_input;
    let infra_name = infra.metadata.name.clone().unwrap_or_default();
    let observed = by_name(contracts);
    let mut plan = InfraPlan::default();
    let mut rows: Vec<ContractStatus> = Vec::new();

    for (object_name, existing) in &observed {
        let entry = entry_of(&infra_name, existing, object_name);
        if !existing.spec.release {
            plan.release.push(Release {
                name: (*object_name).to_owned(),
                entry: entry.clone(),
            });
        }
        push_row(
            &mut rows,
            entry,
            object_name,
            ContractState::Released,
            existing,
        );
    }
    keep_unreadable_rows(infra, unreadable, &BTreeSet::new(), &mut rows);
    rows.sort_by(|a, b| a.name.cmp(&b.name));

    let all_released = unreadable.is_empty()
        && observed
            .values()
            .all(|c| phase(c) == Some(ComputeContractPhase::Released));
    if all_released {
        for (object_name, existing) in &observed {
            if !existing.is_deleting() {
                plan.delete.push(deletion(existing, object_name));
            }
        }
    }
    plan.finalized = observed.is_empty() && unreadable.is_empty();
    if !plan.finalized {
        plan.requeue = Some(IN_FLIGHT_RESYNC);
    }
    settle_deletions(&mut plan, &observed);
    retry_unreadable(&mut plan, unreadable);
    let infra_phase = if all_released {
        InfraPhase::Released
    } else {
        InfraPhase::Releasing
    };
    let ready = conditions::ready_deleting(&rows, infra.metadata.generation, to_time(now));
    plan.status = changed_status(infra, infra_phase, rows, 0, ready);
    plan
}

/// Looks again soon while a contract's direct read failed.
fn retry_unreadable(plan: &mut InfraPlan, unreadable: &BTreeSet<String>) {
    if !unreadable.is_empty() {
        plan.requeue = Some(
            plan.requeue
                .map_or(UNREADABLE_RETRY, |r| r.min(UNREADABLE_RETRY)),
        );
    }
}

/// Looks again soon while a delete is sent or a deleted contract is still cached.
fn settle_deletions(plan: &mut InfraPlan, observed: &BTreeMap<&str, &CachedContract>) {
    if !plan.delete.is_empty() || observed.values().any(|c| c.is_deleting()) {
        plan.requeue = Some(DELETION_SETTLE);
    }
}

/// Releases `existing` if it is not yet released; deletes it once Released.
fn release_or_delete(existing: &CachedContract, entry: &str, plan: &mut InfraPlan) {
    let object_name = existing.name().unwrap_or_default().to_owned();
    if !existing.spec.release {
        plan.release.push(Release {
            name: object_name,
            entry: entry.to_owned(),
        });
    } else if phase(existing) == Some(ComputeContractPhase::Released) && !existing.is_deleting() {
        plan.delete.push(deletion(existing, &object_name));
    }
}

fn deletion(existing: &CachedContract, object_name: &str) -> Deletion {
    Deletion {
        name: object_name.to_owned(),
        uid: existing.uid(),
        resource_version: existing.resource_version().map(str::to_owned),
    }
}

/// Records a contract of a live entry released by hand: the problem, and an
/// Event the first time the status says so.
fn hand_released(
    plan: &mut InfraPlan,
    problems: &mut Problems,
    old: Option<&&ContractStatus>,
    object_name: &str,
) {
    if old.is_none_or(|r| r.state != ContractState::ReleasedByHand) {
        plan.events.push(InfraEvent::ReleasedByHand {
            contract: object_name.to_owned(),
        });
    }
    problems.released_by_hand.push(object_name.to_owned());
}
