//! The atproto market's own account of whether it can rent: the Requester's
//! conditions are made from it (plan 0013, R2-SEAM).

use crate::atproto_support;

use atproto_fake::{Fault, Service};
use atproto_support::{Harness, usd_hourly};
use market::atproto::{AtprotoMarket, Unhealthy};

#[tokio::test]
async fn a_working_market_names_its_account_and_bidders() {
    let harness = Harness::start(vec![usd_hourly(0.5), usd_hourly(0.7)]).await;
    let health = harness.market().health().await.unwrap();
    assert_eq!(health.did, harness.requester);
    let mut expected: Vec<String> = harness.bidders.iter().map(|b| b.did().to_owned()).collect();
    expected.sort();
    assert_eq!(health.bidders, expected);
    assert!(health.problems.is_empty(), "{:?}", health.problems);
}

#[tokio::test]
async fn a_wrong_app_password_is_refused_credentials() {
    let mut harness = Harness::start(vec![usd_hourly(0.5)]).await;
    harness.config.app_password = "not-the-password".to_owned().into();
    let Err(Unhealthy::Credentials(why)) = harness.market().health().await else {
        panic!("a wrong password passed");
    };
    assert!(why.contains("401"), "{why}");
    assert!(
        !why.contains("not-the-password"),
        "the password leaked: {why}"
    );
}

#[tokio::test]
async fn a_pds_that_does_not_answer_is_unreachable_and_a_later_answer_heals() {
    let harness = Harness::start(vec![usd_hourly(0.5)]).await;
    harness.net.faults.once(
        Service::Pds,
        "com.atproto.server.createSession",
        Fault::internal(),
    );
    let market = harness.market();
    assert!(matches!(
        market.health().await,
        Err(Unhealthy::Unreachable(_))
    ));
    market.health().await.unwrap();

    let mut nowhere = harness.config.clone();
    nowhere.pds_url = "http://127.0.0.1:9".to_owned();
    let market = AtprotoMarket::new(
        nowhere,
        harness.clock.clone(),
        market::atproto::Inbox::default(),
    )
    .unwrap();
    assert!(matches!(
        market.health().await,
        Err(Unhealthy::Unreachable(_))
    ));
}

#[tokio::test]
async fn no_bidder_found_says_why_for_each() {
    let mut harness = Harness::start(vec![usd_hourly(0.5)]).await;
    harness.config.bidders = vec!["did:plc:nobodyhereatall".to_owned()];
    let Err(Unhealthy::NoBidders(why)) = harness.market().health().await else {
        panic!("healthy without a bidder");
    };
    assert!(why.contains("did:plc:nobodyhereatall"), "{why}");
}
