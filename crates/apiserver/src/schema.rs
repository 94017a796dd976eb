//! The boundary to the structural-schema engine (`apiextensions`): defaulting, pruning,
//! validation and list types of custom resources; and the typed decoding of built-in kinds.

use std::sync::atomic::{AtomicU32, Ordering};

use apiextensions::{FieldError, StructuralSchema};
use serde_json::Value;

use crate::fields::ListType;
use crate::registry::Resource;
use crate::registry::typed::{DecodeError, Typed};
use crate::semantics::prepare::FieldValidation;
use crate::status::{ApiError, ApiResult, Cause};

/// The structural schema of one custom resource version.
#[derive(Debug, Clone)]
pub struct CrdSchema {
    schema: StructuralSchema,
    mark: u32,
}

/// The mark of the next schema built (0 is no schema's).
static NEXT_MARK: AtomicU32 = AtomicU32::new(1);

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
            .map(|schema| Self {
                schema,
                mark: NEXT_MARK.fetch_add(1, Ordering::Relaxed),
            })
            .map_err(|e| causes(e.field_errors()))
    }

    /// This schema's mark, which no other schema built in this process has (never 0): a
    /// stored object carries the mark of the schema whose pass made its content
    /// ([`crate::store::StoredObject::schema_mark`]).
    #[must_use]
    pub fn mark(&self) -> u32 {
        self.mark
    }

    /// Whether an update changing only `metadata` of content this schema made passes
    /// without the schema pass ([`StructuralSchema::passes_metadata_only_updates`]).
    #[must_use]
    pub fn passes_metadata_only_updates(&self) -> bool {
        self.schema.passes_metadata_only_updates()
    }

    /// Defaults, prunes and validates an update of `old`, content this schema made, walking
    /// only the top-level fields that changed ([`StructuralSchema::update_pass`]): the
    /// pruned paths and the causes; None when the whole object must be walked.
    pub fn update_pass(
        &self,
        object: &mut Value,
        old: &Value,
    ) -> Option<(Vec<String>, Vec<Cause>)> {
        self.schema
            .update_pass(object, old)
            .map(|pass| (pass.pruned, causes(&pass.errors)))
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

/// Which kind of write an object comes from: the real server reports a body that does not
/// decode differently for each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// POST or PUT of a whole object.
    Body,
    /// A merge, JSON or strategic merge patch.
    Patch,
    /// A server-side apply patch.
    Apply,
}

/// Decodes a built-in object through its k8s-openapi type: unknown fields are dropped,
/// warned about or refused per `fieldValidation`; a value of the wrong type is refused.
///
/// The real server's answers (k8s.io/apiserver/pkg/endpoints/handlers, 1.32): a POST or PUT
/// body that does not decode is 400 "`<Kind>` in version "v" cannot be handled as a
/// `<Kind>`: ..." (`transformDecodeError` in rest.go), Strict unknown fields included; a
/// patched object that does not decode is 422 Invalid on the field `patch` (patch.go); an
/// apply patch that does not fit the type fails to convert to a typed value, which 1.32
/// answers with a 500 "failed to create typed patch object" (structuredmerge.go; upstream
/// issue 122480), whatever `fieldValidation` says.
///
/// # Errors
/// As above; a missing required field is 422 Invalid "Required value", as the kind's
/// validation says.
pub fn typed_pass(
    res: &Resource,
    typed: &Typed,
    object: &mut Value,
    validation: FieldValidation,
    write: WriteKind,
) -> ApiResult<Vec<String>> {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let cannot_handle = |problem: &str| {
        format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {problem}",
            kind = res.kind,
            version = res.version
        )
    };
    let typed_patch_error = |problem: &str| {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
        // A plain error upstream: 500 without a reason.
        ApiError::new(
            500,
            "",
            format!(
                "failed to create typed patch object ({namespace}/{name}; {group}/{version}, Kind={kind}): {problem}",
                group = res.group,
                version = res.version,
                kind = res.kind
            ),
        )
    };
    let patch_invalid = |problem: &str| {
        ApiError::invalid(
            "",
            "",
            "",
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                field: "patch".into(),
                // Upstream quotes the whole patched object here; it may hold a Secret's data.
                message: format!("Invalid value: \"<patched object>\": {problem}"),
            }],
        )
    };
    let decoded = match typed.decode(object) {
        Ok(decoded) => decoded,
        Err(DecodeError::Missing { field }) => {
            return Err(ApiError::invalid_field(
                &res.group,
                &res.kind,
                &name,
                "FieldValueRequired",
                &field,
                "Required value",
            ));
        }
        Err(DecodeError::Type { path, problem }) => {
            let problem = if path.is_empty() {
                problem
            } else {
                format!("{path}: {problem}")
            };
            return Err(match write {
                WriteKind::Body => {
                    ApiError::bad_request(cannot_handle(&format!("json: {problem}")))
                }
                WriteKind::Patch => patch_invalid(&format!("json: {problem}")),
                WriteKind::Apply => typed_patch_error(&format!(".{problem}")),
            });
        }
    };
    let mut warnings = Vec::new();
    if let Some(first) = decoded.unknown.first() {
        let listed = decoded
            .unknown
            .iter()
            .map(|p| format!("unknown field \"{p}\""))
            .collect::<Vec<_>>();
        let strict = format!("strict decoding error: {}", listed.join(", "));
        match (write, validation) {
            (WriteKind::Apply, _) => {
                return Err(typed_patch_error(&format!(
                    ".{first}: field not declared in schema"
                )));
            }
            (WriteKind::Body, FieldValidation::Strict) => {
                return Err(ApiError::bad_request(cannot_handle(&strict)));
            }
            (WriteKind::Patch, FieldValidation::Strict) => return Err(patch_invalid(&strict)),
            (_, FieldValidation::Warn) => warnings = listed,
            (_, FieldValidation::Ignore) => {}
        }
    }
    let causes = validate_workload(res, &decoded.object);
    if !causes.is_empty() {
        return Err(ApiError::invalid(&res.group, &res.kind, &name, causes));
    }
    *object = decoded.object;
    Ok(warnings)
}

/// The part of a Deployment's or StatefulSet's validation that decides whether its pods
/// would ever be its own (k8s.io/kubernetes/pkg/apis/apps/validation, 1.32): a selector,
/// not empty, matching the template's labels, and replicas not negative.
fn validate_workload(res: &Resource, object: &Value) -> Vec<Cause> {
    if res.group != "apps" || !matches!(res.plural.as_str(), "deployments" | "statefulsets") {
        return Vec::new();
    }
    let kind = res.kind.to_lowercase();
    let spec = &object["spec"];
    let mut causes = Vec::new();
    let mut invalid = |field: &str, message: String| {
        causes.push(Cause {
            reason: "FieldValueInvalid".into(),
            field: field.into(),
            message,
        });
    };
    if let Some(replicas) = spec["replicas"].as_i64().filter(|r| *r < 0) {
        invalid(
            "spec.replicas",
            format!("Invalid value: {replicas}: must be greater than or equal to 0"),
        );
    }
    let selector = &spec["selector"];
    let match_labels = selector["matchLabels"].as_object();
    let expressions = selector["matchExpressions"].as_array();
    if !selector.is_object() {
        causes.push(Cause {
            reason: "FieldValueRequired".into(),
            field: "spec.selector".into(),
            message: "Required value".into(),
        });
        return causes;
    }
    if match_labels.is_none_or(serde_json::Map::is_empty) && expressions.is_none_or(Vec::is_empty) {
        invalid(
            "spec.selector",
            format!("Invalid value: {selector}: empty selector is invalid for {kind}"),
        );
        return causes;
    }
    let labels = spec["template"]["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let label = |key: &str| labels.get(key).and_then(Value::as_str);
    let values = |e: &Value| -> Vec<String> {
        e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let matches = match_labels
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str())
        && expressions.into_iter().flatten().all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            match e["operator"].as_str().unwrap_or_default() {
                "In" => label(key).is_some_and(|l| values(e).iter().any(|v| v == l)),
                "NotIn" => label(key).is_none_or(|l| !values(e).iter().any(|v| v == l)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        });
    if !matches {
        // Go prints the labels with %#v.
        let shown = labels
            .iter()
            .map(|(k, v)| format!("{k:?}:{}", v))
            .collect::<Vec<_>>()
            .join(", ");
        invalid(
            "spec.template.metadata.labels",
            format!(
                "Invalid value: map[string]string{{{shown}}}: `selector` does not match template `labels`"
            ),
        );
    }
    causes
}
