//! The invariants of DESIGN.md section 5, checked on the server's objects, its
//! write history and the local market after a scenario.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use api::names::{
    CLUSTER_LABEL, CLUSTER_NAMESPACE_LABEL, CONTRACT_LABEL, INFRA_MANAGER, INFRA_NAME_LABEL,
    JOIN_SECRET_TYPE, REQUESTER_MANAGER, entry_name, infra_name,
};
use api::{Infra, NodeClaim, NodeClaimPhase};
use apiserver::testing::HistoryEntry;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use market::{ContractKey, LocalMarket, Receipt};
use testkit::ListAll;

use super::{CONTRACT_NS, Env};

fn is_deleted(e: &HistoryEntry) -> bool {
    format!("{:?}", e.change) == "Deleted"
}

fn contracts_in(history: &[HistoryEntry]) -> impl Iterator<Item = &HistoryEntry> {
    history
        .iter()
        .filter(|e| e.resource.ends_with("/computecontracts"))
}

/// Runs every invariant that holds at any converged point (1, 2, 3, 5, 6, 7, 8).
pub async fn assert_all(env: &Env) {
    assert_quiet(env).await;
    let history = env.server.history();
    one_infra_per_cluster_and_contract_per_claim(env).await;
    writers_are_exclusive(&history);
    status_written_only_by_the_requester(env);
    deleted_only_when_released(&history);
    published_at_most_once(env, &history);
    secrets_stay_in_join_secrets(&history);
    claims_reach_only_their_namespace(env, &history).await;
}

/// Invariant 1 on the objects now.
pub async fn one_infra_per_cluster_and_contract_per_claim(env: &Env) {
    let claims: Vec<NodeClaim> = Api::<NodeClaim>::all(env.client.clone()).list_all().await;
    let infras = env.infras().list_all().await;
    let contracts = env.contracts().list_all().await;
    let mut clusters_with_claims = BTreeSet::new();
    for claim in &claims {
        // A Failed claim is final and keeps no entry (plan 0005 N2).
        let failed = claim.status.as_ref().and_then(|s| s.phase) == Some(NodeClaimPhase::Failed);
        let live = claim.metadata.deletion_timestamp.is_none() && !failed;
        let Some(infra_ref) = claim.status.as_ref().and_then(|s| s.infra.as_ref()) else {
            continue;
        };
        if !live {
            continue;
        }
        let ns = claim.namespace().unwrap();
        clusters_with_claims.insert((ns.clone(), claim.spec.cluster_name.clone()));
        let entry = entry_name(&claim.uid().unwrap());
        let mine: Vec<_> = contracts
            .iter()
            .filter(|c| c.labels().get(CONTRACT_LABEL) == Some(&entry))
            .collect();
        assert!(
            mine.len() <= 1,
            "claim {ns}/{} has {} ComputeContracts",
            claim.name_any(),
            mine.len()
        );
        if let Some(contract) = mine.first() {
            assert_eq!(contract.name_any(), infra_ref.compute_contract);
        }
    }
    for (ns, cluster) in clusters_with_claims {
        let theirs: Vec<&Infra> = infras
            .iter()
            .filter(|i| {
                i.labels().get(CLUSTER_LABEL) == Some(&cluster)
                    && i.labels().get(CLUSTER_NAMESPACE_LABEL) == Some(&ns)
            })
            .collect();
        assert_eq!(theirs.len(), 1, "Cluster {ns}/{cluster}: one Infra");
        assert_eq!(theirs[0].name_any(), infra_name(&ns, &cluster));
    }
    // No contract outside an entry of a live claim, unless it is being released.
    let entries: BTreeSet<String> = claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| entry_name(&c.uid().unwrap()))
        .collect();
    for c in &contracts {
        let orphan = !c
            .labels()
            .get(CONTRACT_LABEL)
            .is_some_and(|e| entries.contains(e));
        assert!(
            !orphan || c.spec.release,
            "ComputeContract {} belongs to no live claim and is not released",
            c.name_any()
        );
    }
}

/// Invariant 2: from the managedFields of every ComputeContract version written.
pub fn writers_are_exclusive(history: &[HistoryEntry]) {
    for e in contracts_in(history) {
        let object = e.object();
        for managed in object["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let manager = managed["manager"].as_str().unwrap_or_default();
            let status = managed["subresource"].as_str() == Some("status");
            let fields = &managed["fieldsV1"];
            if status {
                assert_eq!(
                    manager, REQUESTER_MANAGER,
                    "status of {} written by {manager}",
                    e.name
                );
            } else if fields.get("f:spec").is_some() {
                assert_eq!(
                    manager, INFRA_MANAGER,
                    "spec of {} written by {manager}",
                    e.name
                );
            }
            assert!(
                status || fields.get("f:status").is_none(),
                "{manager} wrote status of {} outside the status subresource",
                e.name
            );
        }
    }
}

/// Invariant 2 from the request log: every accepted write of a ComputeContract's status
/// subresource came from the Requester's field manager.
pub fn status_written_only_by_the_requester(env: &Env) {
    let mut seen = 0;
    for r in env.server.requests() {
        let write = matches!(r.verb.as_str(), "create" | "update" | "patch");
        if write && r.resource == "computecontracts/status" && r.status < 300 {
            seen += 1;
            assert_eq!(
                r.field_manager, REQUESTER_MANAGER,
                "{} {} by {:?}",
                r.method, r.uri, r.user_agent
            );
        }
    }
    let contracts_written = env
        .server
        .history()
        .iter()
        .any(|e| e.resource.ends_with("/computecontracts"));
    assert!(
        seen > 0 || !contracts_written,
        "no status write of a ComputeContract in the request log: is its resource named differently?"
    );
}

/// Invariant 3: a ComputeContract is deleted only once Released. Its release
/// finalizer holds it until then, so the Deleted entry (the object's last
/// state) shows Released, whoever asked for the deletion and when.
pub fn deleted_only_when_released(history: &[HistoryEntry]) {
    for e in contracts_in(history) {
        let object = e.object();
        if is_deleted(e) {
            assert_eq!(
                object["status"]["phase"], "Released",
                "ComputeContract {} deleted while {}",
                e.name, object["status"]["phase"]
            );
        }
    }
}

/// The names of the ComputeContracts written, and of those that went Failed.
fn contracts_and_failed(history: &[HistoryEntry]) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut failed = BTreeSet::new();
    let mut names = BTreeSet::new();
    for e in contracts_in(history) {
        names.insert(e.name.clone());
        if e.object()["status"]["phase"] == "Failed" {
            failed.insert(e.name.clone());
        }
    }
    (names, failed)
}

/// Invariant 5 (no second RFP): each contract published at most once, unless it went Failed.
pub fn published_at_most_once(env: &Env, history: &[HistoryEntry]) {
    if let Some(atproto) = &env.atproto {
        let (names, failed) = contracts_and_failed(history);
        // The records name no contract (they are public): count them all.
        // A contract that never failed publishes one request, ever.
        let rfps = atproto.rfps();
        assert!(
            rfps <= names.len() + failed.len(),
            "{rfps} requests for proposal for {} contracts ({} failed)",
            names.len(),
            failed.len()
        );
        rented_once(env, history);
        return;
    }
    published_and_rented_at_most_once(&env.market, history);
}

/// Invariant 5 at a local market (no second RFP, no second machine): each contract
/// published at most once and rented at most one guest, unless it went Failed. The
/// market may be one opened on the state directory of manager processes.
pub fn published_and_rented_at_most_once(market: &LocalMarket, history: &[HistoryEntry]) {
    let (names, failed) = contracts_and_failed(history);
    for name in names {
        let key = ContractKey::new(CONTRACT_NS, &name);
        let rfps = market.rfps_published(&key);
        assert!(
            rfps <= 1 || failed.contains(&name),
            "ComputeContract {name} published {rfps} times"
        );
        let guests = market.guests_rented(&key);
        assert!(
            guests <= 1 || failed.contains(&name),
            "ComputeContract {name} rented {guests} machines"
        );
    }
}

/// Every value of every join Secret ever written (decoded, and as the server stored it).
fn secret_values(history: &[HistoryEntry]) -> BTreeSet<String> {
    let mut values = BTreeSet::new();
    for e in history
        .iter()
        .filter(|e| e.resource == "/secrets" && !is_deleted(e))
    {
        let Ok(secret) = serde_json::from_value::<Secret>(e.object()) else {
            continue;
        };
        if secret.type_.as_deref() != Some(JOIN_SECRET_TYPE) {
            continue;
        }
        for (key, value) in secret.data.unwrap_or_default() {
            let decoded = String::from_utf8_lossy(&value.0).into_owned();
            // Short values (a node name, a URL) are not secrets.
            let secret_like =
                matches!(key.as_str(), "token" | "ca.crt" | "caData" | "ca") || decoded.len() >= 32;
            if secret_like && !decoded.starts_with("https://") {
                values.insert(decoded);
            }
        }
        for value in secret.string_data.unwrap_or_default().into_values() {
            if value.len() >= 32 && !value.starts_with("https://") {
                values.insert(value);
            }
        }
    }
    values
}

/// Invariant 6: the join token and CA only ever appear in join Secrets (and the Cluster's
/// own status, where whoever runs the cluster put the CA), never in an Infra, a
/// ComputeContract, an Event or a log line.
pub fn secrets_stay_in_join_secrets(history: &[HistoryEntry]) {
    use base64::Engine as _;
    let values = secret_values(history);
    assert!(!values.is_empty() || !history.iter().any(|e| e.resource == "/secrets"));
    let encoded: Vec<String> = values
        .iter()
        .map(|v| base64::engine::general_purpose::STANDARD.encode(v))
        .collect();
    let logs = super::logs::text();
    for e in history.iter().filter(|e| {
        e.resource.ends_with("/infras")
            || e.resource.ends_with("/computecontracts")
            || e.resource.ends_with("/events")
            || e.resource.ends_with("/nodeclaims")
    }) {
        let text = e.object().to_string();
        for (plain, b64) in values.iter().zip(&encoded) {
            assert!(
                !text.contains(plain.trim()) && !text.contains(b64),
                "a join secret value leaked into {} {}/{}",
                e.resource,
                e.namespace,
                e.name
            );
        }
    }
    for (plain, b64) in values.iter().zip(&encoded) {
        assert!(
            !logs.contains(plain.trim()) && !logs.contains(b64),
            "a join secret value leaked into the logs"
        );
    }
}

/// Invariant 7: a claim's Infra is its own namespace's Cluster's, and every Infra's
/// node entries come from the namespace of its Cluster.
pub async fn claims_reach_only_their_namespace(env: &Env, history: &[HistoryEntry]) {
    let claims = Api::<NodeClaim>::all(env.client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    for claim in claims {
        if let Some(infra) = claim.status.as_ref().and_then(|s| s.infra.as_ref()) {
            assert_eq!(
                infra.name,
                infra_name(&claim.namespace().unwrap(), &claim.spec.cluster_name),
                "claim {} names another Cluster's Infra",
                claim.name_any()
            );
        }
    }
    for e in history.iter().filter(|e| e.resource.ends_with("/infras")) {
        let object = e.object();
        let cluster_ns = &object["spec"]["clusterRef"]["namespace"];
        for node in object["spec"]["nodes"].as_array().into_iter().flatten() {
            assert_eq!(
                &node["nodeClaimRef"]["namespace"], cluster_ns,
                "Infra {} holds a node of another namespace",
                e.name
            );
        }
    }
}

/// Invariant 8: once converged, no writes for 2 s (Events and Leases aside).
pub async fn assert_quiet(env: &Env) {
    let counted = |h: Vec<HistoryEntry>| -> Vec<String> {
        h.into_iter()
            .filter(|e| !e.resource.ends_with("/events") && !e.resource.ends_with("/leases"))
            .map(|e| format!("{:?} {} {}/{}", e.change, e.resource, e.namespace, e.name))
            .collect()
    };
    // Let the last reconciles of the scenario settle first.
    let mut before = counted(env.server.history());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = counted(env.server.history());
        if after.len() == before.len() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still writing after convergence: {:?}",
            &after[before.len()..]
        );
        before = after;
    }
}

/// Invariant 4: nothing of the Cluster `ns/name` remains, and every guest it rented was released.
pub async fn assert_cluster_gone(env: &Env, ns: &str, name: &str) {
    let infra = infra_name(ns, name);
    let selector = ListParams::default().labels(&format!("{INFRA_NAME_LABEL}={infra}"));
    assert!(
        env.infras().get_opt(&infra).await.unwrap().is_none(),
        "Infra {infra} remains"
    );
    let left = env.contracts().list(&selector).await.unwrap().items;
    assert!(left.is_empty(), "ComputeContracts of {infra} remain");
    let secrets = env.secrets().list(&selector).await.unwrap().items;
    assert!(secrets.is_empty(), "join Secrets of {infra} remain");
    for receipt in receipts_of(&env.server.history(), Some(&infra)).values() {
        if let Some(atproto) = &env.atproto {
            let machines = atproto.machines_of(receipt);
            assert!(
                !machines.is_empty() && machines.iter().all(|m| !m.running),
                "guest {} of {infra} never released: {machines:?}",
                receipt.uri
            );
            continue;
        }
        assert!(
            env.market.release_calls(receipt) >= 1,
            "guest {} of {infra} never released",
            receipt.uri
        );
    }
}

/// Invariant 4 for the whole contract namespace: no Infra, ComputeContract or join
/// Secret is left, and the market runs no guest. For the end of a scenario that
/// deleted everything it made.
pub async fn assert_nothing_left(client: &kube::Client, market: &LocalMarket) {
    let infras: Api<Infra> = Api::namespaced(client.clone(), CONTRACT_NS);
    let contracts: Api<api::ComputeContract> = Api::namespaced(client.clone(), CONTRACT_NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), CONTRACT_NS);
    let infras_left = names_in(&infras).await;
    assert!(infras_left.is_empty(), "Infras left: {infras_left:?}");
    let contracts_left = names_in(&contracts).await;
    assert!(
        contracts_left.is_empty(),
        "ComputeContracts left: {contracts_left:?}"
    );
    let join_secrets: Vec<String> = secrets
        .list_all()
        .await
        .iter()
        .filter(|s| s.type_.as_deref() == Some(JOIN_SECRET_TYPE))
        .map(ResourceExt::name_any)
        .collect();
    assert!(
        join_secrets.is_empty(),
        "join Secrets left: {join_secrets:?}"
    );
    assert_eq!(market.running_guests(), 0, "guests still running");
}

/// The receipts of the ComputeContracts (of one Infra, or all) ever written, by contract name.
pub fn receipts_of(history: &[HistoryEntry], infra: Option<&str>) -> BTreeMap<String, Receipt> {
    let mut receipts = BTreeMap::new();
    for e in contracts_in(history) {
        let object = e.object();
        if infra.is_some_and(|i| object["metadata"]["labels"][INFRA_NAME_LABEL] != i) {
            continue;
        }
        let receipt = &object["status"]["receipt"];
        if let (Some(uri), Some(cid)) = (receipt["uri"].as_str(), receipt["cid"].as_str()) {
            receipts.insert(
                e.name.clone(),
                Receipt {
                    uri: uri.to_owned(),
                    cid: cid.to_owned(),
                },
            );
        }
    }
    receipts
}

/// Invariant 5 at an atproto market (no second accept): every receipt a
/// contract recorded started exactly one machine, and no machine was started
/// that no contract knows (an accept processed twice would be one).
pub fn rented_once(env: &Env, history: &[HistoryEntry]) {
    let Some(atproto) = &env.atproto else { return };
    let receipts: BTreeSet<String> = receipts_of(history, None)
        .into_values()
        .map(|r| r.uri)
        .collect();
    for uri in &receipts {
        let machines: Vec<_> = atproto
            .machines()
            .into_iter()
            .filter(|(_, m)| &m.receipt.uri == uri)
            .collect();
        assert_eq!(machines.len(), 1, "receipt {uri}: {machines:?}");
    }
    let unknown: Vec<_> = atproto
        .machines()
        .into_iter()
        .filter(|(_, m)| !receipts.contains(&m.receipt.uri))
        .collect();
    assert!(
        unknown.is_empty(),
        "machines no contract knows (a second accept?): {unknown:?}"
    );
}

/// The resourceVersion of the first history entry that matches.
pub fn first_rv(
    history: &[HistoryEntry],
    what: &str,
    matches: impl Fn(&HistoryEntry) -> bool,
) -> u64 {
    history
        .iter()
        .find(|e| matches(e))
        .map(|e| e.resource_version)
        .unwrap_or_else(|| panic!("never happened: {what}"))
}

/// Whether `e` deletes `name` of the resource whose path ends in `resource`.
pub fn deleted(e: &HistoryEntry, resource: &str, name: &str) -> bool {
    is_deleted(e) && e.resource.ends_with(resource) && e.name == name
}

/// Whether `e` writes the ComputeContract `name` Released.
pub fn released(e: &HistoryEntry, name: &str) -> bool {
    e.resource.ends_with("/computecontracts")
        && e.name == name
        && e.object()["status"]["phase"] == "Released"
}

/// When `name` of the resource whose path ends in `resource` was deleted.
pub fn deleted_at(history: &[HistoryEntry], resource: &str, name: &str) -> u64 {
    first_rv(history, &format!("{name} deleted"), |e| {
        deleted(e, resource, name)
    })
}

/// When the ComputeContract `name` was first written Released.
pub fn released_at(history: &[HistoryEntry], name: &str) -> u64 {
    first_rv(history, &format!("{name} released"), |e| released(e, name))
}

/// Every named ComputeContract was released before the Infra of the Cluster
/// `NS/cluster` was deleted; returns when the Infra was deleted.
pub fn released_before_the_infra_went(
    history: &[HistoryEntry],
    cluster: &str,
    names: &[String],
) -> u64 {
    let infra = api::names::infra_name(super::NS, cluster);
    let infra_gone = deleted_at(history, "/infras", &infra);
    for name in names {
        assert!(
            released_at(history, name) < infra_gone,
            "{name} released before {infra} went"
        );
    }
    infra_gone
}

/// The names of every object `api` lists now.
async fn names_in<K>(api: &Api<K>) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list_metadata(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect()
}
