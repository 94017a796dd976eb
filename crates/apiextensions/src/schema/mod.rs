//! [`StructuralSchema`]: a CRD version's schema and what the server does with it.

mod cel;
mod cel_check;
mod cel_functions;
mod cel_values;
mod correlate;
mod defaults;
mod embedded;
mod extensions;
mod formats;
mod listtype;
mod parse;
mod path;
mod prune;
mod validate;

use std::sync::Arc;

use serde_json::Value;

use crate::error::{BadValue, FieldError, FieldErrorKind, SchemaError};
use correlate::{old_item, old_property};
use parse::{Node, Position};
use path::Path;

/// The list semantics server-side apply uses for a list (`x-kubernetes-list-type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Replaced as a whole (the default).
    Atomic,
    /// Merged as a set of scalars.
    Set,
    /// Merged by the values of these key fields.
    Map(Vec<String>),
}

/// A CRD version's structural schema, parsed once when the CRD is registered. Cloning is
/// cheap (the parsed tree is shared) and the schema is `Send + Sync`.
#[derive(Debug, Clone)]
pub struct StructuralSchema {
    root: Arc<Node>,
    has_rules: bool,
    metadata_only_updates_pass: bool,
    /// [`StructuralSchema::update_pass`] applies.
    keyed_updates: bool,
}

/// What [`StructuralSchema::update_pass`] found.
#[derive(Debug, Clone, Default)]
pub struct UpdatePass {
    /// The paths of the unknown fields removed, as [`StructuralSchema::prune`] returns them.
    pub pruned: Vec<String>,
    /// The field errors, as [`StructuralSchema::validate`] returns them.
    pub errors: Vec<FieldError>,
}

/// Field error types that stop CEL rules from running (`hasBlockingErr` in the CR strategy).
const BLOCKING: &[FieldErrorKind] = &[
    FieldErrorKind::Unsupported,
    FieldErrorKind::Required,
    FieldErrorKind::TooLong,
    FieldErrorKind::TooMany,
    FieldErrorKind::TypeInvalid,
];

impl StructuralSchema {
    /// Parses `openAPIV3Schema`; error paths start at `openAPIV3Schema`.
    ///
    /// # Errors
    /// [`SchemaError::Invalid`] when the schema is not structural (e.g. a property without
    /// `type`), has an invalid `pattern`, list-type or CEL rule that does not compile.
    pub fn from_value(schema: &Value) -> Result<Self, SchemaError> {
        Self::from_value_at(schema, "openAPIV3Schema")
    }

    /// Like [`Self::from_value`], with error paths under `path`, e.g.
    /// `spec.versions[0].schema.openAPIV3Schema` as the real server reports them.
    ///
    /// # Errors
    /// As [`Self::from_value`].
    pub fn from_value_at(schema: &Value, path: &str) -> Result<Self, SchemaError> {
        let mut errors = Vec::new();
        let root = parse::parse(schema, path, Position::Root, &mut errors);
        if errors.is_empty() {
            extensions::check_completeness(&root, path, &mut errors);
            extensions::check_old_self(&root, path, None, &mut errors);
            cel_check::check_rules(&root, path, true, &mut errors);
            for property in ["metadata", "apiVersion", "kind"] {
                if let Some(node) = root.properties.get(property) {
                    let at = format!("{path}.properties[{property}]");
                    extensions::check_top_level_meta_defaults(node, property, &at, &mut errors);
                }
            }
        }
        if errors.is_empty() {
            // the root is a resource: defaults under its metadata/apiVersion/kind are ObjectMeta's
            for (key, prop) in &root.properties {
                let meta = matches!(key.as_str(), "metadata" | "apiVersion" | "kind");
                defaults::check(
                    prop,
                    &format!("{path}.properties[{key}]"),
                    meta,
                    &mut errors,
                );
            }
        }
        if !errors.is_empty() {
            return Err(SchemaError::Invalid(errors));
        }
        let has_rules = has_rules(&root);
        let metadata_only_updates_pass = metadata_only_updates_pass(&root);
        let keyed_updates = metadata_only_updates_pass
            && !root.preserve_unknown_fields
            && root.enumeration.is_none();
        Ok(Self {
            root: Arc::new(root),
            has_rules,
            metadata_only_updates_pass,
            keyed_updates,
        })
    }

    /// The schema as written (for OpenAPI publication).
    #[must_use]
    pub fn raw(&self) -> &Value {
        &self.root.raw
    }

    /// Applies `default`s: only to keys missing (or non-nullable `null`) in objects that
    /// exist, never creating absent parents; defaults under `items` and
    /// `additionalProperties` apply to each element. The real server runs this on write
    /// (after decoding the request) and on read (after decoding from storage).
    pub fn apply_defaults(&self, object: &mut Value) {
        defaults::apply(object, &self.root);
    }

    /// Removes fields the schema does not know and returns their paths (`spec.foo`,
    /// `spec.list[0].bar`, `metadata.foo`), for `fieldValidation=Strict`
    /// (`unknown field "spec.foo"`) and `Warn`.
    ///
    /// # Guarantees
    /// Keeps subtrees under `x-kubernetes-preserve-unknown-fields`; at the root and in
    /// `x-kubernetes-embedded-resource` objects keeps `apiVersion`, `kind` and `metadata`,
    /// whose keys are limited to ObjectMeta fields; drops `null`s of non-nullable fields
    /// without a default, as the real server does right after pruning.
    pub fn prune(&self, object: &mut Value) -> Vec<String> {
        prune::prune_resource(object, &self.root)
    }

    /// Validates an object (after defaulting and pruning): OpenAPI value validations, then
    /// list-type uniqueness, then `x-kubernetes-validations` CEL rules (skipped, with one
    /// error saying so, when an earlier error is of a blocking type, like the real server).
    ///
    /// `old` is the stored object on update (None on create): rules using `oldSelf` run only
    /// where the old value exists and correlates (object fields, map values, items of
    /// list-type map lists), and unchanged values are not re-validated (ratcheting).
    #[must_use]
    pub fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut errors = Vec::new();
        validate::validate_value(&self.root, &Path::ROOT, object, old, &mut errors);
        if let Value::Object(map) = object {
            for (key, child) in map {
                if let Some(prop) = self.root.properties.get(key) {
                    embedded::validate(prop, &Path::Text(key), child, &mut errors);
                }
            }
        }
        if let Value::Object(map) = object {
            let old_lists_ok = match old.and_then(Value::as_object) {
                None => true,
                Some(old_map) => {
                    let mut old_errors = Vec::new();
                    listtype::validate_object(&self.root, &Path::ROOT, old_map, &mut old_errors);
                    old_errors.is_empty()
                }
            };
            if old_lists_ok {
                listtype::validate_object(&self.root, &Path::ROOT, map, &mut errors);
            }
        }
        if self.has_rules && !rules_blocked(&mut errors) {
            cel::with_context(|ctx| {
                cel_walk(
                    ctx,
                    &self.root,
                    &Path::ROOT,
                    object,
                    old,
                    false,
                    &mut errors,
                )
            });
        }
        errors
    }

    /// Whether an update that changes nothing but `metadata` (a finalizer, a label, an
    /// ownerReference, deletionTimestamp, managedFields) passes this schema whenever the
    /// rest of the object is the stored one that this schema defaulted, pruned and
    /// validated. Then [`Self::apply_defaults`] and [`Self::prune`] change nothing outside
    /// `metadata` and [`Self::validate`] finds nothing, so a server may skip them and only
    /// prune `metadata`, which [`Self::update_pass`] does (with nothing else changed it
    /// walks no other field).
    ///
    /// That holds when validation ratcheting (CRDValidationRatcheting, on by default since
    /// Kubernetes 1.30) passes every unchanged value and nothing of the schema reads
    /// `metadata`: no CEL rule on the root (a rule sees its object's children, and the
    /// root's include `self.metadata`), no allOf/anyOf/oneOf/not or additionalProperties on
    /// the root, a `metadata` schema of no more than its `type`, and every transition rule
    /// one that holds on an unchanged value (`self == oldSelf`): ratcheting skips only the
    /// rules without `oldSelf`; transition rules run on unchanged values too.
    #[must_use]
    pub fn passes_metadata_only_updates(&self) -> bool {
        self.metadata_only_updates_pass
    }

    /// Defaulting, pruning and validation of an update, `old` being the stored object that
    /// this schema made (defaulted, pruned and validated): the top-level fields equal to
    /// `old`'s are not walked, and `metadata` is only pruned. The answer is what
    /// [`Self::apply_defaults`], [`Self::prune`] and [`Self::validate`] with `old` would
    /// give: on an unchanged field defaulting and pruning change nothing and validation,
    /// which ratchets, finds nothing, when [`Self::passes_metadata_only_updates`] holds (no
    /// rule on the root, which sees every field; transition rules on unchanged values
    /// hold). A changed field is walked whole, its rules seeing its old value.
    ///
    /// None (walk the whole object) when that does not hold, when the root keeps unknown
    /// fields or has an `enum`, or when either value is not an object.
    pub fn update_pass(&self, object: &mut Value, old: &Value) -> Option<UpdatePass> {
        if !self.keyed_updates {
            return None;
        }
        let (Value::Object(new_map), Value::Object(old_map)) = (&*object, old) else {
            return None;
        };
        let changed: Vec<String> = new_map
            .iter()
            .filter(|(key, value)| *key != "metadata" && old_map.get(*key) != Some(*value))
            .map(|(key, _)| key.clone())
            .chain(
                old_map
                    .keys()
                    .filter(|key| *key != "metadata" && !new_map.contains_key(*key))
                    .cloned(),
            )
            .collect();
        defaults::apply_keys(object, &self.root, &changed);
        let pruned = prune::prune_resource_keys(object, &self.root, &changed);
        let errors = if changed.is_empty() {
            Vec::new()
        } else {
            self.validate_keys(object, old, &changed)
        };
        Some(UpdatePass { pruned, errors })
    }

    /// [`Self::validate`] of an update whose top-level fields other than `changed` are
    /// `old`'s, which this schema made (see [`Self::update_pass`]).
    fn validate_keys(&self, object: &Value, old: &Value, changed: &[String]) -> Vec<FieldError> {
        let mut errors = Vec::new();
        // The root's own checks run (its value changed); an unchanged field returns at its
        // ratcheting compare.
        validate::validate_value(&self.root, &Path::ROOT, object, Some(old), &mut errors);
        let Value::Object(map) = object else {
            return errors;
        };
        let changed_fields = || map.iter().filter(|(key, _)| changed.contains(key));
        for (key, child) in changed_fields() {
            if let Some(prop) = self.root.properties.get(key) {
                embedded::validate(prop, &Path::Text(key), child, &mut errors);
            }
        }
        let mut list_errors = Vec::new();
        listtype::validate_keys(&self.root, map, changed, &mut list_errors);
        // List errors count only when the old object had none (anywhere, as in validate).
        if !list_errors.is_empty()
            && let Value::Object(old_map) = old
        {
            let mut old_errors = Vec::new();
            listtype::validate_object(&self.root, &Path::ROOT, old_map, &mut old_errors);
            if old_errors.is_empty() {
                errors.append(&mut list_errors);
            }
        }
        if self.has_rules && !rules_blocked(&mut errors) {
            // The root has no rules; an unchanged field's would find nothing.
            cel::with_context(|ctx| {
                for (key, child) in changed_fields() {
                    if let Some(prop) = self.root.properties.get(key) {
                        let old_child = old_property(Some(old), key);
                        cel_walk(
                            ctx,
                            prop,
                            &Path::Text(key),
                            child,
                            old_child,
                            false,
                            &mut errors,
                        );
                    }
                }
            });
        }
        errors
    }

    /// `x-kubernetes-list-type` of the list at `path` (field names from the root; list
    /// elements add nothing to the path), for server-side apply. Atomic when unknown.
    #[must_use]
    pub fn list_type(&self, path: &[&str]) -> ListType {
        let Some(node) = self.node_at(path) else {
            return ListType::Atomic;
        };
        match node.list_type.as_deref() {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(node.list_map_keys.clone()),
            _ => ListType::Atomic,
        }
    }

    /// Whether the object at `path` is `x-kubernetes-map-type: atomic` (replaced as a whole
    /// by server-side apply) rather than granular.
    #[must_use]
    pub fn is_atomic_map(&self, path: &[&str]) -> bool {
        self.node_at(path).is_some_and(|n| {
            n.raw.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic")
        })
    }

    /// The sub-schema (as written) at a path of field names, for `kubectl explain`.
    #[must_use]
    pub fn sub_schema(&self, path: &[&str]) -> Option<&Value> {
        self.node_at(path).map(|n| &n.raw)
    }

    fn node_at(&self, path: &[&str]) -> Option<&Node> {
        let mut node: &Node = &self.root;
        for segment in path {
            while let Some(items) = node.items.as_deref() {
                node = items;
            }
            node = node.child(segment)?;
        }
        Some(node)
    }
}

fn has_rules(node: &Node) -> bool {
    !node.rules.is_empty()
        || node.properties.values().any(has_rules)
        || node.additional_properties.as_deref().is_some_and(has_rules)
        || node.items.as_deref().is_some_and(has_rules)
}

/// Whether `errors` hold one that stops CEL rules (`hasBlockingErr` in the CR
/// strategy); if so, adds the note kube-apiserver gives that the rules were not checked.
fn rules_blocked(errors: &mut Vec<FieldError>) -> bool {
    let blocked = errors.iter().any(|e| BLOCKING.contains(&e.kind));
    if blocked {
        errors.push(FieldError::invalid(
            "<nil>",
            BadValue::Json(&Value::Null),
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ));
    }
    blocked
}

/// See [`StructuralSchema::passes_metadata_only_updates`].
fn metadata_only_updates_pass(root: &Node) -> bool {
    let bare_metadata = root.properties.get("metadata").is_none_or(|meta| {
        meta.raw
            .as_object()
            .is_some_and(|m| m.keys().all(|k| k == "type" || k == "description"))
    });
    root.rules.is_empty()
        && root.all_of.is_empty()
        && root.any_of.is_empty()
        && root.one_of.is_empty()
        && root.not.is_none()
        && root.additional_properties.is_none()
        && !root.additional_properties_any
        && bare_metadata
        && transition_rules_hold_when_unchanged(root)
}

/// Whether every transition rule under `node` is `self == oldSelf` (or `oldSelf == self`),
/// which holds on an unchanged value (JSON has no NaN), and none is `optionalOldSelf`.
fn transition_rules_hold_when_unchanged(node: &Node) -> bool {
    let holds = |rule: &cel::CompiledRule| {
        if !rule.uses_old_self {
            return true;
        }
        let text: String = rule.rule.split_whitespace().collect();
        !rule.optional_old_self && (text == "self==oldSelf" || text == "oldSelf==self")
    };
    let children = [&node.additional_properties, &node.items];
    node.rules.iter().all(holds)
        && node
            .properties
            .values()
            .all(transition_rules_hold_when_unchanged)
        && children
            .into_iter()
            .flatten()
            .all(|child| transition_rules_hold_when_unchanged(child))
        && node
            .all_of
            .iter()
            .chain(&node.any_of)
            .chain(&node.one_of)
            .chain(node.not.as_deref())
            .all(transition_rules_hold_when_unchanged)
}

fn cel_walk(
    ctx: &kube_cel::cel::Context<'_>,
    node: &Node,
    path: &Path<'_>,
    value: &Value,
    old: Option<&Value>,
    parent_unchanged: bool,
    errors: &mut Vec<FieldError>,
) {
    if value.is_null() {
        return;
    }
    // ratcheting looks at the nearest correlatable value (`ratchetingOptions`)
    let unchanged = match old {
        Some(o) => o == value,
        None => parent_unchanged,
    };
    if !node.rules.is_empty() {
        cel::evaluate_rules(ctx, node, &path.to_string(), value, old, unchanged, errors);
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let old_child = old_property(old, key);
                if let Some(prop) = node.properties.get(key) {
                    cel_walk(
                        ctx,
                        prop,
                        &path.field(key),
                        child,
                        old_child,
                        unchanged,
                        errors,
                    );
                } else if let Some(values) = node.additional_properties.as_deref() {
                    cel_walk(
                        ctx,
                        values,
                        &path.key(key),
                        child,
                        old_child,
                        unchanged,
                        errors,
                    );
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_node) = node.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    let old_child = old_item(node, old, item);
                    cel_walk(
                        ctx,
                        item_node,
                        &path.index(i),
                        item,
                        old_child,
                        unchanged,
                        errors,
                    );
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod cel_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_paths;
