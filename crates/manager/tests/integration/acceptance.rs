//! DESIGN.md section 6 as end-to-end tests: the embedded API server, the REAL
//! manager wiring (`Controllers::start`) and the local market, with every
//! invariant of section 5 checked after each scenario.

use crate::support;

use std::time::Duration;
use testkit::ListAll;
use testkit::kubectl::{headers, kubectl_ok, table};

use api::names::{
    CLUSTER_LABEL, CONTRACT_LABEL, INFRA_NAME_LABEL, JOIN_SECRET_TYPE, entry_name, infra_name,
};
use api::{ComputeContractPhase, NodeClaimPhase};
use controllers::nodeclaim::conditions::{INFRA_COMPOSED, reason};
use kube::ResourceExt;
use kube::api::{ListParams, PostParams};
use market::ContractKey;
use support::invariants::{
    assert_all, assert_cluster_gone, deleted_at, receipts_of, released_at,
    released_before_the_infra_went,
};
use support::{CONTRACT_NS, Env, NS, OTHER_NS, URL, eventually};

fn phase(c: &api::ComputeContract) -> Option<ComputeContractPhase> {
    c.status.as_ref().and_then(|s| s.phase)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_up_two() {
    let env = Env::start().await;
    let (_, a, b) = env.two_joined().await;

    let infras = env
        .infras()
        .list(&ListParams::default().labels(&format!("{CLUSTER_LABEL}=c1")))
        .await
        .unwrap()
        .items;
    assert_eq!(
        infras.len(),
        1,
        "exactly one Infra labelled with the Cluster"
    );
    assert_eq!(infras[0].name_any(), infra_name(NS, "c1"));
    let contracts = env
        .contracts()
        .list(
            &ListParams::default().labels(&format!("{INFRA_NAME_LABEL}={}", infras[0].name_any())),
        )
        .await
        .unwrap()
        .items;
    assert_eq!(contracts.len(), 2);
    for claim in [&a, &b] {
        let c = env.contract_of(claim).await.expect("a contract per claim");
        let join = c.spec.node_join.as_ref().expect("nodeJoin");
        assert_eq!(join.api_server, URL);
        assert_eq!(c.spec.owner_did.as_deref(), Some("did:plc:tenant"));
        let entry = entry_name(&claim.uid().unwrap());
        let secret = c
            .spec
            .secrets_ref
            .as_ref()
            .expect("secretsRef")
            .name
            .clone();
        assert_eq!(secret, format!("join-{entry}"));
        assert_eq!(
            env.secrets().get(&secret).await.unwrap().type_.as_deref(),
            Some(JOIN_SECRET_TYPE)
        );
        assert_eq!(phase(&c), Some(ComputeContractPhase::Deployed));
        assert_eq!(
            env.market
                .rfps_published(&ContractKey::new(CONTRACT_NS, c.name_any())),
            1
        );
    }
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_down_one() {
    let env = Env::start().await;
    let (_, a, b) = env.two_joined().await;
    let contract_a = env.contract_of(&a).await.unwrap();
    let before_b = env.contract_of(&b).await.unwrap();

    testkit::delete_and_wait(&env.claims(NS), "worker-a").await;
    assert!(
        env.contract_of(&a).await.is_none(),
        "its contract is deleted"
    );
    let entry_a = entry_name(&a.uid().unwrap());
    assert!(
        env.secrets()
            .get_opt(&format!("join-{entry_a}"))
            .await
            .unwrap()
            .is_none(),
        "its join Secret is deleted"
    );
    let history = env.server.history();
    let name_a = contract_a.name_any();
    assert!(released_at(&history, &name_a) < deleted_at(&history, "/computecontracts", &name_a));
    let receipt = &receipts_of(&history, None)[&name_a];
    assert!(
        env.market.release_calls(receipt) >= 1,
        "the guest was released"
    );

    let after_b = env.contract_of(&b).await.unwrap();
    assert_eq!(after_b.uid(), before_b.uid());
    assert_eq!(after_b.spec, before_b.spec, "the other is untouched");
    assert_eq!(phase(&after_b), Some(ComputeContractPhase::Deployed));
    assert_eq!(
        env.claim_phase(NS, "worker-b").await,
        Some(NodeClaimPhase::Joined)
    );
    assert_eq!(env.market.running_guests(), 1);
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_recreated_is_a_new_entry() {
    let env = Env::start().await;
    let (cluster, a, _) = env.two_joined().await;
    let old = env.contract_of(&a).await.unwrap();
    testkit::delete_and_wait(&env.claims(NS), "worker-a").await;
    let again = env
        .create_claim(NS, "worker-a", "c1", 2, Some(&cluster))
        .await;
    env.wait_joined(NS, &["worker-a"]).await;
    let new = env.contract_of(&again).await.unwrap();
    assert_ne!(new.name_any(), old.name_any(), "a new entry, never reused");
    assert!(
        env.contracts()
            .get_opt(&old.name_any())
            .await
            .unwrap()
            .is_none()
    );
    let history = env.server.history();
    let receipts = receipts_of(&history, None);
    assert!(env.market.release_calls(&receipts[&old.name_any()]) >= 1);
    assert_ne!(receipts[&old.name_any()], receipts[&new.name_any()]);
    assert_eq!(env.market.running_guests(), 2);
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_delete_releases_every_contract_first() {
    let env = Env::start().await;
    let names = env.two_joined_contracts().await;
    testkit::delete_and_wait(&env.clusters(NS), "c1").await;
    assert_cluster_gone(&env, NS, "c1").await;
    let history = env.server.history();
    let infra_gone = released_before_the_infra_went(&history, "c1", &names);
    for name in &names {
        assert!(deleted_at(&history, "/computecontracts", name) < infra_gone);
    }
    assert_eq!(env.market.running_guests(), 0);
    env.delete_two_claims().await;
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_delete_order() {
    let env = Env::start().await;
    let names = env.two_joined_contracts().await;
    testkit::delete_and_wait(&env.requesters(), "root").await;
    let history = env.server.history();
    let root_gone = deleted_at(&history, "/requesters", "root");
    let infra = infra_name(NS, "c1");
    assert!(deleted_at(&history, "/infras", &infra) < root_gone);
    for name in &names {
        let gone = deleted_at(&history, "/computecontracts", name);
        assert!(released_at(&history, name) < gone);
        assert!(gone < root_gone, "{name} went before the Requester");
    }
    for receipt in receipts_of(&history, None).values() {
        assert!(env.market.release_calls(receipt) >= 1);
    }
    assert_eq!(env.market.running_guests(), 0);
    let history = env.server.history();
    support::invariants::deleted_only_when_released(&history);
    support::invariants::writers_are_exclusive(&history);
    support::invariants::secrets_stay_in_join_secrets(&history);
    support::invariants::published_at_most_once(&env, &history);
    support::invariants::status_written_only_by_the_requester(&env);
    support::invariants::assert_quiet(&env).await;
}

/// Invariant 4 for the root: once the Requester is gone, nothing of the
/// deployments it ran remains (join Secrets included), while the Cluster lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_delete_leaves_nothing_of_its_deployments() {
    let env = Env::start().await;
    env.two_joined().await;
    testkit::delete_and_wait(&env.requesters(), "root").await;
    support::invariants::assert_quiet(&env).await;
    assert_cluster_gone(&env, NS, "c1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_mid_scale_up_and_mid_release() {
    let mut env = Env::start().await;
    let (_, a, b) = env.two_claims().await;
    eventually("a contract Bidding or Accepted", || async {
        let list = env.contracts().list(&ListParams::default()).await.unwrap();
        list.items
            .iter()
            .any(|c| {
                matches!(
                    phase(c),
                    Some(ComputeContractPhase::Bidding | ComputeContractPhase::Accepted)
                )
            })
            .then_some(())
    })
    .await;
    env.kill_manager().await;
    env.start_manager();
    env.wait_joined(NS, &["worker-a", "worker-b"]).await;
    for claim in [&a, &b] {
        let c = env.contract_of(claim).await.unwrap();
        let key = ContractKey::new(CONTRACT_NS, c.name_any());
        assert_eq!(env.market.rfps_published(&key), 1, "no second RFP");
        assert_eq!(env.market.guests_rented(&key), 1, "no second machine");
    }

    let contract_a = env.contract_of(&a).await.unwrap().name_any();
    // The first release fails, so the contract stays Releasing (retrying) long enough to kill it there.
    env.market.fail_next(market::Operation::Release, 1);
    env.delete_claim("worker-a").await;
    eventually("worker-a's contract releasing", || async {
        let c = env.contracts().get_opt(&contract_a).await.unwrap()?;
        (c.spec.release && phase(&c) == Some(ComputeContractPhase::Releasing)).then_some(())
    })
    .await;
    env.kill_manager().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    env.start_manager();
    env.wait_gone(&env.claims(NS), "worker-a").await;
    let history = env.server.history();
    let receipt = &receipts_of(&history, None)[&contract_a];
    assert!(
        env.market.release_calls(receipt) >= 2,
        "the failed release was sent again after the restart"
    );
    assert_eq!(env.market.running_guests(), 1);
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_reported_and_disturbs_nothing() {
    let env = Env::start().await;
    let c1 = env.create_cluster(NS, "c1", true).await;
    let c2 = env.create_cluster(NS, "c2", true).await;
    let good = env.create_claim(NS, "good", "c1", 2, Some(&c1)).await;
    env.create_claim(NS, "no-cluster", "missing", 2, None).await;
    env.create_claim(OTHER_NS, "elsewhere", "c1", 2, None).await;
    env.create_claim(NS, "wrong-owner", "c1", 2, Some(&c2))
        .await;

    // The schema refuses what can never be valid, with a 422: no CPU, or more
    // than any machine has.
    for (name, cpus) in [("zero", 0), ("too-big", 5000)] {
        let claim: api::NodeClaim =
            serde_json::from_value(testkit::claim_json(NS, name, "c1", cpus)).unwrap();
        match env.claims(NS).create(&PostParams::default(), &claim).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 422, "{status:?}"),
            other => panic!("{cpus} CPUs accepted: {other:?}"),
        }
    }
    // A name that reaches into another namespace is refused or reported.
    let across: api::NodeClaim =
        serde_json::from_value(testkit::claim_json(OTHER_NS, "across", "tenant-a/c1", 2)).unwrap();
    let across_created = match env
        .claims(OTHER_NS)
        .create(&PostParams::default(), &across)
        .await
    {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            false
        }
        Ok(_) => true,
        Err(other) => panic!("{other}"),
    };
    // A duplicate name is refused and leaves the first claim alone.
    let dup: api::NodeClaim =
        serde_json::from_value(testkit::claim_json(NS, "good", "c2", 2)).unwrap();
    match env.claims(NS).create(&PostParams::default(), &dup).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 409, "{status:?}"),
        other => panic!("duplicate accepted: {other:?}"),
    }

    let mut expected = vec![
        (NS, "no-cluster", reason::CLUSTER_NOT_FOUND),
        (OTHER_NS, "elsewhere", reason::CLUSTER_NOT_FOUND),
        (NS, "wrong-owner", reason::CLUSTER_OWNER_MISMATCH),
    ];
    if across_created {
        expected.push((OTHER_NS, "across", reason::CLUSTER_NAME_INVALID));
    }
    let env = &env;
    for (ns, name, want) in expected {
        eventually(&format!("{ns}/{name} reports {want}"), || async move {
            let c = env.claims(ns).get(name).await.ok()?;
            let cond = api::find_condition(&c.status?.conditions, INFRA_COMPOSED)?.clone();
            assert!(!cond.message.is_empty(), "{name}: a message says why");
            (cond.reason == want).then_some(())
        })
        .await;
    }
    env.wait_joined(NS, &["good"]).await;
    let all = env.contracts().list_all().await;
    assert_eq!(all.len(), 1, "only the good claim rents a machine");
    assert_eq!(
        all[0].labels()[CONTRACT_LABEL],
        entry_name(&good.uid().unwrap())
    );
    assert!(
        env.infras()
            .get_opt(&infra_name(OTHER_NS, "c1"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(env.market.running_guests(), 1);
    assert_all(env).await;
}

/// The user's view: `kubectl get infra -A -l infra.socialweb.computer/cluster=<name>`
/// lists exactly that Cluster's Infra, with every printer column filled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_finds_a_clusters_infra_by_label() {
    if !testkit::kubectl::kubectl_required() {
        return;
    }
    let env = Env::start().await;
    let (c1, _, _) = env.two_joined().await;
    let other = env.create_cluster(NS, "c2", true).await;
    env.create_claim(NS, "other-node", "c2", 2, Some(&other))
        .await;
    env.wait_joined(NS, &["other-node"]).await;
    let infra = infra_name(NS, &c1.name_any());
    eventually("the Infra reports 2 ready contracts", || async {
        let status = env.infras().get(&infra).await.ok()?.status?;
        (status.ready_contracts == 2).then_some(())
    })
    .await;

    let selector = format!("{CLUSTER_LABEL}=c1");
    let out = kubectl_ok(&env.server, &["get", "infra", "-A", "-l", &selector]);
    assert_eq!(
        headers(&out).join(" "),
        "NAMESPACE NAME CLUSTER PHASE CONTRACTS READY AGE",
        "{out}"
    );
    let rows = table(&out);
    assert_eq!(rows.len(), 1, "exactly one Infra:\n{out}");
    let row = &rows[0];
    let columns = "NAMESPACE NAME CLUSTER PHASE CONTRACTS READY".split(' ');
    assert_eq!(
        columns
            .map(|column| row[column].as_str())
            .collect::<Vec<_>>(),
        [CONTRACT_NS, infra.as_str(), "c1", "Deployed", "2", "2"],
        "{out}"
    );
    assert!(
        !row["AGE"].is_empty() && !row["AGE"].contains("none"),
        "{out}"
    );
}
