//! Which Infra statuses may wait for the status pace (plan 0012 S6): only
//! those that move the progress of contracts already listed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod infra_support;

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
