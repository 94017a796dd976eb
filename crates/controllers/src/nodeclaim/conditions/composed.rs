//! `InfraComposed`: whether the claim is an entry of its Cluster's Infra.
//!
//! # Expected flow
//! A claim that passes every check ([`crate::nodeclaim::compose::check_claim`],
//! its Cluster, the root, adoption) is Composed; one that does not says the
//! first problem found; a claim whose machine failed for good loses its
//! entry (ClaimFailed) so the machine is released.
//!
//! # Guarantees
//! Pure; never a deadline. The condition names the Infra entry and the
//! ComputeContract, never a secret.

use api::{ConditionStatus, InfraRef};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{Failure, INFRA_COMPOSED, Verdict, condition, reason};
use crate::nodeclaim::compose::Problem;

/// Where a claim's composition ended.
#[derive(Clone, Copy, Debug)]
pub enum Composition<'a> {
    /// Not composed: the first problem found.
    Refused(&'a Problem),
    /// Composed as `entry` of the Infra `infra`.
    Composed {
        /// The entry name.
        entry: &'a str,
        /// The Infra and ComputeContract of the entry.
        infra: &'a InfraRef,
    },
    /// Its machine failed for good: the entry is removed so it is released.
    Failed {
        /// The entry name.
        entry: &'a str,
        /// The Infra the entry was removed from.
        infra: &'a InfraRef,
        /// What failed.
        failure: &'a Failure,
    },
}

/// The InfraComposed condition of `composition`.
#[must_use]
pub fn decide(composition: Composition<'_>, generation: Option<i64>, now: &Time) -> Verdict {
    let (status, why, message) = match composition {
        Composition::Refused(problem) => (
            ConditionStatus::False,
            problem.reason,
            problem.message.clone(),
        ),
        Composition::Composed { entry, infra } => (
            ConditionStatus::True,
            reason::COMPOSED,
            format!(
                "entry {entry} of Infra {}/{}; ComputeContract {}",
                infra.namespace, infra.name, infra.compute_contract
            ),
        ),
        Composition::Failed {
            entry,
            infra,
            failure,
        } => (
            ConditionStatus::False,
            reason::CLAIM_FAILED,
            format!(
                "the claim failed ({}): its entry {entry} was removed from Infra {}/{} so its machine is released; delete and recreate the NodeClaim to try again",
                failure.reason, infra.namespace, infra.name
            ),
        ),
    };
    Verdict::settled(condition(
        INFRA_COMPOSED,
        status,
        why,
        message,
        generation,
        now,
    ))
}
