//! `metadata.managedFields` entries: decoding, identity and the real server's order.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::fieldset::FieldSet;
use super::stored::{self, Entry};

/// Operation name of server-side apply entries.
pub const APPLY: &str = "Apply";
/// Operation name of every other write's entries.
pub const UPDATE: &str = "Update";

/// One `metadata.managedFields` entry, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedEntry {
    /// The field manager (`fieldManager` query parameter or the user agent).
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// The apiVersion of the object as the manager wrote it.
    pub api_version: String,
    /// `status` for writes through `/status`, empty for the main resource.
    pub subresource: String,
    /// RFC 3339 time of the manager's last change, if any.
    pub time: Option<String>,
    /// The fields the manager owns.
    pub fields: FieldSet,
}

impl ManagedEntry {
    /// Whether two entries are the same manager in the real server's sense
    /// (`BuildManagerIdentifier`): Apply entries ignore the apiVersion, Update ones do not.
    #[must_use]
    pub fn same_identity(&self, other: &Self) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == APPLY || self.api_version == other.api_version)
    }

    /// How the real server names the manager in conflict messages (`printManager`):
    /// `"name"`, `"name" with subresource "status"`, `"name" using v1 at <time>`.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut text = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            text.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == UPDATE {
            text.push_str(&format!(" using {}", self.api_version));
            if let Some(time) = &self.time {
                text.push_str(&format!(" at {time}"));
            }
        }
        text
    }

    /// The entry as the API writes it.
    #[must_use]
    pub fn to_json(&self) -> Value {
        self.json_with_fields(self.fields.to_fields_v1())
    }

    /// The entry as the API writes it, with `fields_v1` for its fields (the rendering of
    /// its set, or a tree edited as [`super::stored`] edits one).
    pub(super) fn json_with_fields(&self, fields_v1: Value) -> Value {
        let mut entry = Map::new();
        entry.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        entry.insert("fieldsType".into(), Value::String("FieldsV1".into()));
        entry.insert("fieldsV1".into(), fields_v1);
        entry.insert("manager".into(), Value::String(self.manager.clone()));
        entry.insert("operation".into(), Value::String(self.operation.clone()));
        if !self.subresource.is_empty() {
            entry.insert(
                "subresource".into(),
                Value::String(self.subresource.clone()),
            );
        }
        if let Some(time) = &self.time {
            entry.insert("time".into(), Value::String(time.clone()));
        }
        Value::Object(entry)
    }

    /// Reads one entry leniently: missing members are empty.
    #[must_use]
    pub fn from_json(entry: &Value) -> Self {
        Self {
            fields: entry
                .get("fieldsV1")
                .map(FieldSet::from_fields_v1)
                .unwrap_or_default(),
            ..Self::header_from_json(entry)
        }
    }

    /// Reads one entry's names and time leniently (missing members are empty), with no
    /// fields: what a kept stored entry needs ([`super::stored`]).
    pub(super) fn header_from_json(entry: &Value) -> Self {
        let text = |name: &str| {
            entry
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Self {
            manager: text("manager"),
            operation: text("operation"),
            api_version: text("apiVersion"),
            subresource: text("subresource"),
            time: entry.get("time").and_then(Value::as_str).map(str::to_owned),
            fields: FieldSet::new(),
        }
    }
}

/// The entries of an object's `metadata.managedFields` (none when absent).
#[must_use]
pub fn decode(object: &Value) -> Vec<ManagedEntry> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| entries.iter().map(ManagedEntry::from_json).collect())
        .unwrap_or_default()
}

/// Writes entries into `metadata.managedFields` in the real server's order (Apply before
/// Update, then by time, manager, apiVersion, subresource), dropping entries that own
/// nothing; removes the member when none is left.
pub fn encode(object: &mut Value, entries: Vec<ManagedEntry>) {
    stored::encode(object, entries.into_iter().map(Entry::decoded).collect());
}

/// The real server's order of entries: Apply before Update, then by time, manager,
/// apiVersion, subresource.
pub(super) fn order(a: &ManagedEntry, b: &ManagedEntry) -> Ordering {
    a.operation
        .cmp(&b.operation)
        .then_with(|| a.time.cmp(&b.time))
        .then_with(|| a.manager.cmp(&b.manager))
        .then_with(|| a.api_version.cmp(&b.api_version))
        .then_with(|| a.subresource.cmp(&b.subresource))
}

/// The object without `metadata.managedFields`.
#[must_use]
pub fn without_managed_fields(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(Value::Object(metadata)) = copy.get_mut("metadata") {
        metadata.remove("managedFields");
    }
    copy
}
