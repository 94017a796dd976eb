//! The NodeClaim decision, driven through a small in-memory world: `decide`
//! plans, the world applies the plan (as `act` would) and a stand-in for the
//! Infra controller and the market moves the contracts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use api::names::{
    CLUSTER_FINALIZER, CONTRACT_LABEL, INFRA_NAME_LABEL, NODECLAIM_FINALIZER,
    compute_contract_name, entry_name, join_secret_name,
};
use api::{
    Cluster, ClusterSpec, ClusterStatus, ComputeContract, ComputeContractPhase,
    ComputeContractStatus, ConditionStatus, Guest, Infra, Location, NodeClaim, NodeClaimPhase,
    NodeClaimSpec, Receipt, Resources, find_condition,
};
use chrono::{DateTime, Duration, Utc};
use controllers::nodeclaim::compose::ClusterKey;
use controllers::nodeclaim::conditions::{DEPLOYED, INFRA_COMPOSED, JOINED, READY, reason};
use controllers::nodeclaim::decide::{InfraAction, Observed, Plan, decide};
use controllers::nodeclaim::graces::to_time;
use controllers::{Clock, ManualClock};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use proptest::prelude::*;

const NS: &str = "tenant-a";
const CONTRACT_NS: &str = "socialweb-system";
const URL: &str = "https://c1.tenant-a.example:6443";
const CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tQ0EtU0VDUkVU";

fn start() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

fn cluster(name: &str) -> Cluster {
    let mut c = Cluster::new(
        name,
        ClusterSpec {
            account: "did:plc:tenant".into(),
            running: true,
        },
    );
    c.metadata.namespace = Some(NS.into());
    c.metadata.uid = Some(format!("uid-cluster-{name}"));
    c.metadata.resource_version = Some("1".into());
    c.status = Some(ClusterStatus {
        url: Some(URL.into()),
        ca_data: Some(CA.into()),
        ..ClusterStatus::default()
    });
    c
}

fn resources() -> Resources {
    Resources {
        cpus: 2,
        memory: 4096,
        disk: 20,
        network: 100,
    }
}

fn claim(name: &str, uid: &str, cluster: &str) -> NodeClaim {
    let mut c = NodeClaim::new(
        name,
        NodeClaimSpec {
            cluster_name: cluster.into(),
            resources: resources(),
            location: Location {
                country: "DE".into(),
                region: None,
            },
            owner_did: None,
            adopt: None,
            join_grace_seconds: 900,
            loss_grace_seconds: 300,
        },
    );
    c.metadata.namespace = Some(NS.into());
    c.metadata.uid = Some(uid.into());
    c.metadata.generation = Some(1);
    c.metadata.resource_version = Some("1".into());
    c
}

/// The objects the reconciler sees, and a stand-in for everyone else.
#[derive(Clone)]
struct World {
    key: ClusterKey,
    cluster: Option<Cluster>,
    claims: Vec<NodeClaim>,
    infra: Option<Infra>,
    contracts: Vec<ComputeContract>,
    secrets: Vec<Secret>,
    tokens: u32,
}

impl World {
    fn new(cluster_name: &str) -> Self {
        Self {
            key: ClusterKey {
                namespace: NS.into(),
                name: cluster_name.into(),
            },
            cluster: Some(cluster(cluster_name)),
            claims: Vec::new(),
            infra: None,
            contracts: Vec::new(),
            secrets: Vec::new(),
            tokens: 0,
        }
    }

    fn decide(&self, now: DateTime<Utc>) -> Plan {
        let claims: Vec<&NodeClaim> = self.claims.iter().collect();
        let contracts: Vec<&ComputeContract> = self.contracts.iter().collect();
        let secrets: Vec<&Secret> = self.secrets.iter().collect();
        decide(&Observed {
            key: &self.key,
            cluster: self.cluster.as_ref(),
            claims: &claims,
            infra: self.infra.as_ref(),
            contracts: &contracts,
            secrets: &secrets,
            contract_namespace: CONTRACT_NS,
            now,
        })
    }

    /// Decide and apply the plan, as `act` would against the API server.
    fn reconcile(&mut self, now: DateTime<Utc>) -> Plan {
        let plan = self.decide(now);
        self.apply(&plan);
        plan
    }

    fn apply(&mut self, plan: &Plan) {
        if plan.add_cluster_finalizer.is_some() {
            let c = self.cluster.as_mut().unwrap();
            c.finalizers_mut().push(CLUSTER_FINALIZER.into());
        }
        for change in &plan.add_claim_finalizers {
            let c = self.claim_mut(&change.name);
            c.finalizers_mut().push(NODECLAIM_FINALIZER.into());
        }
        for s in &plan.write_secrets {
            let token = s.token.clone().unwrap_or_else(|| {
                self.tokens += 1;
                format!("secret-token-{}", self.tokens)
            });
            self.secrets.retain(|x| x.name_any() != s.name);
            self.secrets.push(s.to_secret(&token));
        }
        match &plan.infra {
            Some(InfraAction::Apply(infra)) => {
                let mut infra = (**infra).clone();
                if let Some(old) = &self.infra {
                    infra.metadata.deletion_timestamp = old.metadata.deletion_timestamp.clone();
                }
                self.infra = Some(infra);
            }
            Some(InfraAction::Delete) => {
                self.infra.as_mut().unwrap().metadata.deletion_timestamp = Some(to_time(start()));
            }
            _ => {}
        }
        for name in &plan.delete_secrets {
            self.secrets.retain(|s| &s.name_any() != name);
        }
        for change in &plan.claim_statuses {
            self.claim_mut(&change.name).status = Some(change.status.clone());
        }
        for change in &plan.remove_claim_finalizers {
            self.claim_mut(&change.name)
                .finalizers_mut()
                .retain(|f| f != NODECLAIM_FINALIZER);
        }
        if let Some(nodes) = plan.cluster_nodes {
            self.cluster
                .as_mut()
                .unwrap()
                .status
                .as_mut()
                .unwrap()
                .nodes = Some(nodes);
        }
        if plan.remove_cluster_finalizer.is_some() {
            self.cluster
                .as_mut()
                .unwrap()
                .finalizers_mut()
                .retain(|f| f != CLUSTER_FINALIZER);
        }
        // Objects being deleted go once their finalizers are gone.
        self.claims
            .retain(|c| c.metadata.deletion_timestamp.is_none() || !c.finalizers().is_empty());
        if self
            .cluster
            .as_ref()
            .is_some_and(|c| c.metadata.deletion_timestamp.is_some() && c.finalizers().is_empty())
        {
            self.cluster = None;
        }
    }

    /// The Infra controller and the market, one step: contracts for entries
    /// (Pending), left entries released and then deleted, a deleting Infra
    /// emptied and then gone.
    fn infra_step(&mut self) {
        let Some(infra) = &self.infra else { return };
        let deleting = infra.metadata.deletion_timestamp.is_some();
        let infra_name = infra.name_any();
        let entries: Vec<String> = if deleting {
            Vec::new()
        } else {
            infra
                .spec
                .contracts
                .iter()
                .map(|c| c.name.clone())
                .collect()
        };
        self.contracts.retain(|c| {
            entries.contains(&c.labels()[CONTRACT_LABEL])
                || phase_of(c) != Some(ComputeContractPhase::Released)
        });
        for c in &mut self.contracts {
            if !entries.contains(&c.labels()[CONTRACT_LABEL]) {
                set_phase(c, ComputeContractPhase::Released, None);
            }
        }
        for entry in &entries {
            if !self
                .contracts
                .iter()
                .any(|c| &c.labels()[CONTRACT_LABEL] == entry)
            {
                self.contracts.push(contract(&infra_name, entry));
            }
        }
        if deleting && self.contracts.is_empty() {
            self.infra = None;
        }
    }

    fn claim_mut(&mut self, name: &str) -> &mut NodeClaim {
        self.claims
            .iter_mut()
            .find(|c| c.name_any() == name)
            .unwrap()
    }

    fn claim(&self, name: &str) -> &NodeClaim {
        self.claims.iter().find(|c| c.name_any() == name).unwrap()
    }

    fn contract_of(&mut self, claim: &str) -> &mut ComputeContract {
        let entry = entry_name(&self.claim(claim).uid().unwrap());
        self.contracts
            .iter_mut()
            .find(|c| c.labels()[CONTRACT_LABEL] == entry)
            .unwrap()
    }

    fn entries(&self) -> Vec<String> {
        self.infra
            .as_ref()
            .map(|i| i.spec.contracts.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default()
    }

    /// Reconcile and let the others move until nothing changes.
    fn settle(&mut self, now: DateTime<Utc>) {
        for _ in 0..20 {
            let plan = self.reconcile(now);
            let before = serde_json::to_string(&(&self.contracts, &self.infra)).unwrap();
            self.infra_step();
            let after = serde_json::to_string(&(&self.contracts, &self.infra)).unwrap();
            if plan.is_empty() && before == after {
                return;
            }
        }
        panic!("did not settle");
    }
}

fn contract(infra: &str, entry: &str) -> ComputeContract {
    let spec = api::compute_contract_spec(
        &api::ContractEntry {
            name: entry.into(),
            resources: resources(),
            location: Location {
                country: "DE".into(),
                region: None,
            },
            role: api::Role::Worker,
        },
        None,
        None,
    );
    let mut c = ComputeContract::new(&compute_contract_name(infra, entry), spec);
    c.metadata.namespace = Some(CONTRACT_NS.into());
    c.metadata.labels = Some(BTreeMap::from([
        (INFRA_NAME_LABEL.into(), infra.into()),
        (CONTRACT_LABEL.into(), entry.into()),
    ]));
    c.status = Some(ComputeContractStatus {
        phase: Some(ComputeContractPhase::Pending),
        ..ComputeContractStatus::default()
    });
    c
}

fn phase_of(c: &ComputeContract) -> Option<ComputeContractPhase> {
    c.status.as_ref().and_then(|s| s.phase)
}

fn set_phase(c: &mut ComputeContract, phase: ComputeContractPhase, guest: Option<Guest>) {
    let status = c.status.get_or_insert_with(ComputeContractStatus::default);
    status.phase = Some(phase);
    status.guest = guest;
}

fn guest(node_id: Option<&str>) -> Option<Guest> {
    Some(Guest {
        provider: "did:web:provider.example".into(),
        address: Some("10.0.0.7".into()),
        node_id: node_id.map(Into::into),
    })
}

fn cond<'a>(world: &'a World, claim: &str, type_: &str) -> &'a api::Condition {
    find_condition(
        &world.claim(claim).status.as_ref().unwrap().conditions,
        type_,
    )
    .unwrap_or_else(|| panic!("{claim} has no {type_}"))
}

fn phase(world: &World, claim: &str) -> Option<NodeClaimPhase> {
    world.claim(claim).status.as_ref().and_then(|s| s.phase)
}

fn two_claims() -> World {
    let mut w = World::new("c1");
    w.claims.push(claim("worker-a", "uid-a", "c1"));
    let mut b = claim("worker-b", "uid-b", "c1");
    b.spec.owner_did = Some("did:plc:someone-else".into());
    b.spec.adopt = Some(Receipt {
        uri: "at://did:web:provider.example/receipt/1".into(),
        cid: "bafyreceipt".into(),
    });
    w.claims.push(b);
    w
}

#[test]
fn two_claims_make_one_infra_with_two_node_entries() {
    let mut w = two_claims();
    let plan = w.reconcile(start());
    assert!(plan.add_cluster_finalizer.is_some());
    assert_eq!(plan.add_claim_finalizers.len(), 2);
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
    let node_a = infra
        .spec
        .nodes
        .iter()
        .find(|n| n.contract == entry_a)
        .unwrap();
    let node_b = infra
        .spec
        .nodes
        .iter()
        .find(|n| n.contract == entry_b)
        .unwrap();
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
    assert_eq!(
        w.cluster.as_ref().unwrap().status.as_ref().unwrap().nodes,
        Some(2)
    );
}

#[test]
fn converged_world_plans_nothing_and_keeps_tokens() {
    let mut w = two_claims();
    w.settle(start());
    let tokens: Vec<_> = w.secrets.iter().map(|s| s.data.clone()).collect();
    let plan = w.reconcile(start() + Duration::seconds(5));
    assert!(plan.is_empty(), "{plan:?}");
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

#[test]
fn phases_follow_the_contract_to_joined() {
    let mut w = two_claims();
    w.settle(start());
    set_phase(
        w.contract_of("worker-a"),
        ComputeContractPhase::Bidding,
        None,
    );
    w.reconcile(start());
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Requesting));
    set_phase(
        w.contract_of("worker-a"),
        ComputeContractPhase::Deployed,
        guest(None),
    );
    let plan = w.reconcile(start() + Duration::seconds(10));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Deployed));
    assert!(cond(&w, "worker-a", DEPLOYED).is_true());
    assert_eq!(
        cond(&w, "worker-a", JOINED).reason,
        reason::WAITING_FOR_NODE
    );
    assert_eq!(plan.requeue_at, Some(start() + Duration::seconds(910)));
    let grant = w
        .claim("worker-a")
        .status
        .as_ref()
        .unwrap()
        .grant_expires_at
        .clone();
    assert_eq!(grant, Some(to_time(start() + Duration::seconds(910))));
    set_phase(
        w.contract_of("worker-a"),
        ComputeContractPhase::Deployed,
        guest(Some("node-7")),
    );
    w.reconcile(start() + Duration::seconds(20));
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Joined));
    assert!(cond(&w, "worker-a", READY).is_true());
    assert_eq!(
        w.claim("worker-a")
            .status
            .as_ref()
            .unwrap()
            .guest
            .as_ref()
            .unwrap()
            .node_id
            .as_deref(),
        Some("node-7")
    );
    // The other claim is untouched by all this.
    assert_eq!(phase(&w, "worker-b"), Some(NodeClaimPhase::Requesting));
}

#[test]
fn join_grace_fires_exactly_at_the_deadline() {
    let clock = ManualClock::new(start());
    let mut w = two_claims();
    w.settle(clock.now());
    set_phase(
        w.contract_of("worker-a"),
        ComputeContractPhase::Deployed,
        guest(None),
    );
    let plan = w.reconcile(clock.now());
    let deadline = start() + Duration::seconds(900);
    assert_eq!(plan.requeue_at, Some(deadline));
    clock.advance(Duration::seconds(899));
    let plan = w.reconcile(clock.now());
    assert_ne!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(
        plan.requeue_at,
        Some(deadline),
        "requeue at deadline - now, not a poll"
    );
    clock.advance(Duration::seconds(1));
    let plan = w.reconcile(clock.now());
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(cond(&w, "worker-a", JOINED).reason, reason::JOIN_TIMEOUT);
    assert_eq!(cond(&w, "worker-a", READY).reason, reason::JOIN_TIMEOUT);
    assert_eq!(
        cond(&w, "worker-a", INFRA_COMPOSED).reason,
        reason::CLAIM_FAILED
    );
    assert!(cond(&w, "worker-a", READY).message.contains("recreate"));
    let Some(InfraAction::Apply(infra)) = &plan.infra else {
        panic!("entry must leave")
    };
    assert_eq!(infra.spec.contracts.len(), 1);
    assert_eq!(infra.spec.contracts[0].name, entry_name("uid-b"));
    assert_eq!(plan.requeue_at, None);
    // Failed is final: the entry stays out, the contract is released and its Secret removed.
    w.settle(clock.now());
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(w.entries(), vec![entry_name("uid-b")]);
    assert!(
        !w.secrets
            .iter()
            .any(|s| s.labels()[CONTRACT_LABEL] == entry_name("uid-a"))
    );
}

#[test]
fn loss_grace_fires_exactly_at_the_deadline_and_a_return_resets_it() {
    let clock = ManualClock::new(start());
    let mut w = two_claims();
    w.settle(clock.now());
    set_phase(
        w.contract_of("worker-a"),
        ComputeContractPhase::Deployed,
        guest(Some("n1")),
    );
    w.reconcile(clock.now());
    clock.advance(Duration::seconds(100));
    // Lost, then back before the grace runs out.
    set_phase(
        w.contract_of("worker-a"),
        ComputeContractPhase::Accepted,
        None,
    );
    let plan = w.reconcile(clock.now());
    assert_eq!(
        cond(&w, "worker-a", DEPLOYED).reason,
        reason::GUEST_UNREACHABLE
    );
    assert_eq!(plan.requeue_at, Some(clock.now() + Duration::seconds(300)));
    clock.advance(Duration::seconds(299));
    set_phase(
        w.contract_of("worker-a"),
        ComputeContractPhase::Deployed,
        guest(Some("n1")),
    );
    w.reconcile(clock.now());
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Joined));
    // Lost again: a fresh grace from this instant.
    clock.advance(Duration::seconds(10));
    let lost_at = clock.now();
    set_phase(
        w.contract_of("worker-a"),
        ComputeContractPhase::Deployed,
        None,
    );
    w.reconcile(clock.now());
    clock.advance(Duration::seconds(299));
    let plan = w.reconcile(clock.now());
    assert_ne!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(plan.requeue_at, Some(lost_at + Duration::seconds(300)));
    clock.advance(Duration::seconds(1));
    w.reconcile(clock.now());
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Failed));
    assert_eq!(cond(&w, "worker-a", READY).reason, reason::GUEST_LOST);
    assert_eq!(w.entries(), vec![entry_name("uid-b")]);
}

#[test]
fn deleted_claim_leaves_the_infra_and_waits_for_its_contract() {
    let mut w = two_claims();
    w.settle(start());
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
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Releasing));
    w.infra_step(); // released
    w.reconcile(start());
    assert_eq!(phase(&w, "worker-a"), Some(NodeClaimPhase::Released));
    w.infra_step(); // deleted
    let plan = w.reconcile(start());
    assert_eq!(
        plan.delete_secrets,
        vec![join_secret_name(&entry_name("uid-a"))]
    );
    assert!(
        plan.remove_claim_finalizers.is_empty(),
        "secret still in the cache"
    );
    let plan = w.reconcile(start());
    assert_eq!(plan.remove_claim_finalizers.len(), 1);
    assert!(w.claims.iter().all(|c| c.name_any() != "worker-a"));
    assert_eq!(w.entries(), vec![entry_name("uid-b")]);
    assert_eq!(
        w.cluster.as_ref().unwrap().status.as_ref().unwrap().nodes,
        Some(1)
    );
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
    assert!(matches!(plan.infra, Some(InfraAction::Delete)));
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
        assert!(plan.add_claim_finalizers.is_empty());
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
    assert!(plan.add_claim_finalizers.is_empty());
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
