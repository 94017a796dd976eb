//! Every knob of the fake market (MARKET.md section 8) against the atproto
//! adapter: refusals, stalls and lost answers at the bidder, duplicate,
//! late and foreign bids, lost callbacks, silent provisioning failure, a
//! bidder restart, relay lag, and JWTs naming us with a port.

use crate::atproto_support;

use std::time::Duration;

use atproto::market as m;
use atproto_fake::{BidderKnobs, Fault, Service};
use atproto_support::{Harness, eventually, first_bid, request, usd_hourly};
use market::{GuestStatus, Market, ReleaseOutcome};

const RESEND: Duration = Duration::from_secs(120);

#[tokio::test]
async fn a_refused_accept_is_withdrawn_and_another_bid_wins() {
    for refusal in [Fault::forbidden(), Fault::invalid_request()] {
        let h = Harness::start(vec![usd_hourly(0.10), usd_hourly(0.05)]).await;
        let market = h.market();
        let rfp = market.publish_rfp(request("c")).await.unwrap();
        market.settled().await;
        let bids = market.collect_bids(&rfp).await.unwrap();
        h.net
            .faults
            .once(Service::Bidder, m::SUBMIT_ACCEPT, refusal.clone());
        let err = market.accept(&rfp, &bids[0]).await.unwrap_err();
        assert_eq!(err.category(), "bid_withdrawn", "{err}");
        assert_eq!(
            h.own_records(m::ACCEPT),
            0,
            "the refused accept is withdrawn"
        );
        let left = market.collect_bids(&rfp).await.unwrap();
        assert_eq!(left.len(), 1, "the refused bid is not offered again");
        assert_eq!(left[0].bidder, h.bidder(0).did());
        market.accept(&rfp, &left[0]).await.unwrap();
        assert_eq!(h.bidder(0).counters().machines_started, 1);
        assert_eq!(h.bidder(1).counters().machines_started, 0);
    }
}

#[tokio::test]
async fn a_401_is_sent_again_at_once_but_a_500_only_after_the_resend_delay() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    let market = h.market();
    let bidder = h.bidder(0);

    let (rfp, bid) = first_bid(&market, "c401").await;
    h.net
        .faults
        .once(Service::Bidder, m::SUBMIT_ACCEPT, Fault::unauthorized());
    assert!(market.accept(&rfp, &bid).await.unwrap_err().is_retryable());
    market.accept(&rfp, &bid).await.unwrap();
    assert_eq!(bidder.counters().machines_started, 1);

    let (rfp, bid) = first_bid(&market, "c500").await;
    h.net
        .faults
        .once(Service::Bidder, m::SUBMIT_ACCEPT, Fault::internal());
    assert!(market.accept(&rfp, &bid).await.unwrap_err().is_retryable());
    let waiting = market.accept(&rfp, &bid).await.unwrap_err();
    assert!(
        waiting.to_string().contains("waiting for the receipt"),
        "{waiting}"
    );
    assert_eq!(bidder.counters().machines_started, 1, "nothing resent yet");
    h.clock.advance(RESEND);
    market.accept(&rfp, &bid).await.unwrap();
    assert_eq!(bidder.counters().machines_started, 2);
}

#[tokio::test]
async fn a_lost_answer_to_submit_accept_never_starts_a_second_machine() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    let market = h.market();
    let (rfp, bid) = first_bid(&market, "c").await;
    h.net
        .faults
        .once(Service::Bidder, m::SUBMIT_ACCEPT, Fault::LoseAnswer);
    assert!(market.accept(&rfp, &bid).await.unwrap_err().is_retryable());
    let receipt = market.accept(&rfp, &bid).await.unwrap();
    h.clock.advance(RESEND * 2);
    assert_eq!(market.accept(&rfp, &bid).await.unwrap(), receipt);
    assert_eq!(h.bidder(0).counters().machines_started, 1);
}

#[tokio::test]
async fn a_stalled_submit_accept_is_not_sent_again_while_its_receipt_can_appear() {
    let mut h = Harness::start(vec![usd_hourly(0.05)]).await;
    let bidding = h.market();
    let (rfp, bid) = first_bid(&bidding, "c").await;
    drop(bidding);
    // Only the accepting instance gives up early: the stall outlasts it.
    h.config.timeouts.call = Duration::from_secs(1);
    let market = h.market();
    h.net.faults.once(
        Service::Bidder,
        m::SUBMIT_ACCEPT,
        Fault::Stall(Duration::from_millis(2500)),
    );
    let timed_out = market.accept(&rfp, &bid).await.unwrap_err();
    assert!(timed_out.is_retryable(), "{timed_out}");
    let receipt = eventually("the stalled accept's receipt", || async {
        market.accept(&rfp, &bid).await.ok()
    })
    .await;
    assert_eq!(market.accept(&rfp, &bid).await.unwrap(), receipt);
    h.quiet().await;
    assert_eq!(h.bidder(0).counters().machines_started, 1);
}

#[tokio::test]
async fn duplicate_late_and_foreign_bids_count_once_and_only_ours() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    h.net.faults.set_bidder(BidderKnobs {
        duplicate_bids: true,
        foreign_bids: true,
        ..BidderKnobs::default()
    });
    let market = h.market();
    let rfp = market.publish_rfp(request("c")).await.unwrap();
    market.settled().await;
    assert_eq!(
        h.inbox().bids_for(rfp.as_str()).len(),
        1,
        "the duplicate is one bid, the foreign one is refused"
    );
    assert_eq!(h.records_of(h.bidder(0).did(), m::BID), 2);
    let bids = market.collect_bids(&rfp).await.unwrap();
    assert_eq!(bids.len(), 1, "{bids:?}");

    h.net.faults.set_bidder(BidderKnobs {
        late_bid: Some(Duration::from_millis(50)),
        ..BidderKnobs::default()
    });
    let rfp = market.publish_rfp(request("late")).await.unwrap();
    market.settled().await;
    let bids = market.collect_bids(&rfp).await.unwrap();
    assert_eq!(
        bids.len(),
        1,
        "the answer and the repository have it before the push"
    );
    let receipt = market.accept(&rfp, &bids[0]).await.unwrap();
    h.quiet().await;
    assert_eq!(
        h.inbox().bids_for(rfp.as_str()).len(),
        1,
        "the late push came"
    );
    assert_eq!(market.collect_bids(&rfp).await.unwrap().len(), 1);
    assert_eq!(market.accept(&rfp, &bids[0]).await.unwrap(), receipt);
    assert_eq!(h.bidder(0).counters().machines_started, 1);
}

#[tokio::test]
async fn lost_callbacks_still_reach_deployed_through_the_repository() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    h.net.faults.set_bidder(BidderKnobs {
        lose_callbacks: true,
        ..BidderKnobs::default()
    });
    let market = h.market();
    let rfp = market.publish_rfp(request("c")).await.unwrap();
    market.settled().await;
    assert!(h.inbox().bids_for(rfp.as_str()).is_empty());
    let bid = market.collect_bids(&rfp).await.unwrap().remove(0);
    let receipt = market.accept(&rfp, &bid).await.unwrap();
    h.quiet().await;
    let status = market.guest_status(&receipt).await.unwrap();
    assert!(status.is_on_network(), "{status:?}");
    assert!(
        h.inbox().events_for(&receipt.uri).is_empty(),
        "nothing was pushed"
    );
}

#[tokio::test]
async fn a_silent_provisioning_failure_is_failed_after_the_timeout_and_released() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    h.net.faults.set_bidder(BidderKnobs {
        silent_provisioning_failure: true,
        ..BidderKnobs::default()
    });
    let market = h.market();
    let receipt = h.rent(&market, "c").await;
    assert_eq!(
        market.guest_status(&receipt).await.unwrap(),
        GuestStatus::Booting
    );
    h.clock.advance(h.config.timeouts.provisioning);
    let GuestStatus::Failed { reason } = market.guest_status(&receipt).await.unwrap() else {
        panic!("a silent provider must become Failed");
    };
    assert!(
        reason.contains("vm.onNetwork") && reason.contains(h.bidder(0).did()),
        "{reason}"
    );
    assert_eq!(
        market.release(&receipt).await.unwrap(),
        ReleaseOutcome::Acknowledged
    );
    h.quiet().await;
    assert_eq!(h.bidder(0).counters().machines_stopped, 1);
}

#[tokio::test]
async fn a_bidder_restart_loses_the_release_and_a_guest_reporting_again_says_so() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    let market = h.market();
    let bidder = h.bidder(0);
    let receipt = h.rent(&market, "c").await;
    assert!(market.guest_status(&receipt).await.unwrap().is_on_network());

    bidder.restart();
    assert_eq!(
        market.release(&receipt).await.unwrap(),
        ReleaseOutcome::Acknowledged
    );
    h.quiet().await;
    assert_eq!(bidder.counters().deletes_ignored, 1);
    assert_eq!(bidder.counters().running, 1, "the machine still runs");
    assert_eq!(
        market.lookup(&receipt).await.unwrap(),
        None,
        "acknowledged, and nothing says otherwise yet"
    );

    h.clock
        .advance(h.config.timeouts.clock_skew + Duration::from_secs(1));
    bidder.heartbeat().await;
    let info = market
        .lookup(&receipt)
        .await
        .unwrap()
        .expect("a guest that reports after its release is still running");
    assert!(info.status.is_on_network(), "{:?}", info.status);
    assert!(market.guest_status(&receipt).await.unwrap().is_on_network());
    h.quiet().await;
    assert_eq!(
        bidder.counters().deletes_ignored,
        3,
        "each lookup sends the release again"
    );
    let ReleaseOutcome::Unconfirmed { reason } = market.release(&receipt).await.unwrap() else {
        panic!("a guest that reports after its release makes the release unconfirmed");
    };
    assert!(
        reason.contains(bidder.did())
            && reason.contains(&receipt.uri)
            && reason.contains("still reports"),
        "{reason}"
    );
}

#[tokio::test]
async fn a_bidder_restarted_on_a_new_endpoint_makes_the_release_unconfirmed() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    let market = h.market();
    let bidder = h.bidder(0);
    let receipt = h.rent(&market, "c").await;
    let old = bidder.url();

    // As the reference's hono-bidder: a new ingress, so a new endpoint, per
    // process; the old one stops answering; the offering names the new one.
    let new = bidder.restart_on_new_endpoint().await.unwrap();
    assert_ne!(old, new);
    let ReleaseOutcome::Unconfirmed { reason } = market.release(&receipt).await.unwrap() else {
        panic!("a release to a bidder process that is gone is not acknowledged as if it arrived");
    };
    for named in [
        bidder.did(),
        receipt.uri.as_str(),
        old.as_str(),
        new.as_str(),
    ] {
        assert!(reason.contains(named), "{named} in {reason}");
    }
    h.quiet().await;
    let counters = bidder.counters();
    assert_eq!(
        counters.deletes_ignored, 1,
        "the release reached the new process, which does not know the contract: {counters:?}"
    );
    assert_eq!(counters.running, 1, "the machine still runs");
}

#[tokio::test]
async fn bidders_hidden_by_relay_lag_are_asked_once_the_relay_lists_them() {
    let mut h = Harness::start(vec![usd_hourly(0.05)]).await;
    h.config.bidders.clear();
    h.config.relay_url = Some(h.net.relay_url.clone());
    h.net.faults.set_relay_lag(Duration::from_secs(3600));
    let market = h.market();
    let rfp = market.publish_rfp(request("c")).await.unwrap();
    market.settled().await;
    let none = market.collect_bids(&rfp).await.unwrap_err();
    assert!(
        none.is_retryable() && none.to_string().contains("no bidder"),
        "{none}"
    );

    h.net.faults.set_relay_lag(Duration::ZERO);
    let asked = market.collect_bids(&rfp).await.unwrap_err();
    assert!(asked.to_string().contains(h.bidder(0).did()), "{asked}");
    market.settled().await;
    assert_eq!(market.collect_bids(&rfp).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_bidder_that_cannot_be_asked_is_named() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    h.net.faults.inject(
        Service::Bidder,
        Some(m::SUBMIT_RFP),
        Fault::internal(),
        None,
    );
    let market = h.market();
    let rfp = market.publish_rfp(request("c")).await.unwrap();
    market.settled().await;
    let err = market.collect_bids(&rfp).await.unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(err.to_string().contains(h.bidder(0).did()), "{err}");
}

#[tokio::test]
async fn pushes_naming_us_by_did_web_with_a_port_are_taken() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    h.net.faults.set_bidder(BidderKnobs {
        aud_with_port: true,
        ..BidderKnobs::default()
    });
    let market = h.market();
    let rfp = market.publish_rfp(request("c")).await.unwrap();
    market.settled().await;
    assert_eq!(h.inbox().bids_for(rfp.as_str()).len(), 1);
    let bid = market.collect_bids(&rfp).await.unwrap().remove(0);
    let receipt = market.accept(&rfp, &bid).await.unwrap();
    h.quiet().await;
    assert_eq!(h.inbox().events_for(&receipt.uri).len(), 2);
}

#[tokio::test]
async fn a_provider_still_provisioning_is_booting_until_the_timeout() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    h.net.faults.set_bidder(BidderKnobs {
        // Longer than the test: the provider never reports within it.
        provisioning_delay: Duration::from_secs(3600),
        ..BidderKnobs::default()
    });
    let market = h.market();
    let (rfp, bid) = first_bid(&market, "c").await;
    let receipt = market.accept(&rfp, &bid).await.unwrap();
    assert_eq!(
        market.guest_status(&receipt).await.unwrap(),
        GuestStatus::Booting
    );
    h.clock
        .advance(h.config.timeouts.provisioning - Duration::from_secs(1));
    assert_eq!(
        market.guest_status(&receipt).await.unwrap(),
        GuestStatus::Booting,
        "not failed a second before the timeout"
    );
    h.clock.advance(Duration::from_secs(1));
    assert!(matches!(
        market.guest_status(&receipt).await.unwrap(),
        GuestStatus::Failed { .. }
    ));
}
