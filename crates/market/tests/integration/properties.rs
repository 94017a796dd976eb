//! Property: whatever a Requester does, and however often the manager restarts
//! on the same state directory, the local market never runs more guests than
//! its bidders' capacity, never opens a second RFP or rents a second guest for
//! a contract, and a released guest stays gone.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use market::{
    ContractKey, LocalBidder, LocalMarket, LocalMarketConfig, Location, ManualClock, Market,
    Receipt, RequestForProposal, Resources, cheapest,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    Publish(u8),
    Accept(u8),
    Release(u8),
    Advance(u16),
    Restart,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..6_u8).prop_map(Step::Publish),
        (0..6_u8).prop_map(Step::Accept),
        (0..6_u8).prop_map(Step::Release),
        (0..120_u16).prop_map(Step::Advance),
        Just(Step::Restart),
    ]
}

fn request(contract: u8) -> RequestForProposal {
    RequestForProposal {
        contract: ContractKey::new("ns", format!("c{contract}")),
        resources: Resources {
            cpus: 1 + u32::from(contract % 3),
            memory_mib: 1024,
            disk_gib: 10,
            network_mbps: 10,
        },
        location: Location::default(),
        owner_did: "did:owner".to_owned(),
    }
}

async fn run(seed: u64, capacities: Vec<u32>, steps: Vec<Step>) -> Result<(), TestCaseError> {
    let bidders: Vec<LocalBidder> = capacities
        .iter()
        .enumerate()
        .map(|(i, capacity)| {
            LocalBidder::new(format!("did:b{i}"), 10 - i as u64, "EUR")
                .with_capacity(*capacity)
                .with_boot_delay(Duration::from_secs(30))
                .with_failure_rate_per_mille(200)
        })
        .collect();
    let total: usize = capacities.iter().map(|c| *c as usize).sum();
    let clock = Arc::new(ManualClock::default());
    let dir = tempfile::tempdir().unwrap();
    let config = LocalMarketConfig {
        seed,
        bidders: bidders.clone(),
        state_dir: Some(dir.path().to_owned()),
        ..LocalMarketConfig::default()
    };
    let mut market = LocalMarket::new(config.clone(), clock.clone()).unwrap();
    let mut receipts: Vec<Option<Receipt>> = vec![None; 6];
    let mut released: BTreeSet<Receipt> = BTreeSet::new();
    // Per contract, how many of its guests were released: each opens a new round.
    let mut rounds = [0_usize; 6];
    for step in steps {
        match step {
            Step::Publish(c) => {
                market.publish_rfp(request(c)).await.unwrap();
            }
            Step::Accept(c) => {
                let id = market.publish_rfp(request(c)).await.unwrap();
                let bids = market.collect_bids(&id).await.unwrap();
                if let Some(bid) = cheapest(&bids) {
                    let receipt = market.accept(&id, bid).await.unwrap();
                    let slot = &mut receipts[usize::from(c)];
                    match slot {
                        // Its guest was released: this is a new round, a new machine.
                        Some(known) if released.contains(known) => {
                            prop_assert_ne!(&*known, &receipt, "a released guest handed out again");
                            *slot = Some(receipt);
                        }
                        Some(known) => {
                            prop_assert_eq!(&*known, &receipt, "a second guest for one contract");
                        }
                        None => *slot = Some(receipt),
                    }
                }
            }
            Step::Release(c) => {
                if let Some(receipt) = &receipts[usize::from(c)] {
                    market.release(receipt).await.unwrap();
                    if released.insert(receipt.clone()) {
                        rounds[usize::from(c)] += 1;
                    }
                }
            }
            Step::Advance(seconds) => clock.advance(Duration::from_secs(u64::from(seconds))),
            Step::Restart => {
                drop(market);
                market = LocalMarket::new(config.clone(), clock.clone()).unwrap();
            }
        }
        prop_assert!(market.running_guests() <= total);
        for (bidder, capacity) in bidders.iter().zip(&capacities) {
            prop_assert!(market.running_guests_of(&bidder.did) <= *capacity as usize);
        }
        for receipt in &released {
            prop_assert!(market.lookup(receipt).await.unwrap().is_none());
        }
        prop_assert!(market.rfp_count() <= 6 + rounds.iter().sum::<usize>());
        for (c, closed) in rounds.iter().enumerate() {
            // One open request and at most one running machine per contract at a time.
            let contract = ContractKey::new("ns", format!("c{c}"));
            prop_assert!(market.rfps_published(&contract) <= closed + 1);
            prop_assert!(market.guests_rented(&contract) <= closed + 1);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn running_guests_never_exceed_capacity_and_released_stay_gone(
        seed in any::<u64>(),
        capacities in proptest::collection::vec(0..3_u32, 1..4),
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        runtime.block_on(run(seed, capacities, steps))?;
    }
}
