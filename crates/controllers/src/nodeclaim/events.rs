//! The Events the NodeClaim reconciler publishes about a claim: only what a
//! person acts on, a claim that failed or a node that left its cluster. A
//! claim that goes well shows its steps in its phase and conditions; an
//! Event per step was a third of a node's API writes. An Event says what the
//! claim's Ready condition says, never a Secret value.

use api::NodeClaimPhase;
use kube::runtime::events::{Event, EventType};

use super::conditions::reason;
use crate::message::cap;

/// One transition of a claim a person acts on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeClaimEvent {
    /// The claim went Failed.
    Failed {
        /// Its Ready condition's message.
        message: Option<String>,
    },
    /// A joined node stopped reporting (the claim left Joined for an
    /// earlier phase); the loss grace runs.
    NodeLost {
        /// Its Ready condition's message.
        message: Option<String>,
    },
}

impl NodeClaimEvent {
    /// The Event a phase change from `previous` to `phase` deserves, if any,
    /// with the Ready condition's `message`.
    #[must_use]
    pub fn of_transition(
        previous: Option<NodeClaimPhase>,
        phase: Option<NodeClaimPhase>,
        message: Option<String>,
    ) -> Option<Self> {
        if phase == Some(NodeClaimPhase::Failed) {
            return Some(Self::Failed { message });
        }
        let node_lost = previous == Some(NodeClaimPhase::Joined)
            && matches!(
                phase,
                Some(
                    NodeClaimPhase::Pending | NodeClaimPhase::Requesting | NodeClaimPhase::Deployed
                )
            );
        node_lost.then_some(Self::NodeLost { message })
    }

    /// The PascalCase reason shown by `kubectl describe`.
    #[must_use]
    pub const fn reason(&self) -> &'static str {
        match self {
            Self::Failed { .. } => "Failed",
            Self::NodeLost { .. } => reason::NODE_LOST,
        }
    }

    /// The events.k8s.io/v1 Event to publish about the claim: a Warning.
    #[must_use]
    pub fn to_event(&self) -> Event {
        let (Self::Failed { message } | Self::NodeLost { message }) = self;
        Event {
            type_: EventType::Warning,
            reason: self.reason().to_owned(),
            note: message.as_deref().map(cap),
            action: "Reconcile".to_owned(),
            secondary: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use api::NodeClaimPhase as P;

    #[test]
    fn only_a_failure_or_a_lost_node_is_an_event() {
        for (previous, phase) in [
            (None, Some(P::Pending)),
            (Some(P::Pending), Some(P::Requesting)),
            (Some(P::Requesting), Some(P::Deployed)),
            (Some(P::Deployed), Some(P::Joined)),
            (Some(P::Joined), Some(P::Releasing)),
            (Some(P::Releasing), Some(P::Released)),
        ] {
            assert_eq!(
                NodeClaimEvent::of_transition(previous, phase, None),
                None,
                "{previous:?} -> {phase:?}"
            );
        }
        assert_eq!(
            NodeClaimEvent::of_transition(Some(P::Requesting), Some(P::Failed), None),
            Some(NodeClaimEvent::Failed { message: None })
        );
        assert_eq!(
            NodeClaimEvent::of_transition(Some(P::Joined), Some(P::Deployed), None),
            Some(NodeClaimEvent::NodeLost { message: None }),
            "the node left its cluster"
        );
    }

    #[test]
    fn each_event_is_a_warning_saying_the_ready_message() {
        for (event, reason) in [
            (
                NodeClaimEvent::Failed {
                    message: Some("the guest stayed gone".to_owned()),
                },
                "Failed",
            ),
            (
                NodeClaimEvent::NodeLost {
                    message: Some("the guest stayed gone".to_owned()),
                },
                "NodeLost",
            ),
        ] {
            let published = event.to_event();
            assert_eq!(
                (published.type_, published.reason.as_str()),
                (EventType::Warning, reason)
            );
            assert_eq!(published.note.as_deref(), Some("the guest stayed gone"));
        }
    }
}
