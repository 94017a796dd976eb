//! TEMPORARY stand-ins for `apimachinery::{selector, patch}` until that crate lands:
//! the same signatures, so swapping is a change of `use` lines.

use std::collections::BTreeMap;

use serde_json::Value;

/// A parse error of a selector.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unable to parse requirement: {0}")]
pub struct SelectorError(pub String);

#[derive(Debug, Clone)]
enum Req {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A label selector.
#[derive(Debug, Clone, Default)]
pub struct LabelSelector(Vec<Req>);

fn split_top(s: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn set_of(s: &str) -> Result<Vec<String>, SelectorError> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| SelectorError(s.to_string()))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
}

impl LabelSelector {
    /// Parses `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`.
    ///
    /// # Errors
    /// When a requirement does not parse.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let req = if let Some(k) = part.strip_prefix('!') {
                Req::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Req::NotIn(k.trim().into(), vec![v.trim().into()])
            } else if let Some((k, v)) = part.split_once("==") {
                Req::In(k.trim().into(), vec![v.trim().into()])
            } else if let Some((k, v)) = part.split_once('=') {
                Req::In(k.trim().into(), vec![v.trim().into()])
            } else if let Some((k, v)) = part.split_once(" notin ") {
                Req::NotIn(k.trim().into(), set_of(v)?)
            } else if let Some((k, v)) = part.split_once(" in ") {
                Req::In(k.trim().into(), set_of(v)?)
            } else if part
                .chars()
                .all(|c| c.is_alphanumeric() || "-_./".contains(c))
            {
                Req::Exists(part.clone())
            } else {
                return Err(SelectorError(part));
            };
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    /// Whether no requirement is set.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether labels satisfy every requirement.
    #[must_use]
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Req::Exists(k) => labels.contains_key(k),
            Req::NotExists(k) => !labels.contains_key(k),
            Req::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Req::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

/// A field selector: `f=v`, `f==v`, `f!=v` joined by commas.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses a field selector.
    ///
    /// # Errors
    /// When a term does not parse.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if let Some((k, v)) = part.split_once("!=") {
                terms.push((k.trim().to_string(), false, v.trim().to_string()));
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                terms.push((k.trim().to_string(), true, v.trim().to_string()));
            } else {
                return Err(SelectorError(part.to_string()));
            }
        }
        Ok(Self(terms))
    }

    /// The fields named.
    #[must_use]
    pub fn field_names(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _, _)| k.as_str()).collect()
    }

    /// Whether the object's fields satisfy every term.
    pub fn matches(&self, field: impl Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|(k, eq, v)| {
            let actual = field(k).unwrap_or_default();
            (actual == *v) == *eq
        })
    }

    /// The name when the selector is exactly `metadata.name=<n>`.
    #[must_use]
    pub fn exact_name(&self) -> Option<&str> {
        match self.0.as_slice() {
            [(k, true, v)] if k == "metadata.name" => Some(v),
            _ => None,
        }
    }
}

/// RFC 7386 JSON merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(map) = target {
        for (k, v) in patch_map {
            if v.is_null() {
                map.remove(k);
            } else {
                merge_patch(map.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// A JSON patch failure.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct PatchError(pub String);

/// RFC 6902 JSON patch with evanphx semantics (`test` of an absent member against null passes).
///
/// # Errors
/// When the patch is malformed or an operation fails.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), PatchError> {
    let ops = patch
        .as_array()
        .ok_or_else(|| PatchError("a JSON patch must be an array".into()))?;
    let mut kept = Vec::new();
    for op in ops {
        if op["op"] == "test" && op["value"].is_null() {
            let path = op["path"].as_str().unwrap_or_default();
            let current = target.pointer(path);
            if current.is_none() || current == Some(&Value::Null) {
                continue;
            }
            return Err(PatchError(format!("testing value {path} failed")));
        }
        kept.push(op.clone());
    }
    let parsed: json_patch::Patch =
        serde_json::from_value(Value::Array(kept)).map_err(|e| PatchError(e.to_string()))?;
    json_patch::patch(target, &parsed).map_err(|e| PatchError(e.to_string()))
}
