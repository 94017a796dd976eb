//! Discovery documents (plain JSON, which kubectl accepts) and /version.

use serde_json::{Value, json};

use crate::registry::Registry;
use crate::status::{ApiError, ApiResult};

/// `/version`.
#[must_use]
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "32", "gitVersion": "v1.32.0-embedded", "gitCommit": "embedded",
        "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "rust",
        "compiler": "rustc", "platform": "linux/amd64",
    })
}

/// `/api`.
#[must_use]
pub fn core_versions() -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}],
    })
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let list: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": list, "preferredVersion": list.first().cloned().unwrap_or(Value::Null)})
}

/// `/apis`.
#[must_use]
pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, v)| group_entry(&g, &v))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
///
/// # Errors
/// 404 for an unknown group.
pub fn group(registry: &Registry, group: &str) -> ApiResult<Value> {
    registry
        .groups()
        .into_iter()
        .find(|(g, _)| g == group && !g.is_empty())
        .map(|(g, v)| {
            let mut entry = group_entry(&g, &v);
            entry["kind"] = json!("APIGroup");
            entry["apiVersion"] = json!("v1");
            entry
        })
        .ok_or_else(|| ApiError::no_route(group))
}

/// `/api/v1` or `/apis/<group>/<version>`.
///
/// # Errors
/// 404 for an unknown group/version.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> ApiResult<Value> {
    let resources = registry.group_version(group, version);
    if resources.is_empty() {
        return Err(ApiError::no_route(&format!("{group}/{version}")));
    }
    let mut list = Vec::new();
    for r in &resources {
        let mut entry = json!({
            "name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
            "kind": r.kind, "verbs": r.verbs(),
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        list.push(entry);
        if r.has_status {
            list.push(json!({
                "name": format!("{}/status", r.plural), "singularName": "", "namespaced": r.namespaced,
                "kind": r.kind, "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list}),
    )
}
