//! End-to-end: hand edits of a composed Infra and its contracts never cost
//! a live claim's machine silently nor rent a second one (plan 0009 S7, S8).
//! The three controllers on the embedded API server with the local market.

use crate::nodeclaim_e2e_support;

use api::names::{compute_contract_name, entry_name, infra_name};
use api::{ComputeContract, Infra, NodeClaim, NodeClaimPhase, find_condition};
use apiserver::store::ChangeType;
use controllers::infra::conditions::READY;
use controllers::infra::problems::{
    REASON_MACHINE_IMMUTABLE, REASON_RELEASE_HELD, REASON_RELEASED_BY_HAND,
};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodeclaim_e2e_support::*;
use serde_json::json;

const CONTRACTS: &str = "socialweb.computer/computecontracts";

/// What `kubectl edit` writes as: an update, not the controllers' apply.
const BY_HAND: &str = "kubectl-edit";

fn contract_of(claim: &NodeClaim) -> String {
    compute_contract_name(&infra_name(NS, "c1"), &entry_name(&claim.uid().unwrap()))
}

fn infras(env: &Env) -> Api<Infra> {
    Api::namespaced(env.client.clone(), CONTRACT_NS)
}

/// Every write of ComputeContract `name`, with its spec as written.
fn contract_writes(env: &Env, name: &str) -> Vec<(ChangeType, serde_json::Value)> {
    env.server
        .history()
        .into_iter()
        .filter(|e| e.resource == CONTRACTS && e.name == name)
        .map(|e| (e.change, e.object()["spec"].clone()))
        .collect()
}

async fn ready_reason(env: &Env) -> Option<String> {
    let infra = infras(env).get(&infra_name(NS, "c1")).await.ok()?;
    let status = infra.status?;
    Some(
        find_condition(&status.conditions, READY)?
            .reason
            .to_string(),
    )
}

/// Replaces the Infra with `edit` applied, as `kubectl edit` would. The
/// controllers write the Infra's status meanwhile (a manager just started
/// does at once), so a replace can meet a 409: the edit is made again on
/// the object as it is now, as a person would after kubectl says so.
async fn edit_infra(env: &Env, edit: impl Fn(&mut Infra)) {
    let api = infras(env);
    let name = infra_name(NS, "c1");
    let params = PostParams {
        field_manager: Some(BY_HAND.to_owned()),
        ..PostParams::default()
    };
    for _ in 0..20 {
        let mut infra = api.get(&name).await.unwrap();
        edit(&mut infra);
        match api.replace(&name, &params, &infra).await {
            Ok(_) => return,
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(other) => panic!("edit Infra {name}: {other}"),
        }
    }
    panic!("edit Infra {name}: a conflict 20 times in a row");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_released_by_hand_fails_its_claim_and_rents_nothing_more() {
    let env = start().await;
    let client = &env.client;
    let (a, b) = two_claims_joined(&env).await;
    let name = contract_of(&a);
    let b_contract = contracts(client).get(&contract_of(&b)).await.unwrap();

    contracts(client)
        .patch(
            &name,
            &PatchParams {
                field_manager: Some(BY_HAND.to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"spec": {"release": true}})),
        )
        .await
        .unwrap();

    let failed = eventually(
        "worker-a Failed: its contract was released by hand",
        || async {
            let claim = claims(client).get("worker-a").await.ok()?;
            let status = claim.status?;
            let ready = find_condition(&status.conditions, "Ready")?;
            (status.phase == Some(NodeClaimPhase::Failed)
                && ready.reason == REASON_RELEASED_BY_HAND)
                .then_some(ready.message.to_string())
        },
    )
    .await;
    assert!(failed.contains(&name), "{failed}");
    let events: Api<Event> = Api::namespaced(client.clone(), CONTRACT_NS);
    eventually("a Warning Event about the hand release", || async {
        let list = events.list(&Default::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some(REASON_RELEASED_BY_HAND)
                    && e.type_.as_deref() == Some("Warning")
                    && e.related.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str())
            })
            .then_some(())
    })
    .await;

    // Its entry leaves with the failed claim; the contract goes once Released.
    testkit::wait_gone(&contracts(client), &name).await;
    eventually("only worker-b's machine runs", || async {
        (env.market.running_guests() == 1).then_some(())
    })
    .await;
    // Settle: a second rent would show as a second create of the same name.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let created = contract_writes(&env, &name)
        .iter()
        .filter(|(change, _)| *change == ChangeType::Added)
        .count();
    assert_eq!(created, 1, "worker-a's contract was created again");
    assert!(contracts(client).get_opt(&name).await.unwrap().is_none());
    assert_eq!(
        phase_of(client, "worker-b").await,
        Some(NodeClaimPhase::Joined)
    );
    let b_after = contracts(client).get(&contract_of(&b)).await.unwrap();
    assert_eq!(b_after.uid(), b_contract.uid(), "worker-b kept its machine");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_live_claims_entry_by_hand_releases_nothing() {
    let mut env = start().await;
    let (a, _b) = two_claims_joined(&env).await;
    let name = contract_of(&a);
    let entry = entry_name(&a.uid().unwrap());

    // Only the Infra controller sees the edit: nothing restores the entry.
    env.kill_manager();
    env.start_without_nodeclaim_controller();
    edit_infra(&env, |infra| {
        infra.spec.contracts.retain(|c| c.name != entry)
    })
    .await;
    eventually("the Infra holds worker-a's contract", || async {
        (ready_reason(&env).await.as_deref() == Some(REASON_RELEASE_HELD)).then_some(())
    })
    .await;

    // The NodeClaim controller puts the entry back; the machine was never released.
    env.kill_manager();
    env.start_manager();
    eventually("the entry is back and every contract Deployed", || async {
        (ready_reason(&env).await.as_deref() == Some("AllDeployed")).then_some(())
    })
    .await;
    let writes = contract_writes(&env, &name);
    assert!(
        writes
            .iter()
            .all(|(_, spec)| spec["release"] != json!(true)),
        "worker-a's contract was released: {writes:?}"
    );
    assert_eq!(
        writes
            .iter()
            .filter(|(c, _)| *c == ChangeType::Added)
            .count(),
        1
    );
    assert_eq!(
        phase_of(&env.client, "worker-a").await,
        Some(NodeClaimPhase::Joined)
    );

    // Deleting the claim still releases its machine.
    claims(&env.client)
        .delete("worker-a", &Default::default())
        .await
        .unwrap();
    testkit::wait_gone(&contracts(&env.client), &name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_edited_by_hand_never_reaches_the_rented_contract() {
    let mut env = start().await;
    let (a, _b) = two_claims_joined(&env).await;
    let name = contract_of(&a);
    let entry = entry_name(&a.uid().unwrap());

    env.kill_manager();
    env.start_without_nodeclaim_controller();
    edit_infra(&env, |infra| {
        let edited = infra.spec.contracts.iter_mut().find(|c| c.name == entry);
        edited.unwrap().resources.cpus = 16;
    })
    .await;
    eventually("the Infra says the machine is kept", || async {
        (ready_reason(&env).await.as_deref() == Some(REASON_MACHINE_IMMUTABLE)).then_some(())
    })
    .await;
    env.kill_manager();
    env.start_manager();
    eventually("the entry is restored", || async {
        (ready_reason(&env).await.as_deref() == Some("AllDeployed")).then_some(())
    })
    .await;
    let writes = contract_writes(&env, &name);
    assert!(
        writes
            .iter()
            .all(|(_, spec)| spec["resources"]["cpus"] == json!(2)),
        "the edited cpus reached the rented contract: {writes:?}"
    );

    // The contract itself refuses a new size, saying what to do instead.
    let refused = contracts(&env.client)
        .patch(
            &name,
            &PatchParams {
                field_manager: Some(BY_HAND.to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"spec": {"resources": {"cpus": 16}}})),
        )
        .await
        .expect_err("a rented contract's resources changed");
    assert!(
        refused.to_string().contains("resources is immutable"),
        "{refused}"
    );
    let contract: ComputeContract = contracts(&env.client).get(&name).await.unwrap();
    assert_eq!(contract.spec.resources.cpus, 2);
}
