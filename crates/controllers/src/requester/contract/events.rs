//! The Events a contract's status change deserves.

use api::{ComputeContractPhase as Phase, ComputeContractStatus};
use kube::runtime::events::{Event, EventType};

use crate::message::cap;
use crate::requester::conditions as cond;

/// An Event about a contract (only on a transition); every one is a
/// Warning a person acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContractEvent {
    /// The contract went Failed; `reason` is its Ready condition's reason,
    /// which says why and what to do.
    Failed {
        /// The Ready condition's reason (`Failed` without one).
        reason: String,
        /// The contract's `status.message`.
        message: String,
    },
    /// An attempt to send or confirm the release failed; it is retried.
    ReleaseFailed {
        /// The contract's `status.message`.
        message: String,
    },
    /// The provider took the release but its records show it was lost: the
    /// machine may still run until a person has the provider stop it.
    ReleaseUnconfirmed {
        /// The `Released` condition's message.
        message: String,
    },
}

impl ContractEvent {
    /// The PascalCase reason shown by `kubectl describe`.
    #[must_use]
    pub fn reason(&self) -> &str {
        match self {
            Self::Failed { reason, .. } => reason,
            Self::ReleaseFailed { .. } => cond::RELEASE_FAILED,
            Self::ReleaseUnconfirmed { .. } => cond::RELEASE_UNCONFIRMED,
        }
    }

    /// The events.k8s.io/v1 Event to publish about the contract.
    #[must_use]
    pub fn to_event(&self) -> Event {
        let (Self::Failed { message, .. }
        | Self::ReleaseFailed { message }
        | Self::ReleaseUnconfirmed { message }) = self;
        Event {
            type_: EventType::Warning,
            reason: self.reason().to_owned(),
            note: Some(cap(message)),
            action: "Reconcile".to_owned(),
            secondary: None,
        }
    }
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
) -> Option<ContractEvent> {
    let old_phase = old.and_then(|s| s.phase);
    let note = new
        .message
        .as_ref()
        .map(api::Text::to_string)
        .unwrap_or_default();
    let unconfirmed = |s: &ComputeContractStatus| {
        api::find_condition(&s.conditions, cond::RELEASED)
            .filter(|c| c.reason == cond::RELEASE_UNCONFIRMED)
            .map(|c| c.message.to_string())
    };
    if let Some(message) = unconfirmed(new)
        && old.and_then(unconfirmed).is_none()
    {
        return Some(ContractEvent::ReleaseUnconfirmed { message });
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
        return Some(ContractEvent::ReleaseFailed { message: note });
    }
    if new.phase != Some(Phase::Failed) || old_phase == Some(Phase::Failed) {
        return None;
    }
    let reason =
        api::find_condition(&new.conditions, cond::READY).map_or("Failed", |c| c.reason.as_str());
    Some(ContractEvent::Failed {
        reason: reason.to_owned(),
        message: note,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_is_a_warning_under_its_reason_with_its_message() {
        let cases = [
            (
                ContractEvent::Failed {
                    reason: cond::INVALID_REQUEST.to_owned(),
                    message: "fix spec.resources".to_owned(),
                },
                cond::INVALID_REQUEST,
            ),
            (
                ContractEvent::ReleaseFailed {
                    message: "fix spec.resources".to_owned(),
                },
                cond::RELEASE_FAILED,
            ),
            (
                ContractEvent::ReleaseUnconfirmed {
                    message: "fix spec.resources".to_owned(),
                },
                cond::RELEASE_UNCONFIRMED,
            ),
        ];
        for (event, reason) in cases {
            assert_eq!(event.reason(), reason);
            let published = event.to_event();
            assert_eq!(published.type_, EventType::Warning);
            assert_eq!(published.reason, reason);
            assert_eq!(published.note.as_deref(), Some("fix spec.resources"));
        }
    }

    #[test]
    fn a_long_message_is_capped_in_the_note() {
        let event = ContractEvent::ReleaseFailed {
            message: "x".repeat(5_000),
        };
        let note = event.to_event().note.unwrap_or_default();
        assert_eq!(note.len(), crate::message::MAX_MESSAGE_LEN);
    }
}
