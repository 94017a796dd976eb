//! The boundary to the structural-schema engine (`apiextensions`): defaulting, pruning,
//! validation and list types of custom resources.

use apiextensions::{FieldError, StructuralSchema};
use serde_json::Value;

use crate::fields::ListType;
use crate::status::Cause;

/// The structural schema of one custom resource version.
#[derive(Debug, Clone)]
pub struct CrdSchema {
    schema: StructuralSchema,
}

/// Converts schema field errors into Status causes.
#[must_use]
pub fn causes(errors: &[FieldError]) -> Vec<Cause> {
    errors
        .iter()
        .map(|e| Cause {
            reason: e.kind.reason().to_string(),
            field: e.field.clone(),
            message: e.message.clone(),
        })
        .collect()
}

impl CrdSchema {
    /// Builds the schema from `openAPIV3Schema`, with error paths under `path`.
    ///
    /// # Errors
    /// The field errors of a non-structural or invalid schema.
    pub fn new(raw: &Value, path: &str) -> Result<Self, Vec<Cause>> {
        StructuralSchema::from_value_at(raw, path)
            .map(|schema| Self { schema })
            .map_err(|e| causes(e.field_errors()))
    }

    /// The raw `openAPIV3Schema` (for OpenAPI publishing).
    #[must_use]
    pub fn raw(&self) -> &Value {
        self.schema.raw()
    }

    /// Applies `default`s to missing keys of objects that exist.
    pub fn apply_defaults(&self, object: &mut Value) {
        self.schema.apply_defaults(object);
    }

    /// Drops unknown fields; returns the removed paths.
    pub fn prune(&self, object: &mut Value) -> Vec<String> {
        self.schema.prune(object)
    }

    /// Validates against the schema.
    #[must_use]
    pub fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        causes(&self.schema.validate(object, old))
    }

    /// The list type at a path (for server-side apply).
    #[must_use]
    pub fn list_type(&self, path: &[&str]) -> ListType {
        match self.schema.list_type(path) {
            apiextensions::ListType::Atomic => ListType::Atomic,
            apiextensions::ListType::Set => ListType::Set,
            apiextensions::ListType::Map(keys) => ListType::Map(keys),
        }
    }

    /// Whether the object at `path` is `x-kubernetes-map-type: atomic`.
    #[must_use]
    pub fn is_atomic_map(&self, path: &[&str]) -> bool {
        self.schema.is_atomic_map(path)
    }
}

impl apimachinery::managed_fields::SchemaTypes for CrdSchema {
    fn list_type(&self, path: &[&str]) -> ListType {
        Self::list_type(self, path)
    }

    fn map_is_atomic(&self, path: &[&str]) -> bool {
        self.is_atomic_map(path)
    }
}
