//! The pure decision of the record controller: an AtprotoRecord, its Infra
//! and what remains of the Infra's contracts in, a [`RecordPlan`] out. No
//! I/O, no clock reads.
//!
//! # Expected flow
//!
//! Live object: the finalizer first ([`Call::AddFinalizer`]); then, whenever
//! the Infra's declaration hash differs from the one the record was written
//! from, [`Call::Publish`] with the record built from the declaration alone.
//!
//! Deleting object: policy Orphan lets go without calling the PDS; policy
//! Delete deletes the record, but while its Infra is being deleted (or is
//! gone) only once no contract of it remains, so the record outlives every
//! release (the Infra delete order, docs/infra-lifecycle.md) however the object came to be deleted
//! (the Infra controller, the garbage collector's foreground deletion, a
//! namespace deletion). Nothing was ever written while `status.repository`
//! is unset (act records it before the first putRecord), so such an object
//! lets go at once.
//!
//! # Guarantees
//!
//! - A record is built only by [`api::declaration_record`] of
//!   [`api::declaration`]: nothing else of the Infra can reach it.
//! - A converged object (record current, finalizer present) gets
//!   [`Call::None`] and no status: nothing is written.
//! - [`Call::DeleteRecord`] is decided only for a deleting object with
//!   policy Delete that holds our finalizer.

use std::time::Duration;

use api::names::RECORD_DELETE_FINALIZER;
use api::{
    AtprotoRecord, AtprotoRecordPhase, AtprotoRecordStatus, ConditionStatus as S, DeletionPolicy,
    Infra, declaration, declaration_record, infra_declaration_hash,
};
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::conditions::{self, reason};

/// How soon to look again while the Infra's contracts are still being released.
pub const RELEASE_POLL: Duration = Duration::from_secs(2);
/// How soon to look again while the Infra is not in the cache.
pub const INFRA_MISSING_RETRY: Duration = Duration::from_secs(5);

/// What one reconcile of an AtprotoRecord observed.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// The AtprotoRecord.
    pub record: &'a AtprotoRecord,
    /// Its Infra (`spec.infraName` in the same namespace), if cached.
    pub infra: Option<&'a Infra>,
    /// How many ComputeContracts labelled with the Infra's name are cached.
    pub contracts_left: usize,
    /// The time of this reconcile.
    pub now: DateTime<Utc>,
}

/// The one call to the PDS (or to the API server, for the finalizer) a reconcile makes.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// Nothing to call.
    None,
    /// Add our finalizer: a live object publishes nothing until it holds it,
    /// so no record can exist that its deletion would not remove.
    AddFinalizer,
    /// `putRecord` of `record` at the object's collection and rkey.
    Publish {
        /// The record: exactly the Infra's declaration, with its `$type`.
        record: Value,
        /// The declaration hash it was built from.
        hash: String,
    },
    /// `deleteRecord` (absent counts as done), then remove the finalizer.
    DeleteRecord,
    /// Remove the finalizer and call no PDS.
    LetGo {
        /// Whether a published record stays behind (policy Orphan).
        kept: bool,
    },
}

/// What one reconcile of an AtprotoRecord does.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordPlan {
    /// The call to make.
    pub call: Call,
    /// A status to write without a call (waiting, the Infra missing);
    /// `None` when unchanged. The outcome of a call writes its own.
    pub status: Option<AtprotoRecordStatus>,
    /// When to look again without a change (`None`: wait for a change).
    pub requeue: Option<Duration>,
}

impl RecordPlan {
    fn call(call: Call) -> Self {
        Self {
            call,
            status: None,
            requeue: None,
        }
    }
}

/// Whether `record` holds our finalizer.
#[must_use]
pub fn has_finalizer(record: &AtprotoRecord) -> bool {
    record
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == RECORD_DELETE_FINALIZER)
}

/// The plan for the observed AtprotoRecord.
#[must_use]
pub fn decide(observed: &Observed<'_>) -> RecordPlan {
    if observed.record.metadata.deletion_timestamp.is_some() {
        decide_deleting(observed)
    } else {
        decide_live(observed)
    }
}

fn decide_live(observed: &Observed<'_>) -> RecordPlan {
    let record = observed.record;
    if !has_finalizer(record) {
        return RecordPlan::call(Call::AddFinalizer);
    }
    let Some(infra) = observed.infra else {
        let message = format!(
            "the Infra {} is not found: nothing to publish (the object goes with its Infra)",
            record.spec.infra_name
        );
        return waiting(
            observed,
            AtprotoRecordPhase::Pending,
            reason::INFRA_MISSING,
            &message,
            INFRA_MISSING_RETRY,
        );
    };
    let Ok(hash) = infra_declaration_hash(&infra.spec) else {
        // The declaration's types always serialize; nothing to publish otherwise.
        return RecordPlan::call(Call::None);
    };
    let status = record.status.as_ref();
    let current = status.is_some_and(|s| {
        s.declaration_hash.as_deref() == Some(hash.as_str())
            && s.uri.is_some()
            && s.phase == Some(AtprotoRecordPhase::Published)
    });
    if current {
        return RecordPlan::call(Call::None);
    }
    match declaration_record(&declaration(&infra.spec)) {
        Ok(value) => RecordPlan::call(Call::Publish {
            record: value,
            hash,
        }),
        Err(_) => RecordPlan::call(Call::None),
    }
}

fn decide_deleting(observed: &Observed<'_>) -> RecordPlan {
    let record = observed.record;
    if !has_finalizer(record) {
        return RecordPlan::call(Call::None);
    }
    let status = record.status.as_ref();
    if record.spec.deletion_policy == DeletionPolicy::Orphan {
        let kept = status.is_some_and(|s| s.repository.is_some());
        return RecordPlan::call(Call::LetGo { kept });
    }
    if status.is_none_or(|s| s.repository.is_none()) {
        // act records the repository before the first putRecord: nothing was written.
        return RecordPlan::call(Call::LetGo { kept: false });
    }
    let infra_live = observed
        .infra
        .is_some_and(|i| i.metadata.deletion_timestamp.is_none());
    let listed = observed
        .infra
        .and_then(|i| i.status.as_ref())
        .map_or(0, |s| s.contracts.len());
    let remaining = observed.contracts_left.max(listed);
    if !infra_live && remaining > 0 {
        let message = format!(
            "waiting until the {remaining} ComputeContracts of Infra {} are released and deleted \
             before deleting the record",
            record.spec.infra_name
        );
        return waiting(
            observed,
            AtprotoRecordPhase::Deleting,
            reason::WAITING_FOR_RELEASES,
            &message,
            RELEASE_POLL,
        );
    }
    RecordPlan::call(Call::DeleteRecord)
}

/// A plan that calls nothing, writes `phase` and a False Ready condition
/// when they changed, and looks again after `retry`.
fn waiting(
    observed: &Observed<'_>,
    phase: AtprotoRecordPhase,
    reason: &str,
    message: &str,
    retry: Duration,
) -> RecordPlan {
    let record = observed.record;
    let old = record.status.clone().unwrap_or_default();
    let mut new = old.clone();
    new.phase = Some(phase);
    new.observed_generation = record.metadata.generation;
    conditions::set_ready(
        &mut new.conditions,
        S::False,
        reason,
        message,
        record.metadata.generation,
        observed.now,
    );
    RecordPlan {
        call: Call::None,
        status: (new != old).then_some(new),
        requeue: Some(retry),
    }
}
