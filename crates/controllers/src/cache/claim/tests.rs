//! The read model keeps what the claims' readers read, decoded from a
//! claim's JSON as the watch delivers it, and digests the rest.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use api::names::NODECLAIM_FINALIZER;
use serde_json::{Value, json};

use super::*;
use crate::cache::decode::Decoded;

/// A Joined claim as `manager dev` wrote it (the cache_weight fixture).
fn claim_json() -> Value {
    serde_json::from_str(include_str!("../../../examples/cache_weight/claim.json")).unwrap()
}

fn cached(value: Value) -> CachedClaim {
    match serde_json::from_value::<Decoded<CachedClaim>>(value).unwrap() {
        Decoded::Object(claim) => claim,
        Decoded::Undecodable(bad) => panic!("a readable claim decodes: {bad:?}"),
    }
}

fn whole(value: Value) -> NodeClaim {
    serde_json::from_value(value).unwrap()
}

#[test]
fn it_keeps_what_the_readers_read() {
    let mut json = claim_json();
    json["metadata"]["labels"] = json!({"team": "a"});
    let claim = cached(json.clone());
    let whole = whole(json);
    assert_eq!(claim.metadata.name.as_deref(), Some("staging-worker-1"));
    assert_eq!(claim.metadata.namespace.as_deref(), Some("tenant-a"));
    assert_eq!(claim.metadata.uid, whole.metadata.uid);
    assert_eq!(claim.metadata.resource_version.as_deref(), Some("60"));
    assert_eq!(claim.metadata.generation, Some(1));
    assert!(
        claim.metadata.creation_timestamp.is_some(),
        "the status hold counts from it"
    );
    assert_eq!(
        claim.metadata.finalizers.as_deref(),
        Some(&[NODECLAIM_FINALIZER.to_owned()][..])
    );
    assert_eq!(
        claim.metadata.owner_references,
        whole.metadata.owner_references
    );
    assert_eq!(claim.metadata.labels, None, "nothing reads them");
    assert_eq!(claim.metadata.annotations, None, "nothing reads them");
    assert_eq!(claim.spec, whole.spec);
    let status = claim.status.as_ref().unwrap();
    let read = whole.status.as_ref().unwrap();
    assert_eq!(claim.phase(), Some(NodeClaimPhase::Joined));
    assert_eq!(status.infra, read.infra);
    assert_eq!(status.guest, read.guest);
    assert_eq!(status.grant_expires_at, read.grant_expires_at);
    assert_eq!(status.observed_generation, Some(1));
    let types: Vec<&str> = status.conditions.iter().map(|c| &*c.type_).collect();
    assert_eq!(types, ["Deployed", "Joined", "InfraComposed", "Ready"]);
    for (kept, condition) in status.conditions.iter().zip(&read.conditions) {
        assert_eq!(kept.status, condition.status);
        assert_eq!(kept.reason, condition.reason);
        assert_eq!(kept.last_transition_time(), condition.last_transition_time);
        assert_eq!(
            kept.rest,
            rest_digest(&condition.message, condition.observed_generation)
        );
    }
    assert_eq!(
        CachedClaim::from(whole),
        claim,
        "decoded, it is the read model of the claim"
    );
}

#[test]
fn a_message_or_generation_that_differs_gives_another_digest() {
    let base = rest_digest("guest 10.0.0.1 is running", Some(1));
    assert_eq!(base, rest_digest("guest 10.0.0.1 is running", Some(1)));
    assert_ne!(base, rest_digest("guest 10.0.0.2 is running", Some(1)));
    assert_ne!(base, rest_digest("guest 10.0.0.1 is running", Some(2)));
    assert_ne!(base, rest_digest("guest 10.0.0.1 is running", None));
    assert_ne!(rest_digest("", None), rest_digest("", Some(0)));
}

#[test]
fn a_condition_set_on_the_read_model_keeps_its_time_while_its_status_stays() {
    let at = |s: &str| Time(s.parse().unwrap());
    let condition = |status, reason: &str, message: &str, time: &str| {
        CachedCondition::from(&Condition::new(
            "Deployed",
            status,
            reason,
            message,
            Some(1),
            at(time),
        ))
    };
    let mut conditions = vec![condition(
        ConditionStatus::True,
        "GuestRunning",
        "a",
        "2026-12-05T04:00:00Z",
    )];
    set_cached_condition(
        &mut conditions,
        condition(
            ConditionStatus::True,
            "GuestRunning",
            "b",
            "2026-12-05T05:00:00Z",
        ),
    );
    assert_eq!(conditions.len(), 1);
    assert_eq!(
        conditions[0].last_transition_time(),
        at("2026-12-05T04:00:00Z")
    );
    assert_eq!(conditions[0].rest, rest_digest("b", Some(1)));
    set_cached_condition(
        &mut conditions,
        condition(
            ConditionStatus::False,
            "GuestLost",
            "c",
            "2026-12-05T06:00:00Z",
        ),
    );
    assert_eq!(
        conditions[0].last_transition_time(),
        at("2026-12-05T06:00:00Z")
    );
    let mut joined = condition(
        ConditionStatus::True,
        "NodeJoined",
        "d",
        "2026-12-05T06:00:00Z",
    );
    joined.type_ = "Joined".into();
    set_cached_condition(&mut conditions, joined);
    assert_eq!(
        find_cached_condition(&conditions, "Joined").map(|c| &*c.reason),
        Some("NodeJoined")
    );
}

proptest::proptest! {
    /// The transition time kept apart as seconds and nanoseconds reads back
    /// as the time the condition had, before the epoch and after, to the
    /// nanosecond, over every second a `Timestamp` holds whole.
    #[test]
    fn a_kept_condition_reads_back_its_transition_time(
        second in (Timestamp::MIN.as_second() + 1)..Timestamp::MAX.as_second(),
        nanosecond in 0_i32..1_000_000_000,
    ) {
        let time = Time(Timestamp::new(second, nanosecond).unwrap());
        let condition = Condition::new(
            "Deployed",
            ConditionStatus::True,
            "GuestRunning",
            "m",
            None,
            time.clone(),
        );
        proptest::prop_assert_eq!(
            CachedCondition::from(&condition).last_transition_time(),
            time
        );
    }
}
