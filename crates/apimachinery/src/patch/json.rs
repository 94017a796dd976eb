//! RFC 6902 JSON patch as the kube-apiserver applies it.
//!
//! Written here rather than on the `json-patch` crate because the crate follows the RFC
//! where evanphx/json-patch (which the real server links) does not, and clients depend
//! on the differences: `test` of an absent member against `null` succeeds (kube's
//! finalizer helper sends exactly that), negative array indices count from the end, a
//! missing `value` means `null`, and the error texts are evanphx's. Special-casing
//! `test` around the crate would have meant splitting the patch and losing atomicity.

use serde_json::{Map, Value};

/// Why a JSON patch was not applied. Nothing is changed when an error is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The body is not a JSON patch at all (not an array of objects): the real server
    /// answers 400 `BadRequest`.
    #[error("{0}")]
    Malformed(String),
    /// Operation `index` (its `op` named) failed: the real server answers 422 with this
    /// message.
    #[error("{message}")]
    Failed {
        /// Position of the failing operation in the patch.
        index: usize,
        /// Its `op` member (`add`, `test`, ...).
        op: String,
        /// evanphx's message, e.g. `testing value /metadata/finalizers failed: test failed`.
        message: String,
    },
}

impl PatchError {
    /// Whether the real server would answer 400 (else 422).
    #[must_use]
    pub fn is_bad_request(&self) -> bool {
        matches!(self, Self::Malformed(_))
    }
}

/// Applies an RFC 6902 patch with evanphx semantics, all or nothing.
///
/// # Errors
/// [`PatchError::Malformed`] when `ops` is not an array of objects;
/// [`PatchError::Failed`] naming the first operation that does not apply.
pub fn json_patch(target: &mut Value, ops: &Value) -> Result<(), PatchError> {
    let Value::Array(operations) = ops else {
        return Err(PatchError::Malformed(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch".to_owned(),
        ));
    };
    let mut document = target.clone();
    for (index, operation) in operations.iter().enumerate() {
        // Go decodes a `null` operation into an empty map, which then has no kind.
        let empty = Map::new();
        let operation = match operation {
            Value::Object(operation) => operation,
            Value::Null => &empty,
            other => {
                return Err(PatchError::Malformed(format!(
                    "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
                    json_type(other)
                )));
            }
        };
        let op = operation
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        apply_one(&mut document, op, operation).map_err(|message| PatchError::Failed {
            index,
            op: op.to_owned(),
            message,
        })?;
    }
    *target = document;
    Ok(())
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn member<'a>(operation: &'a Map<String, Value>, name: &str, op: &str) -> Result<&'a str, String> {
    operation.get(name).and_then(Value::as_str).ok_or_else(|| {
        format!(
            "{op} operation failed to decode {name}: operation missing {name} field: missing value"
        )
    })
}

fn apply_one(document: &mut Value, op: &str, operation: &Map<String, Value>) -> Result<(), String> {
    // A missing `value` decodes to a nil node in evanphx, which marshals as null.
    let value = operation.get("value").cloned().unwrap_or(Value::Null);
    match op {
        "add" => {
            let path = member(operation, "path", op)?;
            add(document, path, value, op)
        }
        "remove" => {
            let path = member(operation, "path", op)?;
            remove(document, path, op).map(drop)
        }
        "replace" => {
            let path = member(operation, "path", op)?;
            let (parent, key) = locate(document, path, op)?;
            let slot = child_mut(parent, &key).ok_or_else(|| {
                format!(
                    "replace operation does not apply: doc is missing key: {path}: missing value"
                )
            })?;
            *slot = value;
            Ok(())
        }
        "move" => {
            let from = member(operation, "from", op)?;
            let path = member(operation, "path", op)?;
            let moved = remove(document, from, op)?;
            add(document, path, moved, op)
        }
        "copy" => {
            let from = member(operation, "from", op)?;
            let path = member(operation, "path", op)?;
            let (parent, key) = locate(document, from, op)?;
            let copied = child_mut(parent, &key)
                .map(|v| v.clone())
                .ok_or_else(|| format!("error in copy for from: '{from}': missing value"))?;
            add(document, path, copied, op)
        }
        "test" => {
            let path = member(operation, "path", op)?;
            let (parent, key) = locate(document, path, op)?;
            let actual = match parent {
                Value::Object(members) => members.get(&key).cloned().unwrap_or(Value::Null),
                array => child_mut(array, &key).map(|v| v.clone()).ok_or_else(|| {
                    format!("error in test for path: '{path}': Unable to access invalid index: {key}: invalid index referenced")
                })?,
            };
            // evanphx reads both an absent member and a `null` one as a nil node, and a
            // nil node equals a `null` (or absent) expected value.
            if actual == value {
                Ok(())
            } else {
                Err(format!("testing value {path} failed: test failed"))
            }
        }
        other => Err(format!("Unexpected kind: {other}")),
    }
}

/// RFC 6901 reference tokens of a pointer; `None` for the root or a pointer without `/`.
fn tokens(path: &str) -> Option<Vec<String>> {
    let rest = path.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|token| token.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

/// evanphx `findObject`: the container holding the last token, which must exist and be
/// an object or array.
fn locate<'a>(
    document: &'a mut Value,
    path: &str,
    op: &str,
) -> Result<(&'a mut Value, String), String> {
    let missing =
        || format!("{op} operation does not apply: doc is missing path: {path:?}: missing value");
    let mut tokens = tokens(path).ok_or_else(missing)?;
    let key = tokens.pop().ok_or_else(missing)?;
    let mut current = document;
    for token in &tokens {
        current = child_mut(current, token).ok_or_else(missing)?;
        if !current.is_object() && !current.is_array() {
            return Err(missing());
        }
    }
    Ok((current, key))
}

/// An array index as evanphx reads it: decimal, negative counting from the end
/// (`SupportNegativeIndices` is on by default), `len` the size it may address.
fn array_index(key: &str, len: usize) -> Option<usize> {
    let index: i64 = key.parse().ok()?;
    let len = i64::try_from(len).ok()?;
    let index = if index < 0 { index + len } else { index };
    if (0..len).contains(&index) {
        usize::try_from(index).ok()
    } else {
        None
    }
}

fn child_mut<'a>(container: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    match container {
        Value::Object(members) => members.get_mut(key),
        Value::Array(items) => {
            let index = array_index(key, items.len())?;
            items.get_mut(index)
        }
        _ => None,
    }
}

fn add(document: &mut Value, path: &str, value: Value, op: &str) -> Result<(), String> {
    let (parent, key) = locate(document, path, op)?;
    match parent {
        Value::Object(members) => {
            members.insert(key, value);
            Ok(())
        }
        Value::Array(items) => {
            if key == "-" {
                items.push(value);
                return Ok(());
            }
            if key.parse::<i64>().is_err() {
                return Err(format!(
                    "error in add for path: '{path}': value was not a proper array index: '{key}': strconv.Atoi: parsing {key:?}: invalid syntax"
                ));
            }
            // Adding may address one past the end.
            let index = array_index(&key, items.len() + 1).ok_or_else(|| {
                format!("error in add for path: '{path}': Unable to access invalid index: {key}: invalid index referenced")
            })?;
            items.insert(index, value);
            Ok(())
        }
        _ => Err(format!(
            "{op} operation does not apply: doc is missing path: {path:?}: missing value"
        )),
    }
}

fn remove(document: &mut Value, path: &str, op: &str) -> Result<Value, String> {
    let (parent, key) = locate(document, path, op)?;
    match parent {
        Value::Object(members) => members.remove(&key).ok_or_else(|| {
            format!("error in {op} for path: '{path}': Unable to remove nonexistent key: {key}: missing value")
        }),
        Value::Array(items) => {
            let index = array_index(&key, items.len()).ok_or_else(|| {
                format!("error in {op} for path: '{path}': Unable to access invalid index: {key}: invalid index referenced")
            })?;
            Ok(items.remove(index))
        }
        _ => Err(format!("{op} operation does not apply: doc is missing path: {path:?}: missing value")),
    }
}
