//! Unit tests of the less travelled paths of [`controllers::requester::decide`]: adoption,
//! withdrawn bids, invalid requests, events and the TTL.

use std::time::Duration;

use api::ComputeContractPhase as Phase;
use market::GuestStatus;

use super::conditions as cond;
use super::decide::{Command, FailureKind, Observation, Operation, transition_event};
use super::steps::{after, at};
use super::test_fixtures::*;
use super::ttl::{Ttl, verdict};
use kube::runtime::events::EventType;

#[test]
fn adopt_of_another_accounts_guest_is_refused_and_releases_nothing() {
    let mut c = contract();
    c.spec.adopt = Some(Box::new(receipt()));
    let info = adoptable_guest("other", "did:web:another-tenant");
    let s = at(&c, 0, Observation::Adopted(info));
    assert_eq!(s.status.phase, Some(Phase::Failed));
    assert_eq!(
        (s.record_receipt.as_ref(), s.status.receipt.as_ref()),
        (None, None)
    );
    assert_eq!(s.command, None);
    assert_eq!(
        condition(&apply(&c, &s), cond::ACCEPTED).reason,
        cond::ADOPT_REFUSED
    );
    // Not retried, and its release sends nothing to the market.
    let refused = apply(&c, &s);
    assert_eq!(at(&refused, 1, Observation::Nothing).command, None);
    let s = step(
        &release(refused),
        &ready(),
        t0() + secs(2),
        Observation::Nothing,
    );
    assert_eq!((s.status.phase, s.command), (Some(Phase::Released), None));
}

#[test]
fn adopt_takes_over_the_named_guest_without_bidding() {
    let mut c = contract();
    c.spec.adopt = Some(Box::new(receipt()));
    let s = at(&c, 0, Observation::Nothing);
    assert_eq!(s.command, Some(Command::Adopt(receipt())));
    let info = adoptable_guest("other", "did:web:tenant");
    let s = at(&c, 0, Observation::Adopted(info));
    assert_eq!(s.status.phase, Some(Phase::Deployed));
    assert_eq!(s.record_receipt, Some(receipt()));
    assert_eq!(s.status.winner.as_ref().unwrap().bidder, "did:web:p");
    let s = at(&c, 0, failed(Operation::Adopt, FailureKind::NotFound));
    assert_eq!(s.status.phase, Some(Phase::Failed));
    assert!(s.status.message.unwrap().contains("spec.adopt"));
    let failed = after(&c, 0, failed(Operation::Adopt, FailureKind::NotFound));
    assert_eq!(at(&failed, 1, Observation::Nothing).command, None);
}

#[test]
fn a_withdrawn_bid_is_collected_again() {
    let c = with_one_bid();
    let s = at(&c, 5, failed(Operation::Accept, FailureKind::BidGone));
    assert_eq!(s.command, Some(Command::CollectBids));
    assert_eq!(s.status.winner, None);
}

#[test]
fn an_invalid_request_fails_until_the_spec_changes() {
    let c = contract();
    let s = at(
        &c,
        0,
        failed(Operation::Publish, FailureKind::InvalidRequest),
    );
    let mut c = apply(&c, &s);
    assert_eq!(phase(&c), Some(Phase::Failed));
    assert_eq!(at(&c, 1, Observation::Nothing).command, None);
    c.metadata.generation = Some(2);
    assert_eq!(
        at(&c, 1, Observation::Nothing).command,
        Some(Command::Publish)
    );
}

#[test]
fn events_mark_failures_and_failed_releases_only() {
    let b = bidding();
    let a = accepted();
    assert_eq!(
        transition_event(b.status.as_ref(), a.status.as_ref().unwrap()),
        None,
        "a step that goes well is no Event"
    );
    assert_eq!(
        transition_event(a.status.as_ref(), a.status.as_ref().unwrap()),
        None
    );
    let invalid = step(
        &contract(),
        &ready(),
        t0(),
        failed(Operation::Publish, FailureKind::InvalidRequest),
    );
    let e = transition_event(None, &invalid.status).unwrap();
    assert_eq!(
        e.to_event().type_,
        EventType::Warning,
        "a Failed contract is a Warning a person acts on"
    );
    assert_eq!(phase(&apply(&contract(), &invalid)), Some(Phase::Failed));
    assert_eq!(
        transition_event(Some(&invalid.status), &invalid.status),
        None,
        "once per failure"
    );
    let c = release(deployed());
    let failed = at(&c, 20, failed(Operation::Release, FailureKind::Retryable));
    let e = transition_event(c.status.as_ref(), &failed.status).unwrap();
    assert_eq!(
        (e.to_event().type_, e.reason()),
        (EventType::Warning, cond::RELEASE_FAILED)
    );
}

#[test]
fn ttl_deletes_only_finished_ownerless_contracts_after_the_deadline() {
    let c = release(deployed());
    assert_eq!(
        verdict(&c, t0() + secs(1000)),
        Ttl::NotFinished,
        "a guest is held"
    );
    let released = after(&c, 30, Observation::Lookup(None));
    assert_eq!(
        verdict(&released, t0() + secs(60)),
        Ttl::Wait(Duration::from_secs(30))
    );
    assert_eq!(verdict(&released, t0() + secs(90)), Ttl::Expired);
    let mut owned = released.clone();
    owned.metadata.owner_references = Some(vec![Default::default()]);
    assert_eq!(verdict(&owned, t0() + secs(1000)), Ttl::Owned);
    // Failed with its guest still held is never deleted; once gone it is.
    let boot_failed = apply(
        &accepted(),
        &step(
            &accepted(),
            &ready(),
            t0() + secs(6),
            Observation::Guest(GuestStatus::Failed {
                reason: "x".to_owned(),
            }),
        ),
    );
    assert_eq!(verdict(&boot_failed, t0() + secs(1000)), Ttl::NotFinished);
    let gone = after(&boot_failed, 7, Observation::Lookup(None));
    assert_eq!(verdict(&gone, t0() + secs(1000)), Ttl::Expired);
}

#[test]
fn nothing_is_rented_for_a_contract_without_the_release_finalizer() {
    let unguarded = bare(contract());
    let s = at(&unguarded, 0, Observation::Nothing);
    assert_eq!(
        s.command, None,
        "no RFP for a contract that could leak its machine"
    );
    assert_eq!(s.status.phase, Some(Phase::Pending));
    let ready_condition = api::find_condition(&s.status.conditions, cond::READY).unwrap();
    assert_eq!(ready_condition.reason, cond::NO_RELEASE_FINALIZER);
    assert!(
        s.status
            .message
            .as_deref()
            .unwrap()
            .contains(api::names::CONTRACT_RELEASE_FINALIZER)
    );
    // Nor is a running guest adopted.
    let mut adopting = bare(contract());
    adopting.spec.adopt = Some(Box::new(receipt()));
    assert_eq!(at(&adopting, 0, Observation::Nothing).command, None);
    // With the finalizer it is rented; deleted without one, it goes at once.
    assert_eq!(
        step(
            &held(unguarded.clone()),
            &ready(),
            t0(),
            Observation::Nothing
        )
        .command,
        Some(Command::Publish)
    );
    let gone = step(&deleted(unguarded), &ready(), t0(), Observation::Nothing);
    assert_eq!(gone.status.phase, Some(Phase::Released));
}
