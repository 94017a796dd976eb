//! The parts of a [`CachedInfra`](super::CachedInfra): each `api::infra`
//! type with its texts shared through one Infra's [`Pool`], its node's own
//! texts boxed, its claim's uid as 16 bytes, and what the NodeClaim
//! controller derives from an entry (its join Secret's name, its contract's,
//! its node name and join labels) kept only when it differs from the
//! derived one.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

use api::names::{CONTRACT_LABEL, INFRA_NAME_LABEL, compute_contract_name, join_secret_name};
use api::{
    ClusterRef, ComputeContractPhase, Condition, ContractEntry, ContractState, ContractStatus,
    InfraPhase, InfraSpec, InfraStatus, Location, NodeClaimRef, NodeEntry, NodeJoin, Receipt,
    Resources, Role, SecretEntry, SecretRef, StringMap, Taint, Text,
};

use crate::cache::derived::{DerivedName, name_or, unless_derived};
use crate::cache::uid::KeptUid;
use crate::nodeclaim::compose::node_name;

/// The texts, locations and join parameters of one Infra, each kept once.
#[derive(Default)]
pub(super) struct Pool {
    texts: HashSet<Text>,
    locations: HashSet<Arc<Location>>,
    joins: HashSet<Arc<SharedJoin>>,
}

/// `value`, shared with an equal one of `set`.
fn shared<T: Hash + Eq>(set: &mut HashSet<Arc<T>>, value: T) -> Arc<T> {
    if let Some(shared) = set.get(&value) {
        return Arc::clone(shared);
    }
    let shared = Arc::new(value);
    set.insert(Arc::clone(&shared));
    shared
}

impl Pool {
    /// `text`, shared with every equal text of this Infra.
    fn text(&mut self, text: String) -> Text {
        if let Some(shared) = self.texts.get(text.as_str()) {
            return shared.clone();
        }
        let shared = Text::from(text);
        self.texts.insert(shared.clone());
        shared
    }

    fn location(&mut self, location: Location) -> Arc<Location> {
        shared(&mut self.locations, location)
    }
}

/// `spec` of [`InfraSpec`], kept.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct KeptSpec {
    description: Box<str>,
    contracts: Box<[KeptContractEntry]>,
    secrets: Box<[KeptSecretEntry]>,
    record: Option<bool>,
    pub(super) cluster_ref: Option<Box<ClusterRef>>,
    nodes: Box<[KeptNodeEntry]>,
}

impl KeptSpec {
    pub(super) fn new(spec: InfraSpec, infra: &str, pool: &mut Pool) -> Self {
        let InfraSpec {
            description,
            contracts,
            secrets,
            record,
            cluster_ref,
            nodes,
        } = spec;
        Self {
            description: description.into_boxed_str(),
            contracts: contracts
                .into_iter()
                .map(|entry| KeptContractEntry::new(entry, pool))
                .collect(),
            secrets: secrets
                .into_iter()
                .map(|entry| KeptSecretEntry::new(entry, pool))
                .collect(),
            record,
            cluster_ref: cluster_ref.map(Box::new),
            nodes: nodes
                .into_iter()
                .map(|entry| KeptNodeEntry::new(entry, infra, pool))
                .collect(),
        }
    }

    pub(super) fn spec(&self, infra: &str) -> InfraSpec {
        InfraSpec {
            description: self.description.to_string(),
            contracts: self
                .contracts
                .iter()
                .map(KeptContractEntry::entry)
                .collect(),
            secrets: self.secrets.iter().map(KeptSecretEntry::entry).collect(),
            record: self.record,
            cluster_ref: self.cluster_ref.as_deref().cloned(),
            nodes: self.nodes.iter().map(|node| node.entry(infra)).collect(),
        }
    }

    pub(super) fn adopted(&self) -> impl Iterator<Item = (&str, &Receipt)> {
        self.nodes
            .iter()
            .filter_map(|node| Some((node.contract.as_str(), node.adopt.as_deref()?)))
    }
}

/// A [`ContractEntry`], kept.
#[derive(Clone, Debug, PartialEq)]
struct KeptContractEntry {
    name: Text,
    resources: Resources,
    location: Arc<Location>,
    role: Role,
}

impl KeptContractEntry {
    fn new(entry: ContractEntry, pool: &mut Pool) -> Self {
        let ContractEntry {
            name,
            resources,
            location,
            role,
        } = entry;
        Self {
            name: pool.text(name),
            resources,
            location: pool.location(location),
            role,
        }
    }

    fn entry(&self) -> ContractEntry {
        ContractEntry {
            name: self.name.to_string(),
            resources: self.resources.clone(),
            location: Location::clone(&self.location),
            role: self.role,
        }
    }
}

/// A [`SecretEntry`], kept: its Secret's name only when it is not `join-<entry>`.
#[derive(Clone, Debug, PartialEq)]
struct KeptSecretEntry {
    contract: Text,
    secret: DerivedName,
}

impl KeptSecretEntry {
    fn new(entry: SecretEntry, pool: &mut Pool) -> Self {
        let SecretEntry {
            contract,
            secret_ref: SecretRef { name },
        } = entry;
        let secret = unless_derived(name, &join_secret_name(&contract));
        Self {
            contract: pool.text(contract),
            secret,
        }
    }

    fn entry(&self) -> SecretEntry {
        SecretEntry {
            contract: self.contract.to_string(),
            secret_ref: SecretRef {
                name: name_or(&self.secret, || join_secret_name(&self.contract)),
            },
        }
    }
}

/// A [`NodeEntry`], kept.
#[derive(Clone, Debug, PartialEq)]
struct KeptNodeEntry {
    contract: Text,
    owner_did: Text,
    adopt: Option<Box<Receipt>>,
    node_join: Option<KeptNodeJoin>,
    claim: KeptClaimRef,
}

impl KeptNodeEntry {
    fn new(entry: NodeEntry, infra: &str, pool: &mut Pool) -> Self {
        let NodeEntry {
            contract,
            owner_did,
            adopt,
            node_join,
            node_claim_ref,
        } = entry;
        let contract = pool.text(contract);
        let node_join = node_join.map(|join| {
            let derived = Derived {
                infra,
                entry: &contract,
                claim: &node_claim_ref.name,
            };
            KeptNodeJoin::new(join, &derived, pool)
        });
        Self {
            contract,
            owner_did: pool.text(owner_did),
            adopt,
            node_join,
            claim: KeptClaimRef::new(node_claim_ref, pool),
        }
    }

    fn entry(&self, infra: &str) -> NodeEntry {
        let derived = Derived {
            infra,
            entry: &self.contract,
            claim: &self.claim.name,
        };
        NodeEntry {
            contract: self.contract.to_string(),
            owner_did: self.owner_did.to_string(),
            adopt: self.adopt.clone(),
            node_join: self.node_join.as_ref().map(|join| join.node_join(&derived)),
            node_claim_ref: self.claim.reference(),
        }
    }
}

/// What a node entry's join parameters are derived from: the NodeClaim
/// controller names its node after its claim and entry
/// (`nodeclaim::compose::node_name`) and labels it with its Infra and entry
/// (`nodeclaim::compose::node_join`).
struct Derived<'a> {
    infra: &'a str,
    entry: &'a str,
    claim: &'a str,
}

impl Derived<'_> {
    fn node_name(&self) -> String {
        node_name(self.claim, self.entry)
    }

    /// Whether `labels` are the derived ones.
    fn are_the_labels(&self, labels: &StringMap) -> bool {
        labels.len() == 2
            && labels.get(INFRA_NAME_LABEL) == Some(self.infra)
            && labels.get(CONTRACT_LABEL) == Some(self.entry)
    }

    fn labels(&self) -> StringMap {
        StringMap::from([
            (INFRA_NAME_LABEL.to_owned(), self.infra.to_owned()),
            (CONTRACT_LABEL.to_owned(), self.entry.to_owned()),
        ])
    }
}

/// A [`NodeJoin`], kept: its node name only when it is not the derived
/// one, the rest shared with every node of the Infra that joins alike.
#[derive(Clone, Debug, PartialEq)]
struct KeptNodeJoin {
    node_name: DerivedName,
    shared: Arc<SharedJoin>,
}

/// What the nodes of one Infra join with alike: the API server, the labels
/// when they are the derived ones (else each node's, their values shared),
/// the taints.
#[derive(Debug, PartialEq, Eq, Hash)]
struct SharedJoin {
    api_server: Text,
    /// `None` when they are the derived ones.
    labels: Option<Box<[(Text, Text)]>>,
    taints: Box<[Taint]>,
}

impl KeptNodeJoin {
    fn new(join: NodeJoin, derived: &Derived<'_>, pool: &mut Pool) -> Self {
        let NodeJoin {
            api_server,
            node_name,
            labels,
            taints,
        } = join;
        let labels = (!derived.are_the_labels(&labels)).then(|| {
            labels
                .iter()
                .map(|(key, value)| (api::intern(key), pool.text(value.to_owned())))
                .collect()
        });
        let api_server = pool.text(api_server);
        Self {
            node_name: unless_derived(node_name, &derived.node_name()),
            shared: shared(
                &mut pool.joins,
                SharedJoin {
                    api_server,
                    labels,
                    taints: taints.into_boxed_slice(),
                },
            ),
        }
    }

    fn node_join(&self, derived: &Derived<'_>) -> NodeJoin {
        let SharedJoin {
            api_server,
            labels,
            taints,
        } = self.shared.as_ref();
        NodeJoin {
            api_server: api_server.to_string(),
            node_name: name_or(&self.node_name, || derived.node_name()),
            labels: labels.as_ref().map_or_else(
                || derived.labels(),
                |labels| {
                    labels
                        .iter()
                        .map(|(key, value)| (key.to_string(), value.to_string()))
                        .collect::<StringMap>()
                },
            ),
            taints: taints.to_vec(),
        }
    }
}

/// A [`NodeClaimRef`], kept.
#[derive(Clone, Debug, PartialEq)]
struct KeptClaimRef {
    namespace: Text,
    name: Box<str>,
    uid: KeptUid,
}

impl KeptClaimRef {
    fn new(reference: NodeClaimRef, pool: &mut Pool) -> Self {
        let NodeClaimRef {
            namespace,
            name,
            uid,
        } = reference;
        Self {
            namespace: pool.text(namespace),
            name: name.into_boxed_str(),
            uid: KeptUid::from(uid),
        }
    }

    fn reference(&self) -> NodeClaimRef {
        NodeClaimRef {
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
            uid: self.uid.to_string(),
        }
    }
}

/// `status` of [`InfraStatus`], kept.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct KeptStatus {
    phase: Option<InfraPhase>,
    contracts: Box<[KeptContractStatus]>,
    declaration_hash: Option<Box<str>>,
    contract_count: u32,
    ready_contracts: u32,
    observed_generation: Option<i64>,
    conditions: Box<[Condition]>,
}

impl KeptStatus {
    pub(super) fn new(status: InfraStatus, infra: &str, pool: &mut Pool) -> Self {
        let InfraStatus {
            phase,
            contracts,
            declaration_hash,
            contract_count,
            ready_contracts,
            observed_generation,
            conditions,
        } = status;
        Self {
            phase,
            contracts: contracts
                .into_iter()
                .map(|row| KeptContractStatus::new(row, infra, pool))
                .collect(),
            declaration_hash: declaration_hash.map(String::into_boxed_str),
            contract_count,
            ready_contracts,
            observed_generation,
            conditions: conditions.into_boxed_slice(),
        }
    }

    pub(super) fn status(&self, infra: &str) -> InfraStatus {
        InfraStatus {
            phase: self.phase,
            contracts: self.contracts.iter().map(|row| row.row(infra)).collect(),
            declaration_hash: self.declaration_hash.as_deref().map(str::to_owned),
            contract_count: self.contract_count,
            ready_contracts: self.ready_contracts,
            observed_generation: self.observed_generation,
            conditions: self.conditions.to_vec(),
        }
    }
}

/// A [`ContractStatus`] row, kept: its contract's name only when it is not
/// `<infra>-<entry>`.
#[derive(Clone, Debug, PartialEq)]
struct KeptContractStatus {
    name: Text,
    compute_contract: DerivedName,
    state: ContractState,
    phase: Option<ComputeContractPhase>,
}

impl KeptContractStatus {
    fn new(row: ContractStatus, infra: &str, pool: &mut Pool) -> Self {
        let ContractStatus {
            name,
            compute_contract,
            state,
            phase,
        } = row;
        let compute_contract =
            unless_derived(compute_contract, &compute_contract_name(infra, &name));
        Self {
            name: pool.text(name),
            compute_contract,
            state,
            phase,
        }
    }

    fn row(&self, infra: &str) -> ContractStatus {
        ContractStatus {
            name: self.name.to_string(),
            compute_contract: name_or(&self.compute_contract, || {
                compute_contract_name(infra, &self.name)
            }),
            state: self.state,
            phase: self.phase,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;

    use super::super::CachedInfra;

    /// The fixture's Infra (three nodes of one Cluster, from `manager dev`).
    fn fixture() -> CachedInfra {
        serde_json::from_str(include_str!("../../../examples/cache_weight/infra.json")).unwrap()
    }

    #[test]
    fn an_entry_name_is_kept_once_and_derived_names_not_at_all() {
        let cached = fixture();
        let spec = &cached.spec;
        let status = cached.status.as_deref().unwrap();
        let name = &spec.contracts[0].name;
        assert!(name.shares(&spec.secrets[0].contract));
        assert!(name.shares(&spec.nodes[0].contract));
        assert!(name.shares(&status.contracts[0].name));
        let join = spec.nodes[0].node_join.as_ref().unwrap();
        // The fixture's node names and join labels are the NodeClaim controller's.
        assert!(spec.nodes.iter().all(|node| {
            let join = node.node_join.as_ref().unwrap();
            join.node_name.is_none() && join.shared.labels.is_none()
        }));
        assert!(spec.secrets.iter().all(|s| s.secret.is_none()));
        assert!(
            status
                .contracts
                .iter()
                .all(|r| r.compute_contract.is_none())
        );
        // What the nodes share is shared.
        assert!(spec.nodes[0].owner_did.shares(&spec.nodes[1].owner_did));
        let other_join = spec.nodes[1].node_join.as_ref().unwrap();
        assert!(
            Arc::ptr_eq(&join.shared, &other_join.shared),
            "the nodes join alike"
        );
        assert!(std::sync::Arc::ptr_eq(
            &spec.contracts[0].location,
            &spec.contracts[1].location
        ));
    }
}
