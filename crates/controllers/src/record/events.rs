//! The Events the record controller publishes about an AtprotoRecord: one
//! per write to the repository a person may want to follow. An Event names
//! the record's AT-URI, never its content or a credential.

use kube::runtime::events::{Event, EventType};

use crate::message::cap;

/// One write to (or deliberate non-write to) the repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordEvent {
    /// The declaration was written for the first time (in this repository).
    Published {
        /// The record's AT-URI.
        uri: String,
    },
    /// The declaration changed and the record was replaced.
    Updated {
        /// The record's AT-URI.
        uri: String,
    },
    /// The record was deleted from the repository (policy Delete).
    Deleted {
        /// The record's AT-URI (empty if it was never recorded).
        uri: String,
    },
    /// The object went and the record stays published (policy Orphan).
    Kept {
        /// The record's AT-URI.
        uri: String,
    },
    /// The Requester's account changed: the record is written anew in the
    /// new repository and the old one is left where it is.
    RepositoryChanged {
        /// The record in the old repository.
        old_uri: String,
        /// The new repository's DID.
        repository: String,
    },
}

impl RecordEvent {
    /// The PascalCase reason shown by `kubectl describe`.
    #[must_use]
    pub const fn reason(&self) -> &'static str {
        match self {
            Self::Published { .. } => "RecordPublished",
            Self::Updated { .. } => "RecordUpdated",
            Self::Deleted { .. } => "RecordDeleted",
            Self::Kept { .. } => "RecordKept",
            Self::RepositoryChanged { .. } => "RepositoryChanged",
        }
    }

    /// The events.k8s.io/v1 Event to publish about the AtprotoRecord.
    #[must_use]
    pub fn to_event(&self) -> Event {
        let (type_, action, note) = match self {
            Self::Published { uri } => (
                EventType::Normal,
                "Publish",
                format!("published the declaration at {uri}"),
            ),
            Self::Updated { uri } => (
                EventType::Normal,
                "Publish",
                format!("the declaration changed: replaced the record at {uri}"),
            ),
            Self::Deleted { uri } => (
                EventType::Normal,
                "Delete",
                format!("deleted the record {uri} from the repository"),
            ),
            Self::Kept { uri } => (
                EventType::Normal,
                "Orphan",
                format!("deletion policy Orphan: the record {uri} stays published"),
            ),
            Self::RepositoryChanged {
                old_uri,
                repository,
            } => (
                EventType::Warning,
                "Publish",
                format!(
                    "the Requester's account is now {repository}: the declaration is written \
                     there, and the record {old_uri} is left in the old repository"
                ),
            ),
        };
        Event {
            type_,
            reason: self.reason().to_owned(),
            note: Some(cap(&note)),
            action: action.to_owned(),
            secondary: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_has_its_reason_and_type_and_names_the_record() {
        let uri = "at://did:plc:a/computer.socialweb.infra/x".to_owned();
        let events = [
            RecordEvent::Published { uri: uri.clone() },
            RecordEvent::Updated { uri: uri.clone() },
            RecordEvent::Deleted { uri: uri.clone() },
            RecordEvent::Kept { uri: uri.clone() },
            RecordEvent::RepositoryChanged {
                old_uri: uri.clone(),
                repository: "did:plc:b".to_owned(),
            },
        ];
        let published: Vec<Event> = events.iter().map(RecordEvent::to_event).collect();
        let reasons: Vec<(&str, bool)> = published
            .iter()
            .map(|e| (e.reason.as_str(), e.type_ == EventType::Warning))
            .collect();
        assert_eq!(
            reasons,
            [
                ("RecordPublished", false),
                ("RecordUpdated", false),
                ("RecordDeleted", false),
                ("RecordKept", false),
                ("RepositoryChanged", true),
            ],
            "only a changed repository is a Warning"
        );
        for event in published {
            let note = event.note.unwrap_or_default();
            assert!(note.contains(&uri), "{}: {note}", event.reason);
        }
    }
}
