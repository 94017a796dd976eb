//! Fixtures for the Infra decide tests: Infra builders and a tiny in-memory
//! world that enacts plans and plays the Requester.

pub mod e2e;

use std::collections::BTreeMap;
use std::sync::Arc;

use api::{
    ComputeContract, ComputeContractPhase, ComputeContractStatus, ContractEntry, Infra, InfraSpec,
    Location, NodeClaimRef, NodeEntry, NodeJoin, Resources, Role, SecretEntry, SecretRef,
};
use chrono::{DateTime, Utc};
use controllers::cache::CachedContract;
use controllers::infra::claims::ClaimsSeen;
use controllers::infra::decide::{InfraPlan, Observed, decide, unseen_contracts};
use controllers::infra::objects::released_object;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

pub const NS: &str = "socialweb-system";
/// The Infra of Cluster `tenant/c1` ([`CLAIM_NS`], [`CLUSTER`]): the claims
/// its node entries name are its own.
pub const INFRA: &str = "nodes-e6f9f44f99453784bad4";
/// Where the claims the node entries name live.
pub const CLAIM_NS: &str = "tenant";
/// The Cluster of those claims.
pub const CLUSTER: &str = "c1";

pub fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

pub fn entry(name: &str) -> ContractEntry {
    ContractEntry {
        name: name.to_owned(),
        resources: Resources {
            cpus: 2,
            memory: 4096,
            disk: 40,
            network: 100,
        },
        location: Location {
            country: "DE".to_owned(),
            region: None,
        },
        role: Role::Worker,
    }
}

pub fn node(name: &str) -> NodeEntry {
    NodeEntry {
        contract: name.to_owned(),
        owner_did: "did:plc:tenant".to_owned(),
        adopt: None,
        node_join: Some(NodeJoin {
            api_server: "https://tenant.example:6443".to_owned(),
            node_name: format!("{name}-host"),
            labels: api::StringMap::new(),
            taints: vec![],
        }),
        node_claim_ref: NodeClaimRef {
            namespace: CLAIM_NS.to_owned(),
            name: name.to_owned(),
            uid: format!("uid-{name}"),
        },
    }
}

/// An Infra spec with one node entry (contract, node, secret) per name.
pub fn spec_with(entries: &[&str]) -> InfraSpec {
    InfraSpec {
        description: "tenant nodes".to_owned(),
        contracts: entries.iter().map(|e| entry(e)).collect(),
        secrets: entries
            .iter()
            .map(|e| SecretEntry {
                contract: (*e).to_owned(),
                secret_ref: SecretRef {
                    name: format!("join-{e}"),
                },
            })
            .collect(),
        record: None,
        cluster_ref: None,
        nodes: entries.iter().map(|e| node(e)).collect(),
    }
}

/// An Infra spec of plain entries (contract and secret, no node): a node
/// entry is rented only for a NodeClaim that exists, and the Infra-only
/// end-to-end tests run no NodeClaims.
pub fn plain_spec_with(entries: &[&str]) -> InfraSpec {
    InfraSpec {
        nodes: Vec::new(),
        ..spec_with(entries)
    }
}

pub fn infra(entries: &[&str]) -> Infra {
    let mut infra = Infra::new(INFRA, spec_with(entries));
    infra.metadata.namespace = Some(NS.to_owned());
    infra.metadata.uid = Some("infra-uid-1".to_owned());
    infra.metadata.generation = Some(1);
    infra
}

pub fn deleting(mut infra: Infra) -> Infra {
    infra.metadata.deletion_timestamp = Some(Time(Timestamp::from_second(1_800_000_000).unwrap()));
    infra
}

pub fn cc_name(entry: &str) -> String {
    api::names::compute_contract_name(INFRA, entry)
}

pub fn phase_of(contract: &ComputeContract) -> Option<ComputeContractPhase> {
    contract.status.as_ref().and_then(|s| s.phase)
}

/// One write the world saw, for order checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    Apply(String),
    Release(String),
    Delete(String),
    Status,
}

/// The API server and the Requester, as far as the Infra controller can tell.
#[derive(Clone, Debug)]
pub struct World {
    pub infra: Infra,
    pub contracts: BTreeMap<String, ComputeContract>,
    pub history: Vec<Write>,
    pub infra_gone: bool,
    /// Contracts created while the cache lags: not yet shown by the cache.
    pub hidden: std::collections::BTreeSet<String>,
    /// Whether the cache lags behind creates.
    pub lagging: bool,
    /// Contracts whose direct read fails (the API server answers an error).
    pub failing_reads: std::collections::BTreeSet<String>,
    /// What the NodeClaims say (default: every node's claim exists, none holds a contract).
    pub claims: ClaimsSeen,
    uid: u64,
    rv: u64,
    pub step: i64,
}

impl World {
    /// A world whose Infra has these entries, each contract Deployed and the
    /// Infra's status caught up.
    pub fn deployed(entries: &[&str]) -> Self {
        let mut world = Self::new(infra(entries));
        world.reconcile();
        world.settle_requester();
        world.reconcile();
        world
    }

    pub fn new(infra: Infra) -> Self {
        Self {
            infra,
            contracts: BTreeMap::new(),
            history: vec![],
            infra_gone: false,
            hidden: std::collections::BTreeSet::new(),
            lagging: false,
            failing_reads: std::collections::BTreeSet::new(),
            claims: ClaimsSeen::default(),
            uid: 0,
            rv: 0,
            step: 0,
        }
    }

    /// Every contract, as the shared cache keeps them.
    pub fn observed(&self) -> Vec<Arc<CachedContract>> {
        self.contracts
            .values()
            .cloned()
            .map(|c| Arc::new(CachedContract::from(c)))
            .collect()
    }

    pub fn now(&self) -> DateTime<Utc> {
        t0() + chrono::Duration::seconds(self.step)
    }

    /// What the cache shows: every contract but the hidden ones.
    /// The contracts as the shared cache keeps them.
    pub fn cache_view(&self) -> Vec<Arc<CachedContract>> {
        self.contracts
            .iter()
            .filter(|(name, _)| !self.hidden.contains(*name))
            .map(|(_, c)| Arc::new(CachedContract::from(c.clone())))
            .collect()
    }

    /// Runs decide as the controller does: the cache, plus direct reads of the contracts
    /// the status lists that the cache lacks (no memory: a restart is the same call).
    pub fn plan(&mut self) -> InfraPlan {
        self.step += 1;
        let mut view = self.cache_view();
        let mut unreadable = std::collections::BTreeSet::new();
        for name in unseen_contracts(&self.infra, &view) {
            if self.failing_reads.contains(&name) {
                unreadable.insert(name);
            } else if let Some(found) = self.contracts.get(&name) {
                view.push(Arc::new(CachedContract::from(found.clone())));
            }
        }
        let observed = Observed {
            infra: &self.infra,
            contracts: &view,
            unreadable: &unreadable,
            claims: &self.claims,
            now: self.now(),
            infra_confirmed_live: false,
        };
        let plan = decide(&observed);
        if plan.confirm_infra {
            // The world's Infra is what a direct read returns.
            return decide(&Observed {
                infra_confirmed_live: true,
                ..observed
            });
        }
        plan
    }

    /// The cache catches up.
    pub fn sync(&mut self) {
        self.hidden.clear();
        self.lagging = false;
    }

    fn bump(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }

    pub fn set_spec(&mut self, entries: &[&str]) {
        self.infra.spec = spec_with(entries);
        self.infra.metadata.generation = Some(self.infra.metadata.generation.unwrap_or(0) + 1);
    }

    pub fn start_deletion(&mut self) {
        if self.infra.metadata.deletion_timestamp.is_none() {
            self.infra = deleting(self.infra.clone());
        }
    }

    fn upsert(&mut self, object: &ComputeContract) {
        let name = object.metadata.name.clone().unwrap();
        let rv = self.bump();
        match self.contracts.get_mut(&name) {
            Some(existing) => {
                existing.spec = object.spec.clone();
                existing.metadata.labels = object.metadata.labels.clone();
                if let Some(annotations) = &object.metadata.annotations {
                    existing
                        .metadata
                        .annotations
                        .get_or_insert_default()
                        .extend(annotations.clone());
                }
                existing.metadata.owner_references = object.metadata.owner_references.clone();
                existing.metadata.resource_version = Some(rv);
            }
            None => {
                self.uid += 1;
                let mut created = object.clone();
                created.metadata.uid = Some(format!("cc-uid-{}", self.uid));
                created.metadata.resource_version = Some(rv);
                created.status = None;
                if self.lagging {
                    self.hidden.insert(name.clone());
                }
                self.contracts.insert(name, created);
            }
        }
    }

    /// The release applies of `plan`, as act makes them: each contract to
    /// release read whole (here, the world's copy), with `spec.release` set;
    /// one gone or already released is left alone.
    pub fn released(&self, plan: &InfraPlan) -> Vec<ComputeContract> {
        plan.release
            .iter()
            .filter_map(|release| {
                let whole = self.contracts.get(&release.name)?;
                (!whole.spec.release)
                    .then(|| released_object(&self.infra, whole, &release.name, &release.entry))
            })
            .collect()
    }

    /// Enacts the first `limit` writes of `plan` (apply, release, delete, status, finalizer
    /// in that order, as act does); `usize::MAX` enacts all of it. A smaller limit is a crash.
    pub fn enact(&mut self, plan: &InfraPlan, limit: usize) {
        let mut budget = limit;
        let mut spend = || {
            if budget == 0 {
                false
            } else {
                budget -= 1;
                true
            }
        };
        for object in &plan.apply {
            if !spend() {
                return;
            }
            self.history
                .push(Write::Apply(object.metadata.name.clone().unwrap()));
            self.upsert(object);
        }
        for object in &self.released(plan) {
            if !spend() {
                return;
            }
            self.history
                .push(Write::Release(object.metadata.name.clone().unwrap()));
            self.upsert(object);
        }
        for deletion in &plan.delete {
            if !spend() {
                return;
            }
            let Some(existing) = self.contracts.get_mut(&deletion.name) else {
                continue;
            };
            // The API server checks the preconditions.
            if existing.metadata.uid != deletion.uid
                || existing.metadata.resource_version != deletion.resource_version
            {
                continue;
            }
            assert_eq!(
                phase_of(existing),
                Some(ComputeContractPhase::Released),
                "deleted {} before it was Released",
                deletion.name
            );
            self.history.push(Write::Delete(deletion.name.clone()));
            existing.metadata.deletion_timestamp =
                Some(Time(Timestamp::from_second(1_800_000_000).unwrap()));
        }
        if let Some(status) = &plan.status {
            if !spend() {
                return;
            }
            self.history.push(Write::Status);
            self.infra.status = Some(status.clone());
        }
        if plan.finalized && spend() {
            self.infra_gone = true;
        }
    }

    /// Runs and fully enacts one reconcile.
    pub fn reconcile(&mut self) -> InfraPlan {
        let plan = self.plan();
        self.enact(&plan, usize::MAX);
        plan
    }

    /// Garbage collection: a contract marked for deletion disappears.
    pub fn collect(&mut self, name: &str) {
        if self
            .contracts
            .get(name)
            .is_some_and(|c| c.metadata.deletion_timestamp.is_some())
        {
            self.contracts.remove(name);
        }
    }

    pub fn collect_all(&mut self) {
        let names: Vec<String> = self.contracts.keys().cloned().collect();
        for name in names {
            self.collect(&name);
        }
    }

    /// Sets a contract's phase as the Requester would.
    pub fn set_phase(&mut self, name: &str, phase: ComputeContractPhase) {
        let rv = self.bump();
        let contract = self.contracts.get_mut(name).unwrap();
        contract.status = Some(ComputeContractStatus {
            phase: Some(phase),
            ..ComputeContractStatus::default()
        });
        contract.metadata.resource_version = Some(rv);
    }

    /// One step of a simulated Requester on `name`: Pending -> Bidding -> Accepted ->
    /// Deployed (or Failed when `fail`); with `spec.release`: -> Releasing -> Released.
    pub fn requester_step(&mut self, name: &str, fail: bool) {
        use ComputeContractPhase as P;
        let Some(contract) = self.contracts.get(name) else {
            return;
        };
        let current = phase_of(contract);
        let next = if contract.spec.release {
            match current {
                Some(P::Released) => None,
                Some(P::Releasing) => Some(P::Released),
                _ => Some(P::Releasing),
            }
        } else {
            match current {
                None => Some(P::Pending),
                Some(P::Pending | P::Bidding | P::Accepted | P::Deployed) if fail => {
                    Some(P::Failed)
                }
                Some(P::Pending) => Some(P::Bidding),
                Some(P::Bidding) => Some(P::Accepted),
                Some(P::Accepted) => Some(P::Deployed),
                _ => None,
            }
        };
        if let Some(next) = next {
            self.set_phase(name, next);
        }
    }

    /// Runs the Requester on every contract until nothing moves (no failures).
    pub fn settle_requester(&mut self) {
        for _ in 0..8 {
            let names: Vec<String> = self.contracts.keys().cloned().collect();
            for name in names {
                self.requester_step(&name, false);
            }
        }
    }
}

/// The names of these objects (the contracts a plan applies or releases).
pub fn names(objects: &[ComputeContract]) -> Vec<String> {
    objects
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect()
}
