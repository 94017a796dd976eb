//! Background controllers, asynchronous as on a real cluster:
//! - the garbage collector: dependents whose owners (by uid, same namespace) are all gone
//!   are deleted; `orphan` owners release their dependents; `foregroundDeletion` owners
//!   wait until no dependent with `blockOwnerDeletion` remains. It works from what the
//!   writes recorded ([`crate::store::gc_index`]), never by scanning the store, and leaves
//!   Events alone (as kube-controller-manager's collector ignores them);
//! - the Event TTL: an Event not written for [`crate::Options::event_ttl`] is deleted (a
//!   DELETED watch event with a new resourceVersion), as etcd's lease expires it behind
//!   kube-apiserver's `--event-ttl`;
//! - the namespace controller: a terminating namespace's objects are deleted, then its
//!   `kubernetes` finalizer is removed and the namespace goes;
//! - the CRD cleanup: a deleted CRD's custom resources are deleted before the CRD goes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::App;
use crate::handlers::write::{Outcome, mutate};
use crate::registry::{CRD_STORAGE, NAMESPACE_STORAGE, Resource, StorageKey};
use crate::semantics::delete::{DeleteOptions, Propagation, delete};
use crate::store::gc_index::{FOREGROUND, ORPHAN};
use crate::store::{EVENTS_STORAGE, Expect, GcWork, Location, ObjKey, Op, StoredObject};

/// The finalizer of CRDs whose instances must go first.
pub const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Runs the controllers until the server stops.
pub async fn run(app: Arc<App>) {
    loop {
        tokio::select! {
            () = app.kick.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        // Let a burst of writes settle into one pass.
        tokio::time::sleep(Duration::from_millis(10)).await;
        pass(&app).await;
        super::namespace_conditions::update(&app).await;
    }
}

/// One pass of every background controller.
pub async fn pass(app: &Arc<App>) {
    collect_garbage(app).await;
    expire_events(app, Instant::now());
    namespaces(app).await;
    crd_cleanup(app).await;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum OwnerState {
    Absent,
    Present,
    Foreground,
}

fn resource(app: &App, storage: &str) -> Option<Arc<Resource>> {
    app.registry.read().by_storage(storage)
}

/// Removes `finalizer` (and, with `drop_owner`, ownerReferences to that uid) from an object.
/// False when it failed and must be tried again.
async fn edit(
    app: &Arc<App>,
    res: &Resource,
    key: &ObjKey,
    finalizer: Option<&str>,
    drop_owner: Option<&str>,
) -> bool {
    let result = mutate(app, res, key, false, |current| {
        let mut value = current.value();
        let mut changed = false;
        if let Some(f) = finalizer
            && let Some(list) = value["metadata"]["finalizers"].as_array_mut()
        {
            let before = list.len();
            list.retain(|x| x != f);
            changed |= list.len() != before;
        }
        if let Some(uid) = drop_owner
            && let Some(list) = value["metadata"]["ownerReferences"].as_array_mut()
        {
            let before = list.len();
            list.retain(|r| r["uid"] != uid);
            changed |= list.len() != before;
        }
        if !changed {
            return Ok(Outcome::Unchanged);
        }
        if let Some(meta) = value["metadata"].as_object_mut() {
            for key in ["finalizers", "ownerReferences"] {
                if meta
                    .get(key)
                    .and_then(Value::as_array)
                    .is_some_and(Vec::is_empty)
                {
                    meta.remove(key);
                }
            }
        }
        let spec_held = res.group.is_empty()
            && res.plural == "namespaces"
            && value["spec"]["finalizers"]
                .as_array()
                .is_some_and(|f| !f.is_empty());
        if current.deleting && value["metadata"]["finalizers"].is_null() && !spec_held {
            return Ok(Outcome::RemoveAs(value));
        }
        Ok(Outcome::StoreMetadata(value))
    })
    .await;
    match result {
        Err(e) if e.code != 404 => {
            tracing::debug!(name = %key.1, error = %e, "garbage collector edit failed; retrying later");
            false
        }
        _ => true,
    }
}

/// Deletes an object; false when it failed and must be tried again.
async fn remove(app: &Arc<App>, res: &Resource, key: &ObjKey, propagation: Propagation) -> bool {
    let options = DeleteOptions {
        propagation: Some(propagation),
        ..DeleteOptions::default()
    };
    match delete(app, res, key, &options).await {
        Err(e) if e.code != 404 => {
            tracing::debug!(name = %key.1, error = %e, "garbage collector delete failed; retrying later");
            false
        }
        _ => true,
    }
}

/// Works off what the writes since the last pass recorded.
async fn collect_garbage(app: &Arc<App>) {
    for work in app.store.take_gc_work() {
        let done = match &work {
            GcWork::Dependent(location) => collect_dependent(app, location).await,
            GcWork::Owner(location) => release_owner(app, location).await,
        };
        if !done {
            app.store.requeue_gc_work(work);
        }
    }
}

/// The state of the owner an ownerReference names, looked up as kube-controller-manager
/// does: by the reference's group, kind and name (in the dependent's namespace when the
/// kind is namespaced), then compared by uid.
fn owner_state(app: &App, dependent: &StoredObject, reference: &Value) -> OwnerState {
    let api_version = reference["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let kind = reference["kind"].as_str().unwrap_or_default();
    let owner_resource = app
        .registry
        .read()
        .all()
        .find(|r| r.group == group && r.kind == kind)
        .cloned();
    let Some(owner_resource) = owner_resource else {
        // As upstream: an owner whose kind is not served cannot be verified, and an
        // unverified owner never has its dependents deleted.
        return OwnerState::Present;
    };
    if owner_resource.namespaced && dependent.namespace().is_empty() {
        // A cluster-scoped object cannot be owned by a namespaced one.
        return OwnerState::Absent;
    }
    let namespace = if owner_resource.namespaced {
        dependent.namespace()
    } else {
        ""
    };
    let name = reference["name"].as_str().unwrap_or_default();
    let key = (namespace.to_owned(), name.to_owned());
    match app.store.get(&owner_resource.storage, &key) {
        Some(owner) if owner.uid() == reference["uid"].as_str().unwrap_or_default() => {
            if owner.deleting && owner.has_finalizer(FOREGROUND) {
                OwnerState::Foreground
            } else {
                OwnerState::Present
            }
        }
        _ => OwnerState::Absent,
    }
}

/// Deletes a dependent whose owners are all gone (in the background) or all gone or going
/// in the foreground (in the foreground).
async fn collect_dependent(app: &Arc<App>, (storage, key): &Location) -> bool {
    let Some(dependent) = app.store.get(storage, key) else {
        return true;
    };
    if dependent.deleting || dependent.owners().is_empty() {
        return true;
    }
    let value = dependent.value();
    let Some(references) = value["metadata"]["ownerReferences"].as_array() else {
        return true;
    };
    let states: Vec<OwnerState> = references
        .iter()
        .map(|r| owner_state(app, &dependent, r))
        .collect();
    let propagation = if states.iter().all(|s| *s == OwnerState::Absent) {
        Propagation::Background
    } else if states.iter().all(|s| *s != OwnerState::Present) {
        Propagation::Foreground
    } else {
        return true;
    };
    match resource(app, storage) {
        Some(res) => remove(app, &res, key, propagation).await,
        None => true,
    }
}

/// An owner deleted with `orphan` lets go of its dependents and then goes; one deleted
/// with `foregroundDeletion` goes once no dependent blocks it. Owners with neither are no
/// work (and their dependents are never looked up).
async fn release_owner(app: &Arc<App>, (storage, key): &Location) -> bool {
    let Some(owner) = app.store.get(storage, key) else {
        return true;
    };
    let orphan = owner.has_finalizer(ORPHAN);
    if !owner.deleting || !(orphan || owner.has_finalizer(FOREGROUND)) {
        return true;
    }
    let Some(res) = resource(app, storage) else {
        return true;
    };
    let dependents = app.store.dependents_of(owner.uid());
    if orphan {
        let mut done = true;
        for (dep_storage, dep_key) in &dependents {
            if let Some(dep_res) = resource(app, dep_storage) {
                done &= edit(app, &dep_res, dep_key, None, Some(owner.uid())).await;
            }
        }
        return done && edit(app, &res, key, Some(ORPHAN), None).await;
    }
    let blocked = dependents.iter().any(|(dep_storage, dep_key)| {
        app.store.get(dep_storage, dep_key).is_some_and(|d| {
            d.owners()
                .iter()
                .any(|link| link.uid == owner.uid() && link.block)
        })
    });
    blocked || edit(app, &res, key, Some(FOREGROUND), None).await
}

/// Deletes the Events whose TTL ran out, as etcd drops an expired lease's keys: no
/// finalizer holds them, and watchers see DELETED.
fn expire_events(app: &Arc<App>, now: Instant) {
    let expired = app.store.expired_events(now);
    if expired.is_empty() {
        return;
    }
    let storage: StorageKey = Arc::from(EVENTS_STORAGE);
    for (key, rv) in expired {
        // A write since the expiry was computed wins: the delete is then a Stale no-op.
        if let Ok(written) = app
            .store
            .write(&storage, &key, Op::Delete(None), Expect::Rv(rv))
        {
            // The delete need not wait for the disk: an Event lost in a crash would expire
            // again after the restart.
            app.after_write(&written.change);
        }
    }
}

async fn namespaces(app: &Arc<App>) {
    let Some(ns_res) = resource(app, NAMESPACE_STORAGE) else {
        return;
    };
    let (_, ns_table) = app.store.snapshot(&ns_res.storage);
    let terminating: Vec<Arc<StoredObject>> =
        ns_table.values().filter(|n| n.deleting).cloned().collect();
    if terminating.is_empty() {
        return;
    }
    let (_, tables) = app.store.all_tables();
    for namespace in terminating {
        let mut remaining = 0usize;
        for (storage, table) in &tables {
            let Some(res) = resource(app, storage) else {
                continue;
            };
            if !res.namespaced {
                continue;
            }
            let start = (namespace.name().to_owned(), String::new());
            for (key, object) in table
                .range(start..)
                .take_while(|(k, _)| k.0 == namespace.name())
            {
                remaining += 1;
                if !object.deleting {
                    remove(app, &res, key, Propagation::Background).await;
                }
            }
        }
        if remaining == 0 {
            let result = mutate(app, &ns_res, &namespace.key(), false, |current| {
                let mut value = current.value();
                let spec_finalizers = value["spec"]["finalizers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if spec_finalizers.is_empty() {
                    return Ok(if value["metadata"]["finalizers"].is_null() {
                        Outcome::Remove
                    } else {
                        Outcome::Unchanged
                    });
                }
                value["spec"]["finalizers"] = json!(
                    spec_finalizers
                        .into_iter()
                        .filter(|f| f != "kubernetes")
                        .collect::<Vec<_>>()
                );
                if value["spec"]["finalizers"]
                    .as_array()
                    .is_some_and(Vec::is_empty)
                    && let Some(spec) = value["spec"].as_object_mut()
                {
                    spec.remove("finalizers");
                }
                if value["metadata"]["finalizers"].is_null()
                    && value["spec"]["finalizers"].is_null()
                {
                    return Ok(Outcome::RemoveAs(value));
                }
                Ok(Outcome::Store(value))
            })
            .await;
            if let Err(e) = result {
                tracing::debug!(namespace = %namespace.name(), error = %e, "namespace finalization failed; retrying later");
            }
        }
    }
}

async fn crd_cleanup(app: &Arc<App>) {
    let Some(crd_res) = resource(app, CRD_STORAGE) else {
        return;
    };
    let (_, crds) = app.store.snapshot(&crd_res.storage);
    for crd in crds
        .values()
        .filter(|c| c.deleting && c.has_finalizer(CRD_CLEANUP_FINALIZER))
    {
        let value = crd.value();
        let group = value["spec"]["group"].as_str().unwrap_or_default();
        let plural = value["spec"]["names"]["plural"]
            .as_str()
            .unwrap_or_default();
        let storage = crate::registry::storage_key(group, plural);
        let (_, instances) = app.store.snapshot(&storage);
        if instances.is_empty() {
            edit(app, &crd_res, &crd.key(), Some(CRD_CLEANUP_FINALIZER), None).await;
            continue;
        }
        if let Some(res) = resource(app, &storage) {
            for (key, object) in &instances {
                if !object.deleting {
                    remove(app, &res, key, Propagation::Background).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
