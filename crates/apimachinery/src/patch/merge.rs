//! RFC 7386 JSON merge patch as evanphx/json-patch `MergePatch` applies it for the
//! kube-apiserver.

use serde_json::{Map, Value};

use super::PatchError;

/// Applies a merge patch: objects merge recursively and `null` deletes a member.
///
/// Like evanphx (and unlike a literal RFC 7386 reading), a value that replaces a
/// missing, `null` or non-object member has its `null` object members pruned, arrays'
/// objects included (`{"list": [{"a": null, "b": 1}]}` stores `[{"b": 1}]`), while an
/// object replaced by a non-object takes the patch value as is. A non-object patch
/// replaces the whole target; the server must first refuse what the real one refuses,
/// see [`check_merge_patch`].
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(document), Value::Object(patch)) => merge_documents(document, patch),
        (target, patch) => *target = pruned(patch),
    }
}

/// The real server answers 400 BadRequest `Invalid JSON Patch` for a merge patch body
/// that is `null` or a scalar; an array would replace the whole object and fail to
/// decode, so it is refused here the same way.
///
/// # Errors
/// [`PatchError::Malformed`] unless the patch is a JSON object.
pub fn check_merge_patch(patch: &Value) -> Result<(), PatchError> {
    if patch.is_object() {
        Ok(())
    } else {
        Err(PatchError::Malformed("Invalid JSON Patch".to_owned()))
    }
}

fn merge_documents(document: &mut Map<String, Value>, patch: &Map<String, Value>) {
    for (key, value) in patch {
        if value.is_null() {
            document.remove(key);
            continue;
        }
        match document.get_mut(key) {
            Some(Value::Object(current)) => match value {
                Value::Object(value) => merge_documents(current, value),
                other => {
                    document.insert(key.clone(), other.clone());
                }
            },
            _ => {
                document.insert(key.clone(), pruned(value));
            }
        }
    }
}

/// evanphx `pruneNulls`: drops `null` object members at any depth, keeps `null` array items.
fn pruned(value: &Value) -> Value {
    match value {
        Value::Object(members) => Value::Object(
            members
                .iter()
                .filter(|(_, member)| !member.is_null())
                .map(|(key, member)| (key.clone(), pruned(member)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(pruned).collect()),
        scalar => scalar.clone(),
    }
}

/// The merge patch that turns `original` into `modified` (`CreateMergePatch`): changed
/// members, `null` for removed ones, arrays and scalars whole. Applying it with
/// [`merge_patch`] gives back `modified`, except that `null` members of `modified`
/// cannot be expressed (a merge patch deletes them).
#[must_use]
pub fn diff_merge_patch(original: &Value, modified: &Value) -> Value {
    match (original, modified) {
        (Value::Object(before), Value::Object(after)) => {
            let mut patch = Map::new();
            for key in before.keys() {
                if !after.contains_key(key) {
                    patch.insert(key.clone(), Value::Null);
                }
            }
            for (key, value) in after {
                match before.get(key) {
                    Some(old) if old == value => {}
                    Some(old) => {
                        patch.insert(key.clone(), diff_merge_patch(old, value));
                    }
                    None => {
                        patch.insert(key.clone(), value.clone());
                    }
                }
            }
            Value::Object(patch)
        }
        _ => modified.clone(),
    }
}
