//! `manager dev --market atproto-fake`: the whole product on one machine over
//! real HTTP, against an atproto market faked in-process (plan 0013, R4-DEV).

use std::time::Duration;

use api::{ComputeContract, NodeClaim, NodeClaimPhase, Requester};
use controllers::StopSignal;
use kube::api::{Api, PostParams};
use manager::dev::{self, DevArgs, DevMarket};
use manager::shutdown::ShutdownArgs;
use manager::wiring::ControllerOptions;
use testkit::ListAll;
use testkit::eventually;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dev_environment_on_the_fake_atproto_market_joins_a_claim() {
    let env = dev::start(&dev_args(None, DevMarket::AtprotoFake), StopSignal::never())
        .await
        .unwrap();
    let controllers = tokio::spawn(env.controllers.done);
    let client = env.client.clone();
    let namespace = api::DEFAULT_CONTRACT_NAMESPACE;
    let requesters: Api<Requester> = Api::namespaced(client.clone(), namespace);
    assert!(
        requesters.get_opt("local").await.unwrap().is_none(),
        "only the atproto Requester runs the namespace"
    );
    eventually("the Requester atproto ready", || async {
        let requester = requesters.get("atproto").await.ok()?;
        let ready = requester
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.reason == "MarketConfigured").then_some(())
    })
    .await;

    testkit::create_namespaces(&client, &["tenant-a"]).await;
    testkit::create_cluster(&client, "tenant-a", "staging", "did:plc:tenant").await;
    let claims: Api<NodeClaim> = Api::namespaced(client.clone(), "tenant-a");
    let mut claim = testkit::node_claim("tenant-a", "worker-1", "staging", 2);
    claim.spec.resources.memory = 4096;
    claim.spec.resources.disk = 40;
    claims.create(&PostParams::default(), &claim).await.unwrap();
    eventually("worker-1 Joined", || async {
        let phase = claims.get("worker-1").await.ok()?.status?.phase;
        (phase == Some(NodeClaimPhase::Joined)).then_some(())
    })
    .await;

    let atproto = env.atproto.as_ref().unwrap();
    let contracts: Api<ComputeContract> = Api::namespaced(client.clone(), namespace);
    let contract = contracts.list_all().await.remove(0);
    let receipt = contract.status.unwrap().receipt.unwrap();
    let bidders: Vec<&str> = atproto.market.bidders.iter().map(|b| b.did()).collect();
    assert!(
        bidders
            .iter()
            .any(|did| receipt.uri.starts_with(&format!("at://{did}/"))),
        "{} is a receipt of a fake bidder",
        receipt.uri
    );
    let running: u64 = atproto
        .market
        .bidders
        .iter()
        .map(|b| b.counters().running)
        .sum();
    assert_eq!(running, 1, "one machine rented over HTTP");
    controllers.abort();
}

/// `dev` options on `data_dir` (else in memory) and `market`, everything else the defaults.
fn dev_args(data_dir: Option<&std::path::Path>, market: DevMarket) -> DevArgs {
    DevArgs {
        port: 0,
        data_dir: data_dir.map(std::path::Path::to_owned),
        kubeconfig_out: None,
        debug_endpoints: false,
        controllers: ControllerOptions::default(),
        shutdown: ShutdownArgs {
            shutdown_deadline: Duration::from_secs(5),
        },
        market,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_of_the_local_market_is_refused_on_the_atproto_one_with_what_to_do() {
    let data_dir = tempfile::tempdir().unwrap();
    let local = dev::start(
        &dev_args(Some(data_dir.path()), DevMarket::Local),
        StopSignal::never(),
    )
    .await
    .unwrap();
    drop(local);

    // Its Requester `local` would run the namespace beside `atproto`: refused, saying how out.
    let error = dev::start(
        &dev_args(Some(data_dir.path()), DevMarket::AtprotoFake),
        StopSignal::never(),
    )
    .await
    .err()
    .expect("the atproto market refused on a data dir with the local Requester");
    let message = error.to_string();
    assert!(
        message.contains("Requester socialweb-system/local") && message.contains("delete it"),
        "{message}"
    );

    // The local market still opens on it, its Requester kept.
    let again = dev::start(
        &dev_args(Some(data_dir.path()), DevMarket::Local),
        StopSignal::never(),
    )
    .await
    .unwrap();
    let requesters: Api<Requester> =
        Api::namespaced(again.client.clone(), api::DEFAULT_CONTRACT_NAMESPACE);
    assert!(requesters.get_opt("local").await.unwrap().is_some());
}
