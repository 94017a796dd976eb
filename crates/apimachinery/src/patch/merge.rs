//! RFC 7386 JSON merge patch.

use serde_json::{Map, Value};

/// Applies an RFC 7386 merge patch: objects merge recursively, `null` deletes a member,
/// anything else (arrays included) replaces. A non-object patch replaces the target.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_members) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_members) = target else {
        return;
    };
    for (key, value) in patch_members {
        if value.is_null() {
            target_members.remove(key);
        } else {
            merge_patch(
                target_members.entry(key.clone()).or_insert(Value::Null),
                value,
            );
        }
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
