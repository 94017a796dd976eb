//! Unit tests of the Infra controller's pure decide against hand edits:
//! a contract released or deleted by someone else, an entry removed while its
//! claim lives, a node entry naming no claim, an entry asking for another
//! machine (plan 0009 S7-S9).

use crate::infra_support;

use api::{ComputeContractPhase as P, ContractState, InfraPhase, find_condition};
use std::sync::Arc;

use api::NodeClaim;
use controllers::cache::CachedClaim;
use controllers::infra::claims::{UnservedNode, in_use, infra_to_wake, unserved_nodes};
use controllers::infra::conditions::READY;
use controllers::infra::decide::HOLD_RECHECK;
use controllers::infra::events::InfraEvent;
use controllers::infra::problems::{
    REASON_MACHINE_IMMUTABLE, REASON_NODE_CLAIM_NOT_FOUND, REASON_RELEASE_HELD,
    REASON_RELEASED_BY_HAND,
};
use infra_support::{World, cc_name, infra, names};
use kube::runtime::reflector::ObjectRef;

fn row_state(world: &World, entry: &str) -> Option<ContractState> {
    let status = world.infra.status.as_ref()?;
    Some(status.contracts.iter().find(|r| r.name == entry)?.state)
}

fn ready_reason(world: &World) -> String {
    let status = world.infra.status.as_ref().unwrap();
    find_condition(&status.conditions, READY)
        .unwrap()
        .reason
        .to_string()
}

fn hand_release_events(events: &[InfraEvent]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, InfraEvent::ReleasedByHand { .. }))
        .count()
}

#[test]
fn a_contract_released_by_hand_is_never_rented_again_while_its_entry_stays() {
    let mut world = World::deployed(&["node-a", "node-b"]);
    let name = cc_name("node-a");
    // kubectl edit: spec.release set, without the Infra controller's annotation.
    world.contracts.get_mut(&name).unwrap().spec.release = true;

    let plan = world.reconcile();
    assert!(plan.apply.is_empty() && plan.release.is_empty() && plan.delete.is_empty());
    assert_eq!(hand_release_events(&plan.events), 1);
    assert_eq!(
        row_state(&world, "node-a"),
        Some(ContractState::ReleasedByHand)
    );
    assert_eq!(
        world.infra.status.as_ref().unwrap().phase,
        Some(InfraPhase::Failed)
    );
    assert_eq!(ready_reason(&world), REASON_RELEASED_BY_HAND);

    // The release goes on; the Released contract stays while its entry does.
    world.settle_requester();
    let plan = world.reconcile();
    assert!(plan.delete.is_empty(), "{plan:?}");
    assert_eq!(
        hand_release_events(&plan.events),
        0,
        "one Event per transition"
    );

    // Deleted by hand too and gone: a direct read finds nothing, and still
    // nothing is created for the entry.
    world.contracts.remove(&name);
    for _ in 0..3 {
        let plan = world.reconcile();
        assert!(plan.apply.is_empty(), "rented again: {plan:?}");
        assert_eq!(hand_release_events(&plan.events), 0);
    }
    assert_eq!(
        row_state(&world, "node-a"),
        Some(ContractState::ReleasedByHand)
    );
    assert!(world.plan().writes_nothing(), "converged");

    // Once the entry leaves, a new entry of the same name is a new contract.
    world.set_spec(&["node-b"]);
    world.reconcile();
    assert_eq!(row_state(&world, "node-a"), None);
    assert_eq!(ready_reason(&world), "AllDeployed");
    world.set_spec(&["node-a", "node-b"]);
    let plan = world.reconcile();
    assert_eq!(plan.apply.len(), 1);
}

#[test]
fn a_contract_deleted_directly_is_replaced_once_gone() {
    let mut world = World::deployed(&["node-a"]);
    let name = cc_name("node-a");
    // kubectl delete: its finalizer holds it until the Requester released it.
    world
        .contracts
        .get_mut(&name)
        .unwrap()
        .metadata
        .deletion_timestamp = infra_support::deleting(infra(&[]))
        .metadata
        .deletion_timestamp;
    let plan = world.reconcile();
    assert!(plan.apply.is_empty() && plan.release.is_empty(), "{plan:?}");
    assert_eq!(hand_release_events(&plan.events), 0);
    world.settle_requester();
    world.reconcile();
    world.collect_all();
    // A direct read finds it gone: a new contract rents the next machine (plan 0004).
    let plan = world.reconcile();
    assert_eq!(plan.apply.len(), 1, "{plan:?}");
    assert_eq!(row_state(&world, "node-a"), Some(ContractState::Staged));
}

#[test]
fn its_own_release_is_finished_and_the_entry_rented_again_once_gone() {
    let mut world = World::deployed(&["node-a"]);
    world.set_spec(&[]);
    let plan = world.reconcile();
    assert_eq!(plan.release.len(), 1);
    // The status write is lost; the entry comes back before the next one.
    world.infra.status = None;
    world.set_spec(&["node-a"]);
    world.settle_requester();
    world.reconcile();
    world.collect_all();
    let plan = world.reconcile();
    assert_eq!(hand_release_events(&plan.events), 0);
    assert_eq!(plan.apply.len(), 1, "{plan:?}");
}

#[test]
fn a_contract_whose_claim_still_uses_it_is_held_not_released() {
    let mut world = World::deployed(&["node-a", "node-b"]);
    world
        .claims
        .in_use
        .insert("node-a".to_owned(), "tenant/node-a".to_owned());
    // kubectl edit removes node-a's entry.
    world.set_spec(&["node-b"]);
    let plan = world.reconcile();
    assert!(
        plan.release.is_empty(),
        "released a live claim's machine: {plan:?}"
    );
    assert!(plan.requeue.is_some_and(|r| r <= HOLD_RECHECK));
    assert_eq!(row_state(&world, "node-a"), Some(ContractState::Requested));
    assert_eq!(ready_reason(&world), REASON_RELEASE_HELD);

    // The claim lets go (deleted, failed, uncomposed): the release follows.
    world.claims.in_use.clear();
    let plan = world.reconcile();
    assert_eq!(plan.release.len(), 1);
}

#[test]
fn a_node_entry_whose_claim_does_not_exist_is_not_rented() {
    let mut world = World::new(infra(&["node-a", "node-b"]));
    world.claims.unserved.insert(
        "node-a".to_owned(),
        UnservedNode::NotFound {
            claim: "tenant/node-a".to_owned(),
            uid: "uid-node-a".to_owned(),
        },
    );
    let plan = world.reconcile();
    let created: Vec<_> = names(&plan.apply);
    assert_eq!(created, [cc_name("node-b")]);
    world.settle_requester();
    world.reconcile();
    assert_eq!(row_state(&world, "node-a"), Some(ContractState::Staged));
    let status = world.infra.status.as_ref().unwrap();
    assert_eq!(status.phase, Some(InfraPhase::Failed));
    let ready = find_condition(&status.conditions, READY).unwrap();
    assert_eq!(ready.reason, REASON_NODE_CLAIM_NOT_FOUND);
    assert!(ready.message.contains("tenant/node-a"), "{}", ready.message);
}

#[test]
fn an_entry_asking_for_another_machine_keeps_the_rented_one() {
    let mut world = World::deployed(&["node-a"]);
    world.infra.spec.contracts[0].resources.cpus = 64;
    world.infra.spec.contracts[0].location.country = "FR".to_owned();
    let plan = world.reconcile();
    assert!(plan.apply.is_empty(), "{plan:?}");
    let contract = &world.contracts[&cc_name("node-a")];
    assert_eq!(contract.spec.resources.cpus, 2);
    assert_eq!(contract.spec.location.country, "DE");
    assert_eq!(infra_support::phase_of(contract), Some(P::Deployed));
    assert_eq!(ready_reason(&world), REASON_MACHINE_IMMUTABLE);
}

/// A NodeClaim of `cluster` in `tenant` with this uid and, when `composed`
/// as `entry`, the status the NodeClaim controller writes; as the cache keeps it.
fn claim(name: &str, uid: &str, cluster: &str, composed: Option<(&str, &str)>) -> CachedClaim {
    let mut claim: NodeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "socialweb.computer/v1alpha1",
        "kind": "NodeClaim",
        "metadata": {"name": name, "namespace": infra_support::CLAIM_NS, "uid": uid},
        "spec": {
            "clusterName": cluster,
            "resources": {"cpus": 2, "memory": 4096, "disk": 40, "network": 100},
            "location": {"country": "DE"},
        },
    }))
    .unwrap();
    if let Some((entry, composed_status)) = composed {
        claim.status = Some(
            serde_json::from_value(serde_json::json!({
                "phase": "Joined",
                "infra": {"namespace": infra_support::NS, "name": infra_support::INFRA,
                          "contract": entry, "computeContract": cc_name(entry)},
                "conditions": [{"type": "InfraComposed", "status": composed_status,
                                "reason": "Composed", "message": "",
                                "lastTransitionTime": "2027-01-15T08:00:00Z"}],
            }))
            .unwrap(),
        );
    }
    CachedClaim::from(claim)
}

#[test]
fn a_node_entry_is_served_only_by_its_own_live_claim() {
    let infra = infra(&["node-a", "node-b", "node-c"]);
    let found = [
        claim("node-a", "uid-node-a", infra_support::CLUSTER, None),
        claim("node-b", "another-uid", infra_support::CLUSTER, None),
        claim("node-c", "uid-node-c", "another-cluster", None),
    ];
    let unserved = unserved_nodes(&infra, |namespace, name| {
        found
            .iter()
            .find(|c| {
                c.metadata.namespace.as_deref() == Some(namespace)
                    && c.metadata.name.as_deref() == Some(name)
            })
            .cloned()
            .map(Arc::new)
    });
    assert!(!unserved.contains_key("node-a"), "its own claim: rented");
    assert!(
        matches!(unserved["node-b"], UnservedNode::NotFound { .. }),
        "a recreated claim (another uid) is not the one named"
    );
    assert!(matches!(
        unserved["node-c"],
        UnservedNode::OfAnotherInfra { .. }
    ));
}

#[test]
fn only_a_composed_live_claim_holds_its_contract() {
    let infra = infra(&[]);
    let entry = |uid: &str| api::names::entry_name(uid);
    let (a, b, c, d) = (entry("ua"), entry("ub"), entry("uc"), entry("ud"));
    let mut failed = claim("b", "ub", infra_support::CLUSTER, Some((&b, "True")));
    failed.status.as_mut().unwrap().phase = Some(api::NodeClaimPhase::Failed);
    let mut deleting = claim("c", "uc", infra_support::CLUSTER, Some((&c, "True")));
    deleting.metadata.deletion_timestamp = infra_support::deleting(infra.clone())
        .metadata
        .deletion_timestamp;
    let claims = [
        claim("a", "ua", infra_support::CLUSTER, Some((&a, "True"))),
        failed,
        deleting,
        claim("d", "ud", infra_support::CLUSTER, Some((&d, "False"))),
    ];
    let leaving = [&a, &b, &c, &d].into_iter().cloned().collect();
    let held = in_use(&infra, &leaving, &claims);
    assert_eq!(held.keys().collect::<Vec<_>>(), [&a]);
    assert_eq!(held[&a], "tenant/a");
    for claim in &claims[1..] {
        assert_eq!(
            infra_to_wake(claim, infra_support::NS),
            Some(ObjectRef::new(infra_support::INFRA).within(infra_support::NS)),
            "a claim that lets go wakes its Infra"
        );
    }
    assert!(
        infra_to_wake(&claims[0], infra_support::NS).is_none(),
        "a healthy claim's writes wake nothing"
    );
}

/// An Infra decided before its claim reached the cache waits with the
/// entry unserved (NodeClaimNotFound): the claim's own arrival must wake it.
#[test]
fn a_claim_its_infra_does_not_list_yet_wakes_the_infra_of_its_cluster() {
    let new = claim("a", "ua", infra_support::CLUSTER, None);
    assert_eq!(
        infra_to_wake(&new, infra_support::NS),
        Some(
            ObjectRef::new(&api::names::infra_name(
                infra_support::CLAIM_NS,
                infra_support::CLUSTER
            ))
            .within(infra_support::NS)
        )
    );
    assert_eq!(
        api::names::infra_name(infra_support::CLAIM_NS, infra_support::CLUSTER),
        infra_support::INFRA,
        "the tests' Infra is the one its claims' Cluster composes into"
    );
}
