//! Ownership for Update-type writes (`Updater.Update` plus the apiserver's
//! `managedFieldsUpdater`).

use serde_json::{Map, Value};

use super::SchemaTypes;
use super::entries::{self, ManagedEntry, UPDATE};
use super::stored::{self, Entry};
use super::walk::{self, Schema};

/// Records an Update-type write (create, replace, merge patch, JSON patch) in `new`'s
/// `metadata.managedFields`: the fields that differ between `old` (`None` on create) and
/// `new` become owned by `manager` (one Update entry per manager, apiVersion and
/// subresource, its time set to `now`) and are taken from every other manager; fields
/// the write removed are dropped from everyone.
///
/// Like the real server, managedFields the client sent win over the stored ones when
/// they are a non-empty list and the write is not to a subresource: clients may edit
/// them, and `[{}]` strips them all. An absent or empty list keeps the stored ones, so
/// clients unaware of the field cannot wipe it.
pub fn update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    types: &dyn SchemaTypes,
    now: &str,
) {
    update_keeping(old, new, manager, subresource, types, now, true);
}

/// [`update`], keeping the stored entries the write does not touch as stored when
/// `keep_untouched` (always, but in the tests that hold its answer to re-encoding them).
pub(super) fn update_keeping(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    types: &dyn SchemaTypes,
    now: &str,
    keep_untouched: bool,
) {
    let schema = Schema::new(types);
    let sent = new
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .filter(|list| !list.is_empty() && subresource.is_none())
        .map(|list| {
            list.iter()
                .map(|entry| Entry::decoded(ManagedEntry::from_json(entry)))
                .collect::<Vec<_>>()
        });
    // Stored entries the write does not touch are kept as stored (`stored`), not
    // decoded and re-encoded.
    let mut managers = match sent {
        Some(sent) => sent,
        None if keep_untouched => old.map(stored::decode).unwrap_or_default(),
        None => old
            .map(|old| {
                entries::decode(old)
                    .into_iter()
                    .map(Entry::decoded)
                    .collect()
            })
            .unwrap_or_default(),
    };
    // The comparison never looks at metadata.managedFields (an untracked path), so the
    // objects are compared as they are, with no copy of either without that member.
    if let Some(Value::Object(metadata)) = new.get_mut("metadata") {
        metadata.remove("managedFields");
    }
    let nothing = Value::Object(Map::new());
    let comparison = walk::compare(old.unwrap_or(&nothing), new, &schema);
    let mut changed = comparison.added;
    changed.insert_all(comparison.modified);
    for entry in &mut managers {
        entry.remove_all(&changed, &comparison.removed);
    }
    if !changed.is_empty() {
        let own = ManagedEntry {
            manager: manager.to_owned(),
            operation: UPDATE.to_owned(),
            api_version: new
                .get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            subresource: subresource.unwrap_or_default().to_owned(),
            time: Some(now.to_owned()),
            fields: changed,
        };
        match managers.iter_mut().find(|entry| entry.same_identity(&own)) {
            Some(entry) => {
                entry.insert_all(own.fields);
                entry.set_time(own.time);
            }
            None => managers.push(Entry::decoded(own)),
        }
    }
    stored::encode(new, managers);
}
