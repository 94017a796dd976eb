//! The schema-aware walks of structured-merge-diff over JSON values: the field set of a
//! value, the comparison of two values, the merge of an apply configuration into a live
//! object, and the removal of owned items.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::fieldset::{Element, FieldPath, FieldSet, field, index, map_key, set_value};
use super::{ListType, SchemaTypes};

/// Metadata fields the server manages itself: never tracked (stripMetaManager).
const UNTRACKED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "clusterName",
];

/// Whether a path (or anything below it) is left out of field sets.
fn untracked(path: &[Element]) -> bool {
    match path {
        [only] => only == "f:apiVersion" || only == "f:kind",
        [first, second, ..] if first == "f:metadata" => second
            .strip_prefix("f:")
            .is_some_and(|name| UNTRACKED_METADATA.contains(&name)),
        _ => false,
    }
}

/// `metadata` itself is never a member (the server strips it), only fields below it.
fn container_only(path: &[Element]) -> bool {
    matches!(path, [only] if only == "f:metadata")
}

/// The schema answers plus the rules ObjectMeta carries for every kind.
pub(crate) struct Schema<'a> {
    types: &'a dyn SchemaTypes,
}

impl<'a> Schema<'a> {
    pub(crate) fn new(types: &'a dyn SchemaTypes) -> Self {
        Self { types }
    }

    fn list_type(&self, names: &[&str]) -> ListType {
        match names {
            ["metadata", "finalizers"] => ListType::Set,
            ["metadata", "ownerReferences"] => ListType::Map(vec!["uid".to_owned()]),
            _ => self.types.list_type(names),
        }
    }

    fn map_is_atomic(&self, names: &[&str]) -> bool {
        if names.is_empty() || (names.len() <= 2 && names[0] == "metadata") {
            return false;
        }
        self.types.map_is_atomic(names)
    }
}

/// The path element of a list item, `strict` for an apply configuration (every key field
/// required), lenient for stored objects (missing keys fall back to the position).
fn element_of(
    list_type: &ListType,
    item: &Value,
    position: usize,
    strict: bool,
) -> Result<Element, String> {
    match list_type {
        ListType::Map(keys) => {
            let mut present = Vec::new();
            for key in keys {
                match item.get(key) {
                    Some(value) if !value.is_null() => present.push((key.as_str(), value)),
                    _ if strict => {
                        return Err(format!(
                            "associative list with keys has an element that omits key field {key:?} (and doesn't have default value)"
                        ));
                    }
                    _ => {}
                }
            }
            if present.is_empty() {
                Ok(index(position))
            } else {
                Ok(map_key(&present))
            }
        }
        _ => Ok(set_value(item)),
    }
}

/// Items of a granular list by path element, in order; duplicates keep the first.
fn index_items<'v>(
    list_type: &ListType,
    items: &'v [Value],
    strict: bool,
    path: &[Element],
) -> Result<Vec<(Element, &'v Value)>, String> {
    let mut seen = BTreeMap::new();
    let mut indexed = Vec::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        let element = element_of(list_type, item, position, strict)?;
        if seen.insert(element.clone(), ()).is_some() {
            if strict {
                return Err(format!(
                    "{}: duplicate entries for key {}",
                    super::fieldset::display_path(path),
                    super::fieldset::display_path(std::slice::from_ref(&element))
                ));
            }
            continue;
        }
        indexed.push((element, item));
    }
    Ok(indexed)
}

/// Walk state: the encoded path and the field names (list elements add none), the names
/// borrowed from the values walked (a copy of each name entered was an allocation per
/// node, and each schema question built a list of them again: plan 0016 C3).
#[derive(Default)]
struct Position<'v> {
    path: FieldPath,
    names: Vec<&'v str>,
}

impl<'v> Position<'v> {
    fn enter_field(&mut self, name: &'v str) {
        self.path.push(field(name));
        self.names.push(name);
    }
    fn leave_field(&mut self) {
        self.path.pop();
        self.names.pop();
    }
}

/// The fields a value sets (`ToFieldSet`): scalars and atomic values as leaves, granular
/// maps through their members only, list-map and set elements as members themselves.
///
/// # Errors
/// A list-map element without its keys, or two elements with the same keys.
pub(crate) fn field_set(value: &Value, schema: &Schema<'_>) -> Result<FieldSet, String> {
    let mut paths = Vec::new();
    let mut position = Position::default();
    collect_fields(value, &mut position, schema, &mut paths, false)?;
    Ok(FieldSet::from_paths(paths))
}

fn collect_fields<'v>(
    value: &'v Value,
    at: &mut Position<'v>,
    schema: &Schema<'_>,
    paths: &mut Vec<FieldPath>,
    element: bool,
) -> Result<(), String> {
    match value {
        Value::Object(members) if element || !schema.map_is_atomic(&at.names) => {
            for (name, child) in members {
                at.enter_field(name);
                if !untracked(&at.path) {
                    collect_fields(child, at, schema, paths, false)?;
                }
                at.leave_field();
            }
        }
        Value::Array(items) => match schema.list_type(&at.names) {
            ListType::Atomic => paths.push(at.path.clone()),
            list_type => {
                for (element, item) in index_items(&list_type, items, true, &at.path)? {
                    at.path.push(element);
                    paths.push(at.path.clone());
                    if matches!(list_type, ListType::Map(_)) {
                        collect_fields(item, at, schema, paths, true)?;
                    }
                    at.path.pop();
                }
            }
        },
        _ => paths.push(at.path.clone()),
    }
    Ok(())
}

/// What changed between two values, in field-set terms (`Compare`).
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    /// Nodes present only in the new value (containers and everything below them).
    pub added: FieldSet,
    /// Leaves present in both with different values.
    pub modified: FieldSet,
    /// Nodes present only in the old value.
    pub removed: FieldSet,
}

pub(crate) fn compare<'v>(old: &'v Value, new: &'v Value, schema: &Schema<'_>) -> Comparison {
    let mut found = Found::default();
    let mut position = Position::default();
    compare_at(
        Some(old),
        Some(new),
        &mut position,
        schema,
        &mut found,
        false,
    );
    Comparison {
        added: FieldSet::from_paths(found.added),
        modified: FieldSet::from_paths(found.modified),
        removed: FieldSet::from_paths(found.removed),
    }
}

/// The paths of a [`Comparison`] as the walk finds them, made sets at the end
/// ([`FieldSet::from_paths`]).
#[derive(Default)]
struct Found {
    added: Vec<FieldPath>,
    modified: Vec<FieldPath>,
    removed: Vec<FieldPath>,
}

fn compare_at<'v>(
    old: Option<&'v Value>,
    new: Option<&'v Value>,
    at: &mut Position<'v>,
    schema: &Schema<'_>,
    out: &mut Found,
    element: bool,
) {
    // Equal values hold no change at any depth: no walk below them (a write usually
    // changes a few fields of an object, and the walk's paths and schema lookups cost
    // far more than an equality test that stops at the first difference).
    if let (Some(before), Some(after)) = (old, new)
        && before == after
    {
        return;
    }
    match (old, new) {
        (None, None) => return,
        (None, Some(_)) if !container_only(&at.path) => out.added.push(at.path.clone()),
        (Some(_), None) if !container_only(&at.path) => out.removed.push(at.path.clone()),
        _ => {}
    }
    let shape = |value: Option<&Value>| match value {
        Some(Value::Object(_)) => 1,
        Some(Value::Array(_)) => 2,
        Some(_) => 3,
        None => 0,
    };
    if old.is_some() && new.is_some() && shape(old) != shape(new) {
        // A changed kind of value: the node is modified, whatever was below the old
        // value is removed and whatever is below the new one added (structured-merge-diff
        // walks each side on its own).
        out.modified.push(at.path.clone());
        compare_children(old, None, at, schema, out, element);
        compare_children(None, new, at, schema, out, element);
        return;
    }
    compare_children(old, new, at, schema, out, element);
}

/// The part of [`compare_at`] below the node: members, items, or the leaf check.
fn compare_children<'v>(
    old: Option<&'v Value>,
    new: Option<&'v Value>,
    at: &mut Position<'v>,
    schema: &Schema<'_>,
    out: &mut Found,
    element: bool,
) {
    match old.or(new) {
        Some(Value::Object(_)) if element || !schema.map_is_atomic(&at.names) => {
            let old_members = old.and_then(Value::as_object);
            let new_members = new.and_then(Value::as_object);
            let mut names: Vec<&String> = old_members
                .into_iter()
                .chain(new_members)
                .flat_map(Map::keys)
                .collect();
            names.sort();
            names.dedup();
            for name in names {
                at.enter_field(name);
                if !untracked(&at.path) {
                    compare_at(
                        old_members.and_then(|members| members.get(name)),
                        new_members.and_then(|members| members.get(name)),
                        at,
                        schema,
                        out,
                        false,
                    );
                }
                at.leave_field();
            }
        }
        Some(Value::Array(_)) if schema.list_type(&at.names) != ListType::Atomic => {
            let list_type = schema.list_type(&at.names);
            let old_items = old.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
            let new_items = new.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
            let old_indexed =
                index_items(&list_type, old_items, false, &at.path).unwrap_or_default();
            let new_indexed =
                index_items(&list_type, new_items, false, &at.path).unwrap_or_default();
            let old_by: BTreeMap<&Element, &Value> =
                old_indexed.iter().map(|(e, v)| (e, *v)).collect();
            let new_by: BTreeMap<&Element, &Value> =
                new_indexed.iter().map(|(e, v)| (e, *v)).collect();
            let mut elements: Vec<&Element> = old_by.keys().chain(new_by.keys()).copied().collect();
            elements.sort();
            elements.dedup();
            let is_map = matches!(list_type, ListType::Map(_));
            for element in elements {
                at.path.push(element.clone());
                let (before, after) = (old_by.get(element).copied(), new_by.get(element).copied());
                if is_map {
                    compare_at(before, after, at, schema, out, true);
                } else {
                    match (before, after) {
                        (None, Some(_)) => out.added.push(at.path.clone()),
                        (Some(_), None) => out.removed.push(at.path.clone()),
                        _ => {}
                    }
                }
                at.path.pop();
            }
        }
        _ => {
            if let (Some(before), Some(after)) = (old, new)
                && before != after
            {
                out.modified.push(at.path.clone());
            }
        }
    }
}

/// Merges an apply configuration into the live value (`Merge`): granular maps member by
/// member, granular lists item by item in structured-merge-diff's order, everything else
/// replaced by the configuration.
pub(crate) fn merge<'v>(live: &'v Value, config: &'v Value, schema: &Schema<'_>) -> Value {
    let mut position = Position::default();
    merge_at(Some(live), config, &mut position, schema, false)
}

fn merge_at<'v>(
    live: Option<&'v Value>,
    config: &'v Value,
    at: &mut Position<'v>,
    schema: &Schema<'_>,
    element: bool,
) -> Value {
    match (live, config) {
        (Some(Value::Object(live_members)), Value::Object(config_members))
            if element || !schema.map_is_atomic(&at.names) =>
        {
            let mut merged = live_members.clone();
            for (name, value) in config_members {
                at.enter_field(name);
                let result = merge_at(live_members.get(name), value, at, schema, false);
                at.leave_field();
                merged.insert(name.clone(), result);
            }
            Value::Object(merged)
        }
        (Some(Value::Array(live_items)), Value::Array(config_items)) => {
            match schema.list_type(&at.names) {
                ListType::Atomic => config.clone(),
                list_type => Value::Array(merge_lists(
                    &list_type,
                    live_items,
                    config_items,
                    at,
                    schema,
                )),
            }
        }
        _ => config.clone(),
    }
}

/// structured-merge-diff's list merge order: live items keep their places, configuration
/// items come in configuration order, shared items are merged where the configuration
/// order reaches them.
fn merge_lists<'v>(
    list_type: &ListType,
    live: &'v [Value],
    config: &'v [Value],
    at: &mut Position<'v>,
    schema: &Schema<'_>,
) -> Vec<Value> {
    let is_map = matches!(list_type, ListType::Map(_));
    let live_indexed = index_items(list_type, live, false, &at.path).unwrap_or_default();
    let config_indexed = index_items(list_type, config, false, &at.path).unwrap_or_default();
    let live_by: BTreeMap<&Element, &Value> = live_indexed.iter().map(|(e, v)| (e, *v)).collect();
    let config_by: BTreeMap<&Element, &Value> =
        config_indexed.iter().map(|(e, v)| (e, *v)).collect();
    let mut shared = config_indexed
        .iter()
        .filter(|(e, _)| live_by.contains_key(e))
        .map(|(e, _)| e.clone());
    let mut next_shared = shared.next();
    let mut merged_config: BTreeMap<Element, ()> = BTreeMap::new();
    let mut out = Vec::with_capacity(live_indexed.len() + config_indexed.len());
    let merge_item = |element: &Element,
                      live_item: Option<&'v Value>,
                      config_item: &'v Value,
                      at: &mut Position<'v>| {
        if is_map {
            at.path.push(element.clone());
            let merged = merge_at(live_item, config_item, at, schema, true);
            at.path.pop();
            merged
        } else {
            config_item.clone()
        }
    };
    let (mut l, mut r) = (0, 0);
    while l < live_indexed.len() || r < config_indexed.len() {
        if l < live_indexed.len() && r < config_indexed.len() {
            let element = &live_indexed[l].0;
            if *element == config_indexed[r].0 {
                merged_config.insert(element.clone(), ());
                out.push(merge_item(
                    element,
                    Some(live_indexed[l].1),
                    config_indexed[r].1,
                    at,
                ));
                if next_shared.as_ref() == Some(element) {
                    next_shared = shared.next();
                }
                l += 1;
                r += 1;
                continue;
            }
            if config_by.contains_key(element) && next_shared.as_ref().is_some_and(|n| n != element)
            {
                l += 1;
                continue;
            }
        }
        if l < live_indexed.len() {
            let (element, item) = &live_indexed[l];
            if !config_by.contains_key(element) {
                out.push((*item).clone());
                l += 1;
                continue;
            }
            if merged_config.contains_key(element) {
                l += 1;
                continue;
            }
        }
        if r < config_indexed.len() {
            let (element, item) = &config_indexed[r];
            merged_config.insert(element.clone(), ());
            out.push(merge_item(element, live_by.get(element).copied(), item, at));
            if next_shared.as_ref() == Some(element) {
                next_shared = shared.next();
            }
            r += 1;
        }
    }
    out
}

/// Removes the node at each path (its whole subtree). Paths are navigated by their
/// encoded elements, so no schema is needed.
pub(crate) fn remove_items(value: &mut Value, paths: &FieldSet) {
    for path in paths.iter() {
        remove_path(value, path);
    }
}

fn matches_element(item: &Value, position: usize, element: &str) -> bool {
    if let Some(keys) = element.strip_prefix("k:") {
        let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(keys) else {
            return false;
        };
        keys.iter()
            .all(|(name, value)| item.get(name) == Some(value))
    } else if let Some(encoded) = element.strip_prefix("v:") {
        serde_json::from_str::<Value>(encoded).is_ok_and(|value| &value == item)
    } else if let Some(wanted) = element.strip_prefix("i:") {
        wanted
            .parse::<usize>()
            .is_ok_and(|wanted| wanted == position)
    } else {
        false
    }
}

fn remove_path(value: &mut Value, path: &[Element]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = value;
    for element in parents {
        let next = match current {
            Value::Object(members) => element
                .strip_prefix("f:")
                .and_then(|name| members.get_mut(name)),
            Value::Array(items) => items
                .iter_mut()
                .enumerate()
                .find(|(position, item)| matches_element(item, *position, element))
                .map(|(_, item)| item),
            _ => None,
        };
        match next {
            Some(next) => current = next,
            None => return,
        }
    }
    match current {
        Value::Object(members) => {
            if let Some(name) = last.strip_prefix("f:") {
                members.remove(name);
            }
        }
        Value::Array(items) => {
            let mut position = 0;
            items.retain(|item| {
                let keep = !matches_element(item, position, last);
                position += 1;
                keep
            });
        }
        _ => {}
    }
}

/// Whether the node a path names exists in the value (tests check that nobody owns
/// fields the object does not have).
#[cfg(test)]
pub(crate) fn path_exists(value: &Value, path: &[Element]) -> bool {
    let mut current = value;
    for element in path {
        let next = match current {
            Value::Object(members) => element
                .strip_prefix("f:")
                .and_then(|name| members.get(name)),
            Value::Array(items) => items
                .iter()
                .enumerate()
                .find(|(position, item)| matches_element(item, *position, element))
                .map(|(_, item)| item),
            _ => None,
        };
        match next {
            Some(next) => current = next,
            None => return false,
        }
    }
    true
}
