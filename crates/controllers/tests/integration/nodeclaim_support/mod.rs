//! The in-memory world the NodeClaim tests drive: `decide` plans, the world
//! applies the plan (as `act` would) and a stand-in for the Infra controller
//! and the market moves the contracts.

use std::collections::{BTreeMap, BTreeSet};

use api::names::{
    CLUSTER_FINALIZER, CONTRACT_LABEL, INFRA_NAME_LABEL, NODECLAIM_FINALIZER,
    compute_contract_name, entry_name,
};
use api::{
    Cluster, ClusterSpec, ClusterStatus, ComputeContract, ComputeContractPhase,
    ComputeContractStatus, Guest, Infra, Location, NodeClaim, NodeClaimPhase, NodeClaimSpec,
    Receipt, Resources, find_condition,
};
use chrono::{DateTime, Utc};
use controllers::cache::{CachedClaim, CachedContract, CachedJoinSecret};
use controllers::nodeclaim::adopt::GuestHolder;
use controllers::nodeclaim::compose::{ClusterKey, OwnerClusters};
use controllers::nodeclaim::decide::{InfraAction, Observed, Plan, decide};
use controllers::nodeclaim::root::RootState;
use controllers::time::to_time;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

pub const NS: &str = "tenant-a";
pub const CONTRACT_NS: &str = "socialweb-system";
pub const URL: &str = "https://c1.tenant-a.example:6443";
pub const CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tQ0EtU0VDUkVU";

pub fn start() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

pub fn cluster(name: &str) -> Cluster {
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

pub fn resources() -> Resources {
    Resources {
        cpus: 2,
        memory: 4096,
        disk: 20,
        network: 100,
    }
}

pub fn claim(name: &str, uid: &str, cluster: &str) -> NodeClaim {
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
pub struct World {
    pub key: ClusterKey,
    pub cluster: Option<Cluster>,
    pub claims: Vec<NodeClaim>,
    pub infra: Option<Infra>,
    pub contracts: Vec<ComputeContract>,
    pub secrets: Vec<Secret>,
    pub tokens: u32,
    pub root: RootState,
    /// Claims the controller wrote Failed that this (stale) world does not show so.
    pub written_failed: BTreeSet<String>,
    /// Who holds the guests claims adopt (other Clusters' contracts).
    pub guest_holders: Vec<GuestHolder>,
    /// Clusters elsewhere that claims' ownerReferences name by uid.
    pub owner_clusters: OwnerClusters,
    /// When the controller first saw new or deleted claims so, by uid (none:
    /// at their timestamps).
    pub first_seen: BTreeMap<String, DateTime<Utc>>,
}

impl World {
    pub fn new(cluster_name: &str) -> Self {
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
            root: RootState::Running,
            written_failed: BTreeSet::new(),
            guest_holders: Vec::new(),
            owner_clusters: OwnerClusters::new(),
            first_seen: BTreeMap::new(),
        }
    }

    pub fn decide(&self, now: DateTime<Utc>) -> Plan {
        // The world holds claims, contracts and Secrets as the server does;
        // the reconcile reads them as the shared cache keeps them.
        let cached_claims: Vec<CachedClaim> =
            self.claims.iter().cloned().map(CachedClaim::from).collect();
        let claims: Vec<&CachedClaim> = cached_claims.iter().collect();
        let cached_contracts: Vec<CachedContract> = self
            .contracts
            .iter()
            .cloned()
            .map(CachedContract::from)
            .collect();
        let contracts: Vec<&CachedContract> = cached_contracts.iter().collect();
        let cached: Vec<CachedJoinSecret> = self
            .secrets
            .iter()
            .cloned()
            .map(CachedJoinSecret::from)
            .collect();
        let secrets: Vec<&CachedJoinSecret> = cached.iter().collect();
        decide(&Observed {
            key: &self.key,
            cluster: self.cluster.as_ref(),
            claims: &claims,
            infra: self.infra.as_ref(),
            contracts: &contracts,
            secrets: &secrets,
            contract_namespace: CONTRACT_NS,
            root: self.root,
            written_failed: &self.written_failed,
            guest_holders: &self.guest_holders,
            owner_clusters: &self.owner_clusters,
            first_seen: &self.first_seen,
            now,
        })
    }

    /// Decide and apply the plan, as `act` would against the API server.
    pub fn reconcile(&mut self, now: DateTime<Utc>) -> Plan {
        let plan = self.decide(now);
        self.apply(&plan);
        plan
    }

    pub fn apply(&mut self, plan: &Plan) {
        if plan.add_cluster_finalizer.is_some() {
            let c = self.cluster.as_mut().unwrap();
            c.finalizers_mut().push(CLUSTER_FINALIZER.into());
        }
        for change in &plan.claim_metadata {
            let c = self.claim_mut(&change.target.name);
            if change.add_finalizer {
                c.finalizers_mut().push(NODECLAIM_FINALIZER.into());
            }
            if let Some(owners) = &change.owner_references {
                c.metadata.owner_references = Some(owners.clone());
            }
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
            Some(InfraAction::Delete(_)) => {
                self.infra.as_mut().unwrap().metadata.deletion_timestamp = Some(to_time(start()));
            }
            _ => {}
        }
        for gone in &plan.delete_secrets {
            self.secrets.retain(|s| s.name_any() != gone.name);
        }
        // As `act` writes them: laid on the claim as the server holds it.
        for change in &plan.claim_statuses {
            let claim = self.claim_mut(&change.name);
            let read = claim.status.take().unwrap_or_default();
            claim.status = Some(change.status.applied_to(read));
        }
        for change in &plan.remove_claim_finalizers {
            self.claim_mut(&change.name)
                .finalizers_mut()
                .retain(|f| f != NODECLAIM_FINALIZER);
        }
        if let Some(change) = &plan.cluster_nodes {
            self.cluster
                .as_mut()
                .unwrap()
                .status
                .as_mut()
                .unwrap()
                .nodes = Some(change.nodes);
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
    pub fn infra_step(&mut self) {
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

    pub fn claim_mut(&mut self, name: &str) -> &mut NodeClaim {
        self.claims
            .iter_mut()
            .find(|c| c.name_any() == name)
            .unwrap()
    }

    pub fn claim(&self, name: &str) -> &NodeClaim {
        self.claims.iter().find(|c| c.name_any() == name).unwrap()
    }

    pub fn contract_of(&mut self, claim: &str) -> &mut ComputeContract {
        let entry = entry_name(&self.claim(claim).uid().unwrap());
        self.contracts
            .iter_mut()
            .find(|c| c.labels()[CONTRACT_LABEL] == entry)
            .unwrap()
    }

    /// Sets the phase and guest of `claim`'s contract, as the Requester would.
    pub fn set_contract_phase(
        &mut self,
        claim: &str,
        phase: ComputeContractPhase,
        guest: Option<Guest>,
    ) {
        set_phase(self.contract_of(claim), phase, guest);
    }

    /// Whether the Infra is being deleted.
    pub fn infra_deleting(&self) -> bool {
        self.infra
            .as_ref()
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    }

    /// The node count the Cluster's status says.
    pub fn cluster_nodes(&self) -> Option<u32> {
        self.cluster
            .as_ref()
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .nodes
    }

    pub fn entries(&self) -> Vec<String> {
        self.infra
            .as_ref()
            .map(|i| i.spec.contracts.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default()
    }

    /// Reconcile and let the others move until nothing changes.
    pub fn settle(&mut self, now: DateTime<Utc>) {
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

pub fn contract(infra: &str, entry: &str) -> ComputeContract {
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

pub fn phase_of(c: &ComputeContract) -> Option<ComputeContractPhase> {
    c.status.as_ref().and_then(|s| s.phase)
}

pub fn set_phase(c: &mut ComputeContract, phase: ComputeContractPhase, guest: Option<Guest>) {
    let status = c.status.get_or_insert_with(ComputeContractStatus::default);
    status.phase = Some(phase);
    status.guest = guest;
}

pub fn guest(node_id: Option<&str>) -> Option<Guest> {
    Some(Guest {
        provider: "did:web:provider.example".into(),
        address: Some("10.0.0.7".into()),
        node_id: node_id.map(Into::into),
    })
}

pub fn cond<'a>(world: &'a World, claim: &str, type_: &str) -> &'a api::Condition {
    find_condition(
        &world.claim(claim).status.as_ref().unwrap().conditions,
        type_,
    )
    .unwrap_or_else(|| panic!("{claim} has no {type_}"))
}

pub fn phase(world: &World, claim: &str) -> Option<NodeClaimPhase> {
    world.claim(claim).status.as_ref().and_then(|s| s.phase)
}

pub fn two_claims() -> World {
    let mut w = World::new("c1");
    w.claims.push(claim("worker-a", "uid-a", "c1"));
    let mut b = claim("worker-b", "uid-b", "c1");
    b.spec.owner_did = Some("did:plc:someone-else".into());
    b.spec.adopt = Some(Box::new(Receipt {
        uri: "at://did:web:provider.example/receipt/1".into(),
        cid: "bafyreceipt".into(),
    }));
    w.claims.push(b);
    w
}
