//! The pure decision of one reconcile of a Cluster key: everything observed
//! (the Cluster if it exists, all its claims, its Infra, that Infra's
//! contracts and join Secrets, the time) in, a [`Plan`] out.
//!
//! # Expected flow
//! 1. Each claim is checked ([`compose::check_claim`]) and against its Cluster
//!    (missing, deleting, no URL yet) and its Infra (still being deleted).
//! 2. A claim that passes is composed into an entry; its contract is observed
//!    for its status, each condition by its own file ([`super::conditions`],
//!    through [`super::status`]); a claim that failed keeps no entry.
//! 3. The Infra is applied with every composed entry, or deleted when none is
//!    left or the Cluster is gone or going. While no live Requester runs the
//!    contract namespace ([`RootState`]) nothing composes and a live
//!    Cluster's Infra is left alone (the root delete order deletes it).
//! 4. Join Secrets are written for composed entries and deleted once their
//!    entry left and its contract is gone.
//! 5. Finalizers: added before anything is rented, removed once nothing of the
//!    claim (or Cluster) is left.
//!
//! # Guarantees
//! Pure and deterministic for the same inputs, except that a new join token is
//! left to `act` ([`JoinSecret::token`] is `None`). Converged inputs give an
//! empty plan ([`Plan::is_empty`]). No secret value reaches the Infra or a
//! claim's status.

use std::collections::{BTreeMap, BTreeSet};

use api::names::{CLUSTER_FINALIZER, CONTRACT_LABEL, NODECLAIM_FINALIZER, join_secret_name};
use api::{Cluster, Infra, NodeClaimPhase};
use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

use super::adopt::{self, GuestHolder};
use super::compose::{self, ClusterKey, ComposedEntry, Problem};
use super::conditions::reason;
use super::root::RootState;
use super::secrets::{JoinSecret, desired_join_secret};
use super::status::{self, ClaimView, Outcome};
use super::status_write::StatusWrite;
use crate::cache::{CachedClaim, CachedContract, CachedJoinSecret, Labelled};
use crate::object_uid::ObjectUid;
use crate::time::earliest;
use crate::write::Seen;

/// What one reconcile of a Cluster key observed (all read from the shared cache).
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// The Cluster's namespace and name.
    pub key: &'a ClusterKey,
    /// The Cluster, if it exists.
    pub cluster: Option<&'a Cluster>,
    /// Every NodeClaim of the key's namespace whose `spec.clusterName` is the key's name.
    pub claims: &'a [&'a CachedClaim],
    /// The Cluster's Infra (`infra_name(key)` in the contract namespace), if it exists.
    pub infra: Option<&'a Infra>,
    /// The ComputeContracts labelled with that Infra's name.
    pub contracts: &'a [&'a CachedContract],
    /// The join Secrets labelled with that Infra's name.
    pub secrets: &'a [&'a CachedJoinSecret],
    /// Where Infras, contracts and join Secrets live.
    pub contract_namespace: &'a str,
    /// Whether a live Requester runs the contract namespace (claims compose only then).
    pub root: RootState,
    /// Uids of claims this controller wrote Failed that the cache may not show
    /// Failed yet ([`super::failed::FailedClaims`]): they are left alone.
    pub written_failed: &'a BTreeSet<String>,
    /// Where the Clusters are that claims' ownerReferences name by a uid that
    /// is not their Cluster's (for the mismatch message).
    pub owner_clusters: &'a compose::OwnerClusters,
    /// Who holds the guests the claims name in `spec.adopt` (all of the contract namespace).
    pub guest_holders: &'a [GuestHolder],
    /// When this controller first saw each new or deleted claim so, by uid
    /// ([`super::first_seen`]): a status hold counts from then.
    pub first_seen: &'a BTreeMap<String, DateTime<Utc>>,
    /// The time of this reconcile.
    pub now: DateTime<Utc>,
}

/// What to do with the Cluster's Infra.
#[derive(Clone, Debug)]
pub enum InfraAction {
    /// Leave it as it is.
    Keep,
    /// Server-side apply this whole Infra.
    Apply(Box<Infra>),
    /// Delete it (its release finalizer releases every contract): the Infra
    /// as read, so a newer one of the same name is never deleted.
    Delete(Seen),
}

/// A finalizer to add to or remove from one object: the object as read, so
/// the write is guarded by the resourceVersion its list was read at.
pub type FinalizerChange = Seen;

/// What the Cluster's `status.nodes` becomes.
#[derive(Clone)]
pub struct ClusterNodes {
    /// How many live claims the Cluster has.
    pub nodes: u32,
    /// The Cluster as read: its status is replaced with `nodes` set, guarded
    /// by its resourceVersion (the rest of its status is its provider's).
    pub cluster: Box<Cluster>,
}

/// The count only: the Cluster's status carries its CA, which no log shows.
impl std::fmt::Debug for ClusterNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClusterNodes({})", self.nodes)
    }
}

/// What a claim's metadata gets, in one patch guarded by the resourceVersion read.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimMetadataChange {
    /// The claim, its finalizers as read and the resourceVersion they were read at.
    pub target: FinalizerChange,
    /// Add [`NODECLAIM_FINALIZER`].
    pub add_finalizer: bool,
    /// The whole new ownerReferences list (the ones read and the Cluster's),
    /// when the claim has no Cluster owner yet.
    pub owner_references: Option<Vec<OwnerReference>>,
}

/// A claim's new status, written only because it differs from the old one
/// (the read model's: the write lays it on the claim read whole).
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimStatusChange {
    /// Namespace of the claim.
    pub namespace: String,
    /// Name of the claim.
    pub name: String,
    /// Uid of the claim.
    pub uid: String,
    /// The resourceVersion the old status was read at: the write is guarded
    /// by it, so a decision from a stale cache is a conflict, never a write.
    pub resource_version: Option<String>,
    /// What the status becomes.
    pub status: StatusWrite,
    /// The phase before, to publish an Event on a transition only.
    pub previous_phase: Option<NodeClaimPhase>,
}

impl ClaimStatusChange {
    /// Whether this write makes the claim Failed (it was not before).
    #[must_use]
    pub fn fails_the_claim(&self) -> bool {
        self.status.phase == Some(NodeClaimPhase::Failed)
            && self.previous_phase != Some(NodeClaimPhase::Failed)
    }
}

/// Everything one reconcile writes, in the order `act` performs it.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Add [`CLUSTER_FINALIZER`] to the Cluster (before anything is rented for it).
    pub add_cluster_finalizer: Option<FinalizerChange>,
    /// Claims to add [`NODECLAIM_FINALIZER`] (before their entries are
    /// applied) or their Cluster's ownerReference to.
    pub claim_metadata: Vec<ClaimMetadataChange>,
    /// Join Secrets to write (before the Infra that references them).
    pub write_secrets: Vec<JoinSecret>,
    /// The Infra.
    pub infra: Option<InfraAction>,
    /// Join Secrets to delete (their entries left and their contracts are gone).
    pub delete_secrets: Vec<Seen>,
    /// Claim statuses that changed.
    pub claim_statuses: Vec<ClaimStatusChange>,
    /// Remove [`NODECLAIM_FINALIZER`] from these (deleting) claims: nothing of them is left.
    pub remove_claim_finalizers: Vec<FinalizerChange>,
    /// Write the Cluster's `status.nodes`.
    pub cluster_nodes: Option<ClusterNodes>,
    /// Remove [`CLUSTER_FINALIZER`] from the (deleting) Cluster: its Infra is gone.
    pub remove_cluster_finalizer: Option<FinalizerChange>,
    /// Reconcile again at this instant (the earliest running grace).
    pub requeue_at: Option<DateTime<Utc>>,
    /// Something this reconcile waits on must disappear (a contract, a join
    /// Secret, the Infra). A deletion made while a watch is down comes only
    /// with the next re-list, so the caller rechecks after a short while.
    pub awaiting_removal: bool,
}

impl Plan {
    /// Whether the plan writes nothing (converged).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.add_cluster_finalizer.is_none()
            && self.claim_metadata.is_empty()
            && self.write_secrets.is_empty()
            && matches!(self.infra, None | Some(InfraAction::Keep))
            && self.delete_secrets.is_empty()
            && self.claim_statuses.is_empty()
            && self.remove_claim_finalizers.is_empty()
            && self.cluster_nodes.is_none()
            && self.remove_cluster_finalizer.is_none()
    }
}

/// The state of the Cluster the key names.
enum ClusterState<'a> {
    Missing,
    Deleting,
    Live(&'a Cluster),
}

/// Decides one reconcile of a Cluster key. See the module docs.
#[must_use]
pub fn decide(observed: &Observed<'_>) -> Plan {
    let key = observed.key;
    let now = observed.now;
    let cluster_state = match observed.cluster {
        None => ClusterState::Missing,
        Some(c) if c.metadata.deletion_timestamp.is_some() => ClusterState::Deleting,
        Some(c) => ClusterState::Live(c),
    };
    let infra_deleting = observed
        .infra
        .is_some_and(|i| i.metadata.deletion_timestamp.is_some());
    let contracts = by_entry(observed.contracts.iter().copied());
    let secrets = by_entry(observed.secrets.iter().copied());
    let observed_entries: BTreeSet<&str> = observed
        .infra
        .map(|i| i.spec.contracts.iter().map(|c| c.name.as_str()).collect())
        .unwrap_or_default();

    let mut plan = Plan::default();
    let mut composed: Vec<ComposedEntry> = Vec::new();
    let mut claims: Vec<&CachedClaim> = observed.claims.to_vec();
    claims.sort_by_key(|c| c.name_any());
    // Guests taken over by claims composed in this reconcile (not yet in any cache).
    let mut adopted_now: Vec<GuestHolder> = Vec::new();

    for claim in &claims {
        let uid = claim.uid().unwrap_or_default();
        let entry = api::names::entry_name(&uid);
        let contract = contracts.get(entry.as_str()).copied();
        let secret = secrets.get(entry.as_str()).copied();
        let deleting = claim.metadata.deletion_timestamp.is_some();
        let previous = claim.status.clone().unwrap_or_default();

        let failed_before = previous.phase == Some(NodeClaimPhase::Failed);
        if !failed_before && observed.written_failed.contains(&uid) {
            // Written Failed, but the cache still shows the claim before that:
            // deciding from it would compose the entry again.
            continue;
        }
        let had_entry = observed_entries.contains(entry.as_str());
        let problem = if deleting {
            Some(Problem {
                reason: reason::CLAIM_DELETING,
                message: "the claim is being deleted: its machine is released and its join Secret removed before it goes".to_owned(),
            })
        } else {
            composability(observed, &cluster_state, claim, had_entry, infra_deleting)
                .or_else(|| adoption_problem(observed, &adopted_now, claim, &entry, had_entry))
        };
        let composed_entry = match problem {
            Some(problem) => Err(problem),
            None => compose_claim(observed, &cluster_state, claim, &entry).ok_or_else(|| Problem {
                reason: reason::CLUSTER_NOT_READY,
                message: format!(
                    "Cluster {key} has no status.url and the entry has no earlier nodeJoin: the node is composed once the cluster reports its API server URL"
                ),
            }),
        };
        let outcome = match &composed_entry {
            _ if failed_before => Outcome::FailedBefore,
            Err(problem) => Outcome::Refused {
                problem,
                stopped: (!deleting && !observed.root.is_running())
                    .then_some(observed.infra.is_none()),
            },
            Ok(_) => Outcome::Composed {
                entry: &entry,
                infra_ref: compose::infra_ref(key, observed.contract_namespace, &entry),
                infra: observed.infra,
            },
        };
        let view = ClaimView {
            claim,
            previous: &previous,
            contract,
            now,
        };
        let decision = status::decide(view, outcome);
        plan.requeue_at = earliest(plan.requeue_at, decision.deadline);
        let entry_for_claim = composed_entry.ok().filter(|_| decision.keeps_entry);
        let status = decision.status;

        let add_finalizer =
            entry_for_claim.is_some() && !has_finalizer(claim.finalizers(), NODECLAIM_FINALIZER);
        let owner_references = match cluster_state {
            ClusterState::Live(cluster) if !deleting => compose::with_cluster_owner(claim, cluster),
            _ => None,
        };
        if add_finalizer || owner_references.is_some() {
            plan.claim_metadata.push(ClaimMetadataChange {
                target: finalizer_change(*claim),
                add_finalizer,
                owner_references,
            });
        }
        if let Some(composed_entry) = entry_for_claim {
            if let ClusterState::Live(cluster) = cluster_state
                && let Some(desired) = desired_join_secret(
                    key,
                    observed.contract_namespace,
                    cluster,
                    &composed_entry,
                    secret,
                )
            {
                plan.write_secrets.push(desired);
            }
            if let Some(receipt) = &composed_entry.node.adopt {
                adopted_now.push(GuestHolder {
                    uri: receipt.uri.clone(),
                    entry: composed_entry.contract.name.clone(),
                });
            }
            composed.push(composed_entry);
        } else if deleting
            && has_finalizer(claim.finalizers(), NODECLAIM_FINALIZER)
            && (!had_entry || !observed.root.is_running())
            && contract.is_none()
            && secret.is_none()
        {
            plan.remove_claim_finalizers.push(finalizer_change(*claim));
            // It goes with this removal: a status written now would be seen
            // by nobody, and would turn the removal (guarded by the version
            // read) into a conflict and one more reconcile.
            continue;
        }

        if status.changes(&previous) {
            let first_seen = observed.first_seen.get(&uid).copied();
            if let Some(shown_at) = status::held_until(claim, &previous, &status, first_seen, now) {
                // Written only if it still applies then (the requeue).
                plan.requeue_at = earliest(plan.requeue_at, Some(shown_at));
            } else {
                plan.claim_statuses.push(ClaimStatusChange {
                    namespace: claim.namespace().unwrap_or_default(),
                    name: claim.name_any(),
                    uid: uid.clone(),
                    resource_version: claim.resource_version(),
                    status,
                    previous_phase: previous.phase,
                });
            }
        }
    }

    // The Infra: applied with every composed entry; deleted when none is left
    // or the Cluster is gone or going. Never touched while it is being deleted.
    plan.infra = Some(match (&cluster_state, observed.infra) {
        (_, Some(_)) if infra_deleting => InfraAction::Keep,
        // Without a live root nothing composes; the root delete order (or the
        // next Requester) decides about a live Cluster's Infra.
        (ClusterState::Live(_), Some(_)) if !observed.root.is_running() => InfraAction::Keep,
        (ClusterState::Live(_), observed_infra) if !composed.is_empty() => {
            let desired = compose::infra_object(key, observed.contract_namespace, &composed);
            match observed_infra {
                Some(current) if compose::infra_matches(current, &desired) => InfraAction::Keep,
                _ => InfraAction::Apply(Box::new(desired)),
            }
        }
        (_, Some(infra)) => InfraAction::Delete(Seen::of(infra).any_version()),
        (_, None) => InfraAction::Keep,
    });
    // The secret of an entry that is still applied from an earlier reconcile
    // but not composed now is kept until its contract is gone.
    let composed_names: BTreeSet<&str> =
        composed.iter().map(|e| e.contract.name.as_str()).collect();
    // Without a live root, an Infra that is gone needs none of its Secrets.
    let infra_gone = observed.infra.is_none() && !observed.root.is_running();
    for (entry, secret) in &secrets {
        if !composed_names.contains(entry) && (infra_gone || !contracts.contains_key(entry)) {
            plan.delete_secrets.push(secret.seen().any_version());
        }
    }

    match cluster_state {
        ClusterState::Live(cluster) => {
            let needs_finalizer = !composed.is_empty() || observed.infra.is_some();
            if needs_finalizer && !has_finalizer(cluster.finalizers(), CLUSTER_FINALIZER) {
                plan.add_cluster_finalizer = Some(finalizer_change(cluster));
            }
            let live_claims = claims
                .iter()
                .filter(|c| c.metadata.deletion_timestamp.is_none())
                .count();
            let nodes = u32::try_from(live_claims).unwrap_or(u32::MAX);
            let reported = cluster.status.as_ref().and_then(|s| s.nodes);
            if reported != Some(nodes) && !(nodes == 0 && reported.is_none()) {
                plan.cluster_nodes = Some(ClusterNodes {
                    nodes,
                    cluster: Box::new(cluster.clone()),
                });
            }
        }
        ClusterState::Deleting => {
            if let Some(cluster) = observed.cluster
                && has_finalizer(cluster.finalizers(), CLUSTER_FINALIZER)
                && observed.infra.is_none()
                && observed.contracts.is_empty()
                && observed.secrets.is_empty()
            {
                plan.remove_cluster_finalizer = Some(finalizer_change(cluster));
            }
        }
        ClusterState::Missing => {}
    }

    // With no Requester at all nothing removes a contract; a new Requester wakes us.
    let departing_contract = observed.root != RootState::Missing
        && contracts.keys().any(|e| !composed_names.contains(e));
    let releasing_claims = claims.iter().filter(|c| {
        c.metadata.deletion_timestamp.is_some()
            && has_finalizer(c.finalizers(), NODECLAIM_FINALIZER)
    });
    let claim_waits = releasing_claims.count() > plan.remove_claim_finalizers.len();
    let cluster_waits = matches!(cluster_state, ClusterState::Deleting)
        && observed
            .cluster
            .is_some_and(|c| has_finalizer(c.finalizers(), CLUSTER_FINALIZER))
        && plan.remove_cluster_finalizer.is_none();
    // A deleting Requester's disappearance wakes nobody either.
    let root_going = observed.root == RootState::Deleting;
    plan.awaiting_removal =
        infra_deleting || departing_contract || claim_waits || cluster_waits || root_going;
    plan
}

/// Whether a live claim may be composed now; `None` when it may.
fn composability(
    observed: &Observed<'_>,
    cluster_state: &ClusterState<'_>,
    claim: &CachedClaim,
    had_entry: bool,
    infra_deleting: bool,
) -> Option<Problem> {
    let key = observed.key;
    let cluster = match cluster_state {
        ClusterState::Missing => {
            return Some(compose::check_claim(claim, None, observed.owner_clusters).err().unwrap_or_else(|| Problem {
                reason: reason::CLUSTER_NOT_FOUND,
                message: format!(
                    "Cluster {:?} does not exist in namespace {:?}: create it, or fix spec.clusterName (a claim reaches only a Cluster in its own namespace)",
                    key.name, key.namespace
                ),
            }));
        }
        ClusterState::Deleting => {
            return Some(Problem {
                reason: reason::CLUSTER_DELETING,
                message: format!(
                    "Cluster {key} is being deleted: every node of it is released; this claim goes with it"
                ),
            });
        }
        ClusterState::Live(cluster) => *cluster,
    };
    if let Err(problem) = compose::check_claim(claim, Some(cluster), observed.owner_clusters) {
        return Some(problem);
    }
    if let Err(problem) = compose::owner_did(claim, cluster) {
        return Some(problem);
    }
    if let Some(problem) = observed.root.problem(observed.contract_namespace) {
        return Some(problem);
    }
    if infra_deleting {
        return Some(Problem {
            reason: reason::INFRA_DELETING,
            message: format!(
                "the previous Infra {} of Cluster {key} is still releasing its machines; the claim is composed once it is gone",
                key.infra_name()
            ),
        });
    }
    let has_url = cluster
        .status
        .as_ref()
        .and_then(|s| s.url.as_deref())
        .is_some_and(|u| !u.is_empty());
    if !has_url && !had_entry {
        return Some(Problem {
            reason: reason::CLUSTER_NOT_READY,
            message: format!(
                "Cluster {key} has no status.url yet: the node is composed once whoever runs the cluster reports its API server URL"
            ),
        });
    }
    None
}

/// Why a claim may not take over the guest in its `spec.adopt`. Only a claim
/// without an entry is refused: the first to hold a guest keeps it.
fn adoption_problem(
    observed: &Observed<'_>,
    adopted_now: &[GuestHolder],
    claim: &CachedClaim,
    entry: &str,
    had_entry: bool,
) -> Option<Problem> {
    if had_entry {
        return None;
    }
    adopt::problem(
        claim,
        entry,
        observed.guest_holders.iter().chain(adopted_now),
    )
}

/// The entry of a claim that passed [`composability`]. Without a Cluster URL
/// (only possible for an entry composed earlier) the earlier nodeJoin is kept.
fn compose_claim(
    observed: &Observed<'_>,
    cluster_state: &ClusterState<'_>,
    claim: &CachedClaim,
    entry: &str,
) -> Option<ComposedEntry> {
    let ClusterState::Live(cluster) = cluster_state else {
        return None;
    };
    let owner_did = compose::owner_did(claim, cluster).ok()?;
    let url = cluster
        .status
        .as_ref()
        .and_then(|s| s.url.as_deref())
        .filter(|u| !u.is_empty());
    let node_join = match url {
        Some(url) => compose::node_join(observed.key, url, &claim.name_any(), entry),
        None => observed
            .infra?
            .spec
            .nodes
            .iter()
            .find(|n| n.contract == entry)?
            .node_join
            .clone()?,
    };
    Some(compose::compose_entry(claim, entry, owner_did, node_join))
}

/// Objects keyed by their contract entry label.
pub(super) fn by_entry<'a, K: Labelled + 'a>(
    objects: impl Iterator<Item = &'a K>,
) -> BTreeMap<&'a str, &'a K> {
    objects
        .filter_map(|o| Some((o.label(CONTRACT_LABEL)?, o)))
        .collect()
}

fn has_finalizer(finalizers: &[String], finalizer: &str) -> bool {
    finalizers.iter().any(|f| f == finalizer)
}

fn finalizer_change<K: ResourceExt + ObjectUid>(object: &K) -> FinalizerChange {
    Seen::of(object)
}

/// The name of the join Secret of a claim's entry (for callers that hold a claim).
#[must_use]
pub fn claim_join_secret_name(claim: &CachedClaim) -> String {
    join_secret_name(&api::names::entry_name(&claim.uid().unwrap_or_default()))
}
