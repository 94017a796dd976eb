//! Server-side apply and field ownership (`metadata.managedFields`), after
//! sigs.k8s.io/structured-merge-diff and k8s.io/apiserver's field manager.
//!
//! # Expected flow
//! The server calls [`apply`] for `application/apply-patch+yaml` patches and [`update`]
//! for every other write (create, replace, merge patch, JSON patch), passing the stored
//! object and the schema's list types. Both return or fill in the object with its new
//! `managedFields`.
//!
//! # Guarantees
//! - FieldsV1 is the real encoding (`f:`, `k:{...}`, `v:...`, `".": {}`).
//! - Fields the server manages (apiVersion, kind, metadata.name/namespace/uid/
//!   resourceVersion/generation/creationTimestamp/deletion*/managedFields/selfLink) are
//!   never owned.
//! - `metadata.labels` and `annotations` merge per key, `metadata.finalizers` is a set,
//!   `metadata.ownerReferences` a list-map keyed by `uid`, for every kind.
//!
//! # Assumptions
//! - Lists are atomic unless [`SchemaTypes`] says otherwise, as in a schema without
//!   `x-kubernetes-list-type`.
//! - `null` members of an apply configuration are dropped before applying (the real
//!   server ends up pruning them from non-nullable fields); the manager does not own them.
//! - The server strips `.status` from main-resource writes and passes only `.status` for
//!   `/status` writes, so no reset-field sets are needed here.

mod apply;
mod entries;
pub mod fieldset;
mod openapi;
mod stored;
mod update;
mod walk;

pub use apply::apply;
pub use entries::{APPLY, ManagedEntry, UPDATE, decode, encode, without_managed_fields};
pub use fieldset::FieldSet;
pub use openapi::OpenApiTypes;
pub use update::update;

/// How a list merges, as declared by the schema (`x-kubernetes-list-type` and
/// `x-kubernetes-list-map-keys`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole; owned as one field.
    Atomic,
    /// Scalars merged by value; each value owned (`v:<json>`).
    Set,
    /// Objects merged by these key fields; each item owned (`k:{...}`) with its fields.
    Map(Vec<String>),
}

/// The schema's answers for a path of field names from the object root; list elements
/// add nothing to the path (e.g. `["spec","contracts"]`, `["spec","contracts","ports"]`).
pub trait SchemaTypes {
    /// How the list at `path` merges.
    fn list_type(&self, path: &[&str]) -> ListType;

    /// Whether the object at `path` is `x-kubernetes-map-type: atomic` (replaced and owned
    /// whole). `metadata`, its labels and annotations are never atomic.
    fn map_is_atomic(&self, path: &[&str]) -> bool {
        let _ = path;
        false
    }
}

/// Every list atomic and every map granular: kinds stored without a schema.
#[derive(Debug, Clone, Copy, Default)]
pub struct AtomicLists;

impl SchemaTypes for AtomicLists {
    fn list_type(&self, _path: &[&str]) -> ListType {
        ListType::Atomic
    }
}

/// One field an apply would take from another manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The other manager's name.
    pub manager: String,
    /// The field in the real server's form: `.spec.replicas`,
    /// `.spec.contracts[name="a"].resources`.
    pub field: String,
    /// The other manager as the real server describes it in messages:
    /// `"name"`, `"name" using v1 at 2024-01-01T00:00:00Z`, `"name" with subresource "status"`.
    pub described_manager: String,
}

impl Conflict {
    /// The `message` of the Status cause (type `FieldManagerConflict`, field [`Self::field`]).
    #[must_use]
    pub fn cause_message(&self) -> String {
        format!("conflict with {}", self.described_manager)
    }

    /// The Status cause the real server sends for this conflict:
    /// `{"type": "FieldManagerConflict", "message": "conflict with \"a\"", "field": ".spec.x"}`.
    #[must_use]
    pub fn to_cause(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "FieldManagerConflict",
            "message": self.cause_message(),
            "field": self.field,
        })
    }
}

/// Why an apply was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// Fields other managers own would change: 409 `Conflict`, reason `Conflict`, this
    /// error's text as the message and one [`Conflict::to_cause`] per entry in
    /// `details.causes`.
    #[error("Apply failed with {} conflict{}: {}", .0.len(), if .0.len() == 1 { "" } else { "s" }, conflict_message(.0))]
    Conflicts(Vec<Conflict>),
    /// The configuration cannot be applied: not an object, `metadata.managedFields` set
    /// (the real server answers 400 `BadRequest` "metadata.managedFields must be nil"),
    /// a list-map item without its keys or two with the same keys (answer 400 too).
    /// Schema violations are the server's own check (422 `Invalid`).
    #[error("{0}")]
    Invalid(String),
}

/// `getConflictMessage` of the real field manager.
fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [only] = conflicts {
        return format!("conflict with {}: {}", only.described_manager, only.field);
    }
    let mut by_manager: std::collections::BTreeMap<&str, Vec<&str>> =
        std::collections::BTreeMap::new();
    for conflict in conflicts {
        by_manager
            .entry(conflict.described_manager.as_str())
            .or_default()
            .push(conflict.field.as_str());
    }
    let mut lines = Vec::new();
    for (manager, fields) in by_manager {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(fields.into_iter().map(|field| format!("- {field}")));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_stored;
#[cfg(test)]
mod tests_update;
