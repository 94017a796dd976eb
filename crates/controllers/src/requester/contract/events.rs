//! The Events a contract's status change deserves.

use api::{ComputeContractPhase as Phase, ComputeContractStatus};

use crate::requester::conditions as cond;

/// An Event to publish about the contract (only on a transition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventNote {
    /// Warning (true) or Normal.
    pub warning: bool,
    /// PascalCase reason.
    pub reason: String,
    /// A message a person can act on.
    pub note: String,
}

/// The Event a status change deserves, if any: only what a person acts on, a
/// Warning when the contract goes Failed (its reason says why and what to do),
/// one for every failed release attempt, and one when a release turns out
/// lost (`ReleaseUnconfirmed`: the machine may still run). The steps of a contract that goes
/// well (RFP published, bid accepted, Deployed, released) are in its phase and
/// conditions, not in Events: they were two thirds of a node's API writes.
#[must_use]
pub fn transition_event(
    old: Option<&ComputeContractStatus>,
    new: &ComputeContractStatus,
) -> Option<EventNote> {
    let old_phase = old.and_then(|s| s.phase);
    let note = new.message.clone().unwrap_or_default();
    let unconfirmed = |s: &ComputeContractStatus| {
        api::find_condition(&s.conditions, cond::RELEASED)
            .filter(|c| c.reason == cond::RELEASE_UNCONFIRMED)
            .map(|c| c.message.clone())
    };
    if let Some(message) = unconfirmed(new)
        && old.and_then(unconfirmed).is_none()
    {
        return Some(EventNote {
            warning: true,
            reason: cond::RELEASE_UNCONFIRMED.to_owned(),
            note: message,
        });
    }
    let release_failed = |s: &ComputeContractStatus| {
        api::find_condition(&s.conditions, cond::RELEASED)
            .filter(|c| c.reason == cond::RELEASE_FAILED)
            .and(s.attempts)
    };
    let old_failures = old.and_then(release_failed);
    if let Some(attempts) = release_failed(new)
        && old_failures != Some(attempts)
    {
        return Some(EventNote {
            warning: true,
            reason: cond::RELEASE_FAILED.to_owned(),
            note,
        });
    }
    if new.phase != Some(Phase::Failed) || old_phase == Some(Phase::Failed) {
        return None;
    }
    let reason =
        api::find_condition(&new.conditions, cond::READY).map_or("Failed", |c| c.reason.as_str());
    Some(EventNote {
        warning: true,
        reason: reason.to_owned(),
        note,
    })
}

/// The metric label of a release that finished in this status change: the
/// `Released` condition turned True, or True with another reason.
#[must_use]
pub fn release_finished(
    old: Option<&ComputeContractStatus>,
    new: &ComputeContractStatus,
) -> Option<&'static str> {
    let finished = |s: &ComputeContractStatus| {
        api::find_condition(&s.conditions, cond::RELEASED)
            .filter(|c| c.is_true())
            .map(|c| c.reason.clone())
    };
    let reason = finished(new)?;
    if old.and_then(finished).as_ref() == Some(&reason) {
        return None;
    }
    Some(match reason.as_str() {
        cond::RELEASE_ACKNOWLEDGED => "acknowledged",
        cond::RELEASE_UNCONFIRMED => "unconfirmed",
        cond::NOTHING_RENTED => "nothing_rented",
        _ => "confirmed",
    })
}
