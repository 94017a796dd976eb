//! End-to-end, the lifecycle across identities and restarts: CLAIM-RECREATED
//! (a new uid is a new entry) and RESTART (a manager killed mid-scale-up comes
//! back to the same objects and the same grant tokens).

use crate::nodeclaim_e2e_support;

use api::names::{CONTRACT_LABEL, entry_name};
use api::{Infra, NodeClaimPhase};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use nodeclaim_e2e_support::*;
use serde_json::json;
use testkit::ListAll;

#[tokio::test]
async fn claim_recreated_is_a_new_entry() {
    let env = start().await;
    let client = &env.client;
    let (a, _) = two_claims_joined(&env).await;
    let old_entry = entry_name(&a.uid().unwrap());
    claims(client)
        .delete("worker-a", &DeleteParams::default())
        .await
        .unwrap();
    testkit::wait_gone(&claims(client), "worker-a").await;
    let again = create_claim(client, "worker-a", "c1", 2).await;
    let new_entry = entry_name(&again.uid().unwrap());
    assert_ne!(new_entry, old_entry, "a recreated claim is a new entry");
    eventually("new worker-a Joined", || async {
        (phase_of(client, "worker-a").await == Some(NodeClaimPhase::Joined)).then_some(())
    })
    .await;
    let status = claim_status(client, "worker-a").await;
    assert_eq!(status.infra.unwrap().contract, new_entry);
    let old = contracts(client)
        .list(&ListParams::default().labels(&format!("{CONTRACT_LABEL}={old_entry}")))
        .await
        .unwrap();
    assert!(old.items.is_empty(), "the old contract is gone");
    let old_name = api::names::compute_contract_name(&api::names::infra_name(NS, "c1"), &old_entry);
    let released = env
        .server
        .history()
        .iter()
        .any(|e| e.name == old_name && e.object()["status"]["phase"] == json!("Released"));
    assert!(released, "the old contract was released, never reused");
}

#[tokio::test]
async fn restart_mid_scale_up_keeps_one_entry_and_one_token_per_claim() {
    let mut env = start().await;
    create_cluster(&env.client, "c1", true).await;
    create_claim(&env.client, "worker-a", "c1", 2).await;
    create_claim(&env.client, "worker-b", "c1", 4).await;
    let client = env.client.clone();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), CONTRACT_NS);
    // Kill the manager as soon as the join Secrets exist, before the nodes run.
    eventually("join Secrets written", || async {
        (secrets.list_all().await.len() == 2).then_some(())
    })
    .await;
    env.kill_manager();
    let tokens = |list: Vec<Secret>| {
        let mut t: Vec<(String, Vec<u8>)> = list
            .into_iter()
            .map(|s| (s.name_any(), s.data.unwrap()["token"].0.clone()))
            .collect();
        t.sort();
        t
    };
    let before = tokens(secrets.list_all().await);
    env.start_manager();
    for name in ["worker-a", "worker-b"] {
        eventually(&format!("{name} Joined after the restart"), || {
            let client = client.clone();
            async move {
                (phase_of(&client, name).await == Some(NodeClaimPhase::Joined)).then_some(())
            }
        })
        .await;
    }
    let after = tokens(secrets.list_all().await);
    assert_eq!(before, after, "a restart keeps every grant token");
    let infras: Api<Infra> = Api::namespaced(client.clone(), CONTRACT_NS);
    assert_eq!(infras.list_all().await.len(), 1);
    assert_eq!(
        contracts(&client).list_all().await.len(),
        2,
        "no duplicate contract"
    );
}
