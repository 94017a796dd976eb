//! The Events a contract's status change deserves.

use api::{ComputeContractPhase as Phase, ComputeContractStatus};

use super::conditions as cond;

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

/// The Event a status change deserves, if any: one per phase transition, and a
/// Warning for every failed release attempt.
#[must_use]
pub fn transition_event(
    old: Option<&ComputeContractStatus>,
    new: &ComputeContractStatus,
) -> Option<EventNote> {
    let old_phase = old.and_then(|s| s.phase);
    let note = new.message.clone().unwrap_or_default();
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
    let phase = new.phase?;
    if old_phase == Some(phase) {
        return None;
    }
    let (warning, reason) = match phase {
        Phase::Pending => return None,
        Phase::Bidding => (false, cond::RFP_PUBLISHED),
        Phase::Accepted => (false, cond::BID_ACCEPTED),
        Phase::Deployed => (false, cond::DEPLOYED_REASON),
        Phase::Releasing => (false, cond::RELEASING),
        Phase::Released => (false, "Released"),
        Phase::Failed => (
            true,
            api::find_condition(&new.conditions, cond::READY)
                .map_or("Failed", |c| c.reason.as_str()),
        ),
    };
    Some(EventNote {
        warning,
        reason: reason.to_owned(),
        note,
    })
}
