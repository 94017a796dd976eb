//! The atproto market drives the whole port against the fake market over
//! loopback HTTP: publish, bids, accept, events, release, lookup.

use crate::atproto_support;

use atproto::market as m;
use atproto_support::{Harness, request, usd_hourly};
use market::{GuestStatus, Market, Price, ReleaseOutcome};

#[tokio::test]
async fn a_contract_is_rented_from_the_cheapest_bidder_and_released() {
    let h = Harness::start(vec![usd_hourly(0.10), usd_hourly(0.05)]).await;
    let market = h.market();

    let rfp = market.publish_rfp(request("c1")).await.unwrap();
    market.settled().await;
    assert_eq!(
        market.publish_rfp(request("c1")).await.unwrap(),
        rfp,
        "publishing again finds the same request"
    );
    assert_eq!(h.own_records(m::RFP), 1);
    assert_eq!(h.own_records(m::VM), 1);

    let bids = market.collect_bids(&rfp).await.unwrap();
    assert_eq!(bids.len(), 2, "{bids:?}");
    let cheap = &bids[0];
    assert_eq!(cheap.bidder, h.bidder(1).did());
    assert_eq!(cheap.price.cost.to_string(), "0.05");
    assert_eq!(cheap.price.currency, "USD");
    assert!(cheap.record.is_some());
    assert!(
        !h.inbox().bids_for(rfp.as_str()).is_empty(),
        "the bids were pushed to submitBid too"
    );

    let receipt = market.accept(&rfp, cheap).await.unwrap();
    assert!(
        receipt
            .uri
            .starts_with(&format!("at://{}/{}/", h.bidder(1).did(), m::RECEIPT))
    );
    assert_eq!(
        market.accept(&rfp, cheap).await.unwrap(),
        receipt,
        "accepting again returns the same receipt"
    );
    let only = market.collect_bids(&rfp).await.unwrap();
    assert_eq!(
        only.len(),
        1,
        "an accepted request has only its accepted bid"
    );
    assert_eq!(only[0].bidder, cheap.bidder);

    h.quiet().await;
    let status = market.guest_status(&receipt).await.unwrap();
    assert!(
        matches!(&status, GuestStatus::NodeRegistered { address: None, node_id } if node_id.starts_with("node-")),
        "{status:?}"
    );
    assert_eq!(h.bidder(1).counters().machines_started, 1);
    assert_eq!(h.bidder(0).counters().machines_started, 0);

    let info = market.lookup(&receipt).await.unwrap().expect("running");
    assert_eq!(info.provider, h.bidder(1).did());
    assert_eq!(info.rfp, rfp);
    assert_eq!(info.price, cheap.price);

    assert_eq!(
        market.release(&receipt).await.unwrap(),
        ReleaseOutcome::Acknowledged
    );
    h.quiet().await;
    let counters = h.bidder(1).counters();
    assert_eq!((counters.machines_stopped, counters.running), (1, 0));
    assert_eq!(market.lookup(&receipt).await.unwrap(), None);
    assert_eq!(
        market.guest_status(&receipt).await.unwrap(),
        GuestStatus::Terminated
    );
    assert_eq!(
        market.release(&receipt).await.unwrap(),
        ReleaseOutcome::Acknowledged,
        "releasing again is harmless"
    );

    let next = market.publish_rfp(request("c1")).await.unwrap();
    assert_ne!(next, rfp, "a released round is closed: the name rents anew");
    assert_eq!(h.own_records(m::RFP), 2);
}

#[tokio::test]
async fn a_bid_rebuilt_without_its_record_accepts_the_bidders_bid() {
    let h = Harness::start(vec![atproto_fake::bidder::Offer::Free]).await;
    let market = h.market();
    let rfp = market.publish_rfp(request("c2")).await.unwrap();
    market.settled().await;
    let bids = market.collect_bids(&rfp).await.unwrap();
    assert_eq!(bids[0].price, Price::free());
    // What the controller rebuilds from status.winner after a restart.
    let rebuilt = market::Bid::new(h.bidder(0).did(), Price::hourly(0, ""));
    let receipt = market.accept(&rfp, &rebuilt).await.unwrap();
    assert_eq!(market.accept(&rfp, &bids[0]).await.unwrap(), receipt);
    let other = market::Bid::new("did:plc:someoneelseaaaaaaaaaaaaa", Price::free());
    let closed = market.accept(&rfp, &other).await.unwrap_err();
    assert_eq!(closed.category(), "rfp_closed", "{closed}");
    assert_eq!(h.bidder(0).counters().machines_started, 1);
}
