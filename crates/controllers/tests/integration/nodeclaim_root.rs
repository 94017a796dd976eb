//! The NodeClaim decision against the root of the contract namespace: claims
//! compose only while a live Requester runs it (DESIGN.md invariant 4: after
//! the Requester is deleted nothing of its deployments remains).

use crate::nodeclaim_support;

use api::names::NODECLAIM_FINALIZER;
use api::{ComputeContractPhase, ConditionStatus, NodeClaimPhase, Requester, RequesterSpec};
use controllers::nodeclaim::conditions::{DEPLOYED, INFRA_COMPOSED, READY, reason};
use controllers::nodeclaim::decide::InfraAction;
use controllers::nodeclaim::root::RootState;
use controllers::time::to_time;
use kube::ResourceExt;
use nodeclaim_support::*;

/// Two claims composed, their machines deployed and joined.
fn two_joined() -> World {
    let mut w = two_claims();
    w.settle(start());
    for (claim, node) in [("worker-a", "node-a"), ("worker-b", "node-b")] {
        set_phase(
            w.contract_of(claim),
            ComputeContractPhase::Deployed,
            guest(Some(node)),
        );
    }
    w.settle(start());
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Joined));
    w
}

/// What the root delete order does: every Infra of the namespace is deleted.
fn root_deletes_the_infra(w: &mut World) {
    w.infra.as_mut().unwrap().metadata.deletion_timestamp = Some(to_time(start()));
}

fn assert_claims_stopped(w: &World, why: &str) {
    for claim in ["worker-a", "worker-b"] {
        let composed = cond(w, claim, INFRA_COMPOSED);
        assert_eq!(composed.status, ConditionStatus::False, "{claim}");
        assert_eq!(composed.reason, why, "{claim}");
        assert!(
            composed.message.contains("examples/requester.yaml"),
            "says what to do: {}",
            composed.message
        );
        assert_eq!(cond(w, claim, READY).status, ConditionStatus::False);
    }
}

#[test]
fn a_deleting_root_stops_composing_and_its_deployments_go_completely() {
    let mut w = two_joined();
    w.root = RootState::Deleting;
    let plan = w.reconcile(start());
    assert!(
        matches!(plan.infra, Some(InfraAction::Keep)),
        "the Infra is neither re-applied nor touched: {:?}",
        plan.infra
    );
    assert!(plan.write_secrets.is_empty());
    assert!(
        plan.awaiting_removal,
        "rechecks until the Requester is gone"
    );
    assert_claims_stopped(&w, reason::REQUESTER_DELETING);
    // The machines still run until the root delete order releases them.
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Releasing));
    assert_eq!(w.secrets.len(), 2, "Secrets stay while their contracts do");

    root_deletes_the_infra(&mut w);
    for _ in 0..6 {
        let plan = w.reconcile(start());
        assert!(
            !matches!(plan.infra, Some(InfraAction::Apply(_))),
            "the deleted Infra is never re-applied"
        );
        assert!(plan.write_secrets.is_empty());
        w.infra_step();
    }
    w.reconcile(start());
    assert!(w.infra.is_none());
    assert!(w.contracts.is_empty());
    assert!(w.secrets.is_empty(), "no join Secret outlives the root");
    for claim in ["worker-a", "worker-b"] {
        let status = w.claim(claim).status.as_ref().unwrap();
        assert_eq!(status.phase, Some(NodeClaimPhase::Pending), "{claim}");
        assert_eq!(status.infra, None, "{claim} names no deleted Infra");
        assert_eq!(status.guest, None, "{claim}");
        assert_eq!(cond(&w, claim, DEPLOYED).reason, reason::NOT_RENTED);
    }
    assert_claims_stopped(&w, reason::REQUESTER_DELETING);
    let plan = w.reconcile(start());
    assert!(plan.is_empty(), "converged: {plan:?}");

    // The Requester is gone: the claims say so and then nothing is written or polled.
    w.root = RootState::Missing;
    w.reconcile(start());
    assert_claims_stopped(&w, reason::NO_REQUESTER);
    let plan = w.reconcile(start());
    assert!(plan.is_empty() && !plan.awaiting_removal, "{plan:?}");

    // A new Requester: the claims compose again.
    w.root = RootState::Running;
    w.settle(start());
    assert_eq!(w.entries().len(), 2);
    assert_eq!(w.secrets.len(), 2);
    assert_eq!(
        cond(&w, "worker-a", INFRA_COMPOSED).reason,
        reason::COMPOSED
    );
}

#[test]
fn without_a_root_claims_compose_nothing_and_rent_nothing() {
    let mut w = two_claims();
    w.root = RootState::Missing;
    let plan = w.reconcile(start());
    assert!(matches!(plan.infra, Some(InfraAction::Keep)));
    assert!(plan.write_secrets.is_empty());
    assert!(
        plan.claim_metadata.iter().all(|c| !c.add_finalizer)
            && plan.add_cluster_finalizer.is_none()
    );
    assert!(w.infra.is_none() && w.secrets.is_empty());
    assert_claims_stopped(&w, reason::NO_REQUESTER);
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Pending));
    let plan = w.reconcile(start());
    assert!(plan.is_empty() && !plan.awaiting_removal, "{plan:?}");
}

#[test]
fn without_a_root_a_live_clusters_infra_is_left_alone() {
    let mut w = two_joined();
    w.root = RootState::Missing;
    let plan = w.reconcile(start());
    assert!(matches!(plan.infra, Some(InfraAction::Keep)));
    assert!(plan.delete_secrets.is_empty(), "contracts still there");
    assert_eq!(w.entries().len(), 2);
    assert_claims_stopped(&w, reason::NO_REQUESTER);
    let plan = w.reconcile(start());
    assert!(plan.is_empty() && !plan.awaiting_removal, "{plan:?}");
}

#[test]
fn a_claim_deleted_while_the_root_is_deleted_still_finishes() {
    let mut w = two_joined();
    w.root = RootState::Deleting;
    // Deleted long enough ago to be shown Releasing (a newer deletion is not written).
    w.claim_mut("worker-a").metadata.deletion_timestamp = Some(to_time(
        start() - controllers::nodeclaim::RELEASING_SHOWN_AFTER,
    ));
    w.reconcile(start());
    assert_eq!(
        cond(&w, "worker-a", INFRA_COMPOSED).reason,
        reason::CLAIM_DELETING
    );
    root_deletes_the_infra(&mut w);
    for _ in 0..6 {
        w.reconcile(start());
        w.infra_step();
    }
    w.reconcile(start());
    w.reconcile(start());
    assert!(
        w.claims.iter().all(|c| c.name_any() != "worker-a"),
        "the claim's finalizer {NODECLAIM_FINALIZER} was removed"
    );
    assert!(w.secrets.is_empty());
}

#[test]
fn a_deleting_root_lets_a_deleting_cluster_go() {
    let mut w = two_joined();
    w.root = RootState::Deleting;
    w.cluster.as_mut().unwrap().metadata.deletion_timestamp = Some(to_time(start()));
    let plan = w.reconcile(start());
    assert!(matches!(plan.infra, Some(InfraAction::Delete(_))));
    for _ in 0..8 {
        w.reconcile(start());
        w.infra_step();
    }
    assert!(w.cluster.is_none(), "the Cluster's finalizer was removed");
    assert!(w.infra.is_none() && w.contracts.is_empty() && w.secrets.is_empty());
}

fn requester(namespace: &str, deleting: bool) -> Requester {
    let mut r = Requester::new(
        "root",
        RequesterSpec {
            market: api::Market {
                local: Some(api::requester::LocalMarket::default()),
                atproto: None,
            },
            bid_window_seconds: 1,
            max_in_flight: 1,
        },
    );
    r.metadata.namespace = Some(namespace.to_owned());
    if deleting {
        r.metadata.deletion_timestamp = Some(to_time(start()));
    }
    r
}

#[test]
fn the_root_state_comes_from_the_requesters_of_the_contract_namespace() {
    let state = |rs: &[Requester]| RootState::of(rs, CONTRACT_NS);
    assert_eq!(state(&[]), RootState::Missing);
    assert_eq!(state(&[requester("elsewhere", false)]), RootState::Missing);
    assert_eq!(state(&[requester(CONTRACT_NS, true)]), RootState::Deleting);
    assert_eq!(
        state(&[requester(CONTRACT_NS, true), requester(CONTRACT_NS, false)]),
        RootState::Running,
        "a live Requester takes over from a deleting one"
    );
    assert!(RootState::Running.problem(CONTRACT_NS).is_none());
    let missing = RootState::Missing.problem(CONTRACT_NS).unwrap();
    assert_eq!(missing.reason, reason::NO_REQUESTER);
    assert!(missing.message.contains(CONTRACT_NS));
}
