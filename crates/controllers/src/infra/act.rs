//! The thin write step of the Infra controller: carries out an [`InfraPlan`].
//!
//! Every write goes through the write layer ([`crate::write`]) under the
//! field manager `socialweb/infra`.
//!
//! # Guarantees
//! - Contracts are written by server-side apply, forced; a release reads the
//!   contract whole first (the cache keeps less than its spec) and keeps
//!   every field the controller owns (labels, ownerReference, spec) so
//!   nothing is dropped; a contract found gone or already released is left
//!   alone.
//! - A delete carries the observed uid and resourceVersion as preconditions, so
//!   it only removes the exact object decide saw Released (a newer one is a 409:
//!   requeue). A delete that finds nothing (404) is done. A delete that
//!   finalizers hold is recorded in [`OwnWrites::deletes`], so a reconcile
//!   that runs before the cache shows it does not send it again (a 409).
//! - At most one status write (only when decide found a change), guarded by
//!   the resourceVersion of the Infra it was decided from.
//! - The applies (and releases) go out together, then the deletes together,
//!   at most [`write::WRITES_AT_ONCE`] in flight; the status goes after both.
//! - A failed write does not stop the others: every write of the plan is
//!   tried and the status is written too, so steady API errors slow the
//!   work down but never stop it. The first error is returned (the reconcile
//!   is retried and counted).
//! - The Events (failures a person acts on) are published only once every
//!   write succeeded: the status records what they are about, and a pass
//!   whose writes failed is decided again (with its Events).

use super::IDENTITY;
use std::collections::BTreeMap;

use api::{ComputeContract, Infra};
use futures::StreamExt;
use kube::{Resource, ResourceExt};

use super::decide::InfraPlan;
use super::objects::released_object;
use super::{Context, OwnWrites};
use crate::write::{self, Seen};
use crate::{Error, Result};

/// Writes `plan` for `infra`: applies, releases, deletes, the status, then the Events.
///
/// # Errors
/// The first failed write, as [`Error::Kube`], once every write was tried.
pub async fn act(ctx: &Context, infra: &Infra, plan: &InfraPlan, own: &OwnWrites) -> Result<()> {
    let namespace = infra
        .namespace()
        .unwrap_or_else(|| ctx.contract_namespace.clone());
    let outcome = write(ctx, infra, &namespace, plan, own).await;
    if outcome.is_ok() {
        publish_events(ctx, infra, &namespace, plan).await;
    }
    outcome
}

/// What reading a plan's contracts to release found.
struct ReleaseReads {
    /// Each contract to release as read whole, with `spec.release` set.
    objects: Vec<ComputeContract>,
    /// The resourceVersion read of each, by name.
    read_versions: BTreeMap<String, String>,
    /// The first read that failed (the rest were read; it is decided again).
    first_error: Option<Error>,
}

/// The release applies of `plan`: each contract to release read whole from
/// the API server. A contract found gone or already released is left out.
async fn released_objects(
    ctx: &Context,
    infra: &Infra,
    namespace: &str,
    plan: &InfraPlan,
) -> ReleaseReads {
    let reads: Vec<_> = (plan.release.iter())
        .map(|release| async move {
            // The write layer's read: no managedFields decoded, 404 as None.
            let read = write::read::<ComputeContract>(&ctx.client, namespace, &release.name)
                .await
                .map_err(|error| error.to("release it"));
            (release, read)
        })
        .collect();
    let read: Vec<_> = write::together(reads).collect().await;
    let mut released = ReleaseReads {
        objects: Vec::new(),
        read_versions: BTreeMap::new(),
        first_error: None,
    };
    for (release, outcome) in read {
        match outcome {
            Ok(Some(whole)) if !whole.spec.release => {
                if let Some(version) = &whole.metadata.resource_version {
                    (released.read_versions).insert(release.name.clone(), version.clone());
                }
                let object = released_object(infra, &whole, &release.name, &release.entry);
                released.objects.push(object);
            }
            // Gone, or released meanwhile: its event decides what follows.
            Ok(_) => {}
            Err(error) => {
                released.first_error.get_or_insert(error);
            }
        }
    }
    released
}

async fn write(
    ctx: &Context,
    infra: &Infra,
    namespace: &str,
    plan: &InfraPlan,
    own: &OwnWrites,
) -> Result<()> {
    let client = &ctx.client;
    let mut first_error = None;
    // The applies go out together, then the deletes together
    // (write::together): a Cluster of ten new nodes waited on ten applies in
    // a row before its last contract existed.
    let ReleaseReads {
        objects: released,
        read_versions: release_read_versions,
        first_error: failed_read,
    } = released_objects(ctx, infra, namespace, plan).await;
    if let Some(error) = failed_read {
        first_error.get_or_insert(error);
    }
    let contracts: Vec<&ComputeContract> = plan.apply.iter().chain(&released).collect();
    let applies: Vec<_> = (contracts.iter())
        .map(|contract| write::apply(client, IDENTITY.manager, *contract))
        .collect();
    let applied: Vec<Result<ComputeContract>> = write::together(applies).collect().await;
    for (contract, outcome) in contracts.into_iter().zip(applied) {
        let name = contract.name_any();
        match outcome {
            Ok(applied) => {
                let read =
                    (plan.read_versions.get(&name)).or_else(|| release_read_versions.get(&name));
                own.applies.wrote(read.map(String::as_str), &applied);
                tracing::debug!(contract = %name, release = contract.spec.release, "applied ComputeContract");
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    let seen: Vec<Seen> = (plan.delete.iter())
        .map(|deletion| Seen {
            namespace: namespace.to_owned(),
            name: deletion.name.clone(),
            uid: deletion.uid.clone(),
            resource_version: deletion.resource_version.clone(),
            finalizers: Vec::new(),
        })
        .collect();
    let deletes: Vec<_> = (seen.iter())
        .map(|seen| write::delete::<ComputeContract>(client, seen))
        .collect();
    let deleted: Vec<Result<write::Deleted<ComputeContract>>> =
        write::together(deletes).collect().await;
    for (deletion, outcome) in plan.delete.iter().zip(deleted) {
        match outcome {
            Ok(deleted) => {
                tracing::debug!(contract = %deletion.name, "deleted Released ComputeContract");
                if let write::Deleted::Marked(marked) = &deleted {
                    // Until the cache shows the mark, a reconcile would
                    // delete it again from the copy this delete replaced.
                    own.deletes
                        .wrote(deletion.resource_version.as_deref(), marked);
                }
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    // Written even after a failed write: the rows it records are what was
    // observed and decided, and a write that failed is decided again next
    // time. Without it a long list of contracts already gone never shrinks.
    if let Some(status) = &plan.status {
        match write::replace_status(client, IDENTITY.manager, infra, status.clone()).await {
            Ok(Some(new)) => own
                .statuses
                .wrote(infra.metadata.resource_version.as_deref(), &new),
            Ok(None) => {}
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

async fn publish_events(ctx: &Context, infra: &Infra, namespace: &str, plan: &InfraPlan) {
    let reference = infra.object_ref(&());
    for event in plan.events.iter().map(|e| e.to_event(namespace)) {
        if let Err(error) = ctx.recorder.publish(&event, &reference).await {
            // An Event is a courtesy to a person; losing one must not stop the reconcile.
            tracing::warn!(reason = %event.reason, %error, "could not publish Event");
        }
    }
}
