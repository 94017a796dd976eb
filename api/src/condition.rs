//! Conditions in the Kubernetes shape, and the one helper that sets them.
//!
//! Our own struct rather than `k8s_openapi`'s `Condition` so that the schema
//! descriptions (what `kubectl explain` shows) and the status enum are ours.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The status of a condition: whether the condition holds.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// The controller cannot tell (yet).
    Unknown,
}

/// One observation of an object's state, in the Kubernetes condition shape.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The kind of condition, PascalCase (for example `Ready`, `Joined`).
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether the condition holds: `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// A PascalCase, machine-readable reason for the last transition.
    pub reason: String,
    /// A human-readable explanation that says what to do about it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When the status last changed (RFC 3339). Kept while the status stays the same.
    pub last_transition_time: Time,
    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = crate::common::MAX_EXACT_INTEGER))]
    pub observed_generation: Option<i64>,
}

impl Condition {
    /// A condition of `type_` with the given status, reason and message, stamped at `now`.
    #[must_use]
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
        observed_generation: Option<i64>,
        now: Time,
    ) -> Self {
        Self {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
            last_transition_time: now,
            observed_generation,
        }
    }

    /// Whether the condition's status is `True`.
    #[must_use]
    pub fn is_true(&self) -> bool {
        self.status == ConditionStatus::True
    }
}

/// Puts `new` into `conditions`, replacing the condition of the same type.
///
/// # Guarantees
/// - When a condition of that type exists with the same status, its
///   `lastTransitionTime` is kept (only reason, message and observedGeneration
///   are updated), so re-running a reconcile writes nothing new.
/// - Returns `true` when `conditions` changed, so callers can skip a no-op patch.
pub fn set_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            let mut merged = new;
            if existing.status == merged.status {
                merged.last_transition_time = existing.last_transition_time.clone();
            }
            if *existing == merged {
                false
            } else {
                *existing = merged;
                true
            }
        }
        None => {
            conditions.push(new);
            true
        }
    }
}

/// The condition of the given type, if present.
#[must_use]
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn same_status_keeps_transition_time_and_updates_message() {
        let mut conditions = vec![];
        let first = Condition::new(
            "Ready",
            ConditionStatus::False,
            "Waiting",
            "a",
            Some(1),
            at(10),
        );
        assert!(set_condition(&mut conditions, first));
        let again = Condition::new(
            "Ready",
            ConditionStatus::False,
            "Waiting",
            "b",
            Some(2),
            at(20),
        );
        assert!(set_condition(&mut conditions, again));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, at(10));
        assert_eq!(conditions[0].message, "b");
    }

    #[test]
    fn identical_condition_is_no_change() {
        let mut conditions = vec![];
        let c = Condition::new("Ready", ConditionStatus::True, "Ok", "", None, at(10));
        set_condition(&mut conditions, c.clone());
        let later = Condition {
            last_transition_time: at(99),
            ..c
        };
        assert!(!set_condition(&mut conditions, later));
        assert_eq!(conditions[0].last_transition_time, at(10));
    }

    #[test]
    fn status_change_moves_transition_time() {
        let mut conditions = vec![];
        set_condition(
            &mut conditions,
            Condition::new("Ready", ConditionStatus::False, "Waiting", "", None, at(10)),
        );
        set_condition(
            &mut conditions,
            Condition::new("Ready", ConditionStatus::True, "Ok", "", None, at(30)),
        );
        assert_eq!(conditions[0].last_transition_time, at(30));
        assert!(find_condition(&conditions, "Ready").unwrap().is_true());
    }

    #[test]
    fn serializes_in_kubernetes_shape() {
        let c = Condition::new("Ready", ConditionStatus::True, "Ok", "fine", Some(3), at(0));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"type": "Ready", "status": "True", "reason": "Ok", "message": "fine",
                "lastTransitionTime": "1970-01-01T00:00:00Z", "observedGeneration": 3})
        );
    }
}
