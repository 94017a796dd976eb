//! The join and loss graces of a NodeClaim, proven by stepping a ManualClock:
//! each fires exactly at its deadline, and before it the reconcile requeues
//! at the deadline instead of polling.

use crate::nodeclaim_support;

use api::names::{CONTRACT_LABEL, entry_name};
use api::{ComputeContractPhase, NodeClaimPhase};
use chrono::Duration;
use controllers::ManualClock;
use controllers::nodeclaim::conditions::{DEPLOYED, INFRA_COMPOSED, JOINED, READY, reason};
use controllers::nodeclaim::decide::{InfraAction, Plan};
use controllers::time;
use controllers::time::to_time;
use kube::ResourceExt;
use nodeclaim_support::*;

#[test]
fn phases_follow_the_contract_to_joined() {
    let mut w = two_claims();
    w.settle(start());
    w.set_contract_phase("worker-a", ComputeContractPhase::Bidding, None);
    w.reconcile(start());
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Requesting));
    w.set_contract_phase("worker-a", ComputeContractPhase::Deployed, guest(None));
    let plan = w.reconcile(start() + Duration::seconds(10));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Deployed));
    assert!(cond(&w, "worker-a", DEPLOYED).is_true());
    assert_eq!(
        cond(&w, "worker-a", JOINED).reason,
        reason::WAITING_FOR_NODE
    );
    assert_eq!(plan.requeue_at, Some(start() + Duration::seconds(910)));
    let grant = w
        .claim("worker-a")
        .status
        .as_ref()
        .unwrap()
        .grant_expires_at
        .clone();
    assert_eq!(grant, Some(to_time(start() + Duration::seconds(910))));
    w.set_contract_phase(
        "worker-a",
        ComputeContractPhase::Deployed,
        guest(Some("node-7")),
    );
    w.reconcile(start() + Duration::seconds(20));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Joined));
    assert!(cond(&w, "worker-a", READY).is_true());
    assert_eq!(
        w.claim("worker-a")
            .status
            .as_ref()
            .unwrap()
            .guest
            .as_ref()
            .unwrap()
            .node_id
            .as_deref(),
        Some("node-7")
    );
    // The other claim is untouched by all this.
    assert_eq!(phase(&w, "worker-b"), Some(NodeClaimPhase::Requesting));
}

#[test]
fn join_grace_fires_exactly_at_the_deadline() {
    let (clock, mut w) = worker_a_deployed_without_a_node();
    let plan = w.reconcile(time::now(&clock));
    let deadline = start() + Duration::seconds(900);
    assert_eq!(plan.requeue_at, Some(deadline));
    clock.advance(std::time::Duration::from_secs(899));
    let plan = w.reconcile(time::now(&clock));
    assert_ne!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(
        plan.requeue_at,
        Some(deadline),
        "requeue at deadline - now, not a poll"
    );
    clock.advance(std::time::Duration::from_secs(1));
    let plan = w.reconcile(time::now(&clock));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(cond(&w, "worker-a", JOINED).reason, reason::JOIN_TIMEOUT);
    assert_eq!(cond(&w, "worker-a", READY).reason, reason::JOIN_TIMEOUT);
    assert_eq!(
        cond(&w, "worker-a", INFRA_COMPOSED).reason,
        reason::CLAIM_FAILED
    );
    assert!(cond(&w, "worker-a", READY).message.contains("recreate"));
    let Some(InfraAction::Apply(infra)) = &plan.infra else {
        panic!("entry must leave")
    };
    assert_eq!(infra.spec.contracts.len(), 1);
    assert_eq!(infra.spec.contracts[0].name, entry_name("uid-b"));
    assert_eq!(plan.requeue_at, None);
    // Failed is final: the entry stays out, the contract is released and its Secret removed.
    w.settle(time::now(&clock));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(w.entries(), vec![entry_name("uid-b")]);
    assert!(
        !w.secrets
            .iter()
            .any(|s| s.labels()[CONTRACT_LABEL] == entry_name("uid-a"))
    );
}

#[test]
fn loss_grace_fires_exactly_at_the_deadline_and_a_return_resets_it() {
    let clock = ManualClock::new(start().into());
    let mut w = two_claims();
    w.settle(time::now(&clock));
    w.set_contract_phase(
        "worker-a",
        ComputeContractPhase::Deployed,
        guest(Some("n1")),
    );
    w.reconcile(time::now(&clock));
    clock.advance(std::time::Duration::from_secs(100));
    // Lost, then back before the grace runs out.
    w.set_contract_phase("worker-a", ComputeContractPhase::Accepted, None);
    let plan = w.reconcile(time::now(&clock));
    assert_eq!(
        cond(&w, "worker-a", DEPLOYED).reason,
        reason::GUEST_UNREACHABLE
    );
    assert_eq!(
        plan.requeue_at,
        Some(time::now(&clock) + Duration::seconds(300))
    );
    clock.advance(std::time::Duration::from_secs(299));
    w.set_contract_phase(
        "worker-a",
        ComputeContractPhase::Deployed,
        guest(Some("n1")),
    );
    w.reconcile(time::now(&clock));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Joined));
    // Lost again: a fresh grace from this instant.
    clock.advance(std::time::Duration::from_secs(10));
    let lost_at = time::now(&clock);
    w.set_contract_phase("worker-a", ComputeContractPhase::Deployed, None);
    w.reconcile(time::now(&clock));
    clock.advance(std::time::Duration::from_secs(299));
    let plan = w.reconcile(time::now(&clock));
    assert_ne!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(plan.requeue_at, Some(lost_at + Duration::seconds(300)));
    clock.advance(std::time::Duration::from_secs(1));
    w.reconcile(time::now(&clock));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(cond(&w, "worker-a", READY).reason, reason::GUEST_LOST);
    assert_eq!(w.entries(), vec![entry_name("uid-b")]);
}

#[test]
fn a_failed_contract_fails_the_claim_at_once_and_drops_its_entry() {
    let mut w = two_claims();
    w.settle(start());
    w.set_contract_phase("worker-b", ComputeContractPhase::Failed, None);
    w.contract_of("worker-b").status.as_mut().unwrap().message = Some("no bid came".into());
    let plan = w.reconcile(start() + Duration::seconds(1));
    assert_eq!(phase(&w, "worker-b"), Some(NodeClaimPhase::Failed));
    assert_eq!(cond(&w, "worker-b", READY).reason, reason::CONTRACT_FAILED);
    assert!(cond(&w, "worker-b", READY).message.contains("no bid came"));
    assert!(matches!(plan.infra, Some(InfraAction::Apply(_))));
    assert_eq!(w.entries(), vec![entry_name("uid-a")]);
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Requesting));
}

#[test]
fn a_failed_claims_deployed_condition_follows_its_machine_out() {
    let (clock, mut w) = worker_a_deployed_without_a_node();
    w.reconcile(time::now(&clock));
    clock.advance(std::time::Duration::from_secs(900));
    w.reconcile(time::now(&clock));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert!(
        cond(&w, "worker-a", DEPLOYED).is_true(),
        "the machine still runs until it is released"
    );

    w.set_contract_phase("worker-a", ComputeContractPhase::Releasing, guest(None));
    w.reconcile(time::now(&clock));
    assert_eq!(cond(&w, "worker-a", DEPLOYED).reason, reason::RELEASING);
    assert!(!cond(&w, "worker-a", DEPLOYED).is_true());
    w.infra_step();
    w.reconcile(time::now(&clock));
    assert_eq!(cond(&w, "worker-a", DEPLOYED).reason, reason::RELEASED);
    w.settle(time::now(&clock));
    let deployed = cond(&w, "worker-a", DEPLOYED);
    assert_eq!(
        (deployed.reason.as_str(), deployed.is_true()),
        (reason::RELEASED, false)
    );
    // Still Failed, and still saying why.
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(cond(&w, "worker-a", READY).reason, reason::JOIN_TIMEOUT);
    assert_eq!(cond(&w, "worker-a", JOINED).reason, reason::JOIN_TIMEOUT);
}

#[test]
fn a_contract_that_retries_after_no_bids_keeps_its_claim_requesting() {
    let mut w = two_claims();
    w.settle(start());
    let retry_at = start() + Duration::seconds(5);
    {
        let contract = w.contract_of("worker-a");
        set_phase(contract, ComputeContractPhase::Failed, None);
        let status = contract.status.as_mut().unwrap();
        status.message =
            Some(format!("no bids: ...; retrying at {}", retry_at.to_rfc3339()).into());
        status.next_attempt_at = Some(to_time(retry_at));
    }
    w.reconcile(start() + Duration::seconds(1));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Requesting));
    let deployed = cond(&w, "worker-a", DEPLOYED);
    assert_eq!(deployed.reason, reason::RENT_RETRYING);
    assert!(
        deployed.message.contains("retrying at"),
        "{}",
        deployed.message
    );
    assert_eq!(cond(&w, "worker-a", READY).reason, reason::RENT_RETRYING);
    assert!(
        w.entries().contains(&entry_name("uid-a")),
        "the entry stays, so the market is asked again"
    );

    // A bid came on the retry: the claim goes on as usual.
    w.set_contract_phase("worker-a", ComputeContractPhase::Deployed, guest(None));
    w.contract_of("worker-a")
        .status
        .as_mut()
        .unwrap()
        .next_attempt_at = None;
    w.reconcile(start() + Duration::seconds(6));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Deployed));
}

/// Two settled claims on a manual clock at [`start`], worker-a's machine
/// Deployed and its node not yet registered.
fn worker_a_deployed_without_a_node() -> (ManualClock, World) {
    let clock = ManualClock::new(start().into());
    let mut w = two_claims();
    w.settle(time::now(&clock));
    w.set_contract_phase("worker-a", ComputeContractPhase::Deployed, guest(None));
    (clock, w)
}

/// Write economy (plan 0012 S6): a new claim is not written while it only
/// says Requesting; it is looked at again REQUESTING_SHOWN_AFTER after its
/// creation and shown Requesting then if its node has not joined.
#[test]
fn a_new_claim_is_shown_requesting_only_once_it_has_waited() {
    let mut w = two_claims();
    for claim in &mut w.claims {
        claim.metadata.creation_timestamp = Some(to_time(start()));
    }
    let shown = start() + controllers::nodeclaim::REQUESTING_SHOWN_AFTER;
    let plan = w.reconcile(start());
    assert!(
        plan.claim_statuses.is_empty(),
        "no Requesting write for a new claim: {:?}",
        plan.claim_statuses
    );
    assert!(
        matches!(plan.infra, Some(InfraAction::Apply(_))),
        "it is rented all the same"
    );
    assert_eq!(plan.requeue_at, Some(shown));
    w.infra_step();
    w.set_contract_phase("worker-a", ComputeContractPhase::Bidding, None);
    w.reconcile(shown - Duration::seconds(1));
    assert_eq!(phase(&w, "worker-a"), None);
    w.reconcile(shown);
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Requesting));
    assert!(cond(&w, "worker-a", INFRA_COMPOSED).is_true());
}

/// Plan 0016 C4: a new claim that queued past REQUESTING_SHOWN_AFTER before
/// its first reconcile is held from that reconcile, so a node that joins
/// within the hold after it is still written once, Joined.
#[test]
fn a_new_claim_that_queued_is_held_from_when_the_controller_first_saw_it() {
    let mut w = two_claims();
    let created = start() - Duration::seconds(60);
    for claim in &mut w.claims {
        claim.metadata.creation_timestamp = Some(to_time(created));
        let uid = claim.uid().unwrap();
        w.first_seen.insert(uid, start());
    }
    let plan = w.reconcile(start());
    assert!(
        plan.claim_statuses.is_empty(),
        "created a minute ago but first seen now: no Requesting write: {:?}",
        plan.claim_statuses
    );
    let shown = start() + controllers::nodeclaim::REQUESTING_SHOWN_AFTER;
    assert_eq!(plan.requeue_at, Some(shown));
    w.infra_step();
    w.set_contract_phase(
        "worker-a",
        ComputeContractPhase::Deployed,
        guest(Some("node-a")),
    );
    w.set_contract_phase("worker-b", ComputeContractPhase::Bidding, None);
    let plan = w.reconcile(start() + Duration::seconds(1));
    assert_eq!(
        written_phases(&plan),
        [("worker-a", Some(NodeClaimPhase::Joined))]
    );
    // The other, still renting a hold after it was first seen, says so.
    w.reconcile(shown);
    assert_eq!(phase(&w, "worker-b"), Some(NodeClaimPhase::Requesting));
}

/// A node that joins within REQUESTING_SHOWN_AFTER: its claim's first write
/// is Joined, naming its entry.
#[test]
fn a_claim_that_joins_at_once_is_first_written_joined() {
    let mut w = two_claims();
    for claim in &mut w.claims {
        claim.metadata.creation_timestamp = Some(to_time(start()));
    }
    w.reconcile(start());
    w.infra_step();
    w.set_contract_phase(
        "worker-a",
        ComputeContractPhase::Deployed,
        guest(Some("node-a")),
    );
    let plan = w.reconcile(start() + Duration::seconds(1));
    assert_eq!(
        written_phases(&plan),
        [("worker-a", Some(NodeClaimPhase::Joined))]
    );
    assert!(w.claim("worker-a").status.as_ref().unwrap().infra.is_some());
}

/// The claims a plan writes a status to, with the phase it writes.
fn written_phases(plan: &Plan) -> Vec<(&str, Option<NodeClaimPhase>)> {
    plan.claim_statuses
        .iter()
        .map(|c| (c.name.as_str(), c.status.phase))
        .collect()
}
