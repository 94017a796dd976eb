//! End-to-end: the NodeClaim, Infra and Requester controllers on the embedded
//! API server, with the Requester running the local simulated market (its
//! guests boot in 50 ms and register their node right after).
//!
//! DESIGN.md section 6: SCALE-UP-TWO, SCALE-DOWN-ONE, CLUSTER-DELETE, BAD-INPUT.

use crate::nodeclaim_e2e_support;

use api::names::{
    CLUSTER_FINALIZER, CLUSTER_LABEL, CONTRACT_LABEL, INFRA_NAME_LABEL, INFRA_RELEASE_FINALIZER,
    JOIN_SECRET_TYPE, NODECLAIM_FINALIZER, entry_name,
};
use api::{
    Cluster, ComputeContractPhase, Infra, NodeClaim, NodeClaimPhase, NodeClaimSpec, Resources,
};
use chrono::{DateTime, Utc};
use controllers::nodeclaim;
use controllers::nodeclaim::conditions::{INFRA_COMPOSED, reason};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use nodeclaim_e2e_support::*;
use serde_json::json;
use std::time::Duration;
use testkit::ListAll;

#[tokio::test]
async fn scale_up_two() {
    let env = start().await;
    let client = &env.client;
    let (a, b) = two_claims_joined(&env).await;

    let infras: Api<Infra> = Api::namespaced(client.clone(), CONTRACT_NS);
    let list = infras
        .list(&ListParams::default().labels(&format!("{CLUSTER_LABEL}=c1")))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1, "exactly one Infra for the Cluster");
    let infra = &list.items[0];
    assert_eq!(infra.name_any(), api::names::infra_name(NS, "c1"));
    let all = contracts(client)
        .list(&ListParams::default().labels(&format!("{INFRA_NAME_LABEL}={}", infra.name_any())))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 2, "one ComputeContract per claim");
    for claim in [&a, &b] {
        let entry = entry_name(&claim.uid().unwrap());
        let c = all
            .items
            .iter()
            .find(|c| c.labels()[CONTRACT_LABEL] == entry)
            .unwrap();
        let join = c.spec.node_join.as_ref().expect("nodeJoin on the contract");
        assert_eq!(join.api_server, URL);
        assert_eq!(c.spec.owner_did.as_deref(), Some("did:plc:tenant"));
        let secret_name = c.spec.secrets_ref.as_ref().unwrap().name.clone();
        assert_eq!(secret_name, format!("join-{entry}"));
        assert_eq!(
            c.status.as_ref().unwrap().phase,
            Some(ComputeContractPhase::Deployed)
        );
        let secret: Secret = Api::namespaced(client.clone(), CONTRACT_NS)
            .get(&secret_name)
            .await
            .unwrap();
        assert_eq!(secret.type_.as_deref(), Some(JOIN_SECRET_TYPE));
        let status = claim_status(client, &claim.name_any()).await;
        assert_eq!(status.infra.unwrap().compute_contract, c.name_any());
        assert!(status.guest.unwrap().node_id.is_some(), "the node joined");
    }
    let cluster: Cluster = Api::namespaced(client.clone(), NS).get("c1").await.unwrap();
    assert!(cluster.finalizers().iter().any(|f| f == CLUSTER_FINALIZER));
    // A Cluster's node count is written at most once per 2 s (status_pace):
    // the second node may be counted a little after it joined.
    eventually("the Cluster counts both nodes", || async move {
        let cluster: Cluster = Api::namespaced(client.clone(), NS).get("c1").await.ok()?;
        (cluster.status?.nodes == Some(2)).then_some(())
    })
    .await;

    // Invariant 6: the token and CA are only in the join Secrets.
    let secret_values: Vec<String> = Api::<Secret>::namespaced(client.clone(), CONTRACT_NS)
        .list_all()
        .await
        .iter()
        .map(|s| String::from_utf8(s.data.as_ref().unwrap()["token"].0.clone()).unwrap())
        .collect();
    for entry in env.server.history() {
        // The CA comes from the Cluster's status, where whoever runs the cluster puts it.
        if entry.resource.ends_with("/secrets") || entry.resource.ends_with("/clusters") {
            continue;
        }
        let text = entry.object().to_string();
        assert!(!text.contains(CA), "CA leaked into {}", entry.resource);
        for token in &secret_values {
            assert!(
                !text.contains(token),
                "token leaked into {}",
                entry.resource
            );
        }
    }

    // A claim that goes well is no Event (its phase says it): only a failure
    // or a lost node is, what a person acts on.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    let about_claims: Vec<String> = events
        .list_all()
        .await
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("NodeClaim"))
        .filter_map(|e| e.reason)
        .collect();
    assert_eq!(
        about_claims,
        Vec::<String>::new(),
        "no Event on a claim that went well"
    );

    // Invariant 8: converged means no writes. The Requester's contract count
    // is written last (at most once per 2 s while only it moves): converged
    // includes it.
    let requesters: Api<api::Requester> = Api::namespaced(client.clone(), CONTRACT_NS);
    testkit::eventually("the Requester counts both contracts", || async {
        let root = requesters.get("root").await.ok()?;
        (root.status?.contracts == 2).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = env.server.history().len();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let writes: Vec<String> = env.server.history()[before..]
        .iter()
        .map(|e| format!("{} {}/{}", e.resource, e.namespace, e.name))
        .collect();
    assert!(writes.is_empty(), "writes after convergence: {writes:?}");
}

#[tokio::test]
async fn scale_down_one() {
    let env = start().await;
    let client = &env.client;
    let (a, b) = two_claims_joined(&env).await;
    let entry_a = entry_name(&a.uid().unwrap());
    let entry_b = entry_name(&b.uid().unwrap());
    let other_before = contracts(client)
        .list(&ListParams::default().labels(&format!("{CONTRACT_LABEL}={entry_b}")))
        .await
        .unwrap()
        .items[0]
        .clone();

    claims(client)
        .delete("worker-a", &DeleteParams::default())
        .await
        .unwrap();
    testkit::wait_gone(&claims(client), "worker-a").await;
    let left = contracts(client)
        .list(&ListParams::default().labels(&format!("{CONTRACT_LABEL}={entry_a}")))
        .await
        .unwrap();
    assert!(left.items.is_empty(), "its contract is deleted");
    let secret: Option<Secret> = Api::namespaced(client.clone(), CONTRACT_NS)
        .get_opt(&format!("join-{entry_a}"))
        .await
        .unwrap();
    assert!(secret.is_none(), "its join Secret is deleted");
    // Released before it was deleted (invariant 3), by the history.
    let name_a = api::names::compute_contract_name(&api::names::infra_name(NS, "c1"), &entry_a);
    let history = env.server.history();
    let released = history
        .iter()
        .any(|e| e.name == name_a && e.object()["status"]["phase"] == json!("Released"));
    assert!(released, "the contract was Released before it went");

    let other_after = contracts(client)
        .list(&ListParams::default().labels(&format!("{CONTRACT_LABEL}={entry_b}")))
        .await
        .unwrap()
        .items[0]
        .clone();
    assert_eq!(
        other_before.spec, other_after.spec,
        "the other is untouched"
    );
    assert_eq!(other_before.uid(), other_after.uid());
    assert_eq!(
        phase_of(client, "worker-b").await,
        Some(NodeClaimPhase::Joined)
    );
}

#[tokio::test]
async fn cluster_delete_releases_everything() {
    let env = start().await;
    let client = &env.client;
    two_claims_joined(&env).await;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let old_uid = clusters.get("c1").await.unwrap().uid().unwrap();
    // The tenant set no owner: the controller made the Cluster the claims' controller owner.
    for name in ["worker-a", "worker-b"] {
        let claim = claims(client).get(name).await.unwrap();
        let owner = &claim.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Cluster", old_uid.as_str(), Some(true))
        );
    }
    clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    testkit::wait_gone(&clusters, "c1").await;
    let infras: Api<Infra> = Api::namespaced(client.clone(), CONTRACT_NS);
    assert!(infras.list_all().await.is_empty());
    // A reconcile before the cache shows the Infra marked for deletion does
    // not delete it again (the NodeClaim controller records its delete).
    let infra_deletes = env
        .server
        .requests()
        .iter()
        .filter(|r| r.verb == "delete" && r.resource == "infras")
        .count();
    assert_eq!(infra_deletes, 1, "the Infra was deleted more than once");
    assert!(contracts(client).list_all().await.is_empty());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), CONTRACT_NS);
    assert!(secrets.list_all().await.is_empty());
    // The claims go with their Cluster (the garbage collector follows the ownerReference).
    eventually("claims gone with their Cluster", || async {
        claims(client).list_all().await.is_empty().then_some(())
    })
    .await;
    // A new Cluster of the same name rents for its own claims only.
    create_cluster(client, "c1", true).await;
    create_claim(client, "worker-c", "c1", 2).await;
    eventually("worker-c Joined", || async {
        (phase_of(client, "worker-c").await == Some(NodeClaimPhase::Joined)).then_some(())
    })
    .await;
    let rented = contracts_changed(&env, apiserver::store::ChangeType::Added);
    assert_eq!(
        rented, 3,
        "two machines for the old Cluster, one for the new"
    );
}

/// A Cluster removed without its finalizer while the manager was away (its
/// finalizer stripped by hand) has no Cluster reconcile to release its
/// machines: the controller of claims whose Cluster is missing does, from
/// the caches' initial lists, and lets the claims go.
#[tokio::test]
async fn a_cluster_removed_without_its_finalizer_still_has_its_machines_released() {
    let mut env = start().await;
    let client = env.client.clone();
    two_claims_joined(&env).await;
    env.kill_manager();
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({ "metadata": { "finalizers": null } })),
        )
        .await
        .unwrap();
    testkit::wait_gone(&clusters, "c1").await;
    assert_eq!(
        contracts(&client).list_all().await.len(),
        2,
        "nothing was released while the manager was away"
    );
    env.start_manager();
    eventually("every machine released and every object gone", || async {
        let infras: Api<Infra> = Api::namespaced(client.clone(), CONTRACT_NS);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), CONTRACT_NS);
        (contracts(&client).list_all().await.is_empty()
            && infras.list_all().await.is_empty()
            && secrets.list_all().await.is_empty()
            && claims(&client).list_all().await.is_empty())
        .then_some(())
    })
    .await;
    assert_eq!(
        contracts_changed(&env, apiserver::store::ChangeType::Deleted),
        2,
        "both contracts went"
    );
    assert_eq!(env.market.running_guests(), 0, "no guest is left running");
}

/// Claims of a Cluster that does not exist, created while the manager was
/// away, are reported once it is back, though no Infra, contract or Secret
/// of theirs will ever wake them. (Which of the orphans controller's paths
/// holds them depends on the order the caches' lists end in; its unit tests
/// pin the order where the claims' list ends first.)
#[tokio::test]
async fn claims_of_a_missing_cluster_made_while_the_manager_was_away_are_reported() {
    let mut env = start().await;
    let client = env.client.clone();
    create_cluster(&client, "c1", true).await;
    create_claim(&client, "good", "c1", 2).await;
    eventually("good Joined", || async {
        (phase_of(&client, "good").await == Some(NodeClaimPhase::Joined)).then_some(())
    })
    .await;
    env.kill_manager();
    for name in ["stray-1", "stray-2"] {
        create_claim(&client, name, "never-made", 2).await;
    }
    env.start_manager();
    for name in ["stray-1", "stray-2"] {
        let client = &client;
        eventually(&format!("{name} reports ClusterNotFound"), || async move {
            let c = claims(client).get(name).await.ok()?;
            let cond = api::find_condition(&c.status?.conditions, INFRA_COMPOSED)?.clone();
            (cond.reason == reason::CLUSTER_NOT_FOUND).then_some(())
        })
        .await;
    }
    assert_eq!(
        contracts(&client).list_all().await.len(),
        1,
        "only the claim of a real Cluster rents a machine"
    );
}

#[tokio::test]
async fn bad_input_is_reported_and_disturbs_nothing() {
    let env = start().await;
    let client = &env.client;
    create_cluster(client, "c1", true).await;
    let good = create_claim(client, "good", "c1", 2).await;
    create_claim(client, "no-cluster", "missing", 2).await;
    // Beyond any machine: the schema refuses it up front, saying so.
    let too_big = NodeClaim::new(
        "too-big",
        NodeClaimSpec {
            resources: Resources {
                cpus: 5000,
                ..good.spec.resources.clone()
            },
            ..good.spec.clone()
        },
    );
    let refused = claims(client)
        .create(&PostParams::default(), &too_big)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("spec.resources.cpus"),
        "{refused}"
    );
    create_cluster(client, "c2", false).await;
    create_claim(client, "waits", "c2", 2).await;
    for (name, want) in [
        ("no-cluster", reason::CLUSTER_NOT_FOUND),
        ("waits", reason::CLUSTER_NOT_READY),
    ] {
        eventually(&format!("{name} reports {want}"), || async move {
            let c = claims(client).get(name).await.ok()?;
            let cond = api::find_condition(&c.status?.conditions, INFRA_COMPOSED)?.clone();
            (cond.reason == want).then_some(())
        })
        .await;
    }
    eventually("good Joined", || async {
        (phase_of(client, "good").await == Some(NodeClaimPhase::Joined)).then_some(())
    })
    .await;
    let all = contracts(client)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(all.items.len(), 1, "only the good claim rents a machine");
    assert_eq!(
        all.items[0].labels()[CONTRACT_LABEL],
        entry_name(&good.uid().unwrap())
    );
    // A bad claim holds no finalizer; the waiting one gets its node once the URL comes.
    let no_cluster = claims(client).get("no-cluster").await.unwrap();
    assert!(
        !no_cluster
            .finalizers()
            .iter()
            .any(|f| f == NODECLAIM_FINALIZER)
    );
    set_cluster_url(client, "c2").await;
    eventually("waits Joined", || async {
        (phase_of(client, "waits").await == Some(NodeClaimPhase::Joined)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn names_and_a_claims_machine_are_checked_up_front() {
    let env = start().await;
    let client = &env.client;
    let long = "c".repeat(64);
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let mut too_long = Cluster::new(
        &long,
        api::ClusterSpec {
            account: "did:plc:tenant".into(),
            running: true,
        },
    );
    too_long.metadata.namespace = Some(NS.into());
    let refused = clusters
        .create(&PostParams::default(), &too_long)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("at most 63 characters"),
        "{refused}"
    );

    create_cluster(client, "c1", true).await;
    let claim = create_claim(client, "worker", "c1", 2).await;
    let mut of_long = NodeClaim::new("of-long", claim.spec.clone());
    of_long.spec.cluster_name = long;
    let refused = claims(client)
        .create(&PostParams::default(), &of_long)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("spec.clusterName"),
        "{refused}"
    );

    // The machine a claim rents is fixed: resizing or moving it is refused, saying what to do.
    for (patch, field) in [
        (json!({"spec": {"resources": {"cpus": 8}}}), "resources"),
        (json!({"spec": {"location": {"country": "FR"}}}), "location"),
    ] {
        let refused = claims(client)
            .patch("worker", &PatchParams::default(), &Patch::Merge(patch))
            .await
            .unwrap_err();
        let text = refused.to_string();
        assert!(
            text.contains(&format!("{field} is immutable"))
                && text.contains("create a new NodeClaim"),
            "{text}"
        );
    }
    // The graces are the claim's own and may change.
    claims(client)
        .patch(
            "worker",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"joinGraceSeconds": 600}})),
        )
        .await
        .unwrap();
}

/// Write economy (issue 12): a claim that goes well is written once, Joined:
/// the steps of its contract (Bidding, Accepted) are not claim writes, it is
/// shown Requesting only if its node has not joined REQUESTING_SHOWN_AFTER
/// after its creation, and a deleted claim is shown Releasing only if still
/// held RELEASING_SHOWN_AFTER after its deletion (never Released).
#[tokio::test]
async fn a_claim_is_written_once_per_step_of_its_own() {
    let env = start().await;
    let client = &env.client;
    let _ = two_claims_joined(&env).await;
    claims(client)
        .delete("worker-a", &DeleteParams::default())
        .await
        .unwrap();
    testkit::wait_gone(&claims(client), "worker-a").await;
    let history = env.server.history();
    let mut phases = testkit::status_writes(&history, "/nodeclaims", "worker-a");
    // A node may join in a pass after its machine is Deployed: one write more.
    phases.retain(|p| p != "Deployed");
    // The claim and its Cluster (created, then given its URL, just before it)
    // come on two watches: under load the claim may be seen first, and a
    // Pending that says the Cluster is missing or has no URL yet is the
    // truth the manager saw then, not a step of the claim's own.
    if phases.first().map(String::as_str) == Some("Pending") {
        let reason = first_composed_reason(&history, "worker-a");
        assert!(
            [reason::CLUSTER_NOT_FOUND, reason::CLUSTER_NOT_READY].contains(&reason.as_str()),
            "a claim is Pending only while its Cluster is not seen yet, not for {reason:?}"
        );
        phases.remove(0);
        // What it waited for came: it is renting, which is news then.
        if phases.first().map(String::as_str) == Some("Requesting") {
            phases.remove(0);
        }
    }
    // A deleted claim is written only if it is still held
    // RELEASING_SHOWN_AFTER after its deletion (a loaded machine), never sooner.
    if phases.last().map(String::as_str) == Some("Releasing") {
        let (deleted_at, shown_at) = releasing_times(&history, "worker-a");
        assert!(
            shown_at >= deleted_at + nodeclaim::RELEASING_SHOWN_AFTER,
            "Releasing written at {shown_at}, the claim deleted at {deleted_at}"
        );
        phases.pop();
    }
    // A new claim is written Requesting only if its node has not joined
    // REQUESTING_SHOWN_AFTER after its creation (a loaded machine), never sooner.
    if phases.first().map(String::as_str) == Some("Requesting") {
        let (created_at, shown_at) = requesting_times(&history, "worker-a");
        assert!(
            shown_at >= created_at + nodeclaim::REQUESTING_SHOWN_AFTER,
            "Requesting written at {shown_at}, the claim created at {created_at}"
        );
        phases.remove(0);
    }
    assert_eq!(phases, ["Joined"], "one write: the node joined");
    // A reconcile woken (by the Infra's events) before the cache shows the
    // join Secret its pass created does not create it again.
    let secret_creates_again = env
        .server
        .requests()
        .iter()
        .filter(|r| r.verb == "create" && r.resource == "secrets" && r.status == 409)
        .count();
    assert_eq!(secret_creates_again, 0, "a join Secret was created twice");
}

/// When the claim `name` was created, and when its status first said it is
/// being rented (the InfraComposed condition's transition to True).
fn requesting_times(
    history: &[apiserver::testing::HistoryEntry],
    name: &str,
) -> (DateTime<Utc>, DateTime<Utc>) {
    let objects = objects_of(history, name);
    let created_at = objects
        .iter()
        .find_map(|o| rfc3339(&o["metadata"]["creationTimestamp"]))
        .expect("the claim was created");
    let shown_at = objects
        .iter()
        .find(|o| o["status"]["phase"] == "Requesting")
        .and_then(|o| o["status"]["conditions"].as_array().cloned())
        .into_iter()
        .flatten()
        .find(|c| c["type"] == INFRA_COMPOSED)
        .and_then(|c| rfc3339(&c["lastTransitionTime"]))
        .expect("Requesting says the claim is composed");
    (created_at, shown_at)
}

fn objects_of(history: &[apiserver::testing::HistoryEntry], name: &str) -> Vec<serde_json::Value> {
    history
        .iter()
        .filter(|entry| entry.name == name && entry.resource.ends_with("/nodeclaims"))
        .map(apiserver::testing::HistoryEntry::object)
        .collect()
}

fn rfc3339(v: &serde_json::Value) -> Option<DateTime<Utc>> {
    v.as_str()
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&Utc))
}

/// When the claim `name` was deleted, and when its status first said so
/// (the InfraComposed condition's transition to ClaimDeleting).
fn releasing_times(
    history: &[apiserver::testing::HistoryEntry],
    name: &str,
) -> (DateTime<Utc>, DateTime<Utc>) {
    let objects = objects_of(history, name);
    let deleted_at = objects
        .iter()
        .find_map(|o| rfc3339(&o["metadata"]["deletionTimestamp"]))
        .expect("the claim was deleted");
    let shown_at = objects
        .iter()
        .filter_map(|o| o["status"]["conditions"].as_array().cloned())
        .flatten()
        .find(|c| c["type"] == INFRA_COMPOSED && c["reason"] == reason::CLAIM_DELETING)
        .and_then(|c| rfc3339(&c["lastTransitionTime"]))
        .expect("Releasing says the claim is being deleted");
    (deleted_at, shown_at)
}

/// The reason of the InfraComposed condition in the first status written to
/// the claim `name`.
fn first_composed_reason(history: &[apiserver::testing::HistoryEntry], name: &str) -> String {
    history
        .iter()
        .filter(|entry| entry.name == name && entry.resource.ends_with("/nodeclaims"))
        .map(|entry| entry.object()["status"].clone())
        .find(|status| !status.is_null())
        .and_then(|status| {
            status["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == INFRA_COMPOSED)?["reason"]
                .as_str()
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// Write economy (issue 12): the Infra is born with the Infra controller's
/// release finalizer (the NodeClaim controller's apply carries it), so no
/// later write adds it; only the Infra controller's cleanup removes it.
#[tokio::test]
async fn an_infra_is_born_with_its_release_finalizer() {
    let env = start().await;
    let _ = two_claims_joined(&env).await;
    let infra_name = api::names::infra_name(NS, "c1");
    let finalizers: Vec<serde_json::Value> = env
        .server
        .history()
        .iter()
        .filter(|entry| entry.name == infra_name && entry.resource.ends_with("/infras"))
        .map(|entry| entry.object()["metadata"]["finalizers"].clone())
        .collect();
    assert!(!finalizers.is_empty(), "the Infra was written");
    assert!(
        finalizers
            .iter()
            .all(|f| *f == json!([INFRA_RELEASE_FINALIZER])),
        "the Infra's finalizers, write by write: {finalizers:?}"
    );
}
