//! The NodeClaim decision: composition, deletion, bad input and the
//! invariants over random claims (one Infra, one entry per live claim, no
//! secret outside the join Secret).

use crate::nodeclaim_support;

use api::names::{CONTRACT_LABEL, compute_contract_name, entry_name, join_secret_name};
use api::{ComputeContractPhase, ConditionStatus, NodeClaim, NodeClaimPhase};
use chrono::Duration;
use controllers::nodeclaim::compose::ClusterKey;
use controllers::nodeclaim::conditions::{INFRA_COMPOSED, READY, reason};
use controllers::nodeclaim::decide::{InfraAction, Plan};
use controllers::time::to_time;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use nodeclaim_support::*;
use proptest::prelude::*;

#[test]
fn two_claims_make_one_infra_with_two_node_entries() {
    let mut w = two_claims();
    let plan = w.reconcile(start());
    assert!(plan.add_cluster_finalizer.is_some());
    assert_eq!(
        plan.claim_metadata
            .iter()
            .filter(|c| c.add_finalizer)
            .count(),
        2
    );
    assert_eq!(plan.write_secrets.len(), 2);
    let infra = w.infra.clone().expect("one Infra");
    assert_eq!(infra.name_any(), api::names::infra_name(NS, "c1"));
    assert_eq!(infra.namespace().as_deref(), Some(CONTRACT_NS));
    assert_eq!(infra.labels()[api::names::CLUSTER_LABEL], "c1");
    assert_eq!(infra.labels()[api::names::CLUSTER_NAMESPACE_LABEL], NS);
    let cref = infra.spec.cluster_ref.as_ref().unwrap();
    assert_eq!((cref.namespace.as_str(), cref.name.as_str()), (NS, "c1"));
    assert_eq!(infra.spec.contracts.len(), 2);
    assert_eq!(infra.spec.nodes.len(), 2);
    assert_eq!(infra.spec.secrets.len(), 2);

    let entry_a = entry_name("uid-a");
    let entry_b = entry_name("uid-b");
    let node_of = |entry: &str| {
        infra
            .spec
            .nodes
            .iter()
            .find(|n| n.contract == entry)
            .unwrap()
    };
    let (node_a, node_b) = (node_of(&entry_a), node_of(&entry_b));
    assert_eq!(
        node_a.owner_did, "did:plc:tenant",
        "defaults to the Cluster's account"
    );
    assert_eq!(node_b.owner_did, "did:plc:someone-else");
    assert_eq!(node_a.adopt, None);
    assert_eq!(
        node_b.adopt.as_ref().unwrap().cid,
        "bafyreceipt",
        "adopt flows to the node entry"
    );
    let join = node_a.node_join.as_ref().unwrap();
    assert_eq!(join.api_server, URL);
    assert!(join.node_name.starts_with("worker-a-"));
    assert_eq!(node_a.node_claim_ref.uid, "uid-a");
    assert_eq!(node_a.node_claim_ref.name, "worker-a");
    let secret_a = infra
        .spec
        .secrets
        .iter()
        .find(|s| s.contract == entry_a)
        .unwrap();
    assert_eq!(secret_a.secret_ref.name, join_secret_name(&entry_a));
    assert!(
        infra
            .spec
            .contracts
            .iter()
            .all(|c| c.role == api::Role::Worker)
    );

    // The join Secret carries the grant, URL, CA and node name, labelled.
    let s = w
        .secrets
        .iter()
        .find(|s| s.name_any() == join_secret_name(&entry_a))
        .unwrap();
    assert_eq!(s.type_.as_deref(), Some(api::names::JOIN_SECRET_TYPE));
    assert_eq!(s.labels()[CONTRACT_LABEL], entry_a);
    let data = s.data.as_ref().unwrap();
    assert_eq!(data["apiServer"].0, URL.as_bytes());
    assert_eq!(data["caData"].0, CA.as_bytes());
    assert!(!data["token"].0.is_empty());

    // Claims name their entry and are Requesting.
    let status = w.claim("worker-a").status.clone().unwrap();
    let r = status.infra.unwrap();
    assert_eq!(r.contract, entry_a);
    assert_eq!(
        r.compute_contract,
        compute_contract_name(&infra.name_any(), &entry_a)
    );
    assert_eq!(status.phase, Some(NodeClaimPhase::Requesting));
    assert!(cond(&w, "worker-a", INFRA_COMPOSED).is_true());
    assert_eq!(w.cluster_nodes(), Some(2));
}

#[test]
fn converged_world_plans_nothing_and_keeps_tokens() {
    let mut w = two_claims();
    w.settle(start());
    let tokens: Vec<_> = w.secrets.iter().map(|s| s.data.clone()).collect();
    let plan = w.reconcile(start() + Duration::seconds(5));
    assert!(plan.is_empty(), "{plan:?}");
    assert!(
        !plan.awaiting_removal && plan.requeue_at.is_none(),
        "no recheck when converged"
    );
    // A URL change rewrites the Secret but keeps its token.
    w.cluster.as_mut().unwrap().status.as_mut().unwrap().url = Some("https://new:6443".into());
    let plan = w.reconcile(start() + Duration::seconds(6));
    assert_eq!(plan.write_secrets.len(), 2);
    assert!(plan.write_secrets.iter().all(|s| s.token.is_some()));
    for (before, after) in tokens.iter().zip(w.secrets.iter()) {
        assert_eq!(
            before.as_ref().unwrap()["token"],
            after.data.as_ref().unwrap()["token"]
        );
    }
}

/// The world's reconciles read its Secrets as the shared cache keeps them
/// (`CachedJoinSecret`: labels, token and the digest of the data).
#[test]
fn cached_join_secrets_are_compared_by_the_digest_of_their_data() {
    let mut w = two_claims();
    w.settle(start());
    let whole = w.secrets.clone();
    assert!(
        whole
            .iter()
            .all(|s| s.data.as_ref().unwrap().contains_key("caData")),
        "the server's Secrets hold the CA"
    );
    let plan = w.reconcile(start() + Duration::seconds(5));
    assert!(plan.write_secrets.is_empty(), "{plan:?}");
    // Someone changed one Secret's CA: that one is rewritten, with its token.
    let mut edited = whole.clone();
    edited[0]
        .data
        .as_mut()
        .unwrap()
        .get_mut("caData")
        .unwrap()
        .0 = b"LS0t".to_vec();
    w.secrets = edited.clone();
    let plan = w.reconcile(start() + Duration::seconds(6));
    assert_eq!(plan.write_secrets.len(), 1, "{plan:?}");
    assert_eq!(plan.write_secrets[0].name, edited[0].name_any());
    assert_eq!(
        plan.write_secrets[0].token.as_deref().map(str::as_bytes),
        Some(whole[0].data.as_ref().unwrap()["token"].0.as_slice())
    );
    // A new URL rewrites every Secret, each with its token.
    w.cluster.as_mut().unwrap().status.as_mut().unwrap().url = Some("https://new:6443".into());
    let plan = w.reconcile(start() + Duration::seconds(7));
    assert_eq!(plan.write_secrets.len(), 2, "{plan:?}");
    assert!(plan.write_secrets.iter().all(|s| s.token.is_some()));
}

#[test]
fn deleted_claim_leaves_the_infra_and_waits_for_its_contract() {
    let mut w = two_claims();
    w.settle(start());
    let before = phase(&w, "worker-a");
    w.claim_mut("worker-a").metadata.deletion_timestamp = Some(to_time(start()));
    let plan = w.reconcile(start());
    let Some(InfraAction::Apply(infra)) = &plan.infra else {
        panic!("entry must leave")
    };
    assert_eq!(infra.spec.contracts.len(), 1);
    assert!(
        plan.remove_claim_finalizers.is_empty(),
        "contract still there"
    );
    assert!(
        plan.delete_secrets.is_empty(),
        "secret outlives the contract"
    );
    // Write economy (plan 0012 S6): a claim deleted a moment ago is not
    // written; it is looked at again when it would be shown Releasing.
    let shown = start() + controllers::nodeclaim::RELEASING_SHOWN_AFTER;
    assert!(
        plan.claim_statuses.is_empty(),
        "no status write while the deletion is new: {:?}",
        plan.claim_statuses
    );
    assert_eq!(phase(&w, "worker-a"), before);
    assert_eq!(plan.requeue_at, Some(shown));
    // Still held when the time comes: it says Releasing and why.
    shown_releasing_at(&mut w, "worker-a", before, shown);
    w.infra_step(); // released
    w.reconcile(shown);
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Released));
    w.infra_step(); // deleted
    let plan = w.reconcile(shown);
    let deleted: Vec<&str> = plan
        .delete_secrets
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(deleted, vec![join_secret_name(&entry_name("uid-a"))]);
    assert!(
        plan.remove_claim_finalizers.is_empty(),
        "secret still in the cache"
    );
    let plan = w.reconcile(shown);
    assert_eq!(plan.remove_claim_finalizers.len(), 1);
    assert!(w.claims.iter().all(|c| c.name_any() != "worker-a"));
    assert_eq!(w.entries(), vec![entry_name("uid-b")]);
    assert_eq!(w.cluster_nodes(), Some(1));
}

/// A deleted claim whose finalizer a pass removes takes no status write in
/// that pass, even when its Released is due: it goes with the removal, and
/// the write would only turn the removal into a conflict (the removal is
/// guarded by the version read, which the status write replaced).
#[test]
fn a_claim_let_go_in_a_pass_takes_no_status_write_in_it() {
    let mut w = two_claims();
    w.settle(start());
    w.set_contract_phase(
        "worker-a",
        ComputeContractPhase::Deployed,
        guest(Some("node-a")),
    );
    w.reconcile(start());
    let running = phase(&w, "worker-a");
    assert!(
        matches!(
            running,
            Some(NodeClaimPhase::Deployed | NodeClaimPhase::Joined)
        ),
        "{running:?}"
    );
    w.claim_mut("worker-a").metadata.deletion_timestamp = Some(to_time(start()));
    w.reconcile(start());
    w.infra_step(); // released
    w.infra_step(); // deleted
    let plan = w.reconcile(start());
    assert_eq!(plan.delete_secrets.len(), 1, "{plan:?}");
    // Its removal came late (a long queue): a deleting claim's status is due
    // by now, and it would say Released.
    let late = start() + controllers::nodeclaim::RELEASING_SHOWN_AFTER + Duration::seconds(1);
    let plan = w.decide(late);
    assert_eq!(plan.remove_claim_finalizers.len(), 1, "{plan:?}");
    assert!(
        plan.claim_statuses.iter().all(|c| c.name != "worker-a"),
        "the claim goes in this pass: {:?}",
        plan.claim_statuses
    );
    w.apply(&plan);
    assert!(w.claims.iter().all(|c| c.name_any() != "worker-a"));
}

/// A deleted `claim` keeps its status `before` until `shown`, then says
/// Releasing and why (its deletion).
fn shown_releasing_at(
    w: &mut World,
    claim: &str,
    before: Option<NodeClaimPhase>,
    shown: chrono::DateTime<chrono::Utc>,
) {
    w.reconcile(shown - Duration::seconds(1));
    assert_eq!(phase(w, claim), before);
    w.reconcile(shown);
    assert_eq!(phase(w, claim), Some(NodeClaimPhase::Releasing));
    assert_eq!(
        cond(w, claim, INFRA_COMPOSED).reason,
        reason::CLAIM_DELETING
    );
}

/// Plan 0016 C4: at scale a deleted claim reaches its first reconcile long
/// after its deletion. The hold counts from when the controller first saw
/// it deleted (and could act), not from the deletionTimestamp: a release
/// still pending a hold after that is shown Releasing all the same.
#[test]
fn a_deleted_claim_that_queued_is_held_from_when_the_controller_first_saw_it() {
    let mut w = two_claims();
    w.settle(start());
    let before = phase(&w, "worker-a");
    let deleted_at = start() - Duration::seconds(60);
    w.claim_mut("worker-a").metadata.deletion_timestamp = Some(to_time(deleted_at));
    w.first_seen.insert("uid-a".into(), start());
    let plan = w.reconcile(start());
    assert!(
        matches!(plan.infra, Some(InfraAction::Apply(_))),
        "the entry leaves at once"
    );
    assert!(
        plan.claim_statuses.is_empty(),
        "deleted a minute ago but first seen now: not written yet: {:?}",
        plan.claim_statuses
    );
    let shown = start() + controllers::nodeclaim::RELEASING_SHOWN_AFTER;
    assert_eq!(plan.requeue_at, Some(shown));
    // Still held a hold after the controller acted: it says Releasing and why.
    shown_releasing_at(&mut w, "worker-a", before, shown);
    // A first sight earlier than the deletion (a claim seen new) never shortens its hold.
    let mut w = two_claims();
    w.settle(start());
    w.claim_mut("worker-b").metadata.deletion_timestamp = Some(to_time(start()));
    w.first_seen
        .insert("uid-b".into(), start() - Duration::seconds(60));
    let plan = w.reconcile(start());
    assert!(plan.claim_statuses.is_empty(), "{:?}", plan.claim_statuses);
    assert_eq!(plan.requeue_at, Some(shown));
}

#[test]
fn recreated_claim_is_a_new_entry_and_the_old_one_is_released() {
    let mut w = two_claims();
    w.settle(start());
    w.claim_mut("worker-a").metadata.deletion_timestamp = Some(to_time(start()));
    w.claims.push(claim("worker-a-new", "placeholder", "c1"));
    // Same name, new uid: replace the placeholder the way the API server would after the old one is gone.
    w.claims.last_mut().unwrap().metadata.name = Some("worker-a".into());
    w.claims.last_mut().unwrap().metadata.uid = Some("uid-a2".into());
    let plan = w.decide(start());
    let Some(InfraAction::Apply(infra)) = &plan.infra else {
        panic!()
    };
    let names: Vec<_> = infra
        .spec
        .contracts
        .iter()
        .map(|c| c.name.clone())
        .collect();
    assert!(names.contains(&entry_name("uid-a2")));
    assert!(!names.contains(&entry_name("uid-a")));
    assert_ne!(entry_name("uid-a2"), entry_name("uid-a"));
}

#[test]
fn cluster_deletion_deletes_the_infra_then_lets_go() {
    let mut w = two_claims();
    w.settle(start());
    w.cluster.as_mut().unwrap().metadata.deletion_timestamp = Some(to_time(start()));
    let plan = w.reconcile(start());
    assert!(matches!(plan.infra, Some(InfraAction::Delete(_))));
    assert!(plan.remove_cluster_finalizer.is_none());
    assert_eq!(
        cond(&w, "worker-a", INFRA_COMPOSED).reason,
        reason::CLUSTER_DELETING
    );
    w.settle(start());
    assert!(w.infra.is_none() && w.contracts.is_empty() && w.secrets.is_empty());
    assert!(w.cluster.is_none(), "finalizer removed once all is gone");
}

fn bad(world: &mut World, claim: NodeClaim) -> Plan {
    world.claims.push(claim);
    world.reconcile(start() + Duration::seconds(1))
}

#[test]
fn bad_input_gets_a_reason_and_leaves_other_claims_alone() {
    type Spoil = fn(&mut NodeClaim);
    let cases: Vec<(&str, Spoil)> = vec![
        (reason::CLUSTER_NOT_FOUND, |c| {
            c.spec.cluster_name = "no-such".into()
        }),
        (reason::CLUSTER_NAME_INVALID, |c| {
            c.spec.cluster_name = "other-ns/c1".into()
        }),
        (reason::IMPOSSIBLE_RESOURCES, |c| c.spec.resources.cpus = 0),
        (reason::IMPOSSIBLE_RESOURCES, |c| {
            c.spec.resources.disk = u64::MAX
        }),
        (reason::INVALID_OWNER_DID, |c| {
            c.spec.owner_did = Some("alice".into())
        }),
        (reason::CLUSTER_OWNER_MISMATCH, |c| {
            c.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "socialweb.computer/v1alpha1".into(),
                kind: "Cluster".into(),
                name: "c2".into(),
                uid: "uid-cluster-c2".into(),
                controller: Some(true),
                ..OwnerReference::default()
            }]);
        }),
    ];
    for (want, spoil) in cases {
        let mut w = two_claims();
        w.settle(start());
        let infra_before = w.infra.clone().unwrap().spec;
        let mut c = claim("bad", "uid-bad", "c1");
        spoil(&mut c);
        if c.spec.cluster_name != "c1" {
            // A claim of another key: the reconcile of its own key reports it.
            let mut other = World::new(&c.spec.cluster_name);
            other.cluster = None;
            other.key.name = c.spec.cluster_name.clone();
            let plan = bad(&mut other, c);
            assert!(plan.infra.is_none() || matches!(plan.infra, Some(InfraAction::Keep)));
            assert_eq!(cond(&other, "bad", INFRA_COMPOSED).reason, want);
            assert!(other.infra.is_none());
            continue;
        }
        let plan = bad(&mut w, c);
        assert_eq!(cond(&w, "bad", INFRA_COMPOSED).reason, want, "{want}");
        assert_eq!(
            cond(&w, "bad", INFRA_COMPOSED).status,
            ConditionStatus::False
        );
        assert!(!cond(&w, "bad", INFRA_COMPOSED).message.is_empty());
        assert_eq!(cond(&w, "bad", READY).reason, want);
        assert_eq!(phase(&w, "bad"), Some(NodeClaimPhase::Pending));
        assert!(!w.entries().contains(&entry_name("uid-bad")));
        assert_eq!(
            w.infra.as_ref().unwrap().spec,
            infra_before,
            "{want}: others unchanged"
        );
        assert!(plan.claim_metadata.iter().all(|c| !c.add_finalizer));
        assert_eq!(
            plan.claim_statuses.len(),
            1,
            "only the bad claim's status changes"
        );
    }
}

#[test]
fn cluster_without_url_makes_new_claims_wait_and_keeps_composed_ones() {
    let mut w = two_claims();
    w.settle(start());
    w.cluster.as_mut().unwrap().status.as_mut().unwrap().url = None;
    w.claims.push(claim("late", "uid-late", "c1"));
    w.settle(start());
    assert_eq!(
        cond(&w, "late", INFRA_COMPOSED).reason,
        reason::CLUSTER_NOT_READY
    );
    assert_eq!(w.entries().len(), 2, "composed entries keep their machines");
    assert!(cond(&w, "worker-a", INFRA_COMPOSED).is_true());
    w.cluster.as_mut().unwrap().status.as_mut().unwrap().url = Some(URL.into());
    w.settle(start());
    assert_eq!(w.entries().len(), 3);
}

#[test]
fn claims_of_a_missing_cluster_report_it_and_hold_nothing() {
    let mut w = World::new("ghost");
    w.cluster = None;
    w.claims.push(claim("a", "uid-a", "ghost"));
    let plan = w.reconcile(start());
    assert_eq!(
        cond(&w, "a", INFRA_COMPOSED).reason,
        reason::CLUSTER_NOT_FOUND
    );
    assert!(cond(&w, "a", INFRA_COMPOSED).message.contains("create it"));
    assert!(w.infra.is_none() && plan.write_secrets.is_empty());
    assert!(plan.claim_metadata.iter().all(|c| !c.add_finalizer));
    assert!(w.reconcile(start()).is_empty());
}

fn arb_claim() -> impl Strategy<Value = (u8, bool, bool, bool)> {
    // (uid seed, valid resources, being deleted, has own DID)
    (
        0u8..40,
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.2),
        any::<bool>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// One Infra, one entry per live composable claim, and no secret value in
    /// the Infra or any claim status, whatever the claims.
    #[test]
    fn one_entry_per_live_claim_and_no_secrets_leak(specs in prop::collection::vec(arb_claim(), 0..8)) {
        let mut w = World::new("c1");
        let mut want = std::collections::BTreeSet::new();
        for (i, (seed, valid, deleting, own_did)) in specs.iter().enumerate() {
            let uid = format!("uid-{seed}-{i}");
            let mut c = claim(&format!("n{i}"), &uid, "c1");
            if !valid { c.spec.resources.memory = 0; }
            if *own_did { c.spec.owner_did = Some(format!("did:plc:o{seed}")); }
            if *deleting { c.metadata.deletion_timestamp = Some(to_time(start())); }
            else if *valid { want.insert(entry_name(&uid)); }
            w.claims.push(c);
        }
        let plan = w.reconcile(start());
        let entries: std::collections::BTreeSet<String> = w.entries().into_iter().collect();
        prop_assert_eq!(&entries, &want);
        if let Some(infra) = &w.infra {
            prop_assert_eq!(infra.spec.nodes.len(), want.len());
            prop_assert_eq!(infra.spec.secrets.len(), want.len());
            for node in &infra.spec.nodes {
                prop_assert_eq!(entry_name(&node.node_claim_ref.uid), node.contract.clone());
            }
        } else {
            prop_assert!(want.is_empty());
        }
        prop_assert_eq!(plan.write_secrets.len(), want.len());
        let infra_json = serde_json::to_string(&w.infra).unwrap();
        let status_json = serde_json::to_string(&w.claims.iter().map(|c| &c.status).collect::<Vec<_>>()).unwrap();
        let plan_debug = format!("{plan:?}");
        for s in &w.secrets {
            let token = String::from_utf8(s.data.as_ref().unwrap()["token"].0.clone()).unwrap();
            for text in [&infra_json, &status_json, &plan_debug] {
                prop_assert!(!text.contains(&token));
                prop_assert!(!text.contains(CA));
            }
        }
        // A second reconcile of the same world writes nothing.
        prop_assert!(w.decide(start()).is_empty());
    }
}

#[test]
fn a_deleted_claim_of_a_missing_cluster_lets_go_at_once() {
    let mut w = World::new("ghost");
    w.cluster = None;
    let mut c = claim("a", "uid-a", "ghost");
    c.metadata.finalizers = Some(vec![api::names::NODECLAIM_FINALIZER.into()]);
    c.metadata.deletion_timestamp = Some(to_time(start()));
    w.claims.push(c);
    let plan = w.reconcile(start());
    assert_eq!(plan.remove_claim_finalizers.len(), 1);
    assert!(w.claims.is_empty());
}

#[test]
fn new_claims_wait_while_the_previous_infra_is_deleted() {
    let mut w = two_claims();
    w.settle(start());
    w.claims.clear();
    w.reconcile(start());
    assert!(w.infra_deleting());
    w.claims.push(claim("next", "uid-next", "c1"));
    let plan = w.reconcile(start());
    assert!(matches!(plan.infra, Some(InfraAction::Keep)));
    assert_eq!(
        cond(&w, "next", INFRA_COMPOSED).reason,
        reason::INFRA_DELETING
    );
    w.settle(start());
    assert_eq!(w.entries(), vec![entry_name("uid-next")]);
    assert!(!w.infra_deleting());
}

#[test]
fn a_claim_written_failed_is_left_alone_while_the_cache_shows_it_before() {
    let mut w = two_claims();
    w.settle(start());
    let stale = w.claim("worker-a").clone();
    w.contract_of("worker-b").status.as_mut().unwrap().phase =
        Some(api::ComputeContractPhase::Deployed);
    w.contract_of("worker-b").status.as_mut().unwrap().guest = guest(None);
    w.reconcile(start());
    w.contract_of("worker-a").status.as_mut().unwrap().phase =
        Some(api::ComputeContractPhase::Failed);
    let plan = w.reconcile(start() + Duration::seconds(1));
    let failed = plan
        .claim_statuses
        .iter()
        .find(|c| c.name == "worker-a")
        .unwrap();
    assert!(failed.fails_the_claim());
    // The cache lags: the claim as it was, its contract already gone.
    w.written_failed.insert("uid-a".to_owned());
    *w.claim_mut("worker-a") = stale;
    w.contracts
        .retain(|c| c.labels()[CONTRACT_LABEL] != entry_name("uid-a"));
    let plan = w.decide(start() + Duration::seconds(2));
    assert!(
        plan.claim_statuses.iter().all(|c| c.name != "worker-a"),
        "no status from a stale read"
    );
    if let Some(InfraAction::Apply(infra)) = &plan.infra {
        assert!(
            infra
                .spec
                .contracts
                .iter()
                .all(|c| c.name != entry_name("uid-a")),
            "a claim written Failed never gets its entry back"
        );
    }
    // Without the record, the stale claim would be composed again.
    w.written_failed.clear();
    let plan = w.decide(start() + Duration::seconds(2));
    let Some(InfraAction::Apply(infra)) = &plan.infra else {
        panic!("the stale claim is composed")
    };
    assert!(
        infra
            .spec
            .contracts
            .iter()
            .any(|c| c.name == entry_name("uid-a"))
    );
}

#[test]
fn a_guest_is_adopted_by_one_claim_and_a_composed_claim_keeps_it() {
    let receipt = api::Receipt {
        uri: "local://guests/7".into(),
        cid: "sha256:x".into(),
    };
    let mut w = World::new("c1");
    for (name, uid) in [("first", "uid-1"), ("second", "uid-2")] {
        let mut c = claim(name, uid, "c1");
        c.spec.adopt = Some(Box::new(receipt.clone()));
        w.claims.push(c);
    }
    w.settle(start());
    assert_eq!(w.entries(), vec![entry_name("uid-1")]);
    assert_eq!(
        cond(&w, "second", INFRA_COMPOSED).reason,
        reason::GUEST_HELD
    );
    assert_eq!(phase(&w, "second"), Some(NodeClaimPhase::Pending));

    // Another contract claims to hold the guest later: the composed claim keeps its entry.
    w.guest_holders
        .push(controllers::nodeclaim::adopt::GuestHolder {
            uri: receipt.uri.clone(),
            entry: "node-elsewhere".into(),
        });
    w.settle(start() + Duration::seconds(1));
    assert_eq!(w.entries(), vec![entry_name("uid-1")]);
    assert_eq!(cond(&w, "first", INFRA_COMPOSED).reason, reason::COMPOSED);
}

#[test]
fn a_cluster_name_too_long_for_a_label_is_the_reason_given() {
    // A Cluster stored before its name was validated, not reporting a URL yet.
    let long = "c".repeat(64);
    let mut w = World::new(&long);
    w.cluster.as_mut().unwrap().status.as_mut().unwrap().url = None;
    w.claims.push(claim("worker", "uid-w", &long));
    w.settle(start());
    let composed = cond(&w, "worker", INFRA_COMPOSED);
    assert_eq!(composed.reason, reason::CLUSTER_NAME_TOO_LONG);
    assert!(composed.message.contains("63"), "{}", composed.message);
    // Not hidden by the missing URL, and still the reason once the URL comes.
    w.cluster.as_mut().unwrap().status.as_mut().unwrap().url = Some(URL.into());
    let plan = w.reconcile(start() + Duration::seconds(1));
    assert_eq!(
        cond(&w, "worker", INFRA_COMPOSED).reason,
        reason::CLUSTER_NAME_TOO_LONG
    );
    assert!(plan.write_secrets.is_empty() && w.infra.is_none());
}

/// An ownerReference to a Cluster `name` with `uid`.
fn cluster_owner(name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "socialweb.computer/v1alpha1".into(),
        kind: "Cluster".into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        ..OwnerReference::default()
    }
}

#[test]
fn a_claim_gets_its_cluster_as_owner_so_it_goes_with_it() {
    let mut w = World::new("c1");
    w.claims.push(claim("plain", "uid-p", "c1"));
    let mut managed = claim("managed", "uid-m", "c1");
    managed.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps.example/v1".into(),
        kind: "NodePool".into(),
        name: "pool".into(),
        uid: "uid-pool".into(),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
    w.claims.push(managed);
    let plan = w.decide(start());
    let change = |name: &str| {
        plan.claim_metadata
            .iter()
            .find(|c| c.target.name == name)
            .unwrap()
            .clone()
    };
    let plain = change("plain").owner_references.unwrap();
    assert_eq!(plain, vec![cluster_owner("c1", "uid-cluster-c1")]);
    // Another controller keeps its place; the Cluster only owns.
    let managed = change("managed").owner_references.unwrap();
    assert_eq!(managed.len(), 2);
    assert_eq!(managed[1].controller, Some(false));
    assert_eq!(managed[1].uid, "uid-cluster-c1");
    w.settle(start());
    assert!(
        w.decide(start()).is_empty(),
        "once owned, nothing more to write"
    );
}

#[test]
fn an_owner_uid_mismatch_says_whose_uid_it_is() {
    let mut w = World::new("c1");
    let mut of_deleted = claim("of-deleted", "uid-d", "c1");
    of_deleted.metadata.owner_references = Some(vec![cluster_owner("c1", "uid-gone")]);
    let mut of_other_ns = claim("of-other-ns", "uid-o", "c1");
    of_other_ns.metadata.owner_references = Some(vec![cluster_owner("c1", "uid-tenant-b-c1")]);
    w.claims.extend([of_deleted, of_other_ns]);
    w.owner_clusters.insert(
        "uid-tenant-b-c1".into(),
        ClusterKey {
            namespace: "tenant-b".into(),
            name: "c1".into(),
        },
    );
    w.settle(start());
    assert!(w.infra.is_none(), "neither is composed");
    let deleted = cond(&w, "of-deleted", INFRA_COMPOSED);
    assert_eq!(deleted.reason, reason::CLUSTER_OWNER_MISMATCH);
    assert!(
        deleted.message.contains("no Cluster has that uid any more"),
        "{}",
        deleted.message
    );
    let other = cond(&w, "of-other-ns", INFRA_COMPOSED);
    assert_eq!(other.reason, reason::CLUSTER_OWNER_MISMATCH);
    assert!(
        other.message.contains("a Cluster of another namespace")
            && !other.message.contains("deleted"),
        "{}",
        other.message
    );
}
