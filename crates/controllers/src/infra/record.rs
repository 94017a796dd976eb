//! The Infra controller's part of `spec.record`: it writes the AtprotoRecord's
//! spec (which Infra, collection, derived rkey, deletion policy) and deletes
//! the object; the record controller does everything with the repository.
//!
//! # Expected flow
//!
//! - Live Infra with `spec.record: true`: the AtprotoRecord (named as the
//!   Infra, controller ownerReference, the Infra's name label, the record
//!   finalizer from its creation on) is applied with policy Delete.
//! - `spec.record` removed (U1-UNBIND-KEEPS-RECORD): policy Orphan is
//!   applied first; once that version is observed the object is deleted with
//!   its uid and resourceVersion as preconditions (so a re-bind in between
//!   wins), and the Event RecordKept says the record stays published.
//! - Deleting Infra: nothing until its contracts are all gone (the Infra delete
//!   order, [`super::decide::decide_deleting`]); then the object is deleted
//!   (policy Delete, or Orphan if `spec.record` was already removed), and
//!   the Infra's finalizer waits until it is gone.
//!
//! # Guarantees
//!
//! A deleting AtprotoRecord is never applied again (a new one is created
//! once it is gone); its collection and rkey are never changed.

use std::collections::BTreeMap;
use std::time::Duration;

use api::names::{INFRA_NAME_LABEL, RECORD_DELETE_FINALIZER, record_key};
use api::{AtprotoRecord, AtprotoRecordSpec, DECLARATION_COLLECTION, DeletionPolicy, Infra};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};

use super::decide::Deletion;

/// How soon to look again while the AtprotoRecord is being deleted.
pub const RECORD_SETTLE: Duration = Duration::from_secs(1);

/// What the Infra controller writes about its AtprotoRecord in one reconcile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordPlan {
    /// The AtprotoRecord to server-side apply.
    pub apply: Option<AtprotoRecord>,
    /// The AtprotoRecord to delete (preconditions pin the observed version).
    pub delete: Option<Deletion>,
    /// When deleting `delete` leaves a published record behind: its AT-URI
    /// (empty if unknown), for the Event RecordKept.
    pub kept_uri: Option<String>,
    /// Deleting Infra only: no AtprotoRecord remains; the finalizer may go.
    pub gone: bool,
    /// When to look again without a change.
    pub requeue: Option<Duration>,
}

/// The plan for `infra`'s AtprotoRecord. `existing` is the object named as
/// the Infra (the cache, or a direct read); `contracts_gone` says whether
/// the deleting path has deleted every contract.
#[must_use]
pub fn decide(infra: &Infra, existing: Option<&AtprotoRecord>, contracts_gone: bool) -> RecordPlan {
    let wanted = infra.spec.record == Some(true);
    let deleting_infra = infra.metadata.deletion_timestamp.is_some();
    let Some(existing) = existing else {
        return RecordPlan {
            apply: (wanted && !deleting_infra)
                .then(|| desired(infra, None, DeletionPolicy::Delete)),
            gone: true,
            ..RecordPlan::default()
        };
    };
    let settle = RecordPlan {
        requeue: Some(RECORD_SETTLE),
        ..RecordPlan::default()
    };
    if existing.metadata.deletion_timestamp.is_some() {
        // Going: wait until it is gone (a re-bind creates a new one then).
        // A deleting Infra still sets the policy it wants on it.
        let policy = if wanted {
            DeletionPolicy::Delete
        } else {
            DeletionPolicy::Orphan
        };
        if deleting_infra && contracts_gone && existing.spec.deletion_policy != policy {
            return RecordPlan {
                apply: Some(desired(infra, Some(existing), policy)),
                ..settle
            };
        }
        return settle;
    }
    if deleting_infra {
        if !contracts_gone {
            return RecordPlan::default();
        }
        let policy = if wanted {
            DeletionPolicy::Delete
        } else {
            DeletionPolicy::Orphan
        };
        return set_policy_then_delete(infra, existing, policy, settle);
    }
    if wanted {
        let desired = desired(infra, Some(existing), DeletionPolicy::Delete);
        return RecordPlan {
            apply: (!is_current(existing, &desired)).then_some(desired),
            ..RecordPlan::default()
        };
    }
    set_policy_then_delete(infra, existing, DeletionPolicy::Orphan, settle)
}

/// Applies `policy` when the object does not carry it yet; deletes the
/// object once it does (pinned to the version observed with it).
fn set_policy_then_delete(
    infra: &Infra,
    existing: &AtprotoRecord,
    policy: DeletionPolicy,
    settle: RecordPlan,
) -> RecordPlan {
    if existing.spec.deletion_policy != policy {
        return RecordPlan {
            apply: Some(desired(infra, Some(existing), policy)),
            ..settle
        };
    }
    let kept_uri = (policy == DeletionPolicy::Orphan).then(|| {
        existing
            .status
            .as_ref()
            .and_then(|s| s.uri.clone())
            .unwrap_or_default()
    });
    RecordPlan {
        delete: Some(Deletion {
            name: existing.metadata.name.clone().unwrap_or_default(),
            uid: existing.metadata.uid.clone(),
            resource_version: existing.metadata.resource_version.clone(),
        }),
        kept_uri,
        ..settle
    }
}

/// The AtprotoRecord the Infra controller applies: named as the Infra, its
/// label, controller ownerReference and the record finalizer, the collection
/// and rkey it already has (else ours and the derived key), and `policy`.
#[must_use]
pub fn desired(
    infra: &Infra,
    existing: Option<&AtprotoRecord>,
    policy: DeletionPolicy,
) -> AtprotoRecord {
    let name = infra.metadata.name.clone().unwrap_or_default();
    let namespace = infra.metadata.namespace.clone().unwrap_or_default();
    let uid = infra.metadata.uid.clone().unwrap_or_default();
    let spec = AtprotoRecordSpec {
        infra_name: name.clone(),
        collection: existing.map_or_else(
            || DECLARATION_COLLECTION.to_owned(),
            |e| e.spec.collection.clone(),
        ),
        rkey: existing.map_or_else(
            || record_key(&namespace, &name, &uid),
            |e| e.spec.rkey.clone(),
        ),
        deletion_policy: policy,
    };
    let mut record = AtprotoRecord::new(&name, spec);
    record.metadata.namespace = Some(namespace);
    record.metadata.labels = Some(BTreeMap::from([(INFRA_NAME_LABEL.to_owned(), name)]));
    record.metadata.owner_references = infra.controller_owner_ref(&()).map(|o| {
        vec![OwnerReference {
            block_owner_deletion: Some(true),
            ..o
        }]
    });
    // A deleting object that already lost the finalizer must not get it
    // again: the API server refuses a new finalizer on a deleting object.
    let lost = existing.is_some_and(|e| {
        e.metadata.deletion_timestamp.is_some()
            && !e.finalizers().iter().any(|f| f == RECORD_DELETE_FINALIZER)
    });
    if !lost {
        record.metadata.finalizers = Some(vec![RECORD_DELETE_FINALIZER.to_owned()]);
    }
    record
}

fn is_current(existing: &AtprotoRecord, desired: &AtprotoRecord) -> bool {
    let label_ok = desired
        .labels()
        .iter()
        .all(|(k, v)| existing.labels().get(k) == Some(v));
    let owner_ok = desired
        .owner_references()
        .iter()
        .all(|o| existing.owner_references().contains(o));
    let finalizer_ok = existing
        .finalizers()
        .iter()
        .any(|f| f == RECORD_DELETE_FINALIZER);
    existing.spec == desired.spec && label_ok && owner_ok && finalizer_ok
}

/// The AtprotoRecord of `infra` as observed: the cache's; when the cache
/// shows none while the deleting Infra is about to let go, read directly
/// (by name), so a lagging cache cannot let the finalizer go around one.
pub(super) async fn observe(
    ctx: &super::Context,
    store: &kube::runtime::reflector::Store<AtprotoRecord>,
    infra: &Infra,
    contracts_gone: bool,
) -> crate::Result<Option<std::sync::Arc<AtprotoRecord>>> {
    let name = infra.name_any();
    let namespace = infra
        .namespace()
        .unwrap_or_else(|| ctx.contract_namespace.clone());
    let cached = store.get(&kube::runtime::reflector::ObjectRef::new(&name).within(&namespace));
    if cached.is_some() || !(contracts_gone && infra.metadata.deletion_timestamp.is_some()) {
        return Ok(cached);
    }
    let found = crate::write::read::<AtprotoRecord>(&ctx.client, &namespace, &name).await?;
    Ok(found.map(std::sync::Arc::new))
}

/// Writes `plan`: the apply, the delete (gone is done), then the Event
/// RecordKept on the Infra when an unbound record stays published.
///
/// # Errors
/// The failed write, as [`crate::Error::Kube`].
pub(super) async fn act(
    ctx: &super::Context,
    infra: &Infra,
    plan: &RecordPlan,
) -> crate::Result<()> {
    use crate::write::{self, Seen};
    if let Some(record) = &plan.apply {
        write::apply(&ctx.client, api::names::INFRA_MANAGER, record).await?;
    }
    if let Some(deletion) = &plan.delete {
        let seen = Seen {
            namespace: infra
                .namespace()
                .unwrap_or_else(|| ctx.contract_namespace.clone()),
            name: deletion.name.clone(),
            uid: deletion.uid.clone(),
            resource_version: deletion.resource_version.clone(),
            finalizers: Vec::new(),
        };
        let deleted = write::delete_if_present::<AtprotoRecord>(&ctx.client, &seen).await?;
        if deleted && let Some(uri) = &plan.kept_uri {
            record_kept(ctx, infra, uri).await;
        }
    }
    Ok(())
}

/// The Event that says an unbound declaration stays published.
async fn record_kept(ctx: &super::Context, infra: &Infra, uri: &str) {
    let event = super::events::InfraEvent::RecordKept {
        uri: uri.to_owned(),
    };
    let published = event.to_event(&infra.namespace().unwrap_or_default());
    if let Err(error) = ctx
        .recorder
        .publish(&published, &infra.object_ref(&()))
        .await
    {
        tracing::warn!(reason = event.reason(), %error, "could not publish Event");
    }
}
