//! Object preparation for writes: server-set metadata on create, what an update may
//! change (immutable metadata, `.status` only through `/status`), generation, finalizer
//! rules, schema defaulting/pruning/validation and built-in conversions.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::registry::Resource;
use crate::schema::WriteKind;
use crate::status::{ApiError, ApiResult, Cause};

/// Now as an RFC 3339 timestamp in whole seconds.
#[must_use]
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Whether the kind keeps `metadata.generation`.
#[must_use]
pub fn tracks_generation(res: &Resource) -> bool {
    res.custom
        || matches!(
            (res.group.as_str(), res.plural.as_str()),
            ("apps", _) | ("apiextensions.k8s.io", _)
        )
}

/// The object's metadata map (created when missing).
pub fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = json!({});
    }
    if !object["metadata"].is_object() {
        object["metadata"] = json!({});
    }
    match object.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        // metadata was made an object just above.
        _ => unreachable!("metadata is an object"),
    }
}

/// Checks an object name as the kind's validation would: the problems, each one cause
/// (`ValidateObjectMeta` with the kind's name function, k8s.io/apimachinery/pkg/api/
/// validation and k8s.io/apimachinery/pkg/util/validation, 1.32).
#[must_use]
pub fn name_errors(res: &Resource, name: &str) -> Vec<String> {
    use apimachinery::selector::validation::{
        is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_valid_path_segment_name,
    };
    let problems = match (res.group.as_str(), res.plural.as_str()) {
        ("rbac.authorization.k8s.io", _) => is_valid_path_segment_name(name),
        ("", "namespaces") => is_dns1123_label(name),
        ("", "services") => is_dns1035_label(name),
        _ => is_dns1123_subdomain(name),
    };
    problems
        .into_iter()
        .map(|problem| format!("Invalid value: {name:?}: {problem}"))
        .collect()
}

/// The 5 random characters appended to `generateName`.
#[must_use]
pub fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect()
}

/// The apiVersion and kind of a POST or PUT body, when given, are the endpoint's (absent
/// ones default to it). Upstream (1.32, k8s.io/apiserver/pkg/endpoints/handlers/create.go and
/// update.go): another group-version is 400 "the API version in the data ... does not match
/// the expected API version"; another kind fails to decode into the endpoint's type, a 400
/// from `transformDecodeError` (rest.go).
///
/// # Errors
/// 400 as above.
pub fn check_type(res: &Resource, object: &Value) -> ApiResult<()> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    if !api_version.is_empty() {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        // Every served version of a custom resource decodes (they share the schema's
        // storage and convert by apiVersion); a built-in kind is served in one version.
        let served = group == res.group && (res.custom || version == res.version);
        if !served {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the expected API version ({})",
                res.api_version()
            )));
        }
    }
    if !kind.is_empty() && kind != res.kind {
        let version = api_version.rsplit_once('/').map_or(api_version, |(_, v)| v);
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {}: the data is a {kind}, not a {}",
            res.kind, res.kind
        )));
    }
    Ok(())
}

fn normalize_finalizers(meta: &mut Map<String, Value>) {
    if meta
        .get("finalizers")
        .is_some_and(|f| f.as_array().is_none_or(Vec::is_empty))
    {
        meta.remove("finalizers");
    }
    for key in ["labels", "annotations", "ownerReferences"] {
        if meta.get(key).is_some_and(Value::is_null) {
            meta.remove(key);
        }
    }
}

/// Server-set fields of a new object.
///
/// # Errors
/// 400 for a wrong kind or a set resourceVersion; 422 for a missing or bad name.
pub fn create(res: &Resource, mut object: Value, namespace: Option<&str>) -> ApiResult<Value> {
    if !object.is_object() {
        return Err(ApiError::bad_request("the object must be a JSON object"));
    }
    check_type(res, &object)?;
    // Custom resources are stored in the storage version (conversion `None` rewrites
    // apiVersion on read), so every served version reads the same bytes.
    object["apiVersion"] = Value::String(if res.custom {
        format!("{}/{}", res.group, res.storage_version)
    } else {
        res.api_version()
    });
    object["kind"] = Value::String(res.kind.clone());
    let meta = meta_mut(&mut object);
    if meta
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty())
    {
        // The real server's storage refuses it with a plain error, which the apiserver
        // answers as 500 without a reason (StatusReasonUnknown).
        return Err(ApiError::new(
            500,
            "",
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let mut name = meta
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty()
        && let Some(prefix) = meta.get("generateName").and_then(Value::as_str)
    {
        name = format!("{prefix}{}", random_suffix());
    }
    if name.is_empty() {
        return Err(ApiError::invalid_field(
            &res.group,
            &res.kind,
            "",
            "FieldValueRequired",
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    }
    let problems = name_errors(res, &name);
    if !problems.is_empty() {
        let causes = problems
            .into_iter()
            .map(|message| Cause {
                reason: "FieldValueInvalid".into(),
                field: "metadata.name".into(),
                message,
            })
            .collect();
        return Err(ApiError::invalid(&res.group, &res.kind, &name, causes));
    }
    meta.insert("name".into(), Value::String(name.clone()));
    match (res.namespaced, namespace) {
        (true, Some(ns)) => {
            if let Some(body_ns) = meta.get("namespace").and_then(Value::as_str)
                && !body_ns.is_empty()
                && body_ns != ns
            {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            meta.insert("namespace".into(), Value::String(ns.to_string()));
        }
        _ => {
            meta.remove("namespace");
        }
    }
    meta.insert(
        "uid".into(),
        Value::String(uuid::Uuid::new_v4().to_string()),
    );
    meta.insert("creationTimestamp".into(), Value::String(now()));
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("selfLink");
    meta.remove("resourceVersion");
    if tracks_generation(res) {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    normalize_finalizers(meta);
    if res.has_status
        && let Some(map) = object.as_object_mut()
    {
        map.remove("status");
    }
    builtin_on_write(res, &mut object, true);
    Ok(object)
}

/// What an update of `old` to `new` stores: immutable metadata kept, `.status` only through
/// `/status` (and only `.status` there), generation bumped on spec changes.
///
/// # Errors
/// 400 for a changed name or kind; 422 for new finalizers on a deleting object.
pub fn update(res: &Resource, old: &Value, mut new: Value, status_only: bool) -> ApiResult<Value> {
    if !new.is_object() {
        return Err(ApiError::new(
            422,
            "Invalid",
            "the patched object must be a JSON object",
        ));
    }
    check_type(res, &new)?;
    let name = old["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Some(new_name) = new["metadata"]["name"].as_str()
        && new_name != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    if status_only {
        let managed = new
            .get_mut("metadata")
            .and_then(|metadata| metadata.get_mut("managedFields"))
            .map_or(Value::Null, Value::take);
        let status = new.get_mut("status").map(Value::take);
        new = without_status(old);
        if let Some(map) = new.as_object_mut() {
            match status {
                Some(s) if !s.is_null() => {
                    map.insert("status".into(), s);
                }
                _ => {
                    map.remove("status");
                }
            }
        }
        if !managed.is_null() {
            meta_mut(&mut new).insert("managedFields".into(), managed);
        }
        return Ok(new);
    }
    new["apiVersion"] = old["apiVersion"].clone();
    new["kind"] = old["kind"].clone();
    if res.has_status
        && let Some(map) = new.as_object_mut()
    {
        match old.get("status") {
            Some(s) => map.insert("status".into(), s.clone()),
            None => map.remove("status"),
        };
    }
    let no_meta = Map::new();
    let old_meta = old["metadata"].as_object().unwrap_or(&no_meta);
    let meta = meta_mut(&mut new);
    for key in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
        "resourceVersion",
    ] {
        match old_meta.get(key) {
            Some(v) => meta.insert(key.into(), v.clone()),
            None => meta.remove(key),
        };
    }
    if !meta.contains_key("managedFields")
        && let Some(mf) = old_meta.get("managedFields")
    {
        meta.insert("managedFields".into(), mf.clone());
    }
    meta.remove("selfLink");
    normalize_finalizers(meta);
    if old_meta.contains_key("deletionTimestamp") {
        let before: Vec<&Value> = old_meta
            .get("finalizers")
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        let added: Vec<String> = meta
            .get("finalizers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter(|f| !before.contains(f))
                    .map(|f| f.as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default();
        if !added.is_empty() {
            return Err(ApiError::invalid_field(
                &res.group,
                &res.kind,
                &name,
                "FieldValueForbidden",
                "metadata.finalizers",
                format!(
                    "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                ),
            ));
        }
    }
    builtin_on_write(res, &mut new, false);
    if tracks_generation(res) && spec_changed(res, old, &new) {
        let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
        meta_mut(&mut new).insert("generation".into(), json!(generation));
    }
    Ok(new)
}

/// A copy of `old` without its `status` (a status write replaces it: copying it first was
/// a copy of the whole object where one without its status will do).
fn without_status(old: &Value) -> Value {
    match old {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(key, _)| key.as_str() != "status")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// What [`update`] reads of the body of a `/status` write: `apiVersion` and `kind`
/// (checked), `metadata.name` (checked), `metadata.managedFields` and `status` (taken).
/// A copy of those alone, not of the whole body: a status write sends the whole object,
/// and [`update`] drops everything else of it (plan 0016 C3: half the manager's writes
/// to Deployed are status writes).
#[must_use]
pub fn status_body(body: &Value) -> Value {
    let Value::Object(members) = body else {
        return body.clone();
    };
    let mut kept = Map::new();
    for key in ["apiVersion", "kind", "status"] {
        if let Some(value) = members.get(key) {
            kept.insert(key.to_owned(), value.clone());
        }
    }
    if let Some(Value::Object(metadata)) = members.get("metadata") {
        let mut meta = Map::new();
        for key in ["name", "managedFields"] {
            if let Some(value) = metadata.get(key) {
                meta.insert(key.to_owned(), value.clone());
            }
        }
        kept.insert("metadata".to_owned(), Value::Object(meta));
    }
    Value::Object(kept)
}

/// Whether anything outside metadata (and status, with a status subresource) changed.
#[must_use]
pub fn spec_changed(res: &Resource, old: &Value, new: &Value) -> bool {
    let skipped = |key: &str| key == "metadata" || (res.has_status && key == "status");
    !members_equal(old, new, skipped, |_, before, after| before == after)
}

/// Whether `new` equals `old` once managedFields timestamps are ignored (a no-op write).
///
/// Compares in place (no copy of either object): metadata without its resourceVersion,
/// each managedFields entry without its time.
#[must_use]
pub fn is_noop(old: &Value, new: &Value) -> bool {
    if !(old.is_object() && new.is_object()) {
        return old == new;
    }
    members_equal(
        old,
        new,
        |_| false,
        |key, before, after| {
            if key == "metadata" {
                metadata_equal(before, after)
            } else {
                before == after
            }
        },
    )
}

/// `metadata` members equal but for resourceVersion and the managedFields' times.
fn metadata_equal(old: &Value, new: &Value) -> bool {
    if !(old.is_object() && new.is_object()) {
        return old == new;
    }
    members_equal(
        old,
        new,
        |key| key == "resourceVersion",
        |key, before, after| match (key, before, after) {
            ("managedFields", Value::Array(before), Value::Array(after)) => {
                before.len() == after.len()
                    && before.iter().zip(after).all(|(b, a)| {
                        if b.is_object() && a.is_object() {
                            members_equal(b, a, |key| key == "time", |_, b, a| b == a)
                        } else {
                            b == a
                        }
                    })
            }
            _ => before == after,
        },
    )
}

/// Whether two values' members are equal under `equal`, members for which `skipped`
/// holds left out; a value that is not an object has no members.
fn members_equal(
    old: &Value,
    new: &Value,
    skipped: impl Fn(&str) -> bool,
    equal: impl Fn(&str, &Value, &Value) -> bool,
) -> bool {
    let no_members = Map::new();
    let old = old.as_object().unwrap_or(&no_members);
    let new = new.as_object().unwrap_or(&no_members);
    let kept = |members: &Map<String, Value>| members.keys().filter(|k| !skipped(k)).count();
    kept(old) == kept(new)
        && old
            .iter()
            .filter(|(key, _)| !skipped(key))
            .all(|(key, before)| new.get(key).is_some_and(|after| equal(key, before, after)))
}

/// Built-in conversions: secrets' `stringData` folds into base64 `data`; namespaces get
/// their phase and `kubernetes` finalizer; workloads get upstream's API defaults.
pub fn builtin_on_write(res: &Resource, object: &mut Value, creating: bool) {
    if !res.custom {
        super::defaults::apply(&res.group, &res.plural, object);
    }
    match (res.group.as_str(), res.plural.as_str()) {
        ("", "secrets") => {
            // A stringData that is not a map of strings stays, for the typed decoding to
            // refuse (400), as the real server does.
            let foldable = object["stringData"]
                .as_object()
                .is_some_and(|m| m.values().all(Value::is_string));
            if let Some(Value::Object(string_data)) = object
                .as_object_mut()
                .filter(|_| foldable)
                .and_then(|m| m.remove("stringData"))
            {
                if !object["data"].is_object() {
                    object["data"] = json!({});
                }
                for (k, v) in string_data {
                    let text = v.as_str().unwrap_or_default();
                    object["data"][k] =
                        Value::String(base64::engine::general_purpose::STANDARD.encode(text));
                }
            }
            if object["type"].is_null() {
                object["type"] = json!("Opaque");
            }
        }
        ("", "namespaces") if creating => {
            object["spec"] = json!({"finalizers": ["kubernetes"]});
            object["status"] = json!({"phase": "Active"});
            let name = object["metadata"]["name"].clone();
            let labels = meta_mut(object)
                .entry("labels")
                .or_insert_with(|| json!({}));
            if labels.is_object() {
                labels["kubernetes.io/metadata.name"] = name;
            }
        }
        _ => {}
    }
}

/// How unknown fields are treated (`fieldValidation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Dropped silently.
    Ignore,
    /// Dropped with a warning.
    Warn,
    /// Rejected.
    Strict,
}

impl FieldValidation {
    /// From the query parameter (default Warn, as the real server).
    #[must_use]
    pub fn from_param(param: Option<&str>) -> Self {
        match param {
            Some("Strict") => Self::Strict,
            Some("Ignore") => Self::Ignore,
            _ => Self::Warn,
        }
    }
}

/// Schema work: a custom resource's defaults, pruning and validation; a built-in kind's
/// decoding through its type ([`crate::schema::typed_pass`]).
///
/// `old` is the stored object on update, with its
/// [`crate::store::StoredObject::schema_mark`]. An update of content this very schema
/// made (same mark) walks only the top-level fields that changed (`status` for a status
/// write, none but `metadata`'s pruning for a finalizer): defaulting and pruning an
/// unchanged field would change nothing, and validation, which ratchets every unchanged
/// value as kube-apiserver does (CRDValidationRatcheting, on by default since 1.30),
/// would find nothing there, when no rule reads across fields from the root and no
/// transition rule could fail on an unchanged value
/// ([`crate::schema::CrdSchema::update_pass`]). A write through another schema (another
/// served version, or the CRD changed since) gets the whole pass, whose validation
/// ratchets unchanged values too.
///
/// # Errors
/// 400 BadRequest for unknown fields under Strict (as the real server); 422 Invalid for
/// schema violations; for built-in kinds, what [`crate::schema::typed_pass`] says.
pub fn schema_pass(
    res: &Resource,
    object: &mut Value,
    old: Option<(&Value, u32)>,
    validation: FieldValidation,
    write: WriteKind,
) -> ApiResult<Vec<String>> {
    if let Some(typed) = &res.typed {
        return crate::schema::typed_pass(res, typed, object, validation, write);
    }
    let Some(schema) = &res.schema else {
        return Ok(Vec::new());
    };
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if let Some((old, mark)) = old
        && mark == schema.mark()
        && let Some((pruned, causes)) = schema.update_pass(object, old)
    {
        let warnings = unknown_field_warnings(&pruned, validation)?;
        if !causes.is_empty() {
            return Err(ApiError::invalid(&res.group, &res.kind, &name, causes));
        }
        return Ok(warnings);
    }
    let old = old.map(|(old, _)| old);
    schema.apply_defaults(object);
    let pruned = schema.prune(object);
    let warnings = unknown_field_warnings(&pruned, validation)?;
    let causes: Vec<Cause> = schema.validate(object, old);
    if !causes.is_empty() {
        return Err(ApiError::invalid(&res.group, &res.kind, &name, causes));
    }
    Ok(warnings)
}

/// What the pruned unknown fields make of a write: a 400 under Strict, warnings under Warn.
///
/// # Errors
/// 400 BadRequest under Strict when any field was pruned.
fn unknown_field_warnings(
    pruned: &[String],
    validation: FieldValidation,
) -> ApiResult<Vec<String>> {
    let mut warnings = Vec::new();
    if !pruned.is_empty() {
        match validation {
            FieldValidation::Strict => {
                let list = pruned
                    .iter()
                    .map(|p| format!("unknown field {p:?}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(ApiError::bad_request(format!(
                    "strict decoding error: {list}"
                )));
            }
            FieldValidation::Warn => {
                warnings.extend(pruned.iter().map(|p| format!("unknown field {p:?}")))
            }
            FieldValidation::Ignore => {}
        }
    }
    Ok(warnings)
}

#[cfg(test)]
#[path = "prepare_tests.rs"]
mod tests;
