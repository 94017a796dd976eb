//! Carries out a [`Plan`]: finalizers, join Secrets, the Infra, claim
//! statuses, the Cluster's node count, in that order.
//!
//! # Guarantees
//! - Finalizers are added before anything is rented and removed last, each
//!   with a JSON patch guarded by a `test` of the list as read, so a stale
//!   cache turns into a conflict (requeue), never a lost finalizer.
//! - A new join Secret is created (POST), never applied, so a cache that has
//!   not seen it yet cannot replace its token: that is a conflict too.
//! - A claim's Failed status is written first, before its entry leaves the
//!   Infra, and recorded in [`FailedClaims`]: a restart lists it Failed, and a
//!   later reconcile whose cache has not caught up leaves the claim alone.
//! - Claim statuses are guarded by the resourceVersion they were decided
//!   from: a stale decision is a conflict, so each transition is written (and
//!   its Event and metric published) once.
//! - Writes stop at the first error; the next reconcile starts over from the cache.
//! - Logs and Events name objects only, never a Secret value.

use api::names::{CLUSTER_FINALIZER, NODECLAIM_FINALIZER, NODECLAIM_MANAGER};
use api::{Cluster, Infra, NodeClaim, NodeClaimPhase};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::Context;
use super::compose::ClusterKey;
use super::conditions::{DEPLOYED, JOINED, READY, reason};
use super::decide::{ClaimMetadataChange, ClaimStatusChange, FinalizerChange, InfraAction, Plan};
use super::failed::FailedClaims;
use super::secrets::new_token;
use crate::{Error, Result};

/// Performs `plan` for the claims in `claims` (used for Events); records the
/// claims it wrote Failed in `failed`.
///
/// # Errors
/// The first failed write, with what was being done.
pub async fn act(
    ctx: &Context,
    key: &ClusterKey,
    plan: &Plan,
    claims: &[&NodeClaim],
    failed: &FailedClaims,
) -> Result<()> {
    let (failing, other_statuses): (Vec<_>, Vec<_>) = plan
        .claim_statuses
        .iter()
        .partition(|change| change.fails_the_claim());
    for change in failing {
        if write_claim_status(ctx, change, claims).await? {
            failed.record(&change.uid, key);
            publish_transition(ctx, change, claims).await;
        }
    }
    if let Some(change) = &plan.add_cluster_finalizer {
        add_finalizer::<Cluster>(ctx, change, CLUSTER_FINALIZER).await?;
    }
    for change in &plan.claim_metadata {
        patch_claim_metadata(ctx, change).await?;
    }
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ctx.contract_namespace);
    for desired in &plan.write_secrets {
        let action = format!("write join Secret {}/{}", desired.namespace, desired.name);
        match &desired.token {
            Some(token) => {
                secrets
                    .patch(
                        &desired.name,
                        &apply_params(),
                        &Patch::Apply(with_type_meta::<Secret>(&desired.to_secret(token))?),
                    )
                    .await
                    .map_err(|e| Error::kube(action, e))?;
            }
            None => {
                let params = PostParams {
                    field_manager: Some(NODECLAIM_MANAGER.to_owned()),
                    ..PostParams::default()
                };
                secrets
                    .create(&params, &desired.to_secret(&new_token()))
                    .await
                    .map_err(|e| Error::kube(action, e))?;
            }
        }
    }
    let infras: Api<Infra> = Api::namespaced(ctx.client.clone(), &ctx.contract_namespace);
    match &plan.infra {
        Some(InfraAction::Apply(infra)) => {
            let name = infra.name_any();
            infras
                .patch(
                    &name,
                    &apply_params(),
                    &Patch::Apply(with_type_meta::<Infra>(infra.as_ref())?),
                )
                .await
                .map_err(|e| {
                    Error::kube(format!("apply Infra {}/{name}", ctx.contract_namespace), e)
                })?;
        }
        Some(InfraAction::Delete) => {
            delete_ignoring_missing(&infras, &key.infra_name(), "Infra").await?;
        }
        Some(InfraAction::Keep) | None => {}
    }
    for name in &plan.delete_secrets {
        delete_ignoring_missing(&secrets, name, "join Secret").await?;
    }
    for change in other_statuses {
        if write_claim_status(ctx, change, claims).await? {
            publish_transition(ctx, change, claims).await;
        }
    }
    for change in &plan.remove_claim_finalizers {
        remove_finalizer::<NodeClaim>(ctx, change, NODECLAIM_FINALIZER).await?;
    }
    if let Some(nodes) = plan.cluster_nodes {
        let clusters: Api<Cluster> = Api::namespaced(ctx.client.clone(), &key.namespace);
        let body = json!({
            "apiVersion": api_version::<Cluster>(),
            "kind": Cluster::kind(&()),
            "metadata": {"name": key.name},
            "status": {"nodes": nodes},
        });
        clusters
            .patch_status(&key.name, &apply_params(), &Patch::Apply(body))
            .await
            .map_err(|e| Error::kube(format!("write status.nodes of Cluster {key}"), e))?;
    }
    if let Some(change) = &plan.remove_cluster_finalizer {
        remove_finalizer::<Cluster>(ctx, change, CLUSTER_FINALIZER).await?;
    }
    Ok(())
}

/// Server-side apply under the NodeClaim controller's field manager, forced:
/// these fields are ours alone.
fn apply_params() -> PatchParams {
    PatchParams::apply(NODECLAIM_MANAGER).force()
}

fn api_version<K: Resource<DynamicType = ()>>() -> String {
    K::api_version(&()).into_owned()
}

/// `object` as JSON with apiVersion and kind set (an apply body needs both).
fn with_type_meta<K>(object: &K) -> Result<serde_json::Value>
where
    K: Resource<DynamicType = ()> + serde::Serialize,
{
    let mut value = serde_json::to_value(object).map_err(|e| Error::Invalid {
        object: format!(
            "{} {}",
            K::kind(&()),
            object.meta().name.clone().unwrap_or_default()
        ),
        reason: format!("cannot be serialized: {e}"),
    })?;
    if let Some(map) = value.as_object_mut() {
        map.insert("apiVersion".to_owned(), json!(api_version::<K>()));
        map.insert("kind".to_owned(), json!(K::kind(&())));
        map.remove("status");
    }
    Ok(value)
}

async fn delete_ignoring_missing<K>(api: &Api<K>, name: &str, what: &str) -> Result<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(Error::kube(format!("delete {what} {name}"), e)),
    }
}

/// Replaces a claim's status (PUT), guarded by the resourceVersion it was
/// decided from; `false` when the claim is gone.
async fn write_claim_status(
    ctx: &Context,
    change: &ClaimStatusChange,
    claims: &[&NodeClaim],
) -> Result<bool> {
    let Some(claim) = find_claim(claims, change) else {
        return Ok(false);
    };
    let mut next = claim.clone();
    next.metadata.managed_fields = None;
    next.metadata
        .resource_version
        .clone_from(&change.resource_version);
    next.status = Some(change.status.clone());
    let params = PostParams {
        field_manager: Some(NODECLAIM_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let api: Api<NodeClaim> = Api::namespaced(ctx.client.clone(), &change.namespace);
    match api.replace_status(&change.name, &params, &next).await {
        Ok(_) => Ok(true),
        // The claim went away (its finalizer was already removed): nothing to report on.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(Error::kube(
            format!(
                "write status of NodeClaim {}/{}",
                change.namespace, change.name
            ),
            e,
        )),
    }
}

fn find_claim<'a>(claims: &[&'a NodeClaim], change: &ClaimStatusChange) -> Option<&'a NodeClaim> {
    claims
        .iter()
        .find(|c| {
            c.name_any() == change.name && c.namespace().as_deref() == Some(&change.namespace)
        })
        .copied()
}

/// An Event on the claim when its phase changed (Warning when it failed).
async fn publish_transition(ctx: &Context, change: &ClaimStatusChange, claims: &[&NodeClaim]) {
    let phase = change.status.phase;
    if phase == change.previous_phase {
        return;
    }
    let Some(claim) = find_claim(claims, change) else {
        return;
    };
    if let Some(created) = &claim.metadata.creation_timestamp {
        let metrics = &ctx.metrics;
        let since = (crate::time::now(ctx.clock.as_ref()) - crate::time::from_time(created))
            .to_std()
            .unwrap_or_default();
        // Once per claim: a guest that was lost and came back is not counted again.
        let had = |type_: &str, reasons: &[&str]| {
            claim.status.as_ref().is_some_and(|s| {
                api::find_condition(&s.conditions, type_)
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
    let note = api::find_condition(&change.status.conditions, READY).map(|c| c.message.clone());
    let event = Event {
        type_: if phase == Some(NodeClaimPhase::Failed) {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: phase.map_or_else(|| "Unknown".to_owned(), |p| format!("{p:?}")),
        note,
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &claim.object_ref(&())).await {
        tracing::warn!(claim = %change.name, namespace = %change.namespace, %error, "cannot publish event");
    }
}

async fn add_finalizer<K>(ctx: &Context, change: &FinalizerChange, finalizer: &str) -> Result<()>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let mut wanted = change.current.clone();
    if wanted.iter().any(|f| f == finalizer) {
        return Ok(());
    }
    wanted.push(finalizer.to_owned());
    patch_finalizers::<K>(ctx, change, wanted, "add").await
}

async fn remove_finalizer<K>(ctx: &Context, change: &FinalizerChange, finalizer: &str) -> Result<()>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let wanted: Vec<String> = change
        .current
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    if wanted.len() == change.current.len() {
        return Ok(());
    }
    patch_finalizers::<K>(ctx, change, wanted, "remove").await
}

/// Adds the claim's finalizer and its Cluster ownerReference in one merge
/// patch guarded by the resourceVersion read (a stale read is a 409).
async fn patch_claim_metadata(ctx: &Context, change: &ClaimMetadataChange) -> Result<()> {
    let target = &change.target;
    let mut metadata = json!({"resourceVersion": target.resource_version});
    if change.add_finalizer && !target.current.iter().any(|f| f == NODECLAIM_FINALIZER) {
        let mut finalizers = target.current.clone();
        finalizers.push(NODECLAIM_FINALIZER.to_owned());
        metadata["finalizers"] = json!(finalizers);
    }
    if let Some(owners) = &change.owner_references {
        metadata["ownerReferences"] = json!(owners);
    }
    let api: Api<NodeClaim> = Api::namespaced(ctx.client.clone(), &target.namespace);
    api.patch(
        &target.name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": metadata})),
    )
    .await
    .map_err(|e| {
        Error::kube(
            format!(
                "add the finalizer or Cluster owner of NodeClaim {}/{}",
                target.namespace, target.name
            ),
            e,
        )
    })?;
    Ok(())
}

/// Replaces the finalizer list with a merge patch guarded by the
/// resourceVersion it was read at: a stale read is a 409 (requeue), so another
/// writer's finalizer is never dropped.
async fn patch_finalizers<K>(
    ctx: &Context,
    change: &FinalizerChange,
    wanted: Vec<String>,
    verb: &str,
) -> Result<()>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let what = format!(
        "{verb} finalizer of {} {}/{}",
        K::kind(&()),
        change.namespace,
        change.name
    );
    let patch = json!({
        "metadata": {
            "resourceVersion": change.resource_version,
            "finalizers": wanted,
        }
    });
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &change.namespace);
    match api
        .patch(&change.name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 && verb == "remove" => Ok(()),
        Err(e) => Err(Error::kube(what, e)),
    }
}
