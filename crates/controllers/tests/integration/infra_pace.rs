//! Which Infra statuses may wait for the status pace (plan 0012 S6): only
//! those that move the progress of contracts already listed.

use crate::infra_support;

use api::{ContractState, InfraPhase};
use infra_support::{World, cc_name, infra};

#[test]
fn only_the_progress_of_listed_contracts_may_wait() {
    let mut world = World::new(infra(&["node-a", "node-b"]));
    let created = world.reconcile();
    assert!(!created.progress_only, "new rows");

    world.requester_step(&cc_name("node-a"), false);
    world.requester_step(&cc_name("node-b"), false);
    let requested = world.reconcile();
    let rows = &requested.status.as_ref().unwrap().contracts;
    assert!(rows.iter().all(|r| r.state == ContractState::Requested));
    assert!(!requested.progress_only, "the rows' state moved");

    world.requester_step(&cc_name("node-a"), false);
    let bidding = world.reconcile();
    assert!(bidding.status.is_some());
    assert!(bidding.progress_only, "one contract's phase moved");

    world.settle_requester();
    let deployed = world.reconcile();
    let status = deployed.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(InfraPhase::Deployed));
    assert!(
        !deployed.progress_only,
        "the Infra's phase moved, and its Event hangs on that write"
    );

    world.requester_step(&cc_name("node-a"), true);
    world.set_phase(&cc_name("node-a"), api::ComputeContractPhase::Failed);
    let failed = world.reconcile();
    assert!(!failed.progress_only, "a failure is written at once");
}

/// A scale-down: each contract this controller released and deleted leaves
/// its row when it is gone. That may wait for the pace (the rows leave
/// together, not one status write per departing node, plan 0016
/// C4-SCALE-DOWN); the release itself and the Infra's phase do not.
#[test]
fn rows_of_released_contracts_that_are_gone_may_wait() {
    let mut world = World::deployed(&["node-a", "node-b", "node-c"]);
    world.set_spec(&["node-a"]);
    let released = world.reconcile();
    assert_eq!(released.release.len(), 2);
    assert!(!released.progress_only, "the rows' state moved to Released");

    world.requester_step(&cc_name("node-b"), false);
    world.requester_step(&cc_name("node-c"), false);
    world.reconcile();
    world.requester_step(&cc_name("node-b"), false);
    world.requester_step(&cc_name("node-c"), false);
    let deleting = world.reconcile();
    assert_eq!(deleting.delete.len(), 2, "both Released: deleted");

    world.collect(&cc_name("node-b"));
    let one_gone = world.reconcile();
    let rows = &one_gone.status.as_ref().unwrap().contracts;
    assert_eq!(rows.len(), 2, "node-b's row left");
    assert_eq!(one_gone.status.as_ref().unwrap().contract_count, 2);
    assert!(one_gone.progress_only, "a released row that left may wait");

    world.collect(&cc_name("node-c"));
    let all_gone = world.reconcile();
    assert_eq!(all_gone.status.as_ref().unwrap().contracts.len(), 1);
    assert!(all_gone.progress_only);
}

#[test]
fn a_row_that_leaves_unreleased_is_written_at_once() {
    use api::{ContractStatus, InfraStatus};
    let row = |name: &str, state| ContractStatus {
        name: name.to_owned(),
        compute_contract: cc_name(name),
        state,
        phase: None,
    };
    let status = |rows: Vec<ContractStatus>| InfraStatus {
        contract_count: u32::try_from(rows.len()).unwrap(),
        contracts: rows,
        ..InfraStatus::default()
    };
    let old = status(vec![
        row("a", ContractState::Requested),
        row("b", ContractState::Released),
        row("c", ContractState::ReleasedByHand),
        row("d", ContractState::Released),
    ]);
    let progress = |new: &InfraStatus| controllers::infra::rows::progress_only(Some(&old), new);
    assert!(progress(&old.clone()));
    assert!(progress(&status(vec![
        row("a", ContractState::Requested),
        row("c", ContractState::ReleasedByHand),
    ])));
    assert!(
        !progress(&status(vec![
            row("b", ContractState::Released),
            row("c", ContractState::ReleasedByHand),
            row("d", ContractState::Released),
        ])),
        "a live entry's row left"
    );
    assert!(
        !progress(&status(vec![
            row("a", ContractState::Requested),
            row("b", ContractState::Released),
            row("d", ContractState::Released),
        ])),
        "a row released by hand left: its problem is written at once"
    );
    assert!(
        !progress(&status(vec![
            row("a", ContractState::Requested),
            row("b", ContractState::Released),
            row("c", ContractState::ReleasedByHand),
            row("d", ContractState::Released),
            row("e", ContractState::Staged),
        ])),
        "a new row"
    );
    let mut miscounted = old.clone();
    miscounted.contract_count = 3;
    assert!(!progress(&miscounted), "a count that is not the rows'");
}
