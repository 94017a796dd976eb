//! Unit tests of the Infra controller's pure decide, one per case.

use crate::infra_support;

use api::names::{CONTRACT_LABEL, INFRA_NAME_LABEL};
use api::{ComputeContractPhase as P, ConditionStatus, ContractState, InfraPhase, find_condition};
use controllers::infra::conditions::{
    READY, REASON_ALL_DEPLOYED, REASON_CONTRACT_FAILED, REASON_CONTRACTS_NOT_READY,
    REASON_RELEASED, REASON_RELEASING,
};
use controllers::infra::decide::{DELETION_SETTLE, unseen_contracts};
use controllers::infra::events::InfraEvent;
use infra_support::{INFRA, World, cc_name, infra, names, phase_of};

#[test]
fn new_entry_is_applied_with_labels_owner_and_mapped_spec() {
    let mut world = World::new(infra(&["node-a"]));
    let plan = world.plan();

    assert_eq!(plan.apply.len(), 1);
    let contract = &plan.apply[0];
    assert_eq!(
        contract.metadata.name.as_deref(),
        Some(cc_name("node-a").as_str())
    );
    assert_eq!(
        contract.metadata.namespace.as_deref(),
        Some(infra_support::NS)
    );
    let labels = contract.metadata.labels.as_ref().unwrap();
    assert_eq!(labels[INFRA_NAME_LABEL], INFRA);
    assert_eq!(labels[CONTRACT_LABEL], "node-a");
    let owner = &contract.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.uid, "infra-uid-1");
    assert_eq!(owner.kind, "Infra");
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
    // The spec comes from the api mapping: node fields and the secret ref by contract name.
    assert_eq!(
        contract.spec,
        api::compute_contract_spec_for(&world.infra.spec, "node-a").unwrap()
    );
    assert_eq!(contract.spec.owner_did.as_deref(), Some("did:plc:tenant"));
    assert_eq!(
        contract.spec.secrets_ref.as_ref().unwrap().name,
        "join-node-a"
    );
    assert!(contract.spec.node_join.is_some());
    assert!(!contract.spec.release);

    assert!(
        plan.events.is_empty(),
        "a creation is routine, shown in the status, no Event: {:?}",
        plan.events
    );
    let status = plan.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(InfraPhase::Requesting));
    assert_eq!(status.contracts[0].state, ContractState::Staged);
    assert_eq!(status.observed_generation, Some(1));
    assert!(status.declaration_hash.is_some());
    let ready = find_condition(&status.conditions, READY).unwrap();
    assert_eq!(ready.status, ConditionStatus::False);
    assert_eq!(ready.reason, REASON_CONTRACTS_NOT_READY);
    assert!(
        ready.message.contains("node-a (Staged)"),
        "{}",
        ready.message
    );
    assert!(plan.requeue.is_some());
}

#[test]
fn a_stale_cache_reapplies_without_another_status_write() {
    let mut world = World::new(infra(&["node-a"]));
    let first = world.plan();
    // Only the status lands (the cache has not seen the contract yet).
    world.infra.status = first.status.clone();
    let second = world.plan();
    assert_eq!(second.apply.len(), 1);
    assert!(second.events.is_empty());
    assert!(second.status.is_none());
}

#[test]
fn observed_contract_is_requested_and_all_deployed_converges_to_no_writes() {
    let mut world = World::new(infra(&["node-a", "node-b"]));
    world.reconcile();
    let plan = world.reconcile();
    assert!(
        plan.apply.is_empty(),
        "an applied contract is not applied again"
    );
    let status = world.infra.status.clone().unwrap();
    assert!(
        status
            .contracts
            .iter()
            .all(|r| r.state == ContractState::Requested)
    );

    world.settle_requester();
    let plan = world.reconcile();
    assert!(
        plan.events.is_empty(),
        "Deployed is shown in the status (phase, Ready), no Event: {:?}",
        plan.events
    );
    let status = world.infra.status.clone().unwrap();
    assert_eq!(status.phase, Some(InfraPhase::Deployed));
    assert_eq!(status.ready_contracts, 2);
    assert_eq!(status.contract_count, 2);
    let ready = find_condition(&status.conditions, READY).unwrap();
    assert_eq!(ready.status, ConditionStatus::True);
    assert_eq!(ready.reason, REASON_ALL_DEPLOYED);

    let converged = world.plan();
    assert!(converged.writes_nothing(), "{converged:?}");
    assert!(converged.requeue.is_none());
}

#[test]
fn changed_entry_updates_its_contract_only() {
    let mut world = World::deployed(&["node-a", "node-b"]);
    let new_server = "https://moved.example:6443";
    world.infra.spec.nodes[0]
        .node_join
        .as_mut()
        .unwrap()
        .api_server = new_server.to_owned();
    let plan = world.plan();
    assert_eq!(plan.apply.len(), 1);
    assert_eq!(
        plan.apply[0].metadata.name.as_deref(),
        Some(cc_name("node-a").as_str())
    );
    assert_eq!(
        plan.apply[0].spec.node_join.as_ref().unwrap().api_server,
        new_server
    );
    assert!(plan.events.is_empty(), "an update is not a creation");
}

#[test]
fn removed_entry_is_released_then_deleted_only_once_released() {
    let mut world = World::deployed(&["node-a", "node-b"]);
    world.set_spec(&["node-b"]);

    let plan = world.plan();
    let released = world.released(&plan);
    world.enact(&plan, usize::MAX);
    assert!(plan.apply.is_empty(), "the remaining entry is untouched");
    assert_eq!(plan.release.len(), 1);
    let released = &released[0];
    assert_eq!(
        released.metadata.name.as_deref(),
        Some(cc_name("node-a").as_str())
    );
    assert!(released.spec.release);
    assert_eq!(
        released.metadata.labels.as_ref().unwrap()[CONTRACT_LABEL],
        "node-a",
        "the release apply keeps the labels the controller owns"
    );
    assert!(released.metadata.owner_references.is_some());
    assert!(plan.delete.is_empty());
    assert!(
        plan.events.is_empty(),
        "a release is routine, shown in the row's state, no Event: {:?}",
        plan.events
    );
    let status = world.infra.status.clone().unwrap();
    let row = status
        .contracts
        .iter()
        .find(|r| r.name == "node-a")
        .unwrap();
    assert_eq!(row.state, ContractState::Released);
    assert_eq!(
        status.phase,
        Some(InfraPhase::Deployed),
        "the live entries are all Deployed"
    );

    // Releasing: nothing more to write, and certainly no delete.
    world.set_phase(&cc_name("node-a"), P::Releasing);
    let plan = world.reconcile();
    assert!(plan.delete.is_empty());
    assert!(plan.release.is_empty());

    world.set_phase(&cc_name("node-a"), P::Released);
    let plan = world.reconcile();
    assert_eq!(plan.delete.len(), 1);
    let deletion = &plan.delete[0];
    assert_eq!(deletion.name, cc_name("node-a"));
    assert!(deletion.uid.is_some() && deletion.resource_version.is_some());
    assert!(
        plan.events.is_empty(),
        "a delete of a Released contract is routine, no Event: {:?}",
        plan.events
    );

    assert_eq!(
        plan.requeue,
        Some(DELETION_SETTLE),
        "deletions do not wake the controller"
    );

    // Marked for deletion but still in the cache: not deleted twice, looked at again soon.
    let plan = world.reconcile();
    assert!(plan.delete.is_empty());
    assert_eq!(plan.requeue, Some(DELETION_SETTLE));
    world.collect_all();
    world.reconcile();
    let status = world.infra.status.clone().unwrap();
    assert_eq!(status.contract_count, 1);
    assert!(world.plan().writes_nothing());
}

#[test]
fn recreated_claim_is_a_new_entry_and_the_old_contract_is_released() {
    let mut world = World::deployed(&["node-old"]);
    world.set_spec(&["node-new"]);
    let plan = world.plan();
    let applied: Vec<_> = names(&plan.apply);
    let released: Vec<_> = names(&world.released(&plan));
    assert_eq!(applied, vec![cc_name("node-new")]);
    assert_eq!(released, vec![cc_name("node-old")]);
    assert!(!plan.apply[0].spec.release);
}

#[test]
fn entry_readded_while_its_contract_is_released_waits_for_it_to_go() {
    let mut world = World::deployed(&["node-a"]);
    world.set_spec(&[]);
    world.reconcile();
    world.set_spec(&["node-a"]);
    let plan = world.reconcile();
    assert!(
        plan.apply.is_empty(),
        "a released contract is never un-released"
    );
    world.settle_requester();
    let plan = world.reconcile();
    assert_eq!(plan.delete.len(), 1);
    world.collect_all();
    let plan = world.reconcile();
    assert_eq!(plan.apply.len(), 1);
    assert!(!plan.apply[0].spec.release);
}

#[test]
fn failed_contract_fails_the_infra_once() {
    let mut world = World::deployed(&["node-a", "node-b"]);
    world.set_phase(&cc_name("node-b"), P::Failed);
    let plan = world.reconcile();
    assert_eq!(
        plan.events,
        vec![InfraEvent::ContractFailed {
            contract: cc_name("node-b")
        }]
    );
    assert!(plan.apply.is_empty() && plan.release.is_empty() && plan.delete.is_empty());
    let status = world.infra.status.clone().unwrap();
    assert_eq!(status.phase, Some(InfraPhase::Failed));
    let ready = find_condition(&status.conditions, READY).unwrap();
    assert_eq!(ready.reason, REASON_CONTRACT_FAILED);
    assert!(
        ready.message.contains("node-b (Failed)"),
        "{}",
        ready.message
    );
    assert_eq!(status.ready_contracts, 1);
    // Failed is settled: no event again, no write, no polling.
    let again = world.plan();
    assert!(again.writes_nothing());
    assert!(again.requeue.is_none());
}

#[test]
fn ready_message_names_the_first_three_unready_contracts() {
    let mut world = World::new(infra(&["node-a", "node-b", "node-c", "node-d", "node-e"]));
    world.reconcile();
    world.set_phase(&cc_name("node-a"), P::Deployed);
    world.set_phase(&cc_name("node-b"), P::Bidding);
    world.set_phase(&cc_name("node-c"), P::Pending);
    world.reconcile();
    let status = world.infra.status.clone().unwrap();
    let ready = find_condition(&status.conditions, READY).unwrap();
    assert_eq!(
        ready.message,
        "4 of 5 contracts are not Deployed yet: node-b (Bidding), node-c (Pending), node-d (Requested) and 1 more"
    );
}

#[test]
fn ready_keeps_its_transition_time_while_its_status_stays() {
    let mut world = World::new(infra(&["node-a"]));
    world.reconcile();
    let first = find_condition(&world.infra.status.clone().unwrap().conditions, READY)
        .unwrap()
        .clone();
    world.set_phase(&cc_name("node-a"), P::Bidding);
    world.reconcile();
    let second = find_condition(&world.infra.status.clone().unwrap().conditions, READY)
        .unwrap()
        .clone();
    assert_ne!(first.message, second.message);
    assert_eq!(first.last_transition_time, second.last_transition_time);
    world.set_phase(&cc_name("node-a"), P::Deployed);
    world.reconcile();
    let third = find_condition(&world.infra.status.clone().unwrap().conditions, READY)
        .unwrap()
        .clone();
    assert_eq!(third.status, ConditionStatus::True);
    assert_ne!(third.last_transition_time, first.last_transition_time);
}

#[test]
fn deletion_releases_all_then_deletes_all_then_finalizes() {
    let mut world = World::deployed(&["node-a", "node-b", "node-c"]);
    world.set_phase(&cc_name("node-c"), P::Failed);
    world.start_deletion();

    let plan = world.reconcile();
    assert_eq!(
        plan.release.len(),
        3,
        "every contract is released, Failed ones too"
    );
    assert!(plan.apply.is_empty());
    assert!(plan.delete.is_empty());
    assert!(!plan.finalized);
    assert!(
        plan.events.is_empty(),
        "releasing a deleted Infra is routine, even of a Failed contract: {:?}",
        plan.events
    );
    let status = world.infra.status.clone().unwrap();
    assert_eq!(status.phase, Some(InfraPhase::Releasing));
    let ready = find_condition(&status.conditions, READY).unwrap();
    assert_eq!(ready.reason, REASON_RELEASING);

    // Two of three Released: still nothing deleted.
    world.set_phase(&cc_name("node-a"), P::Released);
    world.set_phase(&cc_name("node-b"), P::Released);
    world.set_phase(&cc_name("node-c"), P::Releasing);
    let plan = world.reconcile();
    assert!(plan.delete.is_empty(), "{:?}", plan.delete);
    assert!(plan.release.is_empty(), "already released");

    world.set_phase(&cc_name("node-c"), P::Released);
    let plan = world.reconcile();
    assert_eq!(plan.delete.len(), 3);
    assert!(!plan.finalized, "deleted is not gone");
    let status = world.infra.status.clone().unwrap();
    assert_eq!(status.phase, Some(InfraPhase::Released));
    assert_eq!(
        find_condition(&status.conditions, READY).unwrap().reason,
        REASON_RELEASED
    );

    let plan = world.reconcile();
    assert!(plan.delete.is_empty() && !plan.finalized);
    world.collect_all();
    let plan = world.reconcile();
    assert!(plan.finalized);
    assert!(plan.events.is_empty(), "{:?}", plan.events);

    let releases = world
        .history
        .iter()
        .filter(|w| matches!(w, infra_support::Write::Release(_)))
        .count();
    assert_eq!(releases, 3);
}

#[test]
fn deletion_never_creates_a_contract() {
    let mut world = World::new(infra(&["node-a"]));
    world.start_deletion();
    let plan = world.reconcile();
    assert!(plan.apply.is_empty());
    assert!(plan.finalized);
}

#[test]
fn a_contract_with_a_foreign_or_missing_phase_is_not_deleted_by_the_live_path() {
    let mut world = World::deployed(&["node-a"]);
    world.set_spec(&[]);
    world.reconcile();
    for phase in [P::Pending, P::Deployed, P::Failed, P::Releasing] {
        world.set_phase(&cc_name("node-a"), phase);
        assert!(world.plan().delete.is_empty(), "{phase:?}");
    }
    assert_eq!(
        phase_of(&world.contracts[&cc_name("node-a")]),
        Some(P::Releasing)
    );
}

#[test]
fn the_contracts_the_status_lists_but_the_cache_lacks_are_named_for_a_direct_read() {
    let mut world = World::new(infra(&["node-a", "node-b"]));
    // The applies and the status landed, but the cache has not shown node-b yet.
    world.reconcile();
    world.reconcile();
    let mut cache = world.observed();
    cache.retain(|c| c.name() != Some(cc_name("node-b").as_str()));
    assert_eq!(
        unseen_contracts(&world.infra, &cache),
        vec![cc_name("node-b")]
    );
    assert!(unseen_contracts(&world.infra, &world.observed()).is_empty());
}

fn has_release_finalizer(contract: &api::ComputeContract) -> bool {
    contract
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == api::names::CONTRACT_RELEASE_FINALIZER)
}

#[test]
fn every_contract_carries_the_release_finalizer_from_its_creation() {
    let mut world = World::new(infra(&["node-a"]));
    let plan = world.plan();
    assert!(has_release_finalizer(&plan.apply[0]), "created with it");
    world.enact(&plan, usize::MAX);
    world.settle_requester();
    world.reconcile();
    let name = cc_name("node-a");
    // A contract created before the finalizer existed gets it on the next apply.
    world.contracts.get_mut(&name).unwrap().metadata.finalizers = None;
    let plan = world.plan();
    assert_eq!(plan.apply.len(), 1);
    assert!(has_release_finalizer(&plan.apply[0]));
}

#[test]
fn a_deleting_contract_without_the_finalizer_is_never_given_it() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let mut world = World::deployed(&["node-a"]);
    let name = cc_name("node-a");
    let contract = world.contracts.get_mut(&name).unwrap();
    contract.metadata.finalizers = None;
    contract.metadata.deletion_timestamp = Some(Time(
        k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap(),
    ));
    // The API server refuses a new finalizer on a deleting object (422).
    let plan = world.plan();
    assert!(plan.apply.is_empty(), "{:?}", plan.apply);
    world.start_deletion();
    let plan = world.plan();
    assert_eq!(plan.release.len(), 1);
    let released = world.released(&plan);
    assert!(released[0].spec.release);
    assert!(!has_release_finalizer(&released[0]));
}

/// A world whose cache does not show `names` and whose reads of them fail.
fn unreadable(world: &mut World, names: &[&str]) {
    for name in names {
        world.hidden.insert(cc_name(name));
        world.failing_reads.insert(cc_name(name));
    }
}

#[test]
fn a_contract_that_cannot_be_read_is_not_created_again_and_is_read_again_soon() {
    use controllers::infra::decide::UNREADABLE_RETRY;
    let mut world = World::deployed(&["node-a", "node-b"]);
    unreadable(&mut world, &["node-b"]);
    let plan = world.plan();
    assert!(plan.apply.is_empty(), "created blindly: {:?}", plan.apply);
    assert!(plan.release.is_empty() && plan.delete.is_empty());
    assert_eq!(plan.requeue, Some(UNREADABLE_RETRY));
    // Its row is what the status remembered: nothing to write.
    assert!(plan.status.is_none(), "{:?}", plan.status);
    world.failing_reads.clear();
    assert!(world.plan().writes_nothing(), "readable again: converged");
}

#[test]
fn a_failed_read_keeps_its_row_while_the_others_make_progress() {
    let mut world = World::deployed(&["node-a", "node-b", "node-c"]);
    world.set_spec(&[]);
    world.reconcile();
    world.settle_requester();
    world.reconcile();
    world.collect_all();
    // All three are gone; the status still lists them; one read fails.
    unreadable(&mut world, &["node-b"]);
    let plan = world.reconcile();
    let rows = &plan.status.as_ref().unwrap().contracts;
    assert_eq!(
        rows.iter()
            .map(|r| r.compute_contract.clone())
            .collect::<Vec<_>>(),
        vec![cc_name("node-b")],
        "the two read as gone leave the list, the unreadable one stays"
    );
    world.failing_reads.clear();
    let plan = world.reconcile();
    assert!(plan.status.unwrap().contracts.is_empty());
}

#[test]
fn a_deleting_infra_with_an_unreadable_contract_deletes_nothing_and_keeps_its_finalizer() {
    let mut world = World::deployed(&["node-a", "node-b"]);
    world.start_deletion();
    world.reconcile();
    world.settle_requester();
    unreadable(&mut world, &["node-b"]);
    let plan = world.plan();
    assert!(
        plan.delete.is_empty(),
        "deleted before all were known Released"
    );
    assert!(!plan.finalized);
    world.failing_reads.clear();
    world.hidden.clear();
    assert_eq!(world.plan().delete.len(), 2);
}

#[test]
fn a_listed_contract_found_gone_is_created_again_only_once_the_infra_is_read_live() {
    use controllers::infra::decide::{Observed, decide};
    let world = World::deployed(&["node-a"]);
    // The garbage collector removed the contract (a foreground deletion of
    // the Infra) and the direct read found it gone; this copy of the Infra
    // does not show the deletion yet.
    let none = std::collections::BTreeSet::new();
    let unconfirmed = Observed {
        infra: &world.infra,
        contracts: &[],
        unreadable: &none,
        claims: &world.claims,
        now: world.now(),
        infra_confirmed_live: false,
    };
    let plan = decide(&unconfirmed);
    assert!(plan.apply.is_empty(), "{:?}", names(&plan.apply));
    assert!(plan.confirm_infra, "the Infra is read before renting again");
    assert!(plan.events.is_empty(), "{:?}", plan.events);

    // Read directly: being deleted. Nothing is created.
    let fresh = infra_support::deleting(world.infra.clone());
    let plan = decide(&Observed {
        infra: &fresh,
        infra_confirmed_live: true,
        ..unconfirmed
    });
    assert!(plan.apply.is_empty(), "{:?}", names(&plan.apply));
    assert!(plan.finalized);

    // Read directly: live. The contract was deleted by hand and is replaced.
    let plan = decide(&Observed {
        infra_confirmed_live: true,
        ..unconfirmed
    });
    assert_eq!(names(&plan.apply), vec![cc_name("node-a")]);
}
