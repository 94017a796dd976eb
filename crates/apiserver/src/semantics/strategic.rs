//! Strategic merge patch for built-in kinds, reduced to what kubectl apply and Helm send:
//! maps merge as in a JSON merge patch, lists of objects with a known patch merge key
//! (containers, env, volumes, ports, ...) merge item by item, other lists are replaced;
//! the `$patch` (delete/replace), `$deleteFromPrimitiveList/` and `$setElementOrder/`
//! directives are honoured or dropped, never stored.

use serde_json::{Map, Value};

/// The patch merge key of a list field of the built-in kinds.
fn merge_key(field: &str, items: &[Value]) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "readinessGates" => Some(if field == "readinessGates" {
            "conditionType"
        } else {
            "name"
        }),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "hostAliases" => Some("ip"),
        "conditions" => Some("type"),
        "ports" => Some(if items.iter().any(|i| i.get("containerPort").is_some()) {
            "containerPort"
        } else {
            "port"
        }),
        _ => None,
    }
}

fn directive(value: &Value) -> Option<&str> {
    value.get("$patch").and_then(Value::as_str)
}

fn without_directives(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), without_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .filter(|i| directive(i).is_none())
                .map(without_directives)
                .collect(),
        ),
        other => other.clone(),
    }
}

fn merge_list(field: &str, target: &mut Value, patch: &[Value]) {
    if patch.iter().any(|i| directive(i) == Some("replace")) {
        *target = without_directives(&Value::Array(patch.to_vec()));
        return;
    }
    let Some(key) = merge_key(field, patch).filter(|_| patch.iter().all(Value::is_object)) else {
        *target = without_directives(&Value::Array(patch.to_vec()));
        return;
    };
    if !target.is_array() {
        *target = Value::Array(Vec::new());
    }
    let Value::Array(items) = target else {
        return;
    };
    for item in patch {
        let id = item.get(key);
        let position = items.iter().position(|t| t.get(key) == id && id.is_some());
        match (directive(item), position) {
            (Some("delete"), Some(p)) => {
                items.remove(p);
            }
            (Some("delete"), None) => {}
            (_, Some(p)) => merge(&mut items[p], item),
            (_, None) => items.push(without_directives(item)),
        }
    }
}

/// Applies a strategic merge patch to `target`.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if directive(patch) == Some("replace") {
        *target = without_directives(patch);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(map) = target else {
        return;
    };
    for (k, v) in patch_map {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(remove)) = (map.get_mut(field), v) {
                list.retain(|x| !remove.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                map.remove(k);
            }
            Value::Object(_) if directive(v) == Some("delete") => {
                map.remove(k);
            }
            Value::Array(items) => {
                merge_list(k, map.entry(k.clone()).or_insert(Value::Null), items)
            }
            _ => merge(map.entry(k.clone()).or_insert(Value::Null), v),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
mod tests {
    use serde_json::json;

    use super::merge;

    #[test]
    fn containers_merge_by_name_and_directives_are_not_stored() {
        let mut deployment = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "a:1", "ports": [{"containerPort": 80}]},
            {"name": "side", "image": "s:1"}
        ]}}}});
        let patch = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "web"}, {"name": "side"}],
            "containers": [{"name": "web", "image": "a:2"}, {"name": "side", "$patch": "delete"}]
        }}}});
        merge(&mut deployment, &patch);
        assert_eq!(
            deployment,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "web", "image": "a:2", "ports": [{"containerPort": 80}]}
            ]}}}})
        );
    }

    #[test]
    fn lists_without_a_key_are_replaced_and_nulls_delete() {
        let mut role =
            json!({"rules": [{"verbs": ["get"]}], "metadata": {"labels": {"a": "1", "b": "2"}}});
        merge(
            &mut role,
            &json!({"rules": [{"verbs": ["list"]}], "metadata": {"labels": {"a": null}}}),
        );
        assert_eq!(
            role,
            json!({"rules": [{"verbs": ["list"]}], "metadata": {"labels": {"b": "2"}}})
        );
    }
}
