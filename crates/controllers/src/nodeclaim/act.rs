//! Carries out a [`Plan`]: finalizers, join Secrets, the Infra, claim
//! statuses, the Cluster's node count, in that order, through the write
//! layer ([`crate::write`]) under the field manager `socialweb/nodeclaim`.
//!
//! # Guarantees
//! - Finalizers are added before anything is rented and removed last, each
//!   with a merge patch guarded by the resourceVersion the list was read at,
//!   so a stale cache turns into a conflict (requeue), never a lost finalizer.
//!   A finalizer that cannot be added because its object is gone stops the
//!   plan: nothing is rented for an object that is not there.
//! - A new join Secret is created (POST), never applied, so a cache that has
//!   not seen it yet cannot replace its token: that is a conflict too. It is
//!   recorded in [`CreatedSecrets`](super::created::CreatedSecrets) and not
//!   created again while the cache catches up.
//! - A claim's Failed status is written first, before its entry leaves the
//!   Infra, and recorded in [`FailedClaims`](super::failed::FailedClaims): a restart lists it Failed, and a
//!   later reconcile whose cache has not caught up leaves the claim alone.
//! - Statuses (the claims', the Cluster's node count) are guarded by the
//!   resourceVersion they were decided from: a stale decision is a conflict,
//!   so each transition is written (and its Event and metric published) once.
//!   A claim's status is decided from its read model, which keeps each
//!   condition's message as a digest: the write reads the claim (one GET)
//!   and lays the decided change on it, so a condition the decision did not
//!   set keeps its message ([`StatusWrite`](super::status_write::StatusWrite)).
//! - Deletes (the Infra, join Secrets) name the uid that was read; a join
//!   Secret deleted is recorded in [`DeletedSecrets`](super::deleted::DeletedSecrets) and not deleted again
//!   while the cache catches up.
//! - The writes of one group go out together, at most
//!   [`write::WRITES_AT_ONCE`] at a time, each group once the one before is
//!   done, in this order: the claims' finalizers, the join Secrets, (the
//!   Infra), the join Secrets deleted, the claims' statuses, the claims'
//!   finalizers removed.
//! - Writes stop at the first error; the next reconcile starts over from the cache.
//! - Logs and Events name objects only, never a Secret value.

use api::names::{CLUSTER_FINALIZER, NODECLAIM_FINALIZER};
use api::{Cluster, Infra, NodeClaim, NodeClaimPhase};
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::Context;
use super::awaited::Awaited;
use super::compose::ClusterKey;
use super::conditions::{DEPLOYED, JOINED, READY, reason};
use super::decide::{ClaimMetadataChange, ClaimStatusChange, InfraAction, Plan};
use super::events::NodeClaimEvent;
use super::secrets::{JoinSecret, new_token};
use crate::cache::CachedClaim;
use crate::own_writes::OwnWrites;
use std::collections::BTreeMap;

use crate::Result;
use crate::write::{self, Finalizers, Seen};

/// The field manager of every write of this reconciler.
const MANAGER: &str = super::IDENTITY.manager;

/// Performs `plan` for the claims in `claims` (used for Events); records in
/// `awaited` the claims it wrote Failed and the join Secrets it created or
/// deleted, and in `own_writes` the versions its writes replaced (the Infra's
/// as read: `infra_read`).
///
/// # Errors
/// The first failed write, with what was being done.
pub async fn act(
    ctx: &Context,
    key: &ClusterKey,
    plan: &Plan,
    claims: &[&CachedClaim],
    awaited: &Awaited,
    own_writes: &OwnWrites,
    infra_read: Option<&str>,
) -> Result<()> {
    let client = &ctx.client;
    let (failing, other_statuses): (Vec<_>, Vec<_>) = plan
        .claim_statuses
        .iter()
        .partition(|change| change.fails_the_claim());
    for change in failing {
        if let Some(written) =
            write_claim_status(ctx, change, &Patched::default(), own_writes).await?
        {
            awaited.failed.record(&change.uid, key);
            publish_transition(ctx, change, claims, &written).await;
        }
    }
    // What this act's own guarded metadata patches made of each object's
    // resourceVersion: a status decided from the version read is still the
    // status of the version the patch made (the patch was guarded by the
    // version read, and changed no field a status is decided from), so it is
    // written guarded by the new version. Guarded by the old one it was a 409
    // and a second reconcile for every new claim.
    let mut patched = Patched::default();
    if let Some(cluster) = &plan.add_cluster_finalizer {
        match write::add_finalizer_written::<Cluster>(client, MANAGER, cluster, CLUSTER_FINALIZER)
            .await?
        {
            (Finalizers::Gone, _) => {
                tracing::debug!(cluster = %key, "the Cluster is gone; nothing is rented for it");
                return Ok(());
            }
            (_, Some(written)) => {
                own_writes.wrote(cluster.resource_version.as_deref(), &written);
                patched.record(cluster, &written);
            }
            (_, None) => {}
        }
    }
    // Each group's writes go out together (write::together), the groups
    // one after another: a Cluster of ten new claims waited on 21 round
    // trips in a row before its entries reached the Infra.
    let patches: Vec<_> = (plan.claim_metadata.iter())
        .map(|change| patch_claim_metadata(ctx, change))
        .collect();
    let claims_written: Vec<Option<NodeClaim>> = write::together(patches).try_collect().await?;
    let mut a_claim_is_gone = false;
    for (change, written) in plan.claim_metadata.iter().zip(claims_written) {
        let Some(written) = written else {
            tracing::debug!(claim = %change.target.name, "the claim is gone; nothing is rented for it");
            a_claim_is_gone = true;
            continue;
        };
        own_writes.wrote(change.target.resource_version.as_deref(), &written);
        patched.record(&change.target, &written);
    }
    if a_claim_is_gone {
        return Ok(());
    }
    let secrets: Vec<_> = (plan.write_secrets.iter())
        .map(|desired| write_join_secret(ctx, key, awaited, desired))
        .collect();
    write::together(secrets).try_collect::<Vec<()>>().await?;
    match &plan.infra {
        // Recorded: a reconcile of the copy it replaced, before the cache
        // shows the write, would apply or delete the Infra again.
        Some(InfraAction::Apply(infra)) => {
            let applied = write::apply(client, MANAGER, infra.as_ref()).await?;
            own_writes.wrote(infra_read, &applied);
        }
        Some(InfraAction::Delete(infra)) => {
            if let write::Deleted::Marked(marked) = write::delete::<Infra>(client, infra).await? {
                own_writes.wrote(infra_read, &marked);
            }
        }
        Some(InfraAction::Keep) | None => {}
    }
    let deletes: Vec<_> = (plan.delete_secrets.iter())
        .map(|secret| delete_join_secret(ctx, key, awaited, secret))
        .collect();
    write::together(deletes).try_collect::<Vec<()>>().await?;
    // A Cluster's claims each take a status write at once (ten Pending when
    // they are new, ten Joined when their guests report): one after another
    // they held this Cluster's reconcile, and the other Clusters' queued
    // behind it, for ten round trips.
    let statuses: Vec<_> = (other_statuses.into_iter())
        .filter(|change| !released_while_going(change, claims))
        .map(|change| write_claim_transition(ctx, change, claims, &patched, own_writes))
        .collect();
    write::together(statuses).try_collect::<Vec<()>>().await?;
    let removals: Vec<_> = (plan.remove_claim_finalizers.iter())
        .map(|claim| remove_claim_finalizer(ctx, claim, own_writes))
        .collect();
    write::together(removals).try_collect::<Vec<()>>().await?;
    if let Some(change) = &plan.cluster_nodes {
        let mut status = change.cluster.status.clone().unwrap_or_default();
        status.nodes = Some(change.nodes);
        let mut decided_from = change.cluster.as_ref().clone();
        decided_from.metadata.resource_version =
            patched.version_of(&Seen::of(change.cluster.as_ref()));
        if let Some(written) = write::replace_status(client, MANAGER, &decided_from, status).await?
        {
            own_writes.wrote(decided_from.metadata.resource_version.as_deref(), &written);
        }
    }
    if let Some(cluster) = &plan.remove_cluster_finalizer {
        write::remove_finalizer::<Cluster>(client, MANAGER, cluster, CLUSTER_FINALIZER).await?;
    }
    Ok(())
}

/// Deletes a join Secret (found gone, a 404, is done too) and records it, so
/// it is not deleted again while the cache catches up.
async fn delete_join_secret(
    ctx: &Context,
    key: &ClusterKey,
    awaited: &Awaited,
    secret: &Seen,
) -> Result<()> {
    write::delete_if_present::<Secret>(&ctx.client, secret).await?;
    if let Some(uid) = &secret.uid {
        awaited.deleted.record(uid, key);
    }
    Ok(())
}

/// Writes a claim's new status, then its transition's metrics and Event.
async fn write_claim_transition(
    ctx: &Context,
    change: &ClaimStatusChange,
    claims: &[&CachedClaim],
    patched: &Patched,
    own_writes: &OwnWrites,
) -> Result<()> {
    if let Some(written) = write_claim_status(ctx, change, patched, own_writes).await? {
        publish_transition(ctx, change, claims, &written).await;
    }
    Ok(())
}

/// Removes a released claim's finalizer. Recorded: a reconcile of the copy
/// it replaced, before the cache drops the claim, would send it again to a
/// claim that is gone.
async fn remove_claim_finalizer(ctx: &Context, claim: &Seen, own_writes: &OwnWrites) -> Result<()> {
    if let (_, Some(written)) = write::remove_finalizer_written::<NodeClaim>(
        &ctx.client,
        MANAGER,
        claim,
        NODECLAIM_FINALIZER,
    )
    .await?
    {
        own_writes.wrote(claim.resource_version.as_deref(), &written);
    }
    Ok(())
}

/// The resourceVersions this act's own metadata patches made, by object.
#[derive(Default)]
struct Patched {
    versions: BTreeMap<(String, String), (Option<String>, Option<String>)>,
}

impl Patched {
    /// `seen` (as read) was patched into `written`.
    fn record<K: Resource>(&mut self, seen: &Seen, written: &K) {
        self.versions.insert(
            (seen.namespace.clone(), seen.name.clone()),
            (
                seen.resource_version.clone(),
                written.meta().resource_version.clone(),
            ),
        );
    }

    /// The version to guard a write decided from `seen` with: the one this
    /// act's patch made of exactly that version, else the one read.
    fn version_of(&self, seen: &Seen) -> Option<String> {
        match self
            .versions
            .get(&(seen.namespace.clone(), seen.name.clone()))
        {
            Some((read, written)) if *read == seen.resource_version => written.clone(),
            _ => seen.resource_version.clone(),
        }
    }
}

/// Replaces a claim's status, guarded by the resourceVersion it was decided
/// from (or the one this act's own metadata patch made of it, see
/// [`Patched`]); the claim as written, `None` when it is gone (its finalizer
/// was already removed: nothing to report on).
///
/// The decision was made from the claim's read model, which keeps a digest
/// of each condition's message: the claim is read whole (one GET) and the
/// decided change laid on its status, so the conditions the decision did
/// not set keep their messages. Read at a newer version than decided from,
/// the write is refused (409) as it was before the read.
async fn write_claim_status(
    ctx: &Context,
    change: &ClaimStatusChange,
    patched: &Patched,
    own_writes: &OwnWrites,
) -> Result<Option<NodeClaim>> {
    let Some(mut decided_from) =
        write::read::<NodeClaim>(&ctx.client, &change.namespace, &change.name).await?
    else {
        return Ok(None);
    };
    let status = change
        .status
        .applied_to(decided_from.status.take().unwrap_or_default());
    decided_from.metadata.resource_version = patched.version_of(&Seen {
        namespace: change.namespace.clone(),
        name: change.name.clone(),
        resource_version: change.resource_version.clone(),
        ..Seen::default()
    });
    let written = write::replace_status(&ctx.client, MANAGER, &decided_from, status).await?;
    if let Some(written) = &written {
        own_writes.wrote(decided_from.metadata.resource_version.as_deref(), written);
    }
    Ok(written)
}

fn find_claim<'a>(
    claims: &[&'a CachedClaim],
    change: &ClaimStatusChange,
) -> Option<&'a CachedClaim> {
    claims
        .iter()
        .find(|c| {
            c.name_any() == change.name && c.namespace().as_deref() == Some(&change.namespace)
        })
        .copied()
}

/// Whether `change` only turns a deleting claim from Releasing to Released:
/// the claim goes as soon as its contract does, so that step is not written
/// (one write per node fewer; its conditions already say it is going).
fn released_while_going(change: &ClaimStatusChange, claims: &[&CachedClaim]) -> bool {
    let deleting = find_claim(claims, change).is_some_and(|c| {
        c.metadata.deletion_timestamp.is_some()
            && c.status
                .as_ref()
                .is_some_and(|old| change.status.changes_only_the_phase(old))
    });
    deleting
        && change.previous_phase == Some(NodeClaimPhase::Releasing)
        && change.status.phase == Some(NodeClaimPhase::Released)
}

/// The claim's phase metrics when its phase changed, and a Warning Event when
/// a person has something to act on (in the words of its Ready condition as
/// `written`).
async fn publish_transition(
    ctx: &Context,
    change: &ClaimStatusChange,
    claims: &[&CachedClaim],
    written: &NodeClaim,
) {
    let phase = change.status.phase;
    if phase == change.previous_phase {
        return;
    }
    let Some(claim) = find_claim(claims, change) else {
        return;
    };
    if let Some(created) = &claim.metadata.creation_timestamp {
        let metrics = &ctx.metrics;
        let since = (ctx.now() - crate::time::from_time(created))
            .to_std()
            .unwrap_or_default();
        // Once per claim: a guest that was lost and came back is not counted again.
        let had = |type_: &str, reasons: &[&str]| {
            claim.status.as_ref().is_some_and(|s| {
                s.condition(type_)
                    .is_some_and(|c| reasons.contains(&c.reason.as_str()))
            })
        };
        let deployed_before = had(
            DEPLOYED,
            &[reason::GUEST_RUNNING, reason::GUEST_UNREACHABLE],
        );
        let joined_before = had(JOINED, &[reason::NODE_JOINED, reason::NODE_LOST]);
        let running = matches!(
            phase,
            Some(NodeClaimPhase::Deployed | NodeClaimPhase::Joined)
        );
        if running && !deployed_before {
            metrics.observe_nodeclaim_deployed(since);
        }
        if phase == Some(NodeClaimPhase::Joined) && !joined_before {
            metrics.observe_nodeclaim_joined(since);
        }
    }
    let message = (written.status.as_ref())
        .and_then(|s| api::find_condition(&s.conditions, READY))
        .map(|c| c.message.to_string());
    let Some(event) = NodeClaimEvent::of_transition(change.previous_phase, phase, message) else {
        return;
    };
    if let Err(error) = ctx
        .recorder
        .publish(&event.to_event(), &claim.object_ref(&()))
        .await
    {
        tracing::warn!(claim = %change.name, namespace = %change.namespace, reason = event.reason(), %error, "cannot publish event");
    }
}

/// Writes one join Secret: applied with the token it has, or created with a
/// new one and recorded in `awaited` until the cache shows it (a reconcile
/// before that would create it again).
async fn write_join_secret(
    ctx: &Context,
    key: &ClusterKey,
    awaited: &Awaited,
    desired: &JoinSecret,
) -> Result<()> {
    match &desired.token {
        Some(token) => {
            write::apply(&ctx.client, MANAGER, &desired.to_secret(token)).await?;
        }
        None => {
            write::create(&ctx.client, MANAGER, &desired.to_secret(&new_token())).await?;
            awaited.created.record(&desired.name, key, ctx.now());
        }
    }
    Ok(())
}

/// Adds the claim's finalizer and its Cluster ownerReference in one merge
/// patch guarded by the resourceVersion read (a stale read is a 409); `None`
/// when the claim is gone.
async fn patch_claim_metadata(
    ctx: &Context,
    change: &ClaimMetadataChange,
) -> Result<Option<NodeClaim>> {
    let target = &change.target;
    let mut metadata = serde_json::Map::new();
    if change.add_finalizer && !target.has_finalizer(NODECLAIM_FINALIZER) {
        let mut finalizers = target.finalizers.clone();
        finalizers.push(NODECLAIM_FINALIZER.to_owned());
        metadata.insert("finalizers".to_owned(), json!(finalizers));
    }
    if let Some(owners) = &change.owner_references {
        metadata.insert("ownerReferences".to_owned(), json!(owners));
    }
    write::patch_metadata(&ctx.client, MANAGER, target, metadata).await
}
