//! Unit tests of a deleted contract in [`controllers::requester::decide`]: a deletionTimestamp
//! is a release request, and the release finalizer goes only in a step whose
//! status says Released.

use api::{ComputeContractPhase as Phase, ComputeContractStatus, ConditionStatus as S};

use super::conditions as cond;
use super::decide::{Command, FailureKind, MarketView, Observation, Operation};
use super::steps::at;
use super::test_fixtures::*;

fn missing() -> MarketView {
    MarketView::Missing {
        reason: "no Requester in namespace socialweb-system".to_owned(),
    }
}

#[test]
fn a_deleted_deployed_contract_releases_its_guest_before_it_lets_go() {
    let c = deleted(held(deployed()));
    let s = at(&c, 20, Observation::Nothing);
    assert_eq!(s.command, Some(Command::Release(receipt())));
    assert!(!s.remove_finalizer, "the guest still runs");
    let c = apply(&c, &s);
    let s = at(
        &c,
        20,
        Observation::ReleaseSent(market::ReleaseOutcome::Confirmed),
    );
    assert_eq!(s.status.phase, Some(Phase::Releasing));
    assert_eq!(s.command, Some(Command::Lookup(receipt())));
    assert!(!s.remove_finalizer, "the market has not confirmed it yet");
    let c = apply(&c, &s);
    let s = at(&c, 21, Observation::Lookup(None));
    assert_eq!(s.status.phase, Some(Phase::Released));
    assert_eq!(
        condition(&apply(&c, &s), cond::RELEASED).reason,
        cond::GUEST_GONE
    );
    assert!(s.remove_finalizer);
    assert_eq!(s.command, None);
}

#[test]
fn a_failed_release_of_a_deleted_contract_keeps_the_finalizer_and_says_why() {
    let c = deleted(held(deployed()));
    let s = at(&c, 20, failed(Operation::Release, FailureKind::Retryable));
    assert!(!s.remove_finalizer);
    assert_eq!(s.status.phase, Some(Phase::Releasing));
    assert_eq!(s.status.attempts, Some(1));
    let c = apply(&c, &s);
    let released = condition(&c, cond::RELEASED);
    assert_eq!(
        (released.status, released.reason.as_str()),
        (S::False, cond::RELEASE_FAILED)
    );
    // Retried after the backoff, not before.
    let early = at(&c, 21, Observation::Nothing);
    assert_eq!((early.command, early.remove_finalizer), (None, false));
    let due = at(&c, 60, Observation::Nothing);
    assert_eq!(due.command, Some(Command::Release(receipt())));
}

#[test]
fn a_deleted_contract_that_never_rented_goes_at_once_without_a_market_call() {
    let pending = apply(
        &contract(),
        &step(&contract(), &ready(), t0(), Observation::Nothing),
    );
    for c in [held(contract()), held(pending), held(bidding())] {
        let s = step(&deleted(c), &ready(), t0() + secs(1), Observation::Nothing);
        assert_eq!(s.command, None);
        assert_eq!(s.status.phase, Some(Phase::Released));
        assert!(s.remove_finalizer);
    }
}

#[test]
fn a_released_contract_lets_go_at_once_even_without_a_requester() {
    let c = deleted(held(with_status(
        contract(),
        ComputeContractStatus {
            phase: Some(Phase::Released),
            receipt: Some(receipt()),
            ..ComputeContractStatus::default()
        },
    )));
    for view in [ready(), missing()] {
        let s = step(&c, &view, t0() + secs(1), Observation::Nothing);
        assert_eq!((s.command.clone(), s.remove_finalizer), (None, true));
    }
}

#[test]
fn without_a_requester_a_deleted_contract_keeps_a_live_guest() {
    let c = deleted(held(deployed()));
    let s = step(&c, &missing(), t0() + secs(20), Observation::Nothing);
    assert_eq!((s.command, s.remove_finalizer), (None, false));
    assert_eq!(s.status.phase, Some(Phase::Deployed));
    assert!(s.status.message.unwrap().contains("is kept until then"));
}

#[test]
fn a_failed_contract_whose_guest_is_gone_lets_go_without_a_market() {
    // A boot failure whose guest the market confirmed gone (Released=True).
    let mut c = held(accepted());
    let s = at(&c, 6, failed(Operation::GuestStatus, FailureKind::NotFound));
    c = apply(&c, &s);
    assert_eq!(phase(&c), Some(Phase::Failed));
    let s = step(
        &deleted(c),
        &missing(),
        t0() + secs(7),
        Observation::Nothing,
    );
    assert_eq!(s.status.phase, Some(Phase::Released));
    assert!(s.remove_finalizer);
}

#[test]
fn only_a_deleted_contract_with_the_finalizer_asks_for_its_removal() {
    let released = with_status(
        contract(),
        ComputeContractStatus {
            phase: Some(Phase::Released),
            ..ComputeContractStatus::default()
        },
    );
    let live = step(
        &held(released.clone()),
        &ready(),
        t0(),
        Observation::Nothing,
    );
    assert!(!live.remove_finalizer, "not deleted");
    let bare = step(
        &deleted(bare(released)),
        &ready(),
        t0(),
        Observation::Nothing,
    );
    assert!(!bare.remove_finalizer, "nothing to remove");
}

#[test]
fn a_deleted_contract_released_already_lets_go_without_another_status_write() {
    // Released (the Infra's spec.release), then deleted: the delete bumps the
    // generation, which the status would otherwise write once more.
    let c = apply(
        &held(deployed()),
        &at(&held(deployed()), 20, Observation::Nothing),
    );
    let mut c = c;
    c.spec.release = true;
    let s = at(&c, 20, Observation::Nothing);
    let c = apply(&c, &s);
    let s = at(
        &c,
        21,
        Observation::ReleaseSent(market::ReleaseOutcome::Confirmed),
    );
    let c = apply(&c, &s);
    let s = at(&c, 22, Observation::Lookup(None));
    let released = apply(&c, &s);
    assert_eq!(phase(&released), Some(Phase::Released));

    let gone = deleted(released.clone());
    let s = at(&gone, 30, Observation::Nothing);
    assert!(s.remove_finalizer);
    assert_eq!(
        Some(&s.status),
        released.status.as_ref(),
        "nothing new to write"
    );
}
