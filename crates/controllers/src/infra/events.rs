//! The Events the Infra controller publishes: one per transition a person
//! cares about, decided by [`super::decide`] and published by `act`.
//!
//! An Event names contracts and phases only: never a Secret's content, a join
//! token, a CA or a market error text (those stay on the ComputeContract).

use api::ComputeContract;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;
use kube::runtime::events::{Event, EventType};

use crate::message::cap;

/// Why a contract's release was requested.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseCause {
    /// Its entry left `spec.contracts` (or was recreated under another name).
    EntryRemoved,
    /// The Infra is being deleted.
    InfraDeleted,
}

/// One transition of an Infra or of one of its ComputeContracts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InfraEvent {
    /// A ComputeContract was written for an entry that had none.
    ContractCreated {
        /// Name of the ComputeContract.
        contract: String,
    },
    /// `spec.release` was set on a ComputeContract.
    ReleaseRequested {
        /// Name of the ComputeContract.
        contract: String,
        /// Why.
        cause: ReleaseCause,
    },
    /// A Released ComputeContract was deleted.
    ContractDeleted {
        /// Name of the ComputeContract.
        contract: String,
    },
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
    /// Every contract of the Infra is Deployed.
    Deployed {
        /// How many contracts are Deployed.
        contracts: usize,
    },
    /// Every contract is released and deleted; the release finalizer is removed.
    Finalized,
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
            Self::ContractCreated { .. } => "ContractCreated",
            Self::ReleaseRequested { .. } => "ReleaseRequested",
            Self::ContractDeleted { .. } => "ContractDeleted",
            Self::ContractFailed { .. } => "ContractFailed",
            Self::ReleasedByHand { .. } => "ContractReleasedByHand",
            Self::Deployed { .. } => "Deployed",
            Self::Finalized => "Finalized",
            Self::RecordKept { .. } => "RecordKept",
        }
    }

    /// The ComputeContract the event is about, if it is about one.
    #[must_use]
    pub fn contract(&self) -> Option<&str> {
        match self {
            Self::ContractCreated { contract }
            | Self::ReleaseRequested { contract, .. }
            | Self::ContractDeleted { contract }
            | Self::ContractFailed { contract }
            | Self::ReleasedByHand { contract } => Some(contract),
            Self::Deployed { .. } | Self::Finalized | Self::RecordKept { .. } => None,
        }
    }

    /// The events.k8s.io/v1 Event to publish about the Infra; a ComputeContract it
    /// is about (in `namespace`) is its `related` object, which also keeps the
    /// Recorder from folding events about different contracts into one series.
    #[must_use]
    pub fn to_event(&self, namespace: &str) -> Event {
        let (type_, action, note) = match self {
            Self::ContractCreated { contract } => (
                EventType::Normal,
                "Apply",
                format!("created ComputeContract {contract}"),
            ),
            Self::ReleaseRequested { contract, cause } => (
                EventType::Normal,
                "Release",
                match cause {
                    ReleaseCause::EntryRemoved => format!(
                        "released ComputeContract {contract}: its entry left the spec; it is deleted once Released"
                    ),
                    ReleaseCause::InfraDeleted => {
                        format!("released ComputeContract {contract}: the Infra is being deleted")
                    }
                },
            ),
            Self::ContractDeleted { contract } => (
                EventType::Normal,
                "Delete",
                format!("deleted ComputeContract {contract}: it is Released"),
            ),
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
            Self::Deployed { contracts } => (
                EventType::Normal,
                "Observe",
                format!("all {contracts} contracts are Deployed"),
            ),
            Self::Finalized => (
                EventType::Normal,
                "Finalize",
                "every contract is released and deleted; the Infra can go".to_owned(),
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

/// How many contract names an aggregated Event lists (an Event's note is
/// capped at 1 KiB by the API server).
const NAMES_LISTED: usize = 10;

/// The Events to publish for the transitions one pass made: the routine steps
/// of many contracts (created, release requested, deleted) are aggregated into
/// one Event per reason naming them, since a scale-up or a deleted Infra makes
/// one per contract; warnings and the Infra's own milestones stay one each.
#[must_use]
pub fn aggregated(happened: &[&InfraEvent], namespace: &str) -> Vec<Event> {
    let routine = |event: &InfraEvent| {
        matches!(
            event,
            InfraEvent::ContractCreated { .. }
                | InfraEvent::ReleaseRequested { .. }
                | InfraEvent::ContractDeleted { .. }
        )
    };
    let mut events = Vec::new();
    for reason in ["ContractCreated", "ReleaseRequested", "ContractDeleted"] {
        let same: Vec<&InfraEvent> = happened
            .iter()
            .copied()
            .filter(|e| routine(e) && e.reason() == reason)
            .collect();
        match same.as_slice() {
            [] => {}
            [one] => events.push(one.to_event(namespace)),
            many => events.push(summary(reason, many, namespace)),
        }
    }
    events.extend(
        happened
            .iter()
            .filter(|e| !routine(e))
            .map(|e| e.to_event(namespace)),
    );
    events
}

/// One Event for `events` (all of `reason`), naming their contracts. Its
/// `related` object is the first of them: the Recorder folds Events of the
/// same reason and `related` into one series (the note of the first), so a
/// later pass over other contracts must not look like a repeat.
fn summary(reason: &str, events: &[&InfraEvent], namespace: &str) -> Event {
    let names: Vec<&str> = events.iter().filter_map(|e| e.contract()).collect();
    let mut listed = names
        .iter()
        .take(NAMES_LISTED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > NAMES_LISTED {
        listed.push_str(&format!(" and {} more", names.len() - NAMES_LISTED));
    }
    let n = names.len();
    let (action, note) = match reason {
        "ContractCreated" => ("Apply", format!("created {n} ComputeContracts: {listed}")),
        "ReleaseRequested" => (
            "Release",
            format!("released {n} ComputeContracts (each is deleted once Released): {listed}"),
        ),
        _ => (
            "Delete",
            format!("deleted {n} ComputeContracts, all Released: {listed}"),
        ),
    };
    Event {
        type_: EventType::Normal,
        reason: reason.to_owned(),
        note: Some(note),
        action: action.to_owned(),
        secondary: events
            .first()
            .and_then(|first| first.to_event(namespace).secondary),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_has_its_reason_type_and_related_contract() {
        let contract = || "cc-a".to_owned();
        let events = [
            InfraEvent::ContractCreated {
                contract: contract(),
            },
            InfraEvent::ReleaseRequested {
                contract: contract(),
                cause: ReleaseCause::InfraDeleted,
            },
            InfraEvent::ContractDeleted {
                contract: contract(),
            },
            InfraEvent::ReleasedByHand {
                contract: contract(),
            },
            InfraEvent::ContractFailed {
                contract: contract(),
            },
            InfraEvent::Deployed { contracts: 2 },
            InfraEvent::Finalized,
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
            ("ContractCreated", false, true),
            ("ReleaseRequested", false, true),
            ("ContractDeleted", false, true),
            ("ContractReleasedByHand", true, true),
            ("ContractFailed", true, true),
            ("Deployed", false, false),
            ("Finalized", false, false),
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

    fn created(name: &str) -> InfraEvent {
        InfraEvent::ContractCreated {
            contract: name.to_owned(),
        }
    }

    #[test]
    fn a_pass_over_many_contracts_is_one_event_per_reason() {
        let names: Vec<String> = (0..12).map(|n| format!("cc-{n}")).collect();
        let mut happened: Vec<InfraEvent> = names.iter().map(|n| created(n)).collect();
        happened.push(InfraEvent::ContractFailed {
            contract: "cc-0".to_owned(),
        });
        happened.push(InfraEvent::ContractDeleted {
            contract: "old".to_owned(),
        });
        let refs: Vec<&InfraEvent> = happened.iter().collect();
        let events = aggregated(&refs, "ns");
        let reasons: Vec<(&str, bool)> = events
            .iter()
            .map(|e| (e.reason.as_str(), e.secondary.is_some()))
            .collect();
        assert_eq!(
            reasons,
            [
                ("ContractCreated", true),
                ("ContractDeleted", true),
                ("ContractFailed", true)
            ],
            "one Event for the twelve creations; a Warning stays its own"
        );
        let first = events[0].secondary.as_ref().and_then(|r| r.name.as_deref());
        assert_eq!(first, Some("cc-0"), "a later pass is not folded into it");
        let note = events[0].note.clone().unwrap_or_default();
        assert!(
            note.starts_with("created 12 ComputeContracts: cc-0, cc-1,")
                && note.ends_with("cc-9 and 2 more"),
            "{note}"
        );
    }
}
