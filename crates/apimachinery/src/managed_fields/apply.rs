//! Server-side apply (`Updater.Apply` of structured-merge-diff plus the apiserver's
//! bookkeeping).

use serde_json::{Map, Value};

use super::entries::{self, APPLY, ManagedEntry};
use super::fieldset::{FieldSet, display_path};
use super::stored::{self, Entry};
use super::walk::{self, Schema};
use super::{ApplyError, Conflict, SchemaTypes};

/// Applies `config` (the parsed apply body: apiVersion, kind, metadata.name and the fields
/// the manager wants) onto `live` (`None` when the object does not exist yet) and returns
/// the new object with `metadata.managedFields` updated.
///
/// - The configuration merges into the live object: maps per member, lists whole unless
///   the schema makes them sets or list-maps (merged per value / per key).
/// - The manager's Apply entry (per subresource) becomes exactly the configuration's fields.
/// - Fields its previous Apply owned and this one omits are removed from the object,
///   unless another manager owns them too (then they are only disowned).
/// - A field the apply changes (or adds) that another manager owns is a conflict; with
///   `force` the field moves to this manager instead.
/// - Fields the apply removes are dropped from every other manager.
///
/// `now` is the RFC 3339 time written into the manager's entry when the object changes.
///
/// # Errors
/// [`ApplyError::Conflicts`] without `force` when other managers own changed fields;
/// [`ApplyError::Invalid`] for a body that is not an object, carries
/// `metadata.managedFields`, or has list-map items without keys or with duplicate keys.
pub fn apply(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    subresource: Option<&str>,
    force: bool,
    types: &dyn SchemaTypes,
    now: &str,
) -> Result<Value, ApplyError> {
    apply_keeping(live, config, manager, subresource, force, types, now, true)
}

/// [`apply`], keeping the stored entries of other managers the apply does not touch as
/// stored when `keep_untouched` (always, but in the tests that hold its answer to
/// re-encoding them).
#[allow(clippy::too_many_arguments)] // apply's arguments and the tests' switch
pub(super) fn apply_keeping(
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    subresource: Option<&str>,
    force: bool,
    types: &dyn SchemaTypes,
    now: &str,
    keep_untouched: bool,
) -> Result<Value, ApplyError> {
    let schema = Schema::new(types);
    if !config.is_object() {
        return Err(ApplyError::Invalid(
            "apply configuration must be a JSON or YAML object".to_owned(),
        ));
    }
    // Go's check is `GetManagedFields() != nil`: `null` passes, `[]` does not.
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|fields| !fields.is_null())
    {
        return Err(ApplyError::Invalid(
            "metadata.managedFields must be nil".to_owned(),
        ));
    }
    let config = without_nulls(config);
    let live_object = live.map_or_else(
        || Value::Object(Map::new()),
        entries::without_managed_fields,
    );
    let mut others: Vec<Entry<'_>> = match live {
        Some(live) if keep_untouched => stored::decode(live),
        Some(live) => entries::decode(live)
            .into_iter()
            .map(Entry::decoded)
            .collect(),
        None => Vec::new(),
    };

    let applied = walk::field_set(&config, &schema).map_err(ApplyError::Invalid)?;
    let mut merged = walk::merge(&live_object, &config, &schema);

    let own = ManagedEntry {
        manager: manager.to_owned(),
        operation: APPLY.to_owned(),
        api_version: api_version(&config),
        subresource: subresource.unwrap_or_default().to_owned(),
        time: None,
        fields: applied,
    };
    let previous = others
        .iter()
        .position(|entry| entry.same_identity(&own))
        .map(|position| others.remove(position).into_decoded());

    // Prune what this manager applied before, omits now and nobody else owns.
    if let Some(previous) = &previous {
        let orphaned: FieldSet = previous
            .fields
            .iter()
            .filter(|path| !owned_by_anyone(path, &others, &own.fields))
            .cloned()
            .collect();
        walk::remove_items(&mut merged, &orphaned);
    }
    drop_empty_metadata(&mut merged);

    let comparison = walk::compare(&live_object, &merged, &schema);
    let changed = comparison.added.union(&comparison.modified);
    let conflicts: Vec<Conflict> = others
        .iter()
        .flat_map(|entry| {
            let names = entry.names();
            entry
                .owned_of(&changed)
                .into_iter()
                .map(|path| Conflict {
                    manager: names.manager.clone(),
                    field: display_path(path),
                    described_manager: names.describe(),
                })
                .collect::<Vec<_>>()
        })
        .collect();
    if !conflicts.is_empty() && !force {
        return Err(ApplyError::Conflicts(conflicts));
    }
    for entry in &mut others {
        entry.remove_all(&changed, &comparison.removed);
    }

    let unchanged = live.is_some() && merged == live_object;
    let time = match previous {
        Some(previous) if unchanged && previous.time.is_some() => previous.time,
        _ => Some(now.to_owned()),
    };
    others.push(Entry::decoded(ManagedEntry { time, ..own }));
    stored::encode(&mut merged, others);
    Ok(merged)
}

/// Whether some manager owns the node: the path itself, or (for a field, not a list item)
/// something below it, as `EnsureNamedFieldsAreMembers` makes parent fields owned.
fn owned_by_anyone(path: &[String], others: &[Entry<'_>], own: &FieldSet) -> bool {
    let is_field = path.last().is_some_and(|element| element.starts_with("f:"));
    others
        .iter()
        .any(|entry| entry.contains(path) || (is_field && entry.has_descendant(path)))
        || own.contains(path)
        || (is_field && own.has_descendant(path))
}

fn api_version(object: &Value) -> String {
    object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The configuration without `null` members, recursively (see the module's assumptions).
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(_, child)| !child.is_null())
                .map(|(name, child)| (name.clone(), without_nulls(child)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        scalar => scalar.clone(),
    }
}

/// ObjectMeta omits empty labels, annotations, finalizers and ownerReferences; pruning
/// the last key must not leave `labels: {}` behind.
fn drop_empty_metadata(object: &mut Value) {
    let Some(Value::Object(metadata)) = object.get_mut("metadata") else {
        return;
    };
    for name in ["labels", "annotations", "finalizers", "ownerReferences"] {
        let empty = match metadata.get(name) {
            Some(Value::Object(members)) => members.is_empty(),
            Some(Value::Array(items)) => items.is_empty(),
            _ => false,
        };
        if empty {
            metadata.remove(name);
        }
    }
}
