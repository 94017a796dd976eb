//! A NodeClaim as the shared cache keeps it: its read model (plan 0018 R3).
//!
//! The NodeClaim controller decides from every claim of a Cluster at each
//! reconcile, so the cache keeps of each claim what that decision, the
//! Infra controller's claim checks and the mappers read: its metadata (less
//! labels, annotations and managed fields), its spec whole (a handful of
//! scalars), and of its status the phase, the Infra entry, the guest, the
//! grant's expiry and each condition's type, status, reason and transition
//! time, with a digest of its message and observed generation: a message is
//! only ever compared (is the condition the decision sets the one written?),
//! never read. Whatever writes a status reads the whole claim from the API
//! server first (`nodeclaim::act`, one GET) and lays the decided change on
//! it ([`crate::nodeclaim::decide::StatusWrite`]), so no message is lost.
//!
//! It is a [`Resource`](kube::Resource) of the claim's group, version and
//! kind, as the orphans controller and the shared cache need, and it
//! decodes from a claim's JSON exactly when a [`NodeClaim`] does (and is
//! then [`CachedClaim::from`] it).
//!
//! # Guarantees
//! - [`CachedClaimStatus::from`] a status, with a [`StatusWrite`] laid on
//!   it, is the read model of that whole status with the same write laid on
//!   it ([`StatusWrite::applied_to`], [`StatusWrite::applied_to_cached`]):
//!   a decision that compares the two never writes a status that is already
//!   there, and never skips one that is not (up to a 64-bit hash collision).
//! - `metadata` keeps the name, namespace, uid, resourceVersion, generation,
//!   creation and deletion times, finalizers and ownerReferences, and
//!   nothing else.
//!
//! [`StatusWrite`]: crate::nodeclaim::decide::StatusWrite
//! [`StatusWrite::applied_to`]: crate::nodeclaim::decide::StatusWrite::applied_to
//! [`StatusWrite::applied_to_cached`]: crate::nodeclaim::decide::StatusWrite::applied_to_cached

use api::{
    Condition, ConditionStatus, Guest, InfraRef, NodeClaim, NodeClaimPhase, NodeClaimSpec,
    NodeClaimStatus, Text,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::projection::projection_of;

/// What the shared cache keeps of a NodeClaim. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct CachedClaim {
    /// Its metadata, less labels, annotations and managed fields.
    pub metadata: ObjectMeta,
    /// Its spec.
    pub spec: NodeClaimSpec,
    /// What is read of its status; `None` while it has none.
    pub status: Option<CachedClaimStatus>,
}

/// What the cache keeps of a claim's status.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachedClaimStatus {
    /// `status.phase`.
    pub phase: Option<NodeClaimPhase>,
    /// `status.infra`.
    pub infra: Option<InfraRef>,
    /// `status.conditions`, in their order.
    pub conditions: Vec<CachedCondition>,
    /// `status.guest`.
    pub guest: Option<Guest>,
    /// `status.grantExpiresAt`.
    pub grant_expires_at: Option<Time>,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
}

/// What the cache keeps of one condition: what decisions read, and a
/// digest of the rest (its message and observed generation).
///
/// Its transition time is kept as seconds and nanoseconds apart: a `Time`
/// is 16 bytes, 4 of them padding, and apart they leave the status that
/// room. A condition is then 56 bytes, so a claim's four take the
/// allocator's 224-byte class, not 256 (plan 0018 R7).
#[derive(Clone, Debug, PartialEq)]
pub struct CachedCondition {
    /// `type`.
    pub type_: Text,
    /// `status`.
    pub status: ConditionStatus,
    /// `reason`.
    pub reason: Text,
    /// `lastTransitionTime`: its seconds since the epoch,
    transition_second: i64,
    /// and its nanoseconds past them.
    transition_nanosecond: i32,
    /// [`rest_digest`] of its message and observed generation.
    pub rest: u64,
}

const _: () = assert!(size_of::<CachedCondition>() <= 56);

impl CachedCondition {
    /// The condition as kept, `rest` its [`rest_digest`].
    #[must_use]
    pub fn new(
        type_: Text,
        status: ConditionStatus,
        reason: Text,
        last_transition_time: &Time,
        rest: u64,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            transition_second: last_transition_time.0.as_second(),
            transition_nanosecond: last_transition_time.0.subsec_nanosecond(),
            rest,
        }
    }

    /// Whether the condition's status is `True`.
    #[must_use]
    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }

    /// `lastTransitionTime`.
    #[must_use]
    pub fn last_transition_time(&self) -> Time {
        // Both parts were read off a valid `Timestamp`, so it is one again.
        Time(
            Timestamp::new(self.transition_second, self.transition_nanosecond)
                .unwrap_or(Timestamp::UNIX_EPOCH),
        )
    }

    /// Takes `other`'s transition time.
    fn keep_transition_time_of(&mut self, other: &Self) {
        self.transition_second = other.transition_second;
        self.transition_nanosecond = other.transition_nanosecond;
    }
}

/// A digest of what a [`CachedCondition`] does not keep of a condition.
#[must_use]
pub fn rest_digest(message: &str, observed_generation: Option<i64>) -> u64 {
    use std::hash::{DefaultHasher, Hash as _, Hasher as _};
    let mut hasher = DefaultHasher::new();
    message.hash(&mut hasher);
    observed_generation.hash(&mut hasher);
    hasher.finish()
}

impl From<&Condition> for CachedCondition {
    fn from(condition: &Condition) -> Self {
        Self::new(
            condition.type_.clone(),
            condition.status,
            condition.reason.clone(),
            &condition.last_transition_time,
            rest_digest(&condition.message, condition.observed_generation),
        )
    }
}

/// The condition of the given type, if present.
#[must_use]
pub fn find_cached_condition<'a>(
    conditions: &'a [CachedCondition],
    type_: &str,
) -> Option<&'a CachedCondition> {
    conditions.iter().find(|c| *c.type_ == *type_)
}

/// [`api::set_condition`] on the read model: `new` replaces the condition of
/// its type (keeping its transition time while the status stays) or is
/// added at the end.
pub fn set_cached_condition(conditions: &mut Vec<CachedCondition>, mut new: CachedCondition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            if existing.status == new.status {
                new.keep_transition_time_of(existing);
            }
            *existing = new;
        }
        None => conditions.push(new),
    }
}

impl From<&NodeClaimStatus> for CachedClaimStatus {
    fn from(status: &NodeClaimStatus) -> Self {
        Self {
            phase: status.phase,
            infra: status.infra.clone(),
            conditions: status
                .conditions
                .iter()
                .map(CachedCondition::from)
                .collect(),
            guest: status.guest.clone(),
            grant_expires_at: status.grant_expires_at.clone(),
            observed_generation: status.observed_generation,
        }
    }
}

impl CachedClaimStatus {
    /// The condition of the given type, if present.
    #[must_use]
    pub fn condition(&self, type_: &str) -> Option<&CachedCondition> {
        find_cached_condition(&self.conditions, type_)
    }
}

impl CachedClaim {
    /// The claim's phase, `None` while its status has none.
    #[must_use]
    pub fn phase(&self) -> Option<NodeClaimPhase> {
        self.status.as_ref().and_then(|s| s.phase)
    }
}

impl From<NodeClaim> for CachedClaim {
    fn from(claim: NodeClaim) -> Self {
        let NodeClaim {
            metadata,
            spec,
            status,
        } = claim;
        // Nothing reads a claim's labels or annotations (a `BTreeMap` takes
        // a ~540-byte node however few entries it holds), nor its other
        // metadata fields; the keeper holds exactly these (`cache::Claims`).
        Self {
            metadata: ObjectMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                generation: metadata.generation,
                creation_timestamp: metadata.creation_timestamp,
                deletion_timestamp: metadata.deletion_timestamp,
                finalizers: metadata.finalizers,
                owner_references: metadata.owner_references,
                ..ObjectMeta::default()
            },
            spec,
            status: status.as_ref().map(CachedClaimStatus::from),
        }
    }
}

projection_of!(CachedClaim, NodeClaim);

#[cfg(test)]
mod tests;
