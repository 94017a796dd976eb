//! What the decision compares is what the write lays on the claim read
//! whole: for any status and any write.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use api::{Condition, ConditionStatus};
use proptest::prelude::*;

use super::*;

fn at(hour: u32) -> Time {
    Time(format!("2026-12-05T{hour:02}:00:00Z").parse().unwrap())
}

fn condition(
    type_: &str,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    hour: u32,
) -> Condition {
    Condition::new(type_, status, reason, message, Some(1), at(hour))
}

fn infra(entry: &str) -> InfraRef {
    InfraRef {
        namespace: "socialweb-system".into(),
        name: "nodes-a".into(),
        contract: entry.into(),
        compute_contract: format!("nodes-a-{entry}"),
    }
}

fn guest(address: &str) -> Guest {
    Guest {
        provider: "did:web:b".into(),
        address: Some(address.into()),
        node_id: None,
    }
}

fn a_condition() -> impl Strategy<Value = Condition> {
    (
        prop::sample::select(vec!["InfraComposed", "Deployed", "Joined", "Ready"]),
        prop::sample::select(vec![
            ConditionStatus::True,
            ConditionStatus::False,
            ConditionStatus::Unknown,
        ]),
        prop::sample::select(vec!["Composed", "GuestRunning", "GuestLost"]),
        prop::sample::select(vec!["", "a", "b", "guest 10.0.0.1 is running"]),
        0u32..3,
        prop::option::of(1i64..3),
    )
        .prop_map(|(type_, status, reason, message, hour, generation)| {
            Condition::new(type_, status, reason, message, generation, at(hour))
        })
}

fn a_status() -> impl Strategy<Value = NodeClaimStatus> {
    (
        prop::option::of(prop::sample::select(vec![
            NodeClaimPhase::Requesting,
            NodeClaimPhase::Joined,
            NodeClaimPhase::Failed,
        ])),
        prop::option::of(prop::sample::select(vec!["node-1", "node-2"])),
        prop::collection::vec(a_condition(), 0..5),
        prop::option::of(prop::sample::select(vec!["10.0.0.1", "10.0.0.2"])),
        prop::option::of(0u32..3),
        prop::option::of(1i64..3),
    )
        .prop_map(|(phase, entry, conditions, address, grant, generation)| {
            let mut status = NodeClaimStatus {
                phase,
                infra: entry.map(infra),
                guest: address.map(guest),
                grant_expires_at: grant.map(at),
                observed_generation: generation,
                conditions: Vec::new(),
            };
            // One condition a type, as the API server's list-map keeps them.
            for condition in conditions {
                set_condition(&mut status.conditions, condition);
            }
            status
        })
}

fn a_write() -> impl Strategy<Value = StatusWrite> {
    (a_status(), prop::collection::vec(a_condition(), 0..5)).prop_map(|(scalars, conditions)| {
        StatusWrite {
            conditions,
            ..StatusWrite::keeping(
                &CachedClaimStatus::from(&scalars),
                scalars.observed_generation,
            )
        }
    })
}

proptest! {
    #[test]
    fn what_is_compared_is_what_is_written(status in a_status(), write in a_write()) {
        let written = write.applied_to(status.clone());
        prop_assert_eq!(
            CachedClaimStatus::from(&written),
            write.applied_to_cached(CachedClaimStatus::from(&status))
        );
        prop_assert_eq!(write.changes(&CachedClaimStatus::from(&status)), written != status);
    }
}

#[test]
fn a_condition_the_decision_does_not_set_keeps_its_message() {
    let status = NodeClaimStatus {
        phase: Some(NodeClaimPhase::Failed),
        conditions: vec![
            condition(
                "Joined",
                ConditionStatus::False,
                "JoinTimeout",
                "node n-1 never joined: see its console",
                1,
            ),
            condition(
                "Deployed",
                ConditionStatus::True,
                "GuestRunning",
                "guest 10.0.0.1 is running",
                1,
            ),
        ],
        ..NodeClaimStatus::default()
    };
    let previous = CachedClaimStatus::from(&status);
    let mut write = StatusWrite::keeping(&previous, Some(1));
    write.conditions.push(condition(
        "Deployed",
        ConditionStatus::False,
        "Releasing",
        "the machine is being released",
        2,
    ));
    assert!(write.changes(&previous));
    let written = write.applied_to(status);
    assert_eq!(
        written.conditions[0].message,
        "node n-1 never joined: see its console"
    );
    assert_eq!(
        written.conditions[1].message,
        "the machine is being released"
    );
    assert_eq!(written.conditions[1].last_transition_time, at(2));
}

#[test]
fn a_write_of_what_is_there_changes_nothing_and_a_new_message_does() {
    let status = NodeClaimStatus {
        phase: Some(NodeClaimPhase::Joined),
        conditions: vec![condition(
            "Deployed",
            ConditionStatus::True,
            "GuestRunning",
            "guest 10.0.0.1 is running",
            1,
        )],
        observed_generation: Some(1),
        ..NodeClaimStatus::default()
    };
    let previous = CachedClaimStatus::from(&status);
    let mut write = StatusWrite::keeping(&previous, Some(1));
    // Stamped later, the same status keeps its transition time: no change.
    write.conditions.push(condition(
        "Deployed",
        ConditionStatus::True,
        "GuestRunning",
        "guest 10.0.0.1 is running",
        2,
    ));
    assert!(!write.changes(&previous));
    write.conditions[0].message = "guest 10.0.0.2 is running".into();
    assert!(write.changes(&previous), "the digest tells a new message");
    assert!(!write.changes_only_the_phase(&previous));
    let mut phase_only = StatusWrite::keeping(&previous, Some(1));
    phase_only.phase = Some(NodeClaimPhase::Released);
    assert!(phase_only.changes(&previous));
    assert!(phase_only.changes_only_the_phase(&previous));
}
