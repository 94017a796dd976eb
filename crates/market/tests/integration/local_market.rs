//! Behaviour of the local market through the `Market` port.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use market::{
    Bid, ContractKey, GuestStatus, LocalBidder, LocalMarket, LocalMarketConfig, Location,
    ManualClock, Market, MarketError, Operation, Price, Receipt, ReleaseOutcome,
    RequestForProposal, Resources, cheapest,
};

fn rfp(name: &str, cpus: u32) -> RequestForProposal {
    RequestForProposal {
        contract: ContractKey::new("socialweb-system", name),
        resources: Resources {
            cpus,
            memory_mib: 4096,
            disk_gib: 40,
            network_mbps: 100,
        },
        location: Location {
            country: "DE".to_owned(),
            region: None,
        },
        owner_did: "did:plc:tenant".to_owned(),
    }
}

fn market_with(bidders: Vec<LocalBidder>, seed: u64) -> (LocalMarket, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::default());
    let config = LocalMarketConfig {
        seed,
        bidders,
        ..LocalMarketConfig::default()
    };
    (LocalMarket::new(config, clock.clone()).unwrap(), clock)
}

fn persistent(dir: &Path, bidders: Vec<LocalBidder>, clock: Arc<ManualClock>) -> LocalMarket {
    let config = LocalMarketConfig {
        seed: 7,
        bidders,
        state_dir: Some(dir.to_owned()),
        ..LocalMarketConfig::default()
    };
    LocalMarket::new(config, clock).unwrap()
}

/// Publishes, takes the cheapest bid and accepts it.
async fn rent(market: &dyn Market, name: &str) -> Result<Receipt, MarketError> {
    let id = market.publish_rfp(rfp(name, 2)).await?;
    let bids = market.collect_bids(&id).await?;
    let bid = cheapest(&bids)
        .cloned()
        .ok_or_else(|| MarketError::BidWithdrawn {
            rfp: id.clone(),
            bidder: "nobody".to_owned(),
        })?;
    market.accept(&id, &bid).await
}

#[tokio::test]
async fn publishing_twice_for_a_contract_is_one_rfp() {
    let (market, _) = market_with(vec![LocalBidder::new("did:a", 5, "EUR")], 1);
    let first = market.publish_rfp(rfp("c1", 2)).await.unwrap();
    let again = market.publish_rfp(rfp("c1", 8)).await.unwrap();
    let other = market.publish_rfp(rfp("c2", 2)).await.unwrap();
    assert_eq!(first, again);
    assert_ne!(first, other);
    let key = ContractKey::new("socialweb-system", "c1");
    assert_eq!(market.publish_calls(&key), 2);
    assert_eq!(market.rfps_published(&key), 1);
    assert_eq!(market.rfp_count(), 2);
}

#[tokio::test]
async fn a_released_contracts_name_used_again_rents_a_new_machine() {
    let (market, clock) = market_with(vec![LocalBidder::new("did:a", 5, "EUR")], 1);
    let key = ContractKey::new("socialweb-system", "c1");
    let first = rent(&market, "c1").await.unwrap();
    // Before the release, publishing again (a restart) finds the same RFP and guest.
    let same = market.publish_rfp(rfp("c1", 2)).await.unwrap();
    let bids = market.collect_bids(&same).await.unwrap();
    assert_eq!(market.accept(&same, &bids[0]).await.unwrap(), first);
    market.release(&first).await.unwrap();
    clock.advance(Duration::from_secs(1));

    // A new object under the same name: a new round, a new machine.
    let second = rent(&market, "c1").await.unwrap();
    assert_ne!(
        second, first,
        "the released guest is never handed out again"
    );
    assert!(market.lookup(&second).await.unwrap().is_some());
    assert!(market.lookup(&first).await.unwrap().is_none());
    assert_eq!(market.rfps_published(&key), 2);
    assert_eq!(market.guests_rented(&key), 2);
    assert_eq!(market.running_guests(), 1);
    // And that round, too, is found again until its guest is released.
    let again = market.publish_rfp(rfp("c1", 2)).await.unwrap();
    let bids = market.collect_bids(&again).await.unwrap();
    assert_eq!(market.accept(&again, &bids[0]).await.unwrap(), second);
}

#[tokio::test]
async fn a_full_bidder_stops_bidding_and_release_frees_it() {
    let bidders = vec![
        LocalBidder::new("did:cheap", 3, "EUR").with_capacity(1),
        LocalBidder::new("did:dear", 9, "EUR").with_capacity(1),
    ];
    let (market, _) = market_with(bidders, 1);
    let first = rent(&market, "c1").await.unwrap();
    let info = market.lookup(&first).await.unwrap().unwrap();
    assert_eq!(info.provider, "did:cheap");
    let id = market.publish_rfp(rfp("c2", 2)).await.unwrap();
    let bids = market.collect_bids(&id).await.unwrap();
    assert_eq!(
        bids.iter().map(|b| b.bidder.as_str()).collect::<Vec<_>>(),
        ["did:dear"]
    );
    let second = market.accept(&id, &bids[0]).await.unwrap();
    let third = market.publish_rfp(rfp("c3", 2)).await.unwrap();
    assert!(market.collect_bids(&third).await.unwrap().is_empty());
    assert_eq!(market.running_guests(), 2);

    market.release(&first).await.unwrap();
    assert_eq!(market.running_guests(), 1);
    assert_eq!(market.running_guests_of("did:cheap"), 0);
    let bids = market.collect_bids(&third).await.unwrap();
    assert_eq!(bids[0].bidder, "did:cheap");
    assert!(market.lookup(&second).await.unwrap().is_some());
}

#[tokio::test]
async fn accept_is_idempotent_and_a_stale_bid_is_refused() {
    let (market, _) = market_with(
        vec![LocalBidder::new("did:a", 5, "EUR").with_capacity(1)],
        1,
    );
    let id = market.publish_rfp(rfp("c1", 2)).await.unwrap();
    let bid = market.collect_bids(&id).await.unwrap().remove(0);
    let receipt = market.accept(&id, &bid).await.unwrap();
    // A restart between accept and recording the receipt: same flow, same receipt.
    let again = market.publish_rfp(rfp("c1", 2)).await.unwrap();
    assert_eq!(
        market.collect_bids(&again).await.unwrap(),
        vec![bid.clone()]
    );
    assert_eq!(market.accept(&again, &bid).await.unwrap(), receipt);
    assert_eq!(
        market.guests_rented(&ContractKey::new("socialweb-system", "c1")),
        1
    );

    let other = Bid {
        bidder: "did:b".to_owned(),
        ..bid.clone()
    };
    let closed = market.accept(&id, &other).await.unwrap_err();
    assert_eq!(closed.category(), "rfp_closed");

    let id2 = market.publish_rfp(rfp("c2", 2)).await.unwrap();
    let withdrawn = market.accept(&id2, &bid).await.unwrap_err();
    assert_eq!(withdrawn.category(), "bid_withdrawn");
    let cheaper = Bid {
        price: Price::hourly(1, bid.price.currency.clone()),
        ..bid
    };
    market.release(&receipt).await.unwrap();
    let lowballed = market.accept(&id2, &cheaper).await.unwrap_err();
    assert_eq!(lowballed.category(), "bid_withdrawn");
    let unknown = market
        .collect_bids(&market::RfpId::new("rfp-nope"))
        .await
        .unwrap_err();
    assert_eq!(unknown.category(), "unknown_rfp");
    assert!(!unknown.is_retryable());
}

#[tokio::test]
async fn a_lost_node_keeps_its_guest_on_the_network_without_a_node_identity() {
    let dir = std::env::temp_dir().join(format!("lost-node-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clock = Arc::new(ManualClock::default());
    let config = || LocalMarketConfig {
        seed: 3,
        bidders: vec![LocalBidder::new("did:a", 5, "EUR")],
        state_dir: Some(dir.clone()),
        ..LocalMarketConfig::default()
    };
    let market = LocalMarket::new(config(), clock.clone()).unwrap();
    let receipt = rent(&market, "c1").await.unwrap();
    clock.advance(Duration::from_secs(1));
    let GuestStatus::NodeRegistered { address, .. } = market.guest_status(&receipt).await.unwrap()
    else {
        panic!("the guest registers its node first");
    };
    assert!(market.lose_node(&receipt).unwrap());
    let lost = GuestStatus::OnNetwork { address };
    assert_eq!(market.guest_status(&receipt).await.unwrap(), lost);
    assert_eq!(
        market.running_guests(),
        1,
        "the machine still runs and is billed"
    );
    // The loss is state: a restarted manager's market sees it too.
    drop(market);
    let again = LocalMarket::new(config(), clock.clone()).unwrap();
    assert_eq!(again.guest_status(&receipt).await.unwrap(), lost);
    again.release(&receipt).await.unwrap();
    assert!(
        !again.lose_node(&receipt).unwrap(),
        "a released guest has no node to lose"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn guest_boots_onto_the_network_then_registers() {
    let bidder = LocalBidder::new("did:a", 5, "EUR").with_boot_delay(Duration::from_secs(60));
    let clock = Arc::new(ManualClock::default());
    let config = LocalMarketConfig {
        seed: 3,
        bidders: vec![bidder],
        node_register_delay: Duration::from_secs(10),
        ..LocalMarketConfig::default()
    };
    let market = LocalMarket::new(config, clock.clone()).unwrap();
    let receipt = rent(&market, "c1").await.unwrap();
    assert_eq!(
        market.guest_status(&receipt).await.unwrap(),
        GuestStatus::Booting
    );
    clock.advance(Duration::from_secs(30));
    assert_eq!(
        market.guest_status(&receipt).await.unwrap(),
        GuestStatus::Started
    );
    clock.advance(Duration::from_secs(30));
    let on = market.guest_status(&receipt).await.unwrap();
    let address = on.address().unwrap().to_owned();
    assert!(matches!(on, GuestStatus::OnNetwork { .. }));
    assert!(address.starts_with("10."));
    clock.advance(Duration::from_secs(10));
    match market.guest_status(&receipt).await.unwrap() {
        GuestStatus::NodeRegistered {
            address: a,
            node_id,
        } => {
            assert_eq!(a.as_deref(), Some(address.as_str()));
            assert!(!node_id.is_empty());
        }
        other => panic!("expected NodeRegistered, got {other:?}"),
    }
    market.release(&receipt).await.unwrap();
    assert_eq!(
        market.guest_status(&receipt).await.unwrap(),
        GuestStatus::Terminated
    );
}

/// Which of 20 contracts fail to boot, for one seed.
async fn failing_contracts(seed: u64) -> Vec<bool> {
    let bidder = LocalBidder::new("did:flaky", 5, "EUR")
        .with_capacity(100)
        .with_failure_rate_per_mille(500);
    let (market, _) = market_with(vec![bidder], seed);
    let mut failed = Vec::new();
    for i in 0..20 {
        let receipt = rent(&market, &format!("c{i}")).await.unwrap();
        let status = market.guest_status(&receipt).await.unwrap();
        if let GuestStatus::Failed { reason } = &status {
            assert!(reason.contains("did:flaky"), "{reason}");
        }
        failed.push(matches!(status, GuestStatus::Failed { .. }));
    }
    failed
}

#[tokio::test]
async fn boot_failures_are_the_same_for_a_seed_and_differ_across_seeds() {
    let first = failing_contracts(11).await;
    assert_eq!(first, failing_contracts(11).await);
    assert_ne!(first, failing_contracts(12).await);
    assert!(first.iter().any(|f| *f) && first.iter().any(|f| !*f));
}

#[tokio::test]
async fn a_failed_guest_frees_capacity_but_exists_until_released() {
    let bidder = LocalBidder::new("did:a", 5, "EUR").with_failure_rate_per_mille(1000);
    let (market, _) = market_with(vec![bidder], 1);
    let receipt = rent(&market, "c1").await.unwrap();
    assert!(matches!(
        market.guest_status(&receipt).await.unwrap(),
        GuestStatus::Failed { .. }
    ));
    assert_eq!(market.running_guests(), 0);
    assert!(market.lookup(&receipt).await.unwrap().is_some());
    market.release(&receipt).await.unwrap();
    assert!(market.lookup(&receipt).await.unwrap().is_none());
}

#[tokio::test]
async fn release_is_idempotent_and_lookup_after_release_is_none() {
    let (market, _) = market_with(vec![LocalBidder::new("did:a", 5, "EUR")], 1);
    let receipt = rent(&market, "c1").await.unwrap();
    // The local market knows its guests: a release is confirmed, not just acknowledged.
    for _ in 0..2 {
        assert_eq!(
            market.release(&receipt).await.unwrap(),
            ReleaseOutcome::Confirmed
        );
    }
    assert_eq!(market.release_calls(&receipt), 2);
    assert!(market.lookup(&receipt).await.unwrap().is_none());
    assert!(market.adopt(&receipt).await.unwrap_err().is_not_found());
    let never = Receipt {
        uri: "local://guests/g-unknown".to_owned(),
        cid: "sha256:00".to_owned(),
    };
    market.release(&never).await.unwrap();
    assert!(market.lookup(&never).await.unwrap().is_none());
    assert!(
        market
            .guest_status(&never)
            .await
            .unwrap_err()
            .is_not_found()
    );
}

#[tokio::test]
async fn forged_or_foreign_receipts_are_rejected() {
    let (market, _) = market_with(vec![LocalBidder::new("did:a", 5, "EUR")], 1);
    let receipt = rent(&market, "c1").await.unwrap();
    let forged = Receipt {
        cid: "sha256:deadbeef".to_owned(),
        ..receipt.clone()
    };
    let foreign = Receipt {
        uri: "https://market.example/guests/1".to_owned(),
        ..receipt.clone()
    };
    for bad in [&forged, &foreign] {
        for err in [
            market.release(bad).await.unwrap_err(),
            market.lookup(bad).await.unwrap_err(),
            market.adopt(bad).await.unwrap_err(),
            market.guest_status(bad).await.unwrap_err(),
        ] {
            assert_eq!(err.category(), "invalid_receipt");
            assert!(!err.is_retryable());
        }
    }
    assert_eq!(market.running_guests(), 1);
}

#[tokio::test]
async fn adopt_takes_over_a_running_guest() {
    let (market, _) = market_with(vec![LocalBidder::new("did:a", 5, "EUR")], 1);
    let receipt = rent(&market, "elsewhere").await.unwrap();
    let info = market.adopt(&receipt).await.unwrap();
    assert_eq!(info.receipt, receipt);
    assert_eq!(info.provider, "did:a");
    assert_eq!(
        info.contract,
        ContractKey::new("socialweb-system", "elsewhere")
    );
    assert!(info.status.is_on_network());
}

#[tokio::test]
async fn impossible_resources_get_no_bid_and_a_new_bidder_recovers() {
    let small = LocalBidder::new("did:small", 5, "EUR").with_max_cpus(4);
    let (market, _) = market_with(vec![small.clone()], 1);
    let id = market.publish_rfp(rfp("big", 64)).await.unwrap();
    assert!(market.collect_bids(&id).await.unwrap().is_empty());
    let zero = market.publish_rfp(rfp("zero", 0)).await.unwrap_err();
    assert_eq!(zero.category(), "invalid_request");

    market
        .set_bidders(vec![small, LocalBidder::new("did:big", 50, "EUR")])
        .unwrap();
    let bids = market.collect_bids(&id).await.unwrap();
    assert_eq!(bids.len(), 1);
    assert!(market.accept(&id, &bids[0]).await.is_ok());
    let duplicate = vec![
        LocalBidder::new("did:x", 1, "EUR"),
        LocalBidder::new("did:x", 1, "EUR"),
    ];
    assert_eq!(
        market.set_bidders(duplicate).unwrap_err().category(),
        "invalid_config"
    );
    assert_eq!(market.bidders().len(), 2);
}

#[tokio::test]
async fn injected_faults_are_retryable_and_change_nothing() {
    let (market, _) = market_with(vec![LocalBidder::new("did:a", 5, "EUR")], 1);
    let receipt = rent(&market, "c1").await.unwrap();
    market.fail_next(Operation::Release, 2);
    for _ in 0..2 {
        let err = market.release(&receipt).await.unwrap_err();
        assert!(err.is_retryable());
        assert_eq!(err.category(), "unavailable");
        assert!(market.lookup(&receipt).await.unwrap().is_some());
    }
    market.release(&receipt).await.unwrap();
    assert_eq!(market.release_calls(&receipt), 3);
    assert!(market.lookup(&receipt).await.unwrap().is_none());

    market.fail_next(Operation::Publish, 1);
    assert!(
        market
            .publish_rfp(rfp("c2", 2))
            .await
            .unwrap_err()
            .is_retryable()
    );
    assert_eq!(market.rfp_count(), 1);
    market.publish_rfp(rfp("c2", 2)).await.unwrap();
    assert_eq!(market.rfp_count(), 2);
}

#[tokio::test]
async fn a_new_instance_on_the_same_state_dir_finds_everything_again() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::default());
    let bidders = vec![LocalBidder::new("did:a", 5, "EUR").with_capacity(2)];
    let (kept, released, status) = {
        let market = persistent(dir.path(), bidders.clone(), clock.clone());
        let kept = rent(&market, "kept").await.unwrap();
        let released = rent(&market, "released").await.unwrap();
        market.release(&released).await.unwrap();
        market.publish_rfp(rfp("open", 2)).await.unwrap();
        let status = market.guest_status(&kept).await.unwrap();
        // Killed, not dropped: nothing runs on the way out, as after a kill.
        std::mem::forget(market);
        (kept, released, status)
    };
    let market = persistent(dir.path(), bidders, clock);
    assert_eq!(
        market.guest_status(&released).await.unwrap(),
        GuestStatus::Terminated,
        "a late status poll of a released guest"
    );
    assert_eq!(market.rfp_count(), 3);
    assert_eq!(market.guest_status(&kept).await.unwrap(), status);
    assert_eq!(market.adopt(&kept).await.unwrap().receipt, kept);
    assert!(market.lookup(&released).await.unwrap().is_none());
    assert_eq!(market.running_guests_of("did:a"), 1);
    // Publishing again after the restart is the same RFP, and accepting gives the same receipt.
    assert_eq!(rent(&market, "kept").await.unwrap(), kept);
    assert_eq!(
        market.rfps_published(&ContractKey::new("socialweb-system", "kept")),
        1
    );
}

#[tokio::test]
async fn a_corrupt_state_dir_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("local-market.json"), "[]").unwrap();
    let config = LocalMarketConfig {
        state_dir: Some(dir.path().to_owned()),
        ..LocalMarketConfig::default()
    };
    let Err(err) = LocalMarket::new(config, Arc::new(ManualClock::default())) else {
        panic!("a corrupt state must not open as an empty market");
    };
    assert_eq!(err.category(), "corrupt_state");
}

#[tokio::test]
async fn the_market_is_usable_as_a_shared_trait_object() {
    let (market, _) = market_with(
        vec![LocalBidder::new("did:a", 5, "EUR").with_capacity(4)],
        1,
    );
    let market: Arc<dyn Market> = Arc::new(market);
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let market = market.clone();
            tokio::spawn(async move { rent(market.as_ref(), &format!("c{i}")).await })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_batch_of_guest_statuses_answers_each_receipt_as_one_call_would() {
    let (market, clock) = market_with(
        vec![LocalBidder::new("did:a", 5, "EUR").with_capacity(3)],
        1,
    );
    let running = rent(&market, "c1").await.unwrap();
    let lost = rent(&market, "c2").await.unwrap();
    let released = rent(&market, "c3").await.unwrap();
    clock.advance(Duration::from_secs(1));
    assert!(market.lose_node(&lost).unwrap());
    market.release(&released).await.unwrap();
    let forged = Receipt {
        cid: "sha256:deadbeef".to_owned(),
        ..running.clone()
    };
    let unknown = Receipt {
        uri: format!("{}-gone", running.uri),
        ..running.clone()
    };
    let receipts = [running, lost, released, forged, unknown];

    let batch = market.guest_statuses(&receipts).await;
    let mut one_by_one = Vec::new();
    for receipt in &receipts {
        one_by_one.push(market.guest_status(receipt).await);
    }

    let shown = |answers: &[Result<GuestStatus, MarketError>]| {
        answers
            .iter()
            .map(|a| match a {
                Ok(status) => format!("{status:?}"),
                Err(error) => error.category().to_owned(),
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(shown(&batch), shown(&one_by_one));
    assert!(matches!(batch[0], Ok(GuestStatus::NodeRegistered { .. })));
    assert!(matches!(batch[1], Ok(GuestStatus::OnNetwork { .. })));
    assert_eq!(batch[2].as_ref().ok(), Some(&GuestStatus::Terminated));
    assert!(batch[4].as_ref().is_err_and(MarketError::is_not_found));
}
