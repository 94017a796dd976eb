//! Unit tests of every phase transition of [`controllers::requester::decide`].

use std::time::Duration;

use api::{ComputeContractPhase as Phase, ComputeContractStatus, ConditionStatus as S};
use market::{GuestInfo, GuestStatus, RfpId};

use super::conditions as cond;
use super::decide::{Command, FailureKind, MarketView, Observation, Operation};
use super::steps::{after, at};
use super::test_fixtures::*;
use crate::time;

#[test]
fn a_new_contract_publishes_its_request_for_proposal() {
    let s = step(&contract(), &ready(), t0(), Observation::Nothing);
    assert_eq!(s.command, Some(Command::Publish));
    // Bidding is decided (and written) before the publish, and a publish
    // that goes well changes nothing more: one status write, not two.
    assert_eq!(s.status.phase, Some(Phase::Bidding));
    assert_eq!(s.status.observed_generation, Some(1));
    let c = apply(&contract(), &s);
    let published = step(&c, &ready(), t0(), Observation::Published);
    assert_eq!(Some(&published.status), c.status.as_ref());
    // A publish that fails leaves the contract Pending, retried later.
    let failed = step(
        &c,
        &ready(),
        t0(),
        Observation::Failed {
            operation: Operation::Publish,
            failure: super::decide::MarketFailure {
                kind: FailureKind::Retryable,
                message: "market down".to_owned(),
            },
        },
    );
    assert_eq!(failed.status.phase, Some(Phase::Pending));
    assert!(failed.command.is_none());
}

#[test]
fn published_opens_the_bid_window_from_the_clock() {
    let c = bidding();
    assert_eq!(phase(&c), Some(Phase::Bidding));
    let bidding = condition(&c, cond::BIDDING);
    assert!(bidding.is_true());
    assert_eq!(time::from_time(&bidding.last_transition_time), t0());
    let s = at(&c, 2, Observation::Nothing);
    assert_eq!(s.command, None);
    assert_eq!(s.requeue, Some(Duration::from_secs(3)));
    assert_eq!(Some(&s.status), c.status.as_ref(), "waiting writes nothing");
    let s = at(&c, 5, Observation::Nothing);
    assert_eq!(s.command, Some(Command::CollectBids));
}

#[test]
fn a_window_opened_mid_second_lasts_its_full_length() {
    // The Bidding condition keeps whole seconds: a window opened at t0 + 0.8 s
    // reads t0 back. Ending it at t0 + 5 s closed a 5 s window 4.2 s after it
    // opened (a 1 s window after 0.2 s), before slow bidders could answer.
    let opened = t0() + chrono::Duration::milliseconds(800);
    let c = contract();
    let c = apply(&c, &step(&c, &ready(), opened, Observation::Nothing));
    let published = step(&c, &ready(), opened, Observation::Published);
    let c = apply(&c, &published);
    let full = opened + secs(5);
    let looked_again = |now: chrono::DateTime<chrono::Utc>, requeue: Option<Duration>| {
        now + time::chrono_duration(requeue.expect("a window that is open requeues"))
    };
    assert!(looked_again(opened, published.requeue) >= full);
    // Whenever else the contract is reconciled before the window is over
    // (another object's event), it waits, to no earlier than the window's end.
    for millis in [1_000, 4_200, 5_000, 5_500, 5_799] {
        let now = t0() + chrono::Duration::milliseconds(millis);
        let s = step(&c, &ready(), now, Observation::Nothing);
        assert_eq!(s.command, None, "{millis} ms after t0 the window is open");
        assert!(looked_again(now, s.requeue) >= full, "{millis} ms");
    }
    // It closes at its full length, not later: its opening is kept to the
    // microsecond beside the whole-second condition.
    let s = step(&c, &ready(), full, Observation::Nothing);
    assert_eq!(s.command, Some(Command::CollectBids));
}

#[test]
fn the_window_opening_is_written_with_bidding_to_the_microsecond() {
    let opened = t0() + chrono::Duration::microseconds(800_123);
    let c = contract();
    let s = step(&c, &ready(), opened, Observation::Nothing);
    assert_eq!(s.command, Some(Command::Publish));
    // In the status written before the publish: no write of its own.
    let status = &s.status;
    let at = status
        .bid_window_opened_at
        .as_ref()
        .expect("the opening is written");
    assert_eq!(time::from_micro_time(at), opened);
    assert_eq!(
        time::from_time(&condition(&apply(&c, &s), cond::BIDDING).last_transition_time),
        t0()
    );
    // What the server gives back (microseconds) decides the same: waiting writes nothing.
    let json = serde_json::to_value(status).unwrap();
    let read: ComputeContractStatus = serde_json::from_value(json).unwrap();
    assert_eq!(&read, status);
    let c = apply(&c, &s);
    let published = step(&c, &ready(), opened, Observation::Published);
    assert_eq!(Some(&published.status), c.status.as_ref());
    assert_eq!(published.requeue, Some(Duration::from_secs(5)));
    // Once the window is over the opening goes with it.
    let s = step(
        &c,
        &ready(),
        opened + secs(5),
        Observation::Bids(vec![bid("did:web:a", 9)]),
    );
    assert_eq!(s.command, Some(Command::Accept(bid("did:web:a", 9))));
    let accepted = step(
        &apply(&c, &s),
        &ready(),
        opened + secs(5),
        Observation::Accepted {
            bid: bid("did:web:a", 9),
            receipt: receipt(),
        },
    );
    assert_eq!(accepted.status.phase, Some(Phase::Accepted));
    assert_eq!(accepted.status.bid_window_opened_at, None);
}

#[test]
fn a_window_an_older_manager_opened_lasts_its_full_length_from_whole_seconds() {
    // Written before the opening was kept: only the Bidding condition's
    // whole-second time says when it opened (up to a second after it), so a
    // manager restarted mid-window waits a second longer rather than less.
    let mut c = bidding();
    c.status.as_mut().unwrap().bid_window_opened_at = None;
    let s = step(&c, &ready(), t0() + secs(5), Observation::Nothing);
    assert_eq!(s.command, None);
    assert_eq!(s.requeue, Some(Duration::from_secs(1)));
    assert_eq!(Some(&s.status), c.status.as_ref(), "waiting writes nothing");
    let s = step(&c, &ready(), t0() + secs(6), Observation::Nothing);
    assert_eq!(s.command, Some(Command::CollectBids));
}

#[test]
fn the_lowest_bid_wins_and_is_written_before_it_is_accepted() {
    let c = bidding();
    let bids = vec![
        bid("did:web:b", 12),
        bid("did:web:a", 9),
        bid("did:web:c", 30),
    ];
    let s = at(&c, 5, Observation::Bids(bids));
    assert_eq!(s.command, Some(Command::Accept(bid("did:web:a", 9))));
    assert_eq!(s.status.winner.as_ref().unwrap().bidder, "did:web:a");
    assert_eq!(s.status.phase, Some(Phase::Bidding));
    let c = apply(&c, &s);
    assert_eq!(condition(&c, cond::ACCEPTED).status, S::Unknown);
    // A restart before the receipt came back accepts the same bid again.
    let again = at(&c, 9, Observation::Nothing);
    assert_eq!(again.command, Some(Command::Accept(bid("did:web:a", 9))));
}

#[test]
fn the_receipt_is_recorded_before_anything_else() {
    let c = with_one_bid();
    let s = at(
        &c,
        5,
        Observation::Accepted {
            bid: bid("did:web:a", 9),
            receipt: receipt(),
        },
    );
    assert_eq!(s.record_receipt, Some(receipt()));
    assert_eq!(s.status.receipt, Some(receipt()));
    assert_eq!(s.status.phase, Some(Phase::Accepted));
    assert_eq!(s.command, Some(Command::GuestStatus(receipt())));
    let c = apply(&c, &s);
    assert!(condition(&c, cond::ACCEPTED).is_true());
    assert_eq!(at(&c, 6, Observation::Nothing).record_receipt, None);
}

#[test]
fn a_booting_guest_is_polled_and_an_online_one_is_deployed() {
    let c = accepted();
    let s = at(&c, 6, Observation::Guest(GuestStatus::Booting));
    assert_eq!(s.status.phase, Some(Phase::Accepted));
    assert_eq!(s.requeue, Some(timing().boot_poll));
    let c = deployed();
    assert_eq!(phase(&c), Some(Phase::Deployed));
    let guest = c.status.as_ref().unwrap().guest.clone().unwrap();
    assert_eq!(guest.provider, "did:web:a");
    assert_eq!(guest.address.as_deref(), Some("10.0.0.7"));
    assert_eq!(guest.node_id, None);
    assert!(condition(&c, cond::READY).is_true());
    let s = at(
        &c,
        9,
        Observation::Guest(GuestStatus::NodeRegistered {
            address: Some("10.0.0.7".to_owned()),
            node_id: "guest-1".to_owned(),
        }),
    );
    assert_eq!(s.status.guest.unwrap().node_id.as_deref(), Some("guest-1"));
    // No poll of its own: the guest watch asks about every registered guest at once.
    assert_eq!(s.requeue, None);
}

#[test]
fn a_deployed_contract_converges_without_writes() {
    let c = deployed();
    let s = at(&c, 60, Observation::Nothing);
    assert_eq!(s.command, Some(Command::GuestStatus(receipt())));
    let again = at(
        &c,
        60,
        Observation::Guest(GuestStatus::OnNetwork {
            address: Some("10.0.0.7".to_owned()),
        }),
    );
    assert_eq!(Some(&again.status), c.status.as_ref());
    assert_eq!(again.record_receipt, None);
}

#[test]
fn a_failed_boot_names_the_bidder_and_releases_the_guest() {
    let c = accepted();
    let s = at(
        &c,
        6,
        Observation::Guest(GuestStatus::Failed {
            reason: "simulated boot failure".to_owned(),
        }),
    );
    assert_eq!(s.status.phase, Some(Phase::Failed));
    let message = s.status.message.clone().unwrap();
    assert!(message.contains("did:web:a"), "{message}");
    assert!(message.contains("boot"), "{message}");
    assert_eq!(s.command, Some(Command::Release(receipt())));
    let c = apply(&c, &s);
    assert_eq!(condition(&c, cond::READY).reason, cond::BOOT_FAILED);
    let s = at(
        &c,
        6,
        Observation::ReleaseSent(market::ReleaseOutcome::Confirmed),
    );
    assert_eq!(s.status.phase, Some(Phase::Failed));
    assert_eq!(s.command, Some(Command::Lookup(receipt())));
    let c = apply(&c, &s);
    let c = after(&c, 6, Observation::Lookup(None));
    assert_eq!(phase(&c), Some(Phase::Failed));
    assert!(condition(&c, cond::RELEASED).is_true());
    assert_eq!(condition(&c, cond::READY).reason, cond::BOOT_FAILED);
    assert_eq!(at(&c, 7, Observation::Nothing).command, None);
}

#[test]
fn no_bids_fails_with_what_was_asked_and_retries_with_backoff() {
    let c = bidding();
    let s = at(&c, 5, Observation::Bids(vec![]));
    assert_eq!(s.status.phase, Some(Phase::Failed));
    let message = s.status.message.clone().unwrap();
    for needle in [
        "no bidder had capacity",
        "2 cpus",
        "4096 MiB",
        "DE/BY",
        "root",
    ] {
        assert!(message.contains(needle), "{needle} missing in {message}");
    }
    assert_eq!(s.status.attempts, Some(1));
    assert_eq!(s.requeue, Some(timing().retry_base));
    let c = apply(&c, &s);
    let early = at(&c, 7, Observation::Nothing);
    assert_eq!(early.command, None);
    let due = t0() + secs(10);
    let s = step(&c, &ready(), due, Observation::Nothing);
    assert_eq!(s.command, Some(Command::Publish));
    let c = apply(&c, &s);
    let s = step(&c, &ready(), due, Observation::Published);
    assert_eq!(s.status.phase, Some(Phase::Bidding));
    assert_eq!(s.status.completion_time, None);
    let c = apply(&c, &s);
    assert_eq!(
        time::from_time(&condition(&c, cond::BIDDING).last_transition_time),
        due
    );
    // A second empty window backs off longer; a bid then recovers.
    let c = apply(
        &c,
        &step(&c, &ready(), due + secs(5), Observation::Bids(vec![])),
    );
    assert_eq!(c.status.as_ref().unwrap().attempts, Some(2));
    let s = step(&c, &ready(), due + secs(5), Observation::Nothing);
    assert_eq!(s.requeue, Some(timing().backoff(2)));
    let retry = due + secs(5) + secs(10);
    let c = apply(&c, &step(&c, &ready(), retry, Observation::Nothing));
    let c = apply(&c, &step(&c, &ready(), retry, Observation::Published));
    let s = step(
        &c,
        &ready(),
        retry + secs(5),
        Observation::Bids(vec![bid("did:web:new", 3)]),
    );
    assert_eq!(s.command, Some(Command::Accept(bid("did:web:new", 3))));
}

#[test]
fn release_of_a_deployed_guest_is_sent_and_confirmed() {
    let c = release(deployed());
    let s = at(&c, 20, Observation::Nothing);
    assert_eq!(s.command, Some(Command::Release(receipt())));
    let c = apply(&c, &s);
    let s = at(
        &c,
        20,
        Observation::ReleaseSent(market::ReleaseOutcome::Confirmed),
    );
    assert_eq!(s.status.phase, Some(Phase::Releasing));
    assert_eq!(s.command, Some(Command::Lookup(receipt())));
    let c = apply(&c, &s);
    let info = GuestInfo {
        receipt: market_receipt(),
        rfp: RfpId::new("rfp-1"),
        contract: market::ContractKey::new("socialweb-system", "nodes-a-node-b"),
        owner_did: "did:web:tenant".to_owned(),
        provider: "did:web:a".to_owned(),
        price: market::Price::hourly(9, "EUR"),
        status: GuestStatus::OnNetwork {
            address: Some("10.0.0.7".to_owned()),
        },
    };
    let s = at(&c, 20, Observation::Lookup(Some(info)));
    assert_eq!(
        s.status.phase,
        Some(Phase::Releasing),
        "still listed: not released"
    );
    assert_eq!(s.requeue, Some(timing().release_poll));
    let s = at(&c, 21, Observation::Lookup(None));
    assert_eq!(s.status.phase, Some(Phase::Released));
    assert_eq!(
        s.status.completion_time,
        Some(time::to_time(t0() + secs(21)))
    );
    let c = apply(&c, &s);
    assert!(condition(&c, cond::RELEASED).is_true());
    let done = at(&c, 30, Observation::Nothing);
    assert_eq!(
        (done.command, Some(&done.status)),
        (None, c.status.as_ref())
    );
}

#[test]
fn a_failed_release_stays_visible_and_is_retried_for_ever() {
    let mut c = release(deployed());
    let mut now = t0() + secs(20);
    for attempt in 1..=7_u32 {
        let s = step(&c, &ready(), now, Observation::Nothing);
        assert_eq!(
            s.command,
            Some(Command::Release(receipt())),
            "attempt {attempt}"
        );
        c = apply(&c, &s);
        let s = step(
            &c,
            &ready(),
            now,
            failed(Operation::Release, FailureKind::Retryable),
        );
        c = apply(&c, &s);
        let released = condition(&c, cond::RELEASED);
        assert_eq!(released.reason, cond::RELEASE_FAILED);
        assert!(released.message.contains("injected fault"));
        let status = c.status.as_ref().unwrap();
        assert_eq!(status.attempts, Some(attempt));
        let expected = if attempt < timing().release_failed_after {
            Phase::Releasing
        } else {
            Phase::Failed
        };
        assert_eq!(status.phase, Some(expected), "attempt {attempt}");
        assert!(status.message.as_ref().unwrap().contains("retrying"));
        assert_eq!(
            step(&c, &ready(), now, Observation::Nothing).command,
            None,
            "backs off"
        );
        now += time::chrono_duration(timing().backoff(attempt));
    }
    let c = apply(
        &c,
        &step(
            &c,
            &ready(),
            now,
            Observation::ReleaseSent(market::ReleaseOutcome::Confirmed),
        ),
    );
    assert_eq!(phase(&c), Some(Phase::Releasing));
    let c = apply(&c, &step(&c, &ready(), now, Observation::Lookup(None)));
    assert_eq!(phase(&c), Some(Phase::Released));
}

#[test]
fn not_found_counts_as_gone() {
    let c = release(deployed());
    for operation in [Operation::Release, Operation::Lookup] {
        let s = at(
            &c,
            20,
            Observation::Failed {
                operation,
                failure: failure(FailureKind::NotFound),
            },
        );
        assert_eq!(s.status.phase, Some(Phase::Released), "{operation:?}");
    }
}

#[test]
fn a_receipt_only_in_the_annotation_is_never_published_again() {
    let c = with_annotation(contract(), &receipt());
    let s = at(&c, 0, Observation::Nothing);
    assert_eq!(s.command, Some(Command::Lookup(receipt())));
    assert_eq!(s.status.receipt, Some(receipt()));
    assert_eq!(s.record_receipt, None);
    let restored = with_status(
        contract(),
        ComputeContractStatus {
            receipt: Some(receipt()),
            ..ComputeContractStatus::default()
        },
    );
    let s = at(&restored, 0, Observation::Nothing);
    assert_eq!(
        s.record_receipt,
        Some(receipt()),
        "the annotation is written back"
    );
}

#[test]
fn release_without_anything_rented_is_released_at_once() {
    for c in [release(contract()), release(bidding())] {
        let s = step(
            &c,
            &MarketView::Missing {
                reason: "none".to_owned(),
            },
            t0() + secs(1),
            Observation::Nothing,
        );
        assert_eq!(s.status.phase, Some(Phase::Released));
        assert_eq!(s.command, None);
    }
}

#[test]
fn release_with_a_winner_but_no_receipt_accepts_first_then_releases() {
    let c = with_one_bid();
    let c = release(c);
    let s = at(&c, 6, Observation::Nothing);
    assert_eq!(s.command, Some(Command::Accept(bid("did:web:a", 9))));
    let s = at(
        &c,
        6,
        Observation::Accepted {
            bid: bid("did:web:a", 9),
            receipt: receipt(),
        },
    );
    assert_eq!(s.record_receipt, Some(receipt()));
    assert_eq!(s.command, Some(Command::Release(receipt())));
}

#[test]
fn a_deleting_root_releases_every_guest() {
    let view = MarketView::Ready {
        requester: "root".to_owned(),
        bid_window: Duration::from_secs(5),
        slot_free: true,
        root_deleting: true,
    };
    let s = step(&deployed(), &view, t0() + secs(30), Observation::Nothing);
    assert_eq!(s.command, Some(Command::Release(receipt())));
    let s = step(&contract(), &view, t0(), Observation::Nothing);
    assert_eq!(s.status.phase, Some(Phase::Released));
}

#[test]
fn without_a_requester_a_contract_waits_and_says_so() {
    let view = MarketView::Missing {
        reason: "no Requester in namespace socialweb-system: create one".to_owned(),
    };
    let s = step(&contract(), &view, t0(), Observation::Nothing);
    assert_eq!((s.command, s.status.phase), (None, Some(Phase::Pending)));
    let c = apply(
        &contract(),
        &step(&contract(), &view, t0(), Observation::Nothing),
    );
    assert_eq!(condition(&c, cond::READY).reason, cond::NO_REQUESTER);
    assert!(
        condition(&c, cond::BIDDING)
            .message
            .contains("no Requester")
    );
    let s = step(&deployed(), &view, t0() + secs(30), Observation::Nothing);
    assert_eq!(s.command, None);
    assert_eq!(
        s.status.phase,
        Some(Phase::Deployed),
        "a running guest keeps its phase"
    );
}

#[test]
fn max_in_flight_keeps_a_contract_pending() {
    let view = MarketView::Ready {
        requester: "root".to_owned(),
        bid_window: Duration::from_secs(5),
        slot_free: false,
        root_deleting: false,
    };
    let s = step(&contract(), &view, t0(), Observation::Nothing);
    assert_eq!(s.command, None);
    assert_eq!(s.requeue, Some(timing().slot_wait));
    let c = apply(&contract(), &s);
    assert_eq!(condition(&c, cond::READY).reason, cond::MAX_IN_FLIGHT);
    // A contract already bidding keeps going.
    let s = step(&bidding(), &view, t0() + secs(6), Observation::Nothing);
    assert_eq!(s.command, Some(Command::CollectBids));
}
