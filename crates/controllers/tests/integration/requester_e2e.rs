//! The Requester controller end to end on the embedded API server: contracts
//! are rented, fail with a message a person can act on, recover, and are
//! released.

use crate::requester_support;

use std::time::Duration;

use api::{ComputeContractPhase as Phase, names};
use apiserver::store::ChangeType;
use controllers::requester::Timing;
use kube::ResourceExt;
use requester_support::*;

#[tokio::test]
async fn a_contract_is_rented_deployed_and_the_receipt_recorded_twice() {
    let (env, controller) = Env::running().await;
    env.create_requester(
        "root",
        vec![bidder("did:web:cheap", 5), bidder("did:web:dear", 9)],
        1,
    )
    .await;
    let c = env.create_deployed("c1", 3600).await;
    let status = c.status.clone().unwrap();
    let winner = status.winner.unwrap();
    assert_eq!((winner.bidder.as_str(), winner.cost), ("did:web:cheap", 5));
    let guest = status.guest.unwrap();
    assert_eq!(guest.provider, "did:web:cheap");
    assert!(guest.address.unwrap().starts_with("10."));
    let receipt = status.receipt.unwrap();
    let annotated = c.metadata.annotations.as_ref().unwrap()[names::RECEIPT_ANNOTATION].clone();
    assert_eq!(
        serde_json::from_str::<api::Receipt>(&annotated).unwrap(),
        receipt
    );
    assert_eq!(env.market.rfps_published(&key("c1")), 1);
    assert_eq!(env.market.guests_rented(&key("c1")), 1);
    assert_eq!(
        env.remembered_rfps("root").await,
        0,
        "a contract past its bidding leaves no RFP id behind"
    );
    // The Requester reports its market and holds the root finalizer.
    env.wait_until("requester status", Duration::from_secs(5), async || {
        let r = env.requesters().get("root").await.unwrap();
        let ready = r
            .status
            .as_ref()
            .and_then(|s| api::find_condition(&s.conditions, "Ready").map(api::Condition::is_true));
        ready == Some(true)
            && r.status.as_ref().unwrap().contracts == 1
            && r.metadata
                .finalizers
                .unwrap_or_default()
                .contains(&names::REQUESTER_FINALIZER.to_owned())
    })
    .await;
    // Converged: no further writes to the contract.
    let before = env
        .contracts()
        .get("c1")
        .await
        .unwrap()
        .metadata
        .resource_version;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = env
        .contracts()
        .get("c1")
        .await
        .unwrap()
        .metadata
        .resource_version;
    assert_eq!(before, after, "a Deployed contract is not rewritten");
    controller.abort();
}

#[tokio::test]
async fn a_bidder_that_cannot_boot_fails_the_contract_and_its_guest_is_released() {
    let (env, controller) = Env::running().await;
    let mut broken = bidder("did:web:broken", 3);
    broken.failure_rate = 1000;
    env.create_requester("root", vec![broken], 1).await;
    env.create_contract("c1", 3600).await;
    let c = env
        .wait_contract("c1", Duration::from_secs(10), |c| {
            phase_of(c) == Some(Phase::Failed)
                && c.status.as_ref().is_some_and(|s| {
                    api::find_condition(&s.conditions, "Released")
                        .is_some_and(api::Condition::is_true)
                })
        })
        .await;
    let message = c.status.as_ref().unwrap().message.clone().unwrap();
    assert!(message.contains("did:web:broken"), "{message}");
    assert!(message.contains("boot"), "{message}");
    assert!(env.market.release_calls(&market_receipt(&c)) >= 1);
    assert_eq!(env.market.running_guests(), 0);
    // The failure is also an Event on the contract, naming the bidder.
    let events: kube::Api<k8s_openapi::api::events::v1::Event> =
        kube::Api::namespaced(env.client.clone(), NS);
    env.wait_until("a BootFailed event", Duration::from_secs(5), async || {
        events
            .list(&kube::api::ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("BootFailed")
                    && e.type_.as_deref() == Some("Warning")
                    && e.note
                        .as_deref()
                        .is_some_and(|n| n.contains("did:web:broken"))
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("c1")
            })
    })
    .await;
    controller.abort();
}

#[tokio::test]
async fn no_bids_fails_and_recovers_when_a_bidder_appears() {
    let (env, controller) = Env::running().await;
    env.create_requester("root", vec![], 1).await;
    // A market nobody bids on is not ready, and says why.
    env.wait_until(
        "root says it has no bidder",
        Duration::from_secs(5),
        async || {
            let root = env.requesters().get("root").await.unwrap();
            root.status.as_ref().is_some_and(|s| {
                api::find_condition(&s.conditions, "Ready").is_some_and(|c| {
                    !c.is_true() && c.reason == "NoBidders" && c.message.contains("bidders")
                })
            })
        },
    )
    .await;
    env.create_contract("c1", 3600).await;
    let c = env.wait_phase("c1", Phase::Failed).await;
    let message = c.status.as_ref().unwrap().message.clone().unwrap();
    assert!(message.contains("no bidder had capacity"), "{message}");
    assert!(
        message.contains("2 cpus") && message.contains("DE"),
        "{message}"
    );
    assert_eq!(
        env.remembered_rfps("root").await,
        1,
        "a contract that may bid again keeps its RFP id"
    );
    env.set_bidders("root", vec![bidder("did:web:late", 4)])
        .await;
    let c = env.wait_phase("c1", Phase::Deployed).await;
    let root = env.requesters().get("root").await.unwrap();
    let ready = api::find_condition(&root.status.as_ref().unwrap().conditions, "Ready").unwrap();
    assert_eq!(
        (ready.is_true(), ready.reason.as_str()),
        (true, "MarketConfigured")
    );
    assert_eq!(c.status.unwrap().winner.unwrap().bidder, "did:web:late");
    assert_eq!(
        env.market.rfps_published(&key("c1")),
        1,
        "the same RFP, collected again"
    );
    controller.abort();
}

#[tokio::test]
async fn a_contract_deleted_before_any_bid_leaves_no_rfp_id_behind() {
    let (env, controller) = Env::running().await;
    env.create_requester("root", vec![], 1).await;
    env.create_contract("c1", 3600).await;
    env.wait_phase("c1", Phase::Failed).await;
    assert_eq!(env.remembered_rfps("root").await, 1);
    env.contracts()
        .delete("c1", &Default::default())
        .await
        .unwrap();
    env.wait_until("c1 gone", Duration::from_secs(10), async || {
        env.contracts().get_opt("c1").await.unwrap().is_none()
    })
    .await;
    assert_eq!(
        env.remembered_rfps("root").await,
        0,
        "the RFP id goes with the release finalizer"
    );
    controller.abort();
}

#[tokio::test]
async fn release_is_sent_confirmed_and_the_finished_contract_expires() {
    let (env, controller) = Env::running_with_root().await;
    let deployed = env.create_deployed("c1", 1).await;
    let receipt = market_receipt(&deployed);
    let uid = deployed.uid().unwrap();
    env.release("c1").await;
    // Ownerless and finished: deleted ttlSecondsAfterFinished (1 s) after its
    // completionTime. That time is in whole seconds, so the Released object
    // may live only milliseconds: a poll for it can miss it on a busy
    // machine. The server's history shows every state it had.
    env.wait_until(
        "release and ttl deletion",
        Duration::from_secs(16),
        async || env.contracts().get_opt("c1").await.unwrap().is_none(),
    )
    .await;
    let writes: Vec<_> = env
        .server
        .history()
        .into_iter()
        .filter(|e| {
            e.resource.ends_with("/computecontracts") && e.object()["metadata"]["uid"] == uid
        })
        .collect();
    let released = writes
        .iter()
        .find(|e| e.change != ChangeType::Deleted && e.object()["status"]["phase"] == "Released")
        .expect("a Released status was written")
        .object();
    let time = |t: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(t.as_str().expect("a time")).unwrap()
    };
    let completed = time(&released["status"]["completionTime"]);
    let gone = writes.last().unwrap();
    assert_eq!(gone.change, ChangeType::Deleted);
    assert_eq!(gone.object()["status"]["phase"], "Released");
    let deleted = time(&gone.object()["metadata"]["deletionTimestamp"]);
    assert!(
        deleted >= completed + chrono::Duration::seconds(1),
        "deleted at {deleted}, before its TTL ran out (completed {completed})"
    );
    assert!(env.market.release_calls(&receipt) >= 1);
    assert_eq!(env.market.running_guests(), 0);
    controller.abort();
}

#[tokio::test]
async fn a_contract_without_a_requester_waits_and_says_so() {
    let (env, controller) = Env::running().await;
    env.create_contract("c1", 3600).await;
    let c = env.wait_ready_reason("c1", "NoRequester").await;
    assert_eq!(phase_of(&c), Some(Phase::Pending));
    env.create_requester("root", vec![bidder("did:web:a", 5)], 1)
        .await;
    env.wait_phase("c1", Phase::Deployed).await;
    controller.abort();
}

#[tokio::test]
async fn max_in_flight_holds_contracts_in_pending_until_a_slot_frees() {
    let (env, controller) = Env::running().await;
    // An hour's bid window holds c1 in flight (Bidding) until the test has
    // seen c2 wait: a one-second window can close before a busy machine has
    // looked.
    env.create_requester("root", vec![bidder("did:web:a", 5)], 3600)
        .await;
    let patch_spec = async |spec: serde_json::Value| {
        env.requesters()
            .patch(
                "root",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(serde_json::json!({ "spec": spec })),
            )
            .await
            .unwrap();
    };
    patch_spec(serde_json::json!({"maxInFlight": 1})).await;
    env.create_contract("c1", 3600).await;
    env.wait_phase("c1", Phase::Bidding).await;
    env.create_contract("c2", 3600).await;
    let waiting = env.wait_ready_reason("c2", "MaxInFlight").await;
    assert_eq!(phase_of(&waiting), Some(Phase::Pending));
    assert_eq!(env.market.rfps_published(&key("c2")), 0);
    // c1's window closes: it is Deployed, and its slot frees for c2.
    patch_spec(serde_json::json!({"bidWindowSeconds": 1})).await;
    env.wait_phase("c1", Phase::Deployed).await;
    env.wait_phase("c2", Phase::Deployed).await;
    controller.abort();
}

/// The count of a burst is written late (at most once per 2 s while only the
/// count moves), never lost: the last contract of the burst is counted.
#[tokio::test]
async fn a_burst_of_contracts_ends_counted_in_the_requester_status() {
    let (env, controller) = Env::running_with_root().await;
    for n in 0..6 {
        env.create_contract(&format!("c{n}"), 3600).await;
    }
    env.wait_until(
        "six contracts counted",
        Duration::from_secs(10),
        async || {
            let r = env.requesters().get("root").await.unwrap();
            r.status.is_some_and(|s| s.contracts == 6)
        },
    )
    .await;
    controller.abort();
}

#[tokio::test]
async fn the_oldest_requester_runs_the_namespace_and_a_newer_one_says_so() {
    let (env, controller) = Env::running().await;
    env.create_requester("first", vec![bidder("did:web:a", 5)], 1)
        .await;
    // Creation timestamps have whole-second precision: make "second" younger.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    env.create_requester("second", vec![bidder("did:web:b", 1)], 1)
        .await;
    env.wait_until("second is superseded", Duration::from_secs(5), async || {
        let r = env.requesters().get("second").await.unwrap();
        r.status.as_ref().is_some_and(|s| {
            api::find_condition(&s.conditions, "Ready")
                .is_some_and(|c| c.reason == "Superseded" && c.message.contains("first"))
        })
    })
    .await;
    let c = env.create_deployed("c1", 3600).await;
    assert_eq!(
        c.status.unwrap().winner.unwrap().bidder,
        "did:web:a",
        "first's bidders"
    );
    controller.abort();
}

#[tokio::test]
async fn a_contract_with_adopt_takes_over_a_running_guest_without_bidding() {
    use market::Market as _;
    let (env, controller) = Env::running_with_root().await;
    // A guest rented outside this contract, straight on the market.
    let mut rfp = controllers::market_adapter::request_for(&{
        let mut c = api::ComputeContract::new("elsewhere", contract_spec(3600));
        c.metadata.namespace = Some(NS.to_owned());
        c.into()
    });
    rfp.contract = key("elsewhere");
    env.wait_until(
        "the market has the bidder",
        Duration::from_secs(5),
        async || !env.market.bidders().is_empty(),
    )
    .await;
    let id = env.market.publish_rfp(rfp).await.unwrap();
    let bids = env.market.collect_bids(&id).await.unwrap();
    let receipt = env.market.accept(&id, &bids[0]).await.unwrap();
    let mut spec = contract_spec(3600);
    spec.adopt = Some(Box::new(api::Receipt {
        uri: receipt.uri.clone(),
        cid: receipt.cid.clone(),
    }));
    let mut adopted = api::ComputeContract::new("c1", spec);
    adopted.metadata.namespace = Some(NS.to_owned());
    adopted.metadata.finalizers = Some(vec![names::CONTRACT_RELEASE_FINALIZER.to_owned()]);
    env.contracts()
        .create(&kube::api::PostParams::default(), &adopted)
        .await
        .unwrap();
    let c = env.wait_phase("c1", Phase::Deployed).await;
    let status = c.status.unwrap();
    assert_eq!(status.receipt.unwrap().uri, receipt.uri);
    assert_eq!(status.winner.unwrap().bidder, "did:web:a");
    assert_eq!(
        env.market.publish_calls(&key("c1")),
        0,
        "no bidding for an adopted guest"
    );
    controller.abort();
}

#[tokio::test]
async fn a_requester_outside_the_contract_namespace_is_told_it_runs_nothing() {
    const ELSEWHERE: &str = "tenant-a";
    let env = Env::start().await;
    testkit::create_namespaces(&env.client, &[ELSEWHERE]).await;
    let controller = env.start_controller();
    env.create_requester("root", vec![bidder("did:web:a", 5)], 1)
        .await;
    let mut stray: api::Requester = env.requesters().get("root").await.unwrap();
    stray.metadata = kube::api::ObjectMeta {
        name: Some("stray".to_owned()),
        namespace: Some(ELSEWHERE.to_owned()),
        ..Default::default()
    };
    stray.status = None;
    let elsewhere: kube::Api<api::Requester> = kube::Api::namespaced(env.client.clone(), ELSEWHERE);
    elsewhere
        .create(&kube::api::PostParams::default(), &stray)
        .await
        .unwrap();
    env.wait_until(
        "the stray Requester says it is ignored",
        Duration::from_secs(5),
        async || {
            let stray = elsewhere.get("stray").await.unwrap();
            stray.status.as_ref().is_some_and(|s| {
                api::find_condition(&s.conditions, "Ready").is_some_and(|c| {
                    !c.is_true() && c.reason == "OutsideContractNamespace" && c.message.contains(NS)
                })
            })
        },
    )
    .await;
    let stray = elsewhere.get("stray").await.unwrap();
    assert!(
        stray.finalizers().is_empty(),
        "no root finalizer on a Requester that runs nothing"
    );
    // It takes nothing from the Requester that runs the namespace.
    env.create_deployed("c1", 3600).await;
    controller.abort();
}

#[tokio::test]
async fn a_contract_made_by_hand_without_the_release_finalizer_is_not_rented() {
    let (env, controller) = Env::running_with_root().await;
    let mut by_hand = api::ComputeContract::new("by-hand", contract_spec(3600));
    by_hand.metadata.namespace = Some(NS.to_owned());
    env.contracts()
        .create(&kube::api::PostParams::default(), &by_hand)
        .await
        .unwrap();
    let waiting = env
        .wait_contract("by-hand", Duration::from_secs(5), |c| {
            c.status.as_ref().is_some_and(|s| {
                api::find_condition(&s.conditions, "Ready")
                    .is_some_and(|r| r.reason == "NoReleaseFinalizer")
            })
        })
        .await;
    assert_eq!(phase_of(&waiting), Some(Phase::Pending));
    let message = waiting.status.unwrap().message.unwrap();
    assert!(
        message.contains(names::CONTRACT_RELEASE_FINALIZER),
        "{message}"
    );
    assert_eq!(env.market.rfps_published(&key("by-hand")), 0);
    // kubectl delete takes it at once, and no machine is left behind.
    env.contracts()
        .delete("by-hand", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    env.wait_until("by-hand gone", Duration::from_secs(5), async || {
        env.contracts().get_opt("by-hand").await.unwrap().is_none()
    })
    .await;
    assert_eq!(env.market.running_guests(), 0);
    // One made with the finalizer is rented, ownerless or not.
    env.create_deployed("held", 3600).await;
    controller.abort();
}

/// Write economy (issue 12): a contract that goes well gets one status write
/// per step, none for a booting guest (the Accepted write says it already).
/// Pending and a release's new generation are still written before the market
/// call: that write, guarded by the resourceVersion, is what keeps a
/// reconcile from a stale cache from calling the market again.
#[tokio::test]
async fn a_contract_that_goes_well_is_written_once_per_step() {
    let (env, controller) = Env::running_with_root().await;
    env.create_deployed("c1", 3600).await;
    env.release("c1").await;
    env.wait_phase("c1", Phase::Released).await;
    let mut phases = testkit::status_writes(&env.server.history(), "/computecontracts", "c1");
    // The local market may report a guest on the network before its node
    // registers: one Deployed write or two.
    phases.dedup_by(|later, earlier| later == "Deployed" && earlier == "Deployed");
    // A guest that is up by the first poll after the acceptance is written
    // Deployed at once, with no Accepted write (a slow machine sees that).
    let accepted = phases.iter().filter(|p| *p == "Accepted").count();
    assert!(accepted <= 1, "{phases:?}");
    phases.retain(|p| p != "Accepted");
    assert_eq!(
        phases,
        ["Bidding", "Bidding", "Deployed", "Released"],
        "bid window opened before the publish, winner chosen before it is accepted, (accepted \
         while the guest boots), deployed, released: the release and the market's confirmation are one write"
    );
    controller.abort();
}

/// Plan 0016 C4: a contract is reconciled for what other writers change (its
/// release, its delete), not again for the events of its own writes (its
/// Released status, its finalizer removal): the reconcile that wrote decided
/// on from what the write answered. Each woke it once more in a scale-down
/// (3.00 reconciles per node).
#[tokio::test]
async fn a_released_contract_is_not_woken_again_by_its_own_writes() {
    let env = Env::start().await;
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = controllers::metrics::Metrics::register(&mut registry);
    let controller = env.start_controller_measured(
        Timing {
            // No guest watch round meanwhile: only the contracts' own events count.
            guest_poll: Duration::from_secs(3600),
            ..fast_timing()
        },
        metrics,
    );
    env.create_requester("root", vec![bidder("did:web:a", 5)], 1)
        .await;
    let names = ["c0", "c1", "c2", "c3"];
    for name in names {
        env.create_contract(name, 3600).await;
    }
    let registered = |c: &api::ComputeContract| {
        c.status
            .as_ref()
            .and_then(|s| s.guest.as_ref())
            .is_some_and(|g| g.node_id.is_some())
    };
    for name in names {
        env.wait_contract(name, Duration::from_secs(10), registered)
            .await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = contract_reconciles(&registry);
    for name in names {
        env.release(name).await;
    }
    for name in names {
        env.wait_phase(name, Phase::Released).await;
    }
    for name in names {
        env.contracts()
            .delete(name, &kube::api::DeleteParams::default())
            .await
            .unwrap();
    }
    env.wait_until("every contract gone", Duration::from_secs(10), async || {
        env.contracts()
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let woken = contract_reconciles(&registry) - before;
    assert!(
        woken <= 2 * names.len() as u64,
        "{woken} reconciles for {} releases and {} deletes",
        names.len(),
        names.len()
    );
    controller.abort();
}

/// How many reconciles the contract controller started.
fn contract_reconciles(registry: &prometheus_client::registry::Registry) -> u64 {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    let series = format!(
        "socialweb_reconcile_total{{controller=\"{}\"}}",
        controllers::requester::CONTRACT_METRICS_LABEL
    );
    text.lines()
        .find_map(|line| line.strip_prefix(&series)?.trim().parse().ok())
        .unwrap_or(0)
}

/// A Deployed contract schedules no poll of its own: the guest watch asks the
/// market about every registered guest in one call per round and wakes only
/// the contract whose guest changed.
#[tokio::test]
async fn a_guest_that_dies_while_deployed_is_seen_by_the_guest_watch() {
    let env = Env::start().await;
    let controller = env.start_controller_with(Timing {
        guest_poll: Duration::from_secs(1),
        ..fast_timing()
    });
    env.create_requester("root", vec![bidder("did:web:a", 5)], 1)
        .await;
    let registered = |c: &api::ComputeContract| {
        c.status
            .as_ref()
            .and_then(|s| s.guest.as_ref())
            .is_some_and(|g| g.node_id.is_some())
    };
    env.create_contract("dies", 3600).await;
    env.create_contract("lives", 3600).await;
    let dies = env
        .wait_contract("dies", Duration::from_secs(10), registered)
        .await;
    let lives = env
        .wait_contract("lives", Duration::from_secs(10), registered)
        .await;

    // The guest goes away at the market behind the contract's back.
    use market::Market as _;
    let receipt = market_receipt(&dies);
    env.market.release(&receipt).await.unwrap();

    let lost = env.wait_ready_reason("dies", "GuestLost").await;
    assert_eq!(phase_of(&lost), Some(Phase::Failed));
    let deployed = env.contracts().get("lives").await.unwrap();
    assert_eq!(phase_of(&deployed), Some(Phase::Deployed));
    assert_eq!(
        deployed.metadata.resource_version, lives.metadata.resource_version,
        "the contract whose guest is well is not written"
    );
    controller.abort();
}
