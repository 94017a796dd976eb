//! The ComputeContract release finalizer end to end on the embedded API server,
//! with the real Infra and Requester controllers and the local market: however
//! a contract is deleted (directly, or by the garbage collector in a foreground
//! deletion of its Infra), its guest is released before the object goes, and a
//! contract that never rented anything goes at once.

use crate::infra_support;
use crate::requester_support;

use std::sync::Arc;
use std::time::Duration;

use api::names::CONTRACT_RELEASE_FINALIZER;
use api::{ComputeContract, ComputeContractPhase as Phase, Infra, InfraPhase};
use apiserver::store::ChangeType;
use apiserver::testing::HistoryEntry;
use controllers::requester::conditions as cond;
use controllers::{SharedCaches, infra, requester};
use infra_support::e2e::CONTRACTS;
use infra_support::e2e::served_spec_with;
use infra_support::{INFRA, cc_name};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use market::Market;
use requester_support::{Env, NS, bidder, fast_timing, key, market_receipt, phase_of};
use testkit::ListAll;
use tokio::task::JoinHandle;

const WAIT: Duration = Duration::from_secs(15);

/// The Infra and Requester controllers over one set of shared caches, as the
/// manager wires them; aborted when dropped.
struct Controllers(Vec<JoinHandle<()>>);

impl Controllers {
    fn start(env: &Env) -> Self {
        let markets = Arc::new(requester::Markets::with_injected(
            Arc::clone(&env.clock),
            controllers::market_adapter::Injected::Local(Arc::clone(&env.market)),
        ));
        let mut requester_ctx =
            requester::Context::new(env.client.clone(), Arc::clone(&env.clock), markets, NS);
        requester_ctx.timing = fast_timing();
        let infra_ctx = infra::IDENTITY.context(env.client.clone(), Arc::clone(&env.clock), NS);
        let caches = SharedCaches::new(env.client.clone(), NS);
        let infra_run = infra::controller(Arc::new(infra_ctx), &caches);
        let requester_run = requester::controller(Arc::new(requester_ctx), &caches);
        Self(vec![
            tokio::spawn(infra_run),
            tokio::spawn(requester_run),
            tokio::spawn(caches.run()),
        ])
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// A server, the two controllers, and the Requester `root` with one bidder.
async fn started_with_a_requester() -> (Env, Controllers) {
    let env = Env::start().await;
    let controllers = Controllers::start(&env);
    env.create_requester("root", vec![bidder("did:web:a", 5)], 1)
        .await;
    (env, controllers)
}

/// [`Env::create_contract`], then waits (up to [`WAIT`]) until it is Deployed.
async fn deployed(env: &Env, name: &str, ttl: u32) -> ComputeContract {
    env.create_contract(name, ttl).await;
    env.wait_contract(name, WAIT, |c| phase_of(c) == Some(Phase::Deployed))
        .await
}

/// Polls until the object with `uid` named `name` is gone from the server.
async fn wait_gone(env: &Env, name: &str, uid: &str) {
    env.wait_until(&format!("contract {name} to go"), WAIT, async || {
        env.contracts()
            .get_opt(name)
            .await
            .unwrap()
            .is_none_or(|c| c.uid().as_deref() != Some(uid))
    })
    .await;
}

/// The server's writes to the contract object with `uid`, in order.
fn writes_of(env: &Env, uid: &str) -> Vec<HistoryEntry> {
    env.server
        .history()
        .into_iter()
        .filter(|e| e.resource == CONTRACTS && e.object()["metadata"]["uid"] == uid)
        .collect()
}

/// The object went last, as Released, and a write had said Released before.
fn assert_released_before_gone(env: &Env, name: &str, uid: &str) {
    let writes = writes_of(env, uid);
    let last = writes.last().expect("the contract was written");
    assert_eq!(
        last.change,
        ChangeType::Deleted,
        "{name}: last write is the delete"
    );
    assert_eq!(
        last.object()["status"]["phase"],
        "Released",
        "{name} went while not Released"
    );
    let released_at = writes
        .iter()
        .position(|e| {
            e.change != ChangeType::Deleted && e.object()["status"]["phase"] == "Released"
        })
        .unwrap_or_else(|| panic!("{name}: no Released status before its delete"));
    assert!(released_at < writes.len() - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directly_deleted_deployed_contract_releases_its_guest_before_it_goes() {
    let (env, _controllers) = started_with_a_requester().await;
    let deployed = deployed(&env, "direct", 3600).await;
    let receipt = market_receipt(&deployed);
    let uid = deployed.uid().unwrap();
    assert_eq!(env.market.running_guests(), 1);

    // kubectl delete computecontract direct
    env.contracts()
        .delete("direct", &DeleteParams::default())
        .await
        .unwrap();
    wait_gone(&env, "direct", &uid).await;

    assert!(
        env.market.release_calls(&receipt) >= 1,
        "no release was sent"
    );
    assert_eq!(
        env.market.running_guests(),
        0,
        "the guest outlived its contract"
    );
    assert_eq!(env.market.lookup(&receipt).await.unwrap(), None);
    assert_released_before_gone(&env, "direct", &uid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_infra_deletion_releases_every_guest_before_its_contract_goes() {
    let (env, _controllers) = started_with_a_requester().await;
    let infras: Api<Infra> = Api::namespaced(env.client.clone(), NS);
    let mut object = Infra::new(
        INFRA,
        served_spec_with(&env.client, &["node-a", "node-b"]).await,
    );
    object.metadata.namespace = Some(NS.to_owned());
    infras
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    env.wait_until("the Infra to be Deployed", WAIT, async || {
        infras
            .get(INFRA)
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.phase == Some(InfraPhase::Deployed) && s.ready_contracts == 2)
    })
    .await;
    let mut held = Vec::new();
    for entry in ["node-a", "node-b"] {
        let contract = env.contracts().get(&cc_name(entry)).await.unwrap();
        assert_eq!(phase_of(&contract), Some(Phase::Deployed));
        assert!(
            contract
                .finalizers()
                .iter()
                .any(|f| f == CONTRACT_RELEASE_FINALIZER),
            "the Infra controller creates contracts with the release finalizer"
        );
        held.push((
            contract.name_any(),
            contract.uid().unwrap(),
            market_receipt(&contract),
        ));
    }
    assert_eq!(env.market.running_guests(), 2);

    // kubectl delete infra --cascade=foreground: the garbage collector deletes
    // the contracts while the Infra's own release finalizer has just started.
    infras
        .delete(INFRA, &DeleteParams::foreground())
        .await
        .unwrap();
    env.wait_until("the Infra to go", WAIT, async || {
        infras.get_opt(INFRA).await.unwrap().is_none()
    })
    .await;

    for (name, uid, receipt) in &held {
        wait_gone(&env, name, uid).await;
        assert!(
            env.market.release_calls(receipt) >= 1,
            "{name}: no release was sent"
        );
        assert_eq!(
            env.market.lookup(receipt).await.unwrap(),
            None,
            "{name}: guest lives"
        );
        assert_released_before_gone(&env, name, uid);
    }
    assert_eq!(
        env.market.running_guests(),
        0,
        "a guest outlived its contract"
    );
    assert!(env.contracts().list_all().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_deleted_before_it_got_a_receipt_goes_at_once_without_a_release() {
    let env = Env::start().await;
    let _controllers = Controllers::start(&env);

    // No Requester yet: the contract waits in Pending.
    env.create_contract("unrun", 3600).await;
    let pending = env
        .wait_contract("unrun", WAIT, |c| phase_of(c) == Some(Phase::Pending))
        .await;
    // A Requester whose market has no bidder: the contract bids and fails.
    env.create_requester("root", vec![], 1).await;
    env.create_contract("unbid", 3600).await;
    let failed = env
        .wait_contract("unbid", WAIT, |c| phase_of(c) == Some(Phase::Failed))
        .await;

    for contract in [pending, failed] {
        let name = contract.name_any();
        let uid = contract.uid().unwrap();
        env.contracts()
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
        wait_gone(&env, &name, &uid).await;
        assert_released_before_gone(&env, &name, &uid);
        let last = writes_of(&env, &uid).pop().unwrap().object();
        assert_eq!(
            last["status"]["conditions"].as_array().map(|c| {
                c.iter()
                    .any(|c| c["type"] == cond::RELEASED && c["reason"] == cond::NOTHING_RENTED)
            }),
            Some(true),
            "{name}: released as never rented"
        );
        assert_eq!(env.market.guests_rented(&key(&name)), 0);
    }
    assert_eq!(env.market.running_guests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ttl_still_deletes_a_finished_ownerless_contract_that_holds_the_finalizer() {
    let (env, _controllers) = started_with_a_requester().await;
    let deployed = deployed(&env, "short", 1).await;
    let uid = deployed.uid().unwrap();
    env.release("short").await;
    // Released, then deleted by the TTL one second later, then let go by the finalizer.
    wait_gone(&env, "short", &uid).await;
    assert_released_before_gone(&env, "short", &uid);
    assert_eq!(env.market.running_guests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directly_deleted_infra_contract_is_replaced_by_a_new_machine() {
    let (env, _controllers) = started_with_a_requester().await;
    let infras: Api<Infra> = Api::namespaced(env.client.clone(), NS);
    let mut object = Infra::new(INFRA, served_spec_with(&env.client, &["node-a"]).await);
    object.metadata.namespace = Some(NS.to_owned());
    infras
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let name = cc_name("node-a");
    let first = env
        .wait_contract(&name, WAIT, |c| phase_of(c) == Some(Phase::Deployed))
        .await;
    let uid = first.uid().unwrap();
    env.contracts()
        .delete(&name, &DeleteParams::default())
        .await
        .unwrap();
    let second = env
        .wait_contract(&name, WAIT, |c| {
            c.uid().as_deref() != Some(uid.as_str())
                && matches!(phase_of(c), Some(Phase::Deployed | Phase::Failed))
        })
        .await;
    assert_eq!(
        phase_of(&second),
        Some(Phase::Deployed),
        "{:?}",
        second.status
    );
    assert_ne!(market_receipt(&second), market_receipt(&first));
    assert_eq!(env.market.running_guests(), 1);
}
