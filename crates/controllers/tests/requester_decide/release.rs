//! Unit tests of how a release ends, by what the market could say about it:
//! confirmed (`GuestGone`), acknowledged, or unconfirmed (lost).

use api::{ComputeContractPhase as Phase, ConditionStatus as S};
use market::{GuestInfo, GuestStatus, ReleaseOutcome, RfpId};

use super::conditions as cond;
use super::decide::{Command, Observation, release_finished, transition_event};
use super::steps::{after, at};
use super::test_fixtures::*;
use kube::runtime::events::EventType;

const LOST: &str = "bidder did:web:a acknowledged the release of at://did:web:a/receipt/1 but its offering names \
                    the endpoint https://new since 2026-12-03T10:00:00Z";

fn released_condition(c: &controllers::requester::WholeContract) -> &api::Condition {
    condition(c, cond::RELEASED)
}

fn still_running() -> GuestInfo {
    GuestInfo {
        receipt: market_receipt(),
        rfp: RfpId::new("rfp-1"),
        contract: market::ContractKey::new("socialweb-system", "nodes-a-node-b"),
        owner_did: String::new(),
        provider: "did:web:a".to_owned(),
        price: market::Price::hourly(9, "EUR"),
        status: GuestStatus::OnNetwork { address: None },
    }
}

#[test]
fn an_acknowledged_release_is_released_and_says_it_was_only_acknowledged() {
    let c = release(deployed());
    let c = after(&c, 20, Observation::Nothing);
    let s = at(
        &c,
        20,
        Observation::ReleaseSent(ReleaseOutcome::Acknowledged),
    );
    assert_eq!(s.status.phase, Some(Phase::Releasing));
    assert_eq!(
        s.command,
        Some(Command::Lookup(receipt())),
        "looked up once more: a guest that still reports says the release was lost"
    );
    let c = apply(&c, &s);
    let pending = released_condition(&c);
    assert_eq!(
        (pending.status, pending.reason.as_str()),
        (S::False, cond::RELEASE_ACKNOWLEDGED)
    );

    let s = at(&c, 21, Observation::Lookup(None));
    let done = apply(&c, &s);
    assert_eq!(phase(&done), Some(Phase::Released));
    let released = released_condition(&done);
    assert!(released.is_true());
    assert_eq!(released.reason, cond::RELEASE_ACKNOWLEDGED);
    assert!(
        released.message.contains("did:web:a") && released.message.contains("no confirmation"),
        "{}",
        released.message
    );
    assert_eq!(transition_event(c.status.as_ref(), &s.status), None);
    assert_eq!(
        release_finished(c.status.as_ref(), &s.status),
        Some("acknowledged")
    );
}

#[test]
fn a_confirmed_release_says_the_guest_is_gone() {
    let c = release(deployed());
    let c = after(&c, 20, Observation::Nothing);
    let c = after(&c, 20, Observation::ReleaseSent(ReleaseOutcome::Confirmed));
    assert_eq!(released_condition(&c).reason, cond::RELEASING);
    let s = at(&c, 21, Observation::Lookup(None));
    let done = apply(&c, &s);
    assert_eq!(phase(&done), Some(Phase::Released));
    assert_eq!(released_condition(&done).reason, cond::GUEST_GONE);
    assert_eq!(
        release_finished(c.status.as_ref(), &s.status),
        Some("confirmed")
    );
}

#[test]
fn a_lost_release_is_released_unconfirmed_with_a_warning_and_not_sent_again() {
    let c = release(deployed());
    let c = after(&c, 20, Observation::Nothing);
    let s = at(
        &c,
        20,
        Observation::ReleaseSent(ReleaseOutcome::Unconfirmed {
            reason: LOST.to_owned(),
        }),
    );
    assert_eq!(
        s.command, None,
        "the bidder that knew the guest is gone: resending reaches nobody"
    );
    let done = apply(&c, &s);
    assert_eq!(phase(&done), Some(Phase::Released));
    let released = released_condition(&done);
    assert!(released.is_true());
    assert_eq!(released.reason, cond::RELEASE_UNCONFIRMED);
    assert!(released.message.contains(LOST), "{}", released.message);

    let event = transition_event(c.status.as_ref(), &s.status).expect("a Warning Event");
    let event = event.to_event();
    assert_eq!(event.type_, EventType::Warning);
    assert_eq!(event.reason, cond::RELEASE_UNCONFIRMED);
    let note = event.note.unwrap_or_default();
    assert!(note.contains(LOST), "{note}");
    assert_eq!(
        release_finished(c.status.as_ref(), &s.status),
        Some("unconfirmed")
    );

    let later = at(&done, 600, Observation::Nothing);
    assert_eq!(later.command, None);
    assert_eq!(Some(&later.status), done.status.as_ref(), "said once, kept");
    assert_eq!(transition_event(done.status.as_ref(), &later.status), None);
    assert_eq!(release_finished(done.status.as_ref(), &later.status), None);
}

#[test]
fn a_guest_still_listed_after_an_acknowledged_release_keeps_it_releasing_and_sends_it_again() {
    let c = release(deployed());
    let c = after(&c, 20, Observation::Nothing);
    let c = after(
        &c,
        20,
        Observation::ReleaseSent(ReleaseOutcome::Acknowledged),
    );
    let s = at(&c, 21, Observation::Lookup(Some(still_running())));
    assert_eq!(s.status.phase, Some(Phase::Releasing));
    assert_eq!(s.requeue, Some(timing().release_poll));
    let c = apply(&c, &s);
    let s = at(&c, 30, Observation::Nothing);
    assert_eq!(
        s.command,
        Some(Command::Release(receipt())),
        "sent again: the market then says whether it was lost"
    );
}

#[test]
fn a_deleted_contract_whose_release_was_lost_is_let_go() {
    let c = held(deleted(deployed()));
    let c = after(&c, 20, Observation::Nothing);
    let s = at(
        &c,
        20,
        Observation::ReleaseSent(ReleaseOutcome::Unconfirmed {
            reason: LOST.to_owned(),
        }),
    );
    assert_eq!(s.status.phase, Some(Phase::Released));
    assert!(
        s.remove_finalizer,
        "nothing this manager can do stops the machine: the Event and the metric report it"
    );
}

#[test]
fn a_failed_guest_whose_release_was_lost_keeps_the_reason_when_it_is_released() {
    let c = accepted();
    let c = after(
        &c,
        8,
        Observation::Guest(GuestStatus::Failed {
            reason: "silent".to_owned(),
        }),
    );
    assert_eq!(phase(&c), Some(Phase::Failed));
    let c = after(
        &c,
        8,
        Observation::ReleaseSent(ReleaseOutcome::Unconfirmed {
            reason: LOST.to_owned(),
        }),
    );
    assert_eq!(phase(&c), Some(Phase::Failed), "still the failure to see");
    assert_eq!(released_condition(&c).reason, cond::RELEASE_UNCONFIRMED);
    let c = release(c);
    let s = at(&c, 60, Observation::Nothing);
    assert_eq!(s.command, None);
    let done = apply(&c, &s);
    assert_eq!(phase(&done), Some(Phase::Released));
    assert_eq!(released_condition(&done).reason, cond::RELEASE_UNCONFIRMED);
}
