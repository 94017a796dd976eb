//! Stored `metadata.managedFields` entries that a write leaves untouched, kept as the
//! JSON they were stored as instead of decoded into a [`FieldSet`] and re-encoded
//! (plan 0016 C3: decoding and re-encoding every entry on every write was about 9 % of
//! the API server's samples, and a status write by one manager touches no other
//! manager's entry).
//!
//! An entry is kept only when its stored JSON is exactly what [`ManagedEntry::to_json`]
//! would write for it (every entry this crate encodes is), so keeping it answers what
//! decoding and re-encoding it would; any other entry is decoded as before. Whether a
//! kept entry owns a path is read from its FieldsV1 tree in place: a node owns its path
//! when it is `{}` or carries `"."`, which is how [`FieldSet::from_fields_v1`] reads it.
//!
//! A kept entry the write does touch (the writer's own entry, which every write of that
//! manager changes, and an entry losing a field to it) is edited as that tree, a copy of
//! the stored one, instead of decoded into a [`FieldSet`] and rendered back (the render
//! of the writer's own entry was about 4 % of the API server's samples in
//! `bench_scale --throughput`, plan 0016 C3): [`remove_member`] and [`insert_member`]
//! keep the tree in the form [`FieldSet::to_fields_v1`] renders, so the tree written is
//! the rendering of the set decoding would have made (a property test holds it).

use serde_json::{Map, Value};

use super::entries::{self, ManagedEntry};
use super::fieldset::{Element, FieldPath, FieldSet};

/// One managedFields entry during a write: kept as stored, or decoded.
#[derive(Debug)]
pub(super) struct Entry<'a> {
    /// The stored entry, while it is kept: in [`ManagedEntry::to_json`]'s form, owning
    /// at least one field and none that the write changed or removed so far. `decoded`
    /// then holds its names and time but not its fields.
    kept: Option<&'a Value>,
    /// A kept entry's FieldsV1 tree once the write touched it, edited in place and still
    /// in the canonical form (it may own nothing now). `decoded` then holds its names and
    /// time but not its fields.
    edited: Option<Value>,
    /// The entry itself once decoded (sent by the client, not in the canonical form, or
    /// read as a [`FieldSet`] by server-side apply).
    decoded: ManagedEntry,
}

impl<'a> Entry<'a> {
    /// The stored entry, kept as it is when it is in the canonical form.
    pub(super) fn from_stored(entry: &'a Value) -> Self {
        if !is_canonical(entry) {
            return Self::decoded(ManagedEntry::from_json(entry));
        }
        Self {
            kept: Some(entry),
            edited: None,
            decoded: ManagedEntry::header_from_json(entry),
        }
    }

    /// An entry that is not kept as stored.
    pub(super) fn decoded(entry: ManagedEntry) -> Self {
        Self {
            kept: None,
            edited: None,
            decoded: entry,
        }
    }

    /// Drops the members of `changed` and of `removed` from the entry's fields; a kept
    /// entry that owns none of them stays as stored, one that owns some is edited.
    pub(super) fn remove_all(&mut self, changed: &FieldSet, removed: &FieldSet) {
        if let Some(entry) = self.kept {
            let fields = &entry["fieldsV1"];
            let touched = changed
                .iter()
                .chain(removed.iter())
                .any(|path| owns(fields, path));
            if !touched {
                return;
            }
        }
        if let Some(Value::Object(tree)) = self.edited_mut() {
            for path in changed.iter().chain(removed.iter()) {
                remove_member(tree, path);
            }
            return;
        }
        let decoded = self.decoded_mut();
        decoded.fields.remove_all(changed);
        decoded.fields.remove_all(removed);
    }

    /// Adds the members of `paths` to the entry's fields (a kept entry is edited).
    pub(super) fn insert_all(&mut self, paths: FieldSet) {
        // A path through "." has no place in a tree ("." marks a member); never made
        // by a comparison, but a set may hold it.
        let plain = paths.iter().all(|path| path.iter().all(|e| e != "."));
        if plain && let Some(Value::Object(tree)) = self.edited_mut() {
            for path in paths.iter() {
                insert_member(tree, path);
            }
            return;
        }
        self.decoded_mut().fields.insert_all(paths);
    }

    /// Sets the time of the manager's last change.
    pub(super) fn set_time(&mut self, time: Option<String>) {
        self.decoded.time = time;
    }

    /// The FieldsV1 tree of an entry kept or edited (a kept one is copied now, and
    /// edited from then on); `None` for a decoded entry.
    fn edited_mut(&mut self) -> Option<&mut Value> {
        if let Some(entry) = self.kept.take() {
            self.edited = Some(entry["fieldsV1"].clone());
        }
        self.edited.as_mut()
    }

    /// The entry decoded (a kept or edited one is decoded now, and no longer kept).
    pub(super) fn decoded_mut(&mut self) -> &mut ManagedEntry {
        if let Some(entry) = self.kept.take() {
            self.decoded.fields = FieldSet::from_fields_v1(&entry["fieldsV1"]);
        }
        if let Some(tree) = self.edited.take() {
            self.decoded.fields = FieldSet::from_fields_v1(&tree);
        }
        &mut self.decoded
    }

    /// The entry decoded, owned.
    pub(super) fn into_decoded(mut self) -> ManagedEntry {
        self.decoded_mut();
        self.decoded
    }

    /// Whether the entry owns `path` ([`FieldSet::contains`]).
    pub(super) fn contains(&self, path: &[Element]) -> bool {
        match self.tree() {
            Some(fields) => owns(fields, path),
            None => self.decoded.fields.contains(path),
        }
    }

    /// The FieldsV1 tree of a kept or edited entry.
    fn tree(&self) -> Option<&Value> {
        self.kept
            .map(|entry| &entry["fieldsV1"])
            .or(self.edited.as_ref())
    }

    /// Whether the entry owns something strictly below `path`
    /// ([`FieldSet::has_descendant`]).
    pub(super) fn has_descendant(&self, path: &[Element]) -> bool {
        match self.tree() {
            Some(fields) => has_member_below(fields, path),
            None => self.decoded.fields.has_descendant(path),
        }
    }

    /// The members of `paths` the entry owns, in `paths`' order
    /// ([`FieldSet::intersection`]).
    pub(super) fn owned_of<'p>(&self, paths: &'p FieldSet) -> Vec<&'p FieldPath> {
        paths.iter().filter(|path| self.contains(path)).collect()
    }

    /// The entry as decoded; a kept or edited entry's `fields` are empty.
    pub(super) fn names(&self) -> &ManagedEntry {
        &self.decoded
    }

    /// [`ManagedEntry::same_identity`]; names and time are there whether kept or not.
    pub(super) fn same_identity(&self, other: &ManagedEntry) -> bool {
        self.decoded.same_identity(other)
    }

    /// Whether the entry is still kept as stored.
    #[cfg(test)]
    pub(super) fn is_kept(&self) -> bool {
        self.kept.is_some()
    }

    /// Whether the entry is being edited as a tree.
    #[cfg(test)]
    pub(super) fn is_edited(&self) -> bool {
        self.edited.is_some()
    }

    /// Whether the entry owns nothing (then it is not written).
    fn is_empty(&self) -> bool {
        match (&self.kept, &self.edited) {
            (Some(_), _) => false,
            (None, Some(tree)) => tree.as_object().is_none_or(Map::is_empty),
            (None, None) => self.decoded.fields.is_empty(),
        }
    }

    fn into_json(self) -> Value {
        match (self.kept, self.edited) {
            (Some(entry), _) => entry.clone(),
            (None, Some(tree)) => self.decoded.json_with_fields(tree),
            (None, None) => self.decoded.to_json(),
        }
    }
}

/// The entries of a stored object's `metadata.managedFields` (none when absent).
pub(super) fn decode(object: &Value) -> Vec<Entry<'_>> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| entries.iter().map(Entry::from_stored).collect())
        .unwrap_or_default()
}

/// Writes entries into `metadata.managedFields` in the real server's order (Apply before
/// Update, then by time, manager, apiVersion, subresource), dropping entries that own
/// nothing; removes the member when none is left.
pub(super) fn encode(object: &mut Value, mut entries: Vec<Entry<'_>>) {
    entries.retain(|entry| !entry.is_empty());
    entries.sort_by(|a, b| entries::order(&a.decoded, &b.decoded));
    let Value::Object(members) = object else {
        return;
    };
    if entries.is_empty() {
        if let Some(Value::Object(metadata)) = members.get_mut("metadata") {
            metadata.remove("managedFields");
        }
        return;
    }
    let metadata = members
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(metadata) = metadata {
        metadata.insert(
            "managedFields".into(),
            Value::Array(entries.into_iter().map(Entry::into_json).collect()),
        );
    }
}

/// Whether the FieldsV1 tree `fields` has `path` as a member, as
/// [`FieldSet::from_fields_v1`] would read it: the node at `path` is `{}` or carries `"."`.
pub(super) fn owns(fields: &Value, path: &[Element]) -> bool {
    !path.is_empty()
        && node_at(fields, path)
            .and_then(Value::as_object)
            .is_some_and(|children| children.is_empty() || children.contains_key("."))
}

/// Whether the canonical FieldsV1 tree `fields` has a member strictly below `path`: the
/// node at `path` has a child other than `"."` (in a canonical tree every such child
/// leads to a member).
pub(super) fn has_member_below(fields: &Value, path: &[Element]) -> bool {
    node_at(fields, path)
        .and_then(Value::as_object)
        .is_some_and(|children| children.keys().any(|element| element != "."))
}

/// Removes the member `path` from the children of a canonical FieldsV1 node, as
/// [`FieldSet::remove_all`] removes it from the set the tree renders, keeping the tree
/// the rendering of what is left: a member with members below it becomes a container
/// (its `"."` goes), a leaf member goes, and so does every container left with no member
/// below it; a member whose last member below went becomes a leaf (`{}`). Returns
/// whether `path` was a member.
pub(super) fn remove_member(children: &mut Map<String, Value>, path: &[Element]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    if first == "." {
        return false;
    }
    let Some(Value::Object(node)) = children.get_mut(first.as_str()) else {
        return false;
    };
    if rest.is_empty() {
        if !node.is_empty() {
            return node.remove(".").is_some();
        }
    } else {
        if !remove_member(node, rest) {
            return false;
        }
        match node.len() {
            0 => {}
            1 if node.contains_key(".") => {
                node.clear();
                return true;
            }
            _ => return true,
        }
    }
    children.remove(first.as_str());
    true
}

/// Adds the member `path` (no element `"."`) to the children of a canonical FieldsV1
/// node, as inserting it into the set the tree renders: missing nodes are made on the
/// way, a leaf member on the way gets `"."` (it now has a member below it), and the
/// node at `path` is `{}` when new, or gets `"."` when it has members below it.
pub(super) fn insert_member(children: &mut Map<String, Value>, path: &[Element]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let existed = children.contains_key(first.as_str());
    let node = children
        .entry(first.clone())
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(node) = node else {
        return;
    };
    let marked = |node: &mut Map<String, Value>| {
        node.insert(".".to_owned(), Value::Object(Map::new()));
    };
    if rest.is_empty() {
        if !node.is_empty() {
            marked(node);
        }
        return;
    }
    if existed && node.is_empty() {
        marked(node);
    }
    insert_member(node, rest);
}

/// The node of the FieldsV1 tree `fields` at `path`; `None` when it has none, or when
/// `path` goes through a `"."` (a member marker, never a parent).
fn node_at<'a>(fields: &'a Value, path: &[Element]) -> Option<&'a Value> {
    path.iter().try_fold(fields, |node, element| {
        if element == "." {
            None
        } else {
            node.get(element.as_str())
        }
    })
}

/// Whether `entry` is exactly what [`ManagedEntry::to_json`] writes for the entry
/// [`ManagedEntry::from_json`] reads from it, and owns something.
pub(super) fn is_canonical(entry: &Value) -> bool {
    let Value::Object(members) = entry else {
        return false;
    };
    let text = |name: &str| members.get(name).and_then(Value::as_str);
    members.keys().all(|name| {
        matches!(
            name.as_str(),
            "apiVersion"
                | "fieldsType"
                | "fieldsV1"
                | "manager"
                | "operation"
                | "subresource"
                | "time"
        )
    }) && sorted(members)
        && text("apiVersion").is_some()
        && text("manager").is_some()
        && text("operation").is_some()
        && text("fieldsType") == Some("FieldsV1")
        && members
            .get("subresource")
            .is_none_or(|subresource| subresource.as_str().is_some_and(|text| !text.is_empty()))
        && members.get("time").is_none_or(Value::is_string)
        && members.get("fieldsV1").is_some_and(canonical_root)
}

/// A FieldsV1 root as [`FieldSet::to_fields_v1`] renders a non-empty set: never a member
/// itself, so no `"."`.
fn canonical_root(fields: &Value) -> bool {
    match fields {
        Value::Object(children) => {
            !children.is_empty()
                && !children.contains_key(".")
                && sorted(children)
                && children.values().all(canonical_node)
        }
        _ => false,
    }
}

/// A node below the root as rendered: `{}` (a member without members below it),
/// `{".": {}, ...}` (a member with members below it) or `{...}` (a container only).
fn canonical_node(node: &Value) -> bool {
    let Value::Object(children) = node else {
        return false;
    };
    let dot_ok = match children.get(".") {
        None => true,
        Some(dot) => dot.as_object().is_some_and(Map::is_empty) && children.len() > 1,
    };
    dot_ok
        && sorted(children)
        && children
            .iter()
            .filter(|(element, _)| element.as_str() != ".")
            .all(|(_, child)| canonical_node(child))
}

/// Members in key order, as rendering writes them (always so with serde_json's default
/// map; checked so that its `preserve_order` feature could not make a kept entry differ).
fn sorted(members: &Map<String, Value>) -> bool {
    members
        .keys()
        .zip(members.keys().skip(1))
        .all(|(a, b)| a < b)
}
