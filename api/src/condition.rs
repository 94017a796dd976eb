//! Conditions in the Kubernetes shape, and the one helper that sets them.
//!
//! Our own struct rather than `k8s_openapi`'s `Condition` so that the schema
//! descriptions (what `kubectl explain` shows) and the status enum are ours.
//!
//! # Why the texts are [`Text`]s
//!
//! Every cached contract and claim holds four conditions (plan 0017), and the
//! manager caches 10,000 of each. A condition's type and reason come from a
//! small set (a controller's constants), so decoding looks each up in a
//! bounded table of those seen and equal ones share one allocation
//! ([`crate::intern`]); a message is shared by the conditions of one object that
//! say the same (the contract's projection does that). A [`Text`] is 16
//! bytes where a `String` is 24. The JSON and the schema are a string's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::text::{Text, interned, is_empty};

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
    #[serde(rename = "type", deserialize_with = "interned")]
    pub type_: Text,
    /// Whether the condition holds: `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// A PascalCase, machine-readable reason for the last transition.
    #[serde(deserialize_with = "interned")]
    pub reason: Text,
    /// A human-readable explanation that says what to do about it.
    #[serde(default, skip_serializing_if = "is_empty")]
    pub message: Text,
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
        type_: impl Into<Text>,
        status: ConditionStatus,
        reason: impl Into<Text>,
        message: impl Into<Text>,
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

/// Makes the equal messages of `conditions` and `message` (a status's own,
/// which repeats one of them) share one allocation: a contract says the
/// same of its bid in two conditions and of its guest in two and its
/// message (plan 0017).
pub fn share_equal_messages(conditions: &mut [Condition], message: Option<&mut Text>) {
    for i in 1..conditions.len() {
        let (before, rest) = conditions.split_at_mut(i);
        let current = &mut rest[0];
        if let Some(same) = before.iter().find(|c| c.message == current.message) {
            current.message = same.message.clone();
        }
    }
    if let Some(message) = message
        && let Some(same) = conditions.iter().find(|c| c.message == *message)
    {
        *message = same.message.clone();
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
    fn equal_messages_share_one_allocation() {
        let condition = |type_: &str, message: &str| {
            Condition::new(type_, ConditionStatus::True, "Ok", message, None, at(0))
        };
        let mut conditions = vec![
            condition("Accepted", "the bid"),
            condition("Deployed", "the guest"),
            condition("Bidding", "the bid"),
            condition("Ready", "the guest"),
        ];
        let mut message = Text::from("the guest");
        let before = conditions.clone();
        share_equal_messages(&mut conditions, Some(&mut message));
        assert_eq!(conditions, before, "the same texts");
        assert!(conditions[2].message.shares(&conditions[0].message));
        assert!(conditions[3].message.shares(&conditions[1].message));
        assert!(message.shares(&conditions[1].message));
        assert!(!conditions[1].message.shares(&conditions[0].message));
    }

    #[test]
    fn decoded_types_and_reasons_are_shared_and_messages_are_not() {
        let json = r#"{"type": "Ready", "status": "True", "reason": "NodeJoined",
            "message": "joined", "lastTransitionTime": "1970-01-01T00:00:00Z"}"#;
        let a: Condition = serde_json::from_str(json).unwrap();
        let b: Condition = serde_json::from_str(json).unwrap();
        assert!(a.type_.shares(&b.type_));
        assert!(a.reason.shares(&b.reason));
        assert!(
            !a.message.shares(&b.message),
            "messages are many: only one object's equal ones share"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_condition_reads_back_as_written(
            type_ in "[A-Za-z]{1,20}",
            reason in ".{0,80}",
            message in ".{0,200}",
            generation in proptest::option::of(0..i64::MAX),
        ) {
            let c = Condition::new(type_, ConditionStatus::False, reason, message, generation, at(5));
            let json = serde_json::to_value(&c).unwrap();
            proptest::prop_assert_eq!(
                json.get("message").is_some(),
                !c.message.is_empty(),
                "an empty message is left out, as before"
            );
            let back: Condition = serde_json::from_value(json).unwrap();
            proptest::prop_assert_eq!(back, c);
        }
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
