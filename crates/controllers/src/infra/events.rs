//! The Events the Infra controller publishes: only what a person acts on (a
//! failed contract, a hand release, a kept record), decided by
//! [`super::decide`] and published by `act`. Routine progress (a contract
//! created, released or deleted, the Infra Deployed or finalized) is no Event:
//! a person follows it in the Infra's status (`kubectl get infra`, its `Ready`
//! condition and `status.contracts`), and those Events were most of an Infra's
//! API writes in a scale-up (issue 12, plan 0012 S6).
//!
//! An Event names contracts and phases only: never a Secret's content, a join
//! token, a CA or a market error text (those stay on the ComputeContract).

use api::ComputeContract;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType};

use crate::message::cap;

/// A transition of an Infra or of one of its ComputeContracts that a person acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InfraEvent {
    /// A ComputeContract of a live entry was released by someone
    /// other than the Infra controller; its entry is not rented again.
    ReleasedByHand {
        /// Name of the ComputeContract.
        contract: String,
    },
    /// A ComputeContract of a live entry went Failed.
    ContractFailed {
        /// Name of the ComputeContract.
        contract: String,
    },
    /// `spec.record` was removed: the AtprotoRecord is deleted with policy
    /// Orphan, and the record stays published.
    RecordKept {
        /// The record's AT-URI (empty if it was never recorded).
        uri: String,
    },
}

impl InfraEvent {
    /// The PascalCase reason shown by `kubectl describe` (bounded: usable as a metric label).
    #[must_use]
    pub const fn reason(&self) -> &'static str {
        match self {
            Self::ContractFailed { .. } => "ContractFailed",
            Self::ReleasedByHand { .. } => "ContractReleasedByHand",
            Self::RecordKept { .. } => "RecordKept",
        }
    }

    /// The ComputeContract the event is about, if it is about one.
    #[must_use]
    pub fn contract(&self) -> Option<&str> {
        match self {
            Self::ContractFailed { contract } | Self::ReleasedByHand { contract } => Some(contract),
            Self::RecordKept { .. } => None,
        }
    }

    /// The events.k8s.io/v1 Event to publish about the Infra; a ComputeContract it
    /// is about (in `namespace`) is its `related` object, which also keeps the
    /// Recorder from folding events about different contracts into one series.
    #[must_use]
    pub fn to_event(&self, namespace: &str) -> Event {
        let (type_, action, note) = match self {
            Self::ContractFailed { contract } => (
                EventType::Warning,
                "Observe",
                format!(
                    "ComputeContract {contract} failed; `kubectl describe computecontract {contract}` says why"
                ),
            ),
            Self::ReleasedByHand { contract } => (
                EventType::Warning,
                "Observe",
                format!(
                    "ComputeContract {contract} was released by hand (its spec.release set by someone other than the Infra controller) while its entry is live; the entry is not rented again"
                ),
            ),
            Self::RecordKept { uri } => (
                EventType::Normal,
                "Unbind",
                format!(
                    "spec.record was removed: the AtprotoRecord is deleted with policy Orphan and {} \
                     stays published",
                    if uri.is_empty() {
                        "its record".to_owned()
                    } else {
                        format!("the record {uri}")
                    }
                ),
            ),
        };
        Event {
            type_,
            reason: self.reason().to_owned(),
            note: Some(cap(&note)),
            action: action.to_owned(),
            secondary: self.contract().map(|name| ObjectReference {
                api_version: Some(ComputeContract::api_version(&()).into_owned()),
                kind: Some(ComputeContract::kind(&()).into_owned()),
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectReference::default()
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_has_its_reason_type_and_related_contract() {
        let contract = || "cc-a".to_owned();
        let events = [
            InfraEvent::ReleasedByHand {
                contract: contract(),
            },
            InfraEvent::ContractFailed {
                contract: contract(),
            },
            InfraEvent::RecordKept { uri: String::new() },
        ];
        let published: Vec<(String, bool, bool)> = events
            .iter()
            .map(|e| e.to_event("ns"))
            .map(|e| {
                (
                    e.reason,
                    e.type_ == EventType::Warning,
                    e.secondary.is_some(),
                )
            })
            .collect();
        let expected = [
            ("ContractReleasedByHand", true, true),
            ("ContractFailed", true, true),
            ("RecordKept", false, false),
        ]
        .map(|(reason, warning, related)| (reason.to_owned(), warning, related));
        assert_eq!(
            published, expected,
            "(reason, Warning, related contract) of each"
        );
    }

    #[test]
    fn a_kept_record_names_its_uri_when_known() {
        let note = |uri: &str| {
            InfraEvent::RecordKept {
                uri: uri.to_owned(),
            }
            .to_event("ns")
            .note
            .unwrap_or_default()
        };
        assert!(
            note("at://did:plc:a/x/1").contains("the record at://did:plc:a/x/1 stays published")
        );
        assert!(note("").contains("its record stays published"));
    }
}
