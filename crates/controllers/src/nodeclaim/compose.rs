//! Claims -> the Infra spec: one contract entry, one node entry and one secret
//! reference per composed claim, and the checks a claim must pass first.
//!
//! Pure functions; no secret value ever passes through here (the join Secret
//! is only *named*, see [`crate::nodeclaim::secrets::JoinSecret`]).

use std::collections::BTreeMap;

use api::names::{
    CLUSTER_LABEL, CLUSTER_NAMESPACE_LABEL, CONTRACT_LABEL, DNS_LABEL_MAX_LEN, INFRA_NAME_LABEL,
    INFRA_RELEASE_FINALIZER, compute_contract_name, infra_name, join_secret_name,
};
use api::{
    Cluster, ClusterKind, ClusterRef, ContractEntry, Infra, InfraRef, InfraSpec, NodeClaimRef,
    NodeEntry, NodeJoin, Resources, Role, SecretEntry, SecretRef, StringMap, is_did,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use super::conditions::reason;
use crate::cache::CachedClaim;

/// Upper bounds on a claim's resources: beyond them no market offers a
/// machine, so such a claim is reported instead of published.
pub mod limits {
    /// Most vCPUs of one machine.
    pub const MAX_CPUS: u32 = 1024;
    /// Most memory of one machine, MiB (16 TiB).
    pub const MAX_MEMORY_MIB: u64 = 16 * 1024 * 1024;
    /// Most disk of one machine, GiB (1 PiB).
    pub const MAX_DISK_GIB: u64 = 1024 * 1024;
    /// Most network bandwidth of one machine, Mbit/s (400 Gbit/s).
    pub const MAX_NETWORK_MBITS: u32 = 400_000;
}

/// Longest node name (a DNS-1123 subdomain).
const MAX_NODE_NAME_LEN: usize = 253;

/// The key of one reconcile: a Cluster's namespace and name (the Cluster may not exist).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterKey {
    /// Namespace of the Cluster (and of its claims).
    pub namespace: String,
    /// Name of the Cluster.
    pub name: String,
}

impl ClusterKey {
    /// The key of the Cluster a claim names: `spec.clusterName` in the claim's own namespace.
    #[must_use]
    pub fn of_claim(claim: &CachedClaim) -> Self {
        Self {
            namespace: claim.namespace().unwrap_or_default(),
            name: claim.spec.cluster_name.clone(),
        }
    }

    /// The key of `cluster` itself.
    #[must_use]
    pub fn of_cluster(cluster: &Cluster) -> Self {
        Self {
            namespace: cluster.namespace().unwrap_or_default(),
            name: cluster.name_any(),
        }
    }

    /// The name of this Cluster's Infra.
    #[must_use]
    pub fn infra_name(&self) -> String {
        infra_name(&self.namespace, &self.name)
    }
}

impl std::fmt::Display for ClusterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Why a claim is not composed: a PascalCase reason and a message that says what to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The InfraComposed reason.
    pub reason: &'static str,
    /// What is wrong and what to do.
    pub message: String,
}

impl Problem {
    fn new(reason: &'static str, message: String) -> Self {
        Self { reason, message }
    }
}

/// Where the Clusters that claims' ownerReferences name by uid are, for the
/// uids that are not their own Cluster's: what a mismatch message says.
pub type OwnerClusters = BTreeMap<String, ClusterKey>;

/// The checks of the claim itself (those that do not depend on the Cluster's state):
/// clusterName shape, the Cluster ownerReference, resources and ownerDid.
/// `owners` tells where a Cluster named by an ownerReference's uid is, if anywhere.
///
/// # Errors
/// The first problem found.
pub fn check_claim(
    claim: &CachedClaim,
    cluster: Option<&Cluster>,
    owners: &OwnerClusters,
) -> Result<(), Problem> {
    let namespace = claim.namespace().unwrap_or_default();
    let cluster_name = &claim.spec.cluster_name;
    if cluster_name.contains('/') || cluster_name.is_empty() {
        return Err(Problem::new(
            reason::CLUSTER_NAME_INVALID,
            format!(
                "spec.clusterName {cluster_name:?} is not a name: a NodeClaim reaches only a Cluster in its own namespace {namespace:?}; \
                 create the NodeClaim in the Cluster's namespace and set spec.clusterName to the Cluster's name"
            ),
        ));
    }
    if cluster_name.len() > DNS_LABEL_MAX_LEN {
        // The name labels the Infra and join Secrets: every write would be refused.
        return Err(Problem::new(
            reason::CLUSTER_NAME_TOO_LONG,
            format!(
                "spec.clusterName is {} characters; a Cluster's name is at most {DNS_LABEL_MAX_LEN} because it labels the Infra and join Secrets of its nodes: \
                 recreate the Cluster and its claims with a shorter name",
                cluster_name.len()
            ),
        ));
    }
    for owner in claim
        .owner_references()
        .iter()
        .filter(|o| is_cluster_owner(o))
    {
        if &owner.name != cluster_name {
            return Err(Problem::new(
                reason::CLUSTER_OWNER_MISMATCH,
                format!(
                    "the ownerReference names Cluster {:?} but spec.clusterName is {cluster_name:?}: \
                     fix the ownerReference or recreate the claim for the right Cluster",
                    owner.name
                ),
            ));
        }
        if let Some(cluster) = cluster
            && let Some(current) = cluster.uid().filter(|uid| *uid != owner.uid)
        {
            return Err(owner_uid_mismatch(
                claim,
                &owner.uid,
                &current,
                owners.get(&owner.uid),
            ));
        }
    }
    check_resources(&claim.spec.resources)?;
    if let Some(did) = &claim.spec.owner_did
        && !is_did(did)
    {
        return Err(Problem::new(
            reason::INVALID_OWNER_DID,
            format!(
                "spec.ownerDid {did:?} is not a DID (did:<method>:<id>): fix it or leave it out to use the Cluster's account"
            ),
        ));
    }
    Ok(())
}

/// The claim's Cluster ownerReference has the Cluster's name but not its uid
/// (`current`): say whose uid it is, as far as the cache knows.
fn owner_uid_mismatch(
    claim: &CachedClaim,
    uid: &str,
    current: &str,
    owner: Option<&ClusterKey>,
) -> Problem {
    let name = &claim.spec.cluster_name;
    let namespace = claim.namespace().unwrap_or_default();
    let message = match owner {
        Some(other) if other.namespace != namespace => format!(
            "the ownerReference's uid {uid} is not this namespace's Cluster {name:?} (uid {current}) but a Cluster of another namespace: \
             a claim belongs to a Cluster of its own namespace; set the ownerReference to uid {current} or delete the claim"
        ),
        Some(other) => format!(
            "the ownerReference's uid {uid} is Cluster {:?} of this namespace, not {name:?} (uid {current}): \
             fix the ownerReference or recreate the claim for the right Cluster",
            other.name
        ),
        None => format!(
            "the ownerReference names Cluster {name:?} with uid {uid}, and no Cluster has that uid any more: the Cluster was deleted and \
             {name:?} is a new one (uid {current}); delete this claim and create a new one for the current Cluster"
        ),
    };
    Problem::new(reason::CLUSTER_OWNER_MISMATCH, message)
}

/// The uids the claims' Cluster ownerReferences name other than `current`'s.
#[must_use]
pub fn foreign_owner_uids<'a>(
    claims: impl IntoIterator<Item = &'a CachedClaim>,
    current: Option<&Cluster>,
) -> std::collections::BTreeSet<String> {
    let current = current.and_then(ResourceExt::uid);
    claims
        .into_iter()
        .flat_map(|c| c.owner_references().iter().filter(|o| is_cluster_owner(o)))
        .filter(|o| Some(&o.uid) != current.as_ref())
        .map(|o| o.uid.clone())
        .collect()
}

/// The claim's ownerReferences with its Cluster's added, when it has no
/// Cluster owner yet (DESIGN: a claim's controller owner is its Cluster): the
/// claim is then deleted with its Cluster, and a Cluster recreated under the
/// same name (a new uid) never composes it. `controller` only when no other
/// controller owns the claim; never `blockOwnerDeletion` (that needs rights
/// on the Cluster's finalizers, and the Cluster waits for its Infra anyway).
#[must_use]
pub fn with_cluster_owner(claim: &CachedClaim, cluster: &Cluster) -> Option<Vec<OwnerReference>> {
    let owners = claim.owner_references();
    if owners.iter().any(is_cluster_owner) {
        return None;
    }
    let controlled = owners.iter().any(|o| o.controller == Some(true));
    let mut wanted = owners.to_vec();
    wanted.push(OwnerReference {
        api_version: Cluster::api_version(&()).into_owned(),
        kind: Cluster::kind(&()).into_owned(),
        name: cluster.name_any(),
        uid: cluster.uid()?,
        controller: Some(!controlled),
        block_owner_deletion: None,
    });
    Some(wanted)
}

/// Whether an ownerReference names a Cluster (of this API group, any version).
fn is_cluster_owner(owner: &OwnerReference) -> bool {
    owner.kind == Cluster::kind(&())
        && owner.api_version.split('/').next() == Some(Cluster::group(&()).as_ref())
}

/// Whether every amount is at least 1 and at most what one machine offers.
///
/// # Errors
/// The first amount out of range, with the allowed range.
pub fn check_resources(resources: &Resources) -> Result<(), Problem> {
    let out_of_range = |what: &str, value: u64, max: u64, unit: &str| {
        Problem::new(
            reason::IMPOSSIBLE_RESOURCES,
            format!(
                "spec.resources.{what} is {value} {unit}; no machine offers that: use a value from 1 to {max}"
            ),
        )
    };
    let checks = [
        (
            "cpus",
            u64::from(resources.cpus),
            u64::from(limits::MAX_CPUS),
            "vCPUs",
        ),
        ("memory", resources.memory, limits::MAX_MEMORY_MIB, "MiB"),
        ("disk", resources.disk, limits::MAX_DISK_GIB, "GiB"),
        (
            "network",
            u64::from(resources.network),
            u64::from(limits::MAX_NETWORK_MBITS),
            "Mbit/s",
        ),
    ];
    for (what, value, max, unit) in checks {
        if value == 0 || value > max {
            return Err(out_of_range(what, value, max, unit));
        }
    }
    Ok(())
}

/// The DID a claim's node is rented for: the claim's `ownerDid`, else the Cluster's account.
///
/// # Errors
/// When the Cluster's account is not a DID (the claim's own is checked by [`check_claim`]).
pub fn owner_did(claim: &CachedClaim, cluster: &Cluster) -> Result<String, Problem> {
    match &claim.spec.owner_did {
        Some(did) => Ok(did.clone()),
        None if is_did(&cluster.spec.account) => Ok(cluster.spec.account.clone()),
        None => Err(Problem::new(
            reason::INVALID_OWNER_DID,
            format!(
                "the Cluster's spec.account {:?} is not a DID (did:<method>:<id>): fix the Cluster or set spec.ownerDid on the claim",
                cluster.spec.account
            ),
        )),
    }
}

/// The name the claim's machine registers under as a node: the claim's name
/// and 6 hex digits of its entry, so a recreated claim never reuses the node
/// name of the machine still being released.
#[must_use]
pub fn node_name(claim_name: &str, entry: &str) -> String {
    let suffix: String = entry
        .rsplit('-')
        .next()
        .unwrap_or(entry)
        .chars()
        .take(6)
        .collect();
    let room = MAX_NODE_NAME_LEN - suffix.len() - 1;
    let mut base: String = claim_name.chars().take(room).collect();
    while base.ends_with(['-', '.']) {
        base.pop();
    }
    format!("{base}-{suffix}")
}

/// Where a claim's entry lives, for `status.infra`.
#[must_use]
pub fn infra_ref(key: &ClusterKey, contract_namespace: &str, entry: &str) -> InfraRef {
    let infra = key.infra_name();
    InfraRef {
        namespace: contract_namespace.to_owned(),
        compute_contract: compute_contract_name(&infra, entry),
        name: infra,
        contract: entry.to_owned(),
    }
}

/// One claim's part of the Infra spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ComposedEntry {
    /// The publishable contract entry.
    pub contract: ContractEntry,
    /// The node fields (never published).
    pub node: NodeEntry,
    /// The reference to the join Secret (never published; holds no value).
    pub secret: SecretEntry,
}

/// The node-join parameters of a claim's machine (no secret: the token and CA
/// live only in the join Secret).
#[must_use]
pub fn node_join(key: &ClusterKey, api_server: &str, claim_name: &str, entry: &str) -> NodeJoin {
    NodeJoin {
        api_server: api_server.to_owned(),
        node_name: node_name(claim_name, entry),
        labels: StringMap::from([
            (INFRA_NAME_LABEL.to_owned(), key.infra_name()),
            (CONTRACT_LABEL.to_owned(), entry.to_owned()),
        ]),
        taints: Vec::new(),
    }
}

/// A claim's entry: resources, location and role Worker; ownerDid, adopt,
/// nodeJoin and the claim reference; the join Secret reference.
#[must_use]
pub fn compose_entry(
    claim: &CachedClaim,
    entry: &str,
    owner_did: String,
    node_join: NodeJoin,
) -> ComposedEntry {
    ComposedEntry {
        contract: ContractEntry {
            name: entry.to_owned(),
            resources: claim.spec.resources.clone(),
            location: claim.spec.location.clone(),
            role: Role::Worker,
        },
        node: NodeEntry {
            contract: entry.to_owned(),
            owner_did,
            adopt: claim.spec.adopt.clone(),
            node_join: Some(node_join),
            node_claim_ref: NodeClaimRef {
                namespace: claim.namespace().unwrap_or_default(),
                name: claim.name_any(),
                uid: claim.uid().unwrap_or_default(),
            },
        },
        secret: SecretEntry {
            contract: entry.to_owned(),
            secret_ref: SecretRef {
                name: join_secret_name(entry),
            },
        },
    }
}

/// The whole desired Infra of a Cluster: its labels, the Infra controller's
/// release finalizer, clusterRef and one entry per composed claim, sorted by
/// entry name so the same claims always give the same object.
///
/// The finalizer is in the applied object so the Infra is born with it: the
/// Infra controller does not patch it in (one write per Infra fewer, plan
/// 0012 S6), and an Infra deleted before that controller first saw it still
/// waits for its contracts. The Infra controller alone removes it (a plain
/// patch: this apply's ownership of it does not stand in the way), and this
/// controller never applies a deleting Infra, so it never adds it back.
#[must_use]
pub fn infra_object(
    key: &ClusterKey,
    contract_namespace: &str,
    entries: &[ComposedEntry],
) -> Infra {
    let mut entries: Vec<&ComposedEntry> = entries.iter().collect();
    entries.sort_by(|a, b| a.contract.name.cmp(&b.contract.name));
    let spec = InfraSpec {
        description: format!("nodes of Cluster {key}"),
        contracts: entries.iter().map(|e| e.contract.clone()).collect(),
        secrets: entries.iter().map(|e| e.secret.clone()).collect(),
        record: None,
        cluster_ref: Some(ClusterRef {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            kind: ClusterKind::Cluster,
        }),
        nodes: entries.iter().map(|e| e.node.clone()).collect(),
    };
    let mut infra = Infra::new(&key.infra_name(), spec);
    infra.metadata = ObjectMeta {
        name: Some(key.infra_name()),
        namespace: Some(contract_namespace.to_owned()),
        labels: Some(infra_labels(key)),
        finalizers: Some(vec![INFRA_RELEASE_FINALIZER.to_owned()]),
        ..ObjectMeta::default()
    };
    infra
}

/// The labels that tie an Infra to its Cluster.
#[must_use]
pub fn infra_labels(key: &ClusterKey) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CLUSTER_LABEL.to_owned(), key.name.clone()),
        (CLUSTER_NAMESPACE_LABEL.to_owned(), key.namespace.clone()),
    ])
}

/// Whether the observed Infra already is the desired one (labels and spec), so
/// applying it again would change nothing. List-maps compare as sets.
#[must_use]
pub fn infra_matches(observed: &Infra, desired: &Infra) -> bool {
    let labels_present = desired
        .labels()
        .iter()
        .all(|(k, v)| observed.labels().get(k) == Some(v));
    labels_present && same_spec(&observed.spec, &desired.spec)
}

/// Whether two Infra specs are equal, their list-maps compared as sets by
/// key. Compares borrowed entries: a Cluster's every reconcile asks, and
/// cloning both specs to sort them made 991,514 allocations in one
/// 10,000-node bench-scale run (heaptrack, plan 0018).
fn same_spec(observed: &InfraSpec, desired: &InfraSpec) -> bool {
    // Destructured, so that a new field of the spec cannot be left out here.
    let InfraSpec {
        description,
        contracts,
        secrets,
        record,
        cluster_ref,
        nodes,
    } = observed;
    *description == desired.description
        && *record == desired.record
        && *cluster_ref == desired.cluster_ref
        && same_set(contracts, &desired.contracts, |c| &c.name)
        && same_set(secrets, &desired.secrets, |s| &s.contract)
        && same_set(nodes, &desired.nodes, |n| &n.contract)
}

/// Whether `a` and `b` hold equal items once each is sorted by `key` (a
/// stable sort: items of one key compare in their order).
fn same_set<T: PartialEq>(a: &[T], b: &[T], key: impl Fn(&T) -> &String) -> bool {
    fn sorted<'a, T>(items: &'a [T], key: &impl Fn(&T) -> &String) -> Vec<&'a T> {
        let mut sorted: Vec<&T> = items.iter().collect();
        sorted.sort_by(|x, y| key(x).cmp(key(y)));
        sorted
    }
    a.len() == b.len() && sorted(a, &key) == sorted(b, &key)
}

#[cfg(test)]
mod tests;
