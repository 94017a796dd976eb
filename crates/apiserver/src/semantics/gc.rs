//! Background controllers, asynchronous as on a real cluster:
//! - the garbage collector: dependents whose owners (by uid, same namespace) are all gone
//!   are deleted; `orphan` owners release their dependents; `foregroundDeletion` owners
//!   wait until no dependent with `blockOwnerDeletion` remains;
//! - the namespace controller: a terminating namespace's objects are deleted, then its
//!   `kubernetes` finalizer is removed and the namespace goes;
//! - the CRD cleanup: a deleted CRD's custom resources are deleted before the CRD goes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::App;
use crate::handlers::write::{Outcome, mutate};
use crate::registry::{CRD_STORAGE, Resource, StorageKey};
use crate::semantics::delete::{DeleteOptions, Propagation, delete};
use crate::store::{ObjKey, StoredObject};

/// The finalizer of CRDs whose instances must go first.
pub const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

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

#[derive(Clone, Copy, PartialEq, Eq)]
enum OwnerState {
    Absent,
    Present,
    Foreground,
}

struct Entry<'a> {
    object: &'a Arc<StoredObject>,
    namespaced: bool,
}

fn resource(app: &App, storage: &str) -> Option<Arc<Resource>> {
    app.registry.read().by_storage(storage)
}

/// Removes `finalizer` (and, with `drop_owner`, ownerReferences to that uid) from an object.
async fn edit(
    app: &Arc<App>,
    res: &Resource,
    key: &ObjKey,
    finalizer: Option<&str>,
    drop_owner: Option<&str>,
) {
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
        Ok(Outcome::Store(value))
    })
    .await;
    if let Err(e) = result
        && e.code != 404
    {
        tracing::debug!(name = %key.1, error = %e, "garbage collector edit failed; retrying later");
    }
}

async fn remove(app: &Arc<App>, res: &Resource, key: &ObjKey, propagation: Propagation) {
    let options = DeleteOptions {
        propagation: Some(propagation),
        ..DeleteOptions::default()
    };
    if let Err(e) = delete(app, res, key, &options).await
        && e.code != 404
    {
        tracing::debug!(name = %key.1, error = %e, "garbage collector delete failed; retrying later");
    }
}

async fn pass(app: &Arc<App>) {
    let (_, tables) = app.store.all_tables();
    let mut by_uid: HashMap<&str, Entry<'_>> = HashMap::new();
    for (storage, table) in &tables {
        let namespaced = resource(app, storage).is_none_or(|r| r.namespaced);
        for object in table.values() {
            by_uid.insert(object.uid.as_str(), Entry { object, namespaced });
        }
    }
    let owner_state = |dependent: &StoredObject, uid: &str| -> OwnerState {
        match by_uid.get(uid) {
            None => OwnerState::Absent,
            Some(owner) if owner.namespaced && owner.object.namespace != dependent.namespace => {
                OwnerState::Absent
            }
            Some(owner)
                if owner.object.deleting
                    && owner.object.finalizers.iter().any(|f| f == FOREGROUND) =>
            {
                OwnerState::Foreground
            }
            Some(_) => OwnerState::Present,
        }
    };
    // Dependents of owners that are gone, or going in the foreground.
    for (storage, table) in &tables {
        for object in table.values() {
            if object.owners.is_empty() || object.deleting {
                continue;
            }
            let states: Vec<OwnerState> = object
                .owners
                .iter()
                .map(|o| owner_state(object, &o.uid))
                .collect();
            let propagation = if states.iter().all(|s| *s == OwnerState::Absent) {
                Some(Propagation::Background)
            } else if states.iter().all(|s| *s != OwnerState::Present) {
                Some(Propagation::Foreground)
            } else {
                None
            };
            if let (Some(propagation), Some(res)) = (propagation, resource(app, storage)) {
                remove(app, &res, &object.key(), propagation).await;
            }
        }
    }
    // Owners being deleted with orphan or foregroundDeletion finalizers.
    for (storage, table) in &tables {
        for owner in table.values().filter(|o| o.deleting) {
            let Some(res) = resource(app, storage) else {
                continue;
            };
            let dependents: Vec<(&StorageKey, &Arc<StoredObject>, bool)> = tables
                .iter()
                .flat_map(|(s, t)| t.values().map(move |o| (s, o)))
                .filter_map(|(s, o)| {
                    o.owners
                        .iter()
                        .find(|r| r.uid == owner.uid)
                        .map(|r| (s, o, r.block))
                })
                .collect();
            if owner.finalizers.iter().any(|f| f == ORPHAN) {
                for (dep_storage, dependent, _) in &dependents {
                    if let Some(dep_res) = resource(app, dep_storage) {
                        edit(app, &dep_res, &dependent.key(), None, Some(&owner.uid)).await;
                    }
                }
                edit(app, &res, &owner.key(), Some(ORPHAN), None).await;
            } else if owner.finalizers.iter().any(|f| f == FOREGROUND)
                && !dependents.iter().any(|(_, _, block)| *block)
            {
                edit(app, &res, &owner.key(), Some(FOREGROUND), None).await;
            }
        }
    }
    namespaces(app, &tables).await;
    crd_cleanup(app, &tables).await;
}

async fn namespaces(app: &Arc<App>, tables: &[(StorageKey, crate::store::Table)]) {
    let Some(ns_res) = resource(app, "/namespaces") else {
        return;
    };
    let Some((_, ns_table)) = tables.iter().find(|(s, _)| &**s == "/namespaces") else {
        return;
    };
    for namespace in ns_table.values().filter(|n| n.deleting) {
        let mut remaining = 0usize;
        for (storage, table) in tables {
            let Some(res) = resource(app, storage) else {
                continue;
            };
            if !res.namespaced {
                continue;
            }
            let start = (namespace.name.clone(), String::new());
            for (key, object) in table
                .range(start..)
                .take_while(|(k, _)| k.0 == namespace.name)
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
                tracing::debug!(namespace = %namespace.name, error = %e, "namespace finalization failed; retrying later");
            }
        }
    }
}

async fn crd_cleanup(app: &Arc<App>, tables: &[(StorageKey, crate::store::Table)]) {
    let Some(crd_res) = resource(app, CRD_STORAGE) else {
        return;
    };
    let Some((_, crds)) = tables.iter().find(|(s, _)| &**s == CRD_STORAGE) else {
        return;
    };
    for crd in crds
        .values()
        .filter(|c| c.deleting && c.finalizers.iter().any(|f| f == CRD_CLEANUP_FINALIZER))
    {
        let value = crd.value();
        let group = value["spec"]["group"].as_str().unwrap_or_default();
        let plural = value["spec"]["names"]["plural"]
            .as_str()
            .unwrap_or_default();
        let storage = crate::registry::storage_key(group, plural);
        let instances = tables
            .iter()
            .find(|(s, _)| *s == storage)
            .map(|(_, t)| t.clone())
            .unwrap_or_default();
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
