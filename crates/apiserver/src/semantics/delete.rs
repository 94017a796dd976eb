//! Deletion: preconditions, propagation policy finalizers, finalizer-blocked marking
//! (deletionTimestamp) and removal. Shared by DELETE, deletecollection, the garbage
//! collector and the namespace controller.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::App;
use crate::handlers::write::{Outcome, mutate};
use crate::registry::Resource;
use crate::semantics::prepare::{meta_mut, now, tracks_generation};
use crate::status::{ApiError, ApiResult};
use crate::store::{ObjKey, StoredObject};

/// How dependents are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Delete now; the garbage collector removes dependents afterwards.
    Background,
    /// Wait (foregroundDeletion finalizer) until blocking dependents are gone.
    Foreground,
    /// Keep dependents, removing their ownerReferences (orphan finalizer).
    Orphan,
}

impl Propagation {
    /// Parses `propagationPolicy`.
    ///
    /// # Errors
    /// 400 for unknown values.
    pub fn parse(value: &str) -> ApiResult<Self> {
        match value {
            "Background" => Ok(Self::Background),
            "Foreground" => Ok(Self::Foreground),
            "Orphan" => Ok(Self::Orphan),
            other => Err(ApiError::bad_request(format!(
                "unsupported propagationPolicy {other:?}"
            ))),
        }
    }
}

/// Options of one deletion.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Propagation policy (None: Background).
    pub propagation: Option<Propagation>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// What a deletion did.
#[derive(Debug, Clone)]
pub enum Deletion {
    /// The object is gone (its last state).
    Gone(Arc<StoredObject>),
    /// Finalizers hold it: it is marked for deletion.
    Marked(Arc<StoredObject>),
}

/// The finalizers that hold a namespace besides metadata.finalizers.
fn namespace_spec_finalizers(res: &Resource, value: &Value) -> bool {
    res.group.is_empty()
        && res.plural == "namespaces"
        && value["spec"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
}

/// Deletes (or marks) one object.
///
/// # Errors
/// 404 when absent, 409 for failed preconditions.
pub async fn delete(
    app: &Arc<App>,
    res: &Resource,
    key: &ObjKey,
    options: &DeleteOptions,
) -> ApiResult<Deletion> {
    let mut removed = false;
    let stored = mutate(app, res, key, options.dry_run, |current| {
        if let Some(uid) = &options.uid
            && uid != current.uid() {
                return Err(ApiError::conflict(&res.group, &res.plural, &key.1, &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}", current.uid()
                )));
            }
        if let Some(rv) = &options.resource_version
            && rv != &current.rv.to_string() {
                return Err(ApiError::conflict(&res.group, &res.plural, &key.1, &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}", current.rv
                )));
            }
        let mut value = current.value();
        let mut finalizers = current.finalizers().to_vec();
        let policy_finalizer = match options.propagation {
            Some(Propagation::Foreground) => Some("foregroundDeletion"),
            Some(Propagation::Orphan) => Some("orphan"),
            _ => None,
        };
        if let Some(f) = policy_finalizer
            && !finalizers.iter().any(|x| x == f) {
                finalizers.push(f.to_string());
            }
        let held = !finalizers.is_empty() || namespace_spec_finalizers(res, &value);
        if !held {
            removed = true;
            return Ok(Outcome::Remove);
        }
        if current.deleting && finalizers == current.finalizers() {
            removed = false;
            return Ok(Outcome::Unchanged);
        }
        let first_mark = !current.deleting;
        let meta = meta_mut(&mut value);
        if finalizers.is_empty() {
            meta.remove("finalizers");
        } else {
            meta.insert("finalizers".into(), json!(finalizers));
        }
        if first_mark {
            meta.insert("deletionTimestamp".into(), json!(now()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            if tracks_generation(res) {
                let generation = meta.get("generation").and_then(Value::as_i64).unwrap_or(0) + 1;
                meta.insert("generation".into(), json!(generation));
            }
        }
        removed = false;
        if res.group.is_empty() && res.plural == "namespaces" {
            if !value["status"].is_object() {
                value["status"] = json!({});
            }
            value["status"]["phase"] = json!("Terminating");
            return Ok(Outcome::Store(value));
        }
        Ok(Outcome::StoreMetadata(value))
    })
    .await?;
    Ok(if removed {
        Deletion::Gone(stored)
    } else {
        Deletion::Marked(stored)
    })
}
