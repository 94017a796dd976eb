//! What keeps a live Infra from being what its spec says, beyond contracts on
//! their way: decided by [`super::decide`], said by the Ready condition
//! ([`super::conditions::ready_live`]) so a person can act on it.

use super::claims::UnservedNode;
use super::conditions::reason;

// The names the tests import, until they name `conditions::reason::` too.
pub use super::conditions::reason::{
    MACHINE_IMMUTABLE as REASON_MACHINE_IMMUTABLE,
    NODE_CLAIM_NOT_FOUND as REASON_NODE_CLAIM_NOT_FOUND,
    NODE_CLAIM_OF_ANOTHER_INFRA as REASON_NODE_CLAIM_OF_ANOTHER_INFRA,
    RELEASE_HELD as REASON_RELEASE_HELD, RELEASED_BY_HAND as REASON_RELEASED_BY_HAND,
};

/// How many items one message names.
const NAMED: usize = 3;

/// The problems of one live Infra, each list in name order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problems {
    /// ComputeContracts of live entries released by someone other
    /// than the Infra controller: their entries are not rented again.
    pub released_by_hand: Vec<String>,
    /// Node entries not rented, and why.
    pub unserved: Vec<(String, UnservedNode)>,
    /// ComputeContracts whose entry left the spec, kept for the NodeClaim
    /// (`namespace/name`) that still uses them.
    pub held: Vec<(String, String)>,
    /// Entries whose resources or location differ from their ComputeContract's,
    /// which keeps the ones it was rented with.
    pub machine_kept: Vec<(String, String)>,
}

impl Problems {
    /// Whether the Infra cannot become Deployed as its spec stands.
    #[must_use]
    pub fn blocks_deployment(&self) -> bool {
        !self.released_by_hand.is_empty() || !self.unserved.is_empty()
    }

    /// Reason and message of each kind present, most urgent first.
    #[must_use]
    pub fn said(&self) -> Vec<(&'static str, String)> {
        let mut said = Vec::new();
        if !self.released_by_hand.is_empty() {
            said.push((
                reason::RELEASED_BY_HAND,
                format!(
                    "released by hand (its spec.release set by someone other than the \
                     Infra controller): ComputeContract {}; its entry is not rented again, \
                     remove the entry (or delete its NodeClaim) to clear this",
                    named(self.released_by_hand.iter().cloned())
                ),
            ));
        }
        if let Some((_, first)) = self.unserved.first() {
            let reason = match first {
                UnservedNode::NotFound { .. } => reason::NODE_CLAIM_NOT_FOUND,
                UnservedNode::OfAnotherInfra { .. } => reason::NODE_CLAIM_OF_ANOTHER_INFRA,
            };
            let each = self.unserved.iter().map(|(entry, why)| match why {
                UnservedNode::NotFound { claim, uid } => format!(
                    "entry {entry} is a node of NodeClaim {claim} (uid {uid}), which does not exist"
                ),
                UnservedNode::OfAnotherInfra { claim, infra } => format!(
                    "entry {entry} is a node of NodeClaim {claim}, whose machine Infra {infra} rents"
                ),
            });
            said.push((
                reason,
                format!(
                    "{}: nothing is rented for it (one machine per live claim); remove the entry",
                    named(each)
                ),
            ));
        }
        if !self.held.is_empty() {
            let each = self.held.iter().map(|(contract, claim)| {
                format!("ComputeContract {contract} left spec.contracts but NodeClaim {claim} still uses it")
            });
            said.push((
                reason::RELEASE_HELD,
                format!(
                    "{}: it is not released (an edit of the Infra never costs a claim's running \
                     machine, and the NodeClaim controller restores the entry); delete the \
                     NodeClaim to release it",
                    named(each)
                ),
            ));
        }
        if !self.machine_kept.is_empty() {
            let each = self.machine_kept.iter().map(|(entry, contract)| {
                format!("entry {entry} asks for other resources or another location than ComputeContract {contract} was rented with")
            });
            said.push((
                reason::MACHINE_IMMUTABLE,
                format!(
                    "{}: a rented machine does not change, so the contract keeps them; add an \
                     entry with what you want and remove this one",
                    named(each)
                ),
            ));
        }
        said
    }
}

/// The first [`NAMED`] of `items` joined, then "and N more".
fn named(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    let shown = items
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    match items.len().saturating_sub(NAMED) {
        0 => shown,
        rest => format!("{shown} and {rest} more"),
    }
}
