//! [`StatusWrite`]: what a claim's status becomes, decided from the claim's
//! read model ([`CachedClaimStatus`]) and laid on the whole status the API
//! server holds when it is written.
//!
//! The read model keeps each condition's message as a digest (plan 0018
//! R3), so a decision cannot build the whole new status: it keeps the
//! scalars (phase, Infra entry, guest, grant expiry, observed generation)
//! whole and lists the conditions it sets. The write reads the claim (one
//! GET) and lays the decision on its status ([`StatusWrite::applied_to`]):
//! a condition the decision did not set keeps its message.
//!
//! # Guarantees
//! - For every status `s`, `CachedClaimStatus::from(&w.applied_to(s))` is
//!   `w.applied_to_cached(CachedClaimStatus::from(&s))` (tested for any
//!   status and write): what the decision compares is what would be written.
//! - Conditions are set as [`api::set_condition`] sets them, in order: a
//!   condition whose status stays keeps its transition time.

use api::{Condition, Guest, InfraRef, NodeClaimPhase, NodeClaimStatus, set_condition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::cache::{CachedClaimStatus, CachedCondition, set_cached_condition};

/// What a claim's status becomes. See the [module docs](self).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatusWrite {
    /// `status.phase`.
    pub phase: Option<NodeClaimPhase>,
    /// `status.infra`.
    pub infra: Option<InfraRef>,
    /// `status.guest`.
    pub guest: Option<Guest>,
    /// `status.grantExpiresAt`.
    pub grant_expires_at: Option<Time>,
    /// `status.observedGeneration`.
    pub observed_generation: Option<i64>,
    /// The conditions set, in the order they are set; the others stay.
    pub conditions: Vec<Condition>,
}

impl StatusWrite {
    /// A write that keeps `previous` as it is, but for `observedGeneration`.
    #[must_use]
    pub fn keeping(previous: &CachedClaimStatus, observed_generation: Option<i64>) -> Self {
        Self {
            phase: previous.phase,
            infra: previous.infra.clone(),
            guest: previous.guest.clone(),
            grant_expires_at: previous.grant_expires_at.clone(),
            observed_generation,
            conditions: Vec::new(),
        }
    }

    /// The condition of the given type this write sets, if it sets one.
    #[must_use]
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().rev().find(|c| c.type_ == type_)
    }

    /// `status` with this write laid on it.
    #[must_use]
    pub fn applied_to(&self, mut status: NodeClaimStatus) -> NodeClaimStatus {
        self.lay_scalars(
            &mut status.phase,
            &mut status.infra,
            &mut status.guest,
            &mut status.grant_expires_at,
            &mut status.observed_generation,
        );
        for condition in &self.conditions {
            set_condition(&mut status.conditions, condition.clone());
        }
        status
    }

    /// The read model of a status with this write laid on it.
    #[must_use]
    pub fn applied_to_cached(&self, mut status: CachedClaimStatus) -> CachedClaimStatus {
        self.lay_scalars(
            &mut status.phase,
            &mut status.infra,
            &mut status.guest,
            &mut status.grant_expires_at,
            &mut status.observed_generation,
        );
        for condition in &self.conditions {
            set_cached_condition(&mut status.conditions, CachedCondition::from(condition));
        }
        status
    }

    /// Sets the scalars of a status (whole, or its read model) to this write's.
    fn lay_scalars(
        &self,
        phase: &mut Option<NodeClaimPhase>,
        infra: &mut Option<InfraRef>,
        guest: &mut Option<Guest>,
        grant_expires_at: &mut Option<Time>,
        observed_generation: &mut Option<i64>,
    ) {
        *phase = self.phase;
        infra.clone_from(&self.infra);
        guest.clone_from(&self.guest);
        grant_expires_at.clone_from(&self.grant_expires_at);
        *observed_generation = self.observed_generation;
    }

    /// Whether writing this changes `previous`.
    #[must_use]
    pub fn changes(&self, previous: &CachedClaimStatus) -> bool {
        self.applied_to_cached(previous.clone()) != *previous
    }

    /// Whether this write changes `previous` in its phase only.
    #[must_use]
    pub fn changes_only_the_phase(&self, previous: &CachedClaimStatus) -> bool {
        let mut written = self.applied_to_cached(previous.clone());
        written.phase = previous.phase;
        written == *previous
    }
}

#[cfg(test)]
mod tests;
