//! The conditions of a terminating namespace, as the real namespace controller writes them
//! (kubernetes/pkg/controller/namespace/deletion, 1.32: `namespaced_resources_deleter.go`
//! and `status_condition_utils.go`): what content remains and which finalizers hold it,
//! so `kubectl describe ns` says why a namespace is stuck in Terminating.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::App;
use crate::handlers::write::{Outcome, mutate};
use crate::registry::{NAMESPACE_STORAGE, Resource};

/// The five condition types, in the order the real controller lists them, with the reason
/// and message of their "nothing wrong" (False) state.
const OK: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// `schema.GroupResource.String()`: `plural` or `plural.group`.
fn group_resource(res: &Resource) -> String {
    if res.group.is_empty() {
        res.plural.clone()
    } else {
        format!("{}.{}", res.plural, res.group)
    }
}

/// The conditions for what remains: instances by group-resource, and by finalizer. A
/// condition that did not change keeps its `lastTransitionTime`.
#[must_use]
pub fn conditions(
    remaining: &BTreeMap<String, usize>,
    finalizers: &BTreeMap<String, usize>,
    old: &Value,
    now: &str,
) -> Value {
    let listed = |counts: &BTreeMap<String, usize>, each: &dyn Fn(&str, usize) -> String| {
        counts
            .iter()
            .map(|(name, n)| each(name, *n))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let conditions: Vec<Value> = OK
        .iter()
        .map(|(kind, ok_reason, ok_message)| {
            let problem = match *kind {
                "NamespaceContentRemaining" if !remaining.is_empty() => Some((
                    "SomeResourcesRemain",
                    format!(
                        "Some resources are remaining: {}",
                        listed(remaining, &|r, n| format!("{r} has {n} resource instances"))
                    ),
                )),
                "NamespaceFinalizersRemaining" if !finalizers.is_empty() => Some((
                    "SomeFinalizersRemain",
                    format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        listed(finalizers, &|f, n| format!("{f} in {n} resource instances"))
                    ),
                )),
                _ => None,
            };
            let (status, reason, message) = match problem {
                Some((reason, message)) => ("True", reason.to_string(), message),
                None => ("False", (*ok_reason).to_string(), (*ok_message).to_string()),
            };
            let kept = old.as_array().into_iter().flatten().find(|c| {
                c["type"] == *kind
                    && c["status"] == status
                    && c["reason"] == reason.as_str()
                    && c["message"] == message.as_str()
            });
            match kept {
                Some(condition) => condition.clone(),
                None => json!({"type": kind, "status": status, "lastTransitionTime": now,
                    "reason": reason, "message": message}),
            }
        })
        .collect();
    Value::Array(conditions)
}

/// One pass: every terminating namespace gets the conditions of what it still holds.
pub async fn update(app: &Arc<App>) {
    let Some(namespaces) = app.registry.read().by_storage(NAMESPACE_STORAGE) else {
        return;
    };
    let (_, table) = app.store.snapshot(&namespaces.storage);
    let terminating: Vec<String> = table
        .iter()
        .filter(|(_, n)| n.value()["metadata"]["deletionTimestamp"].is_string())
        .map(|(key, _)| key.1.clone())
        .collect();
    if terminating.is_empty() {
        return;
    }
    let (_, tables) = app.store.all_tables();
    for name in terminating {
        let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
        let mut finalizers: BTreeMap<String, usize> = BTreeMap::new();
        for (storage, objects) in &tables {
            let Some(res) = app.registry.read().by_storage(storage) else {
                continue;
            };
            if !res.namespaced {
                continue;
            }
            for (_, object) in objects
                .range((name.clone(), String::new())..)
                .take_while(|(key, _)| key.0 == name)
            {
                *remaining.entry(group_resource(&res)).or_default() += 1;
                let value = object.value();
                for finalizer in value["metadata"]["finalizers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    *finalizers.entry(finalizer.to_string()).or_default() += 1;
                }
            }
        }
        let now = crate::semantics::prepare::now();
        // A namespace that went meanwhile needs no conditions: the error is dropped.
        let _ = mutate(
            app,
            &namespaces,
            &(String::new(), name.clone()),
            false,
            |current| {
                let mut value = current.value();
                if value["metadata"]["deletionTimestamp"].is_null() {
                    return Ok(Outcome::Unchanged);
                }
                let next = conditions(
                    &remaining,
                    &finalizers,
                    &value["status"]["conditions"],
                    &now,
                );
                if value["status"]["conditions"] == next {
                    return Ok(Outcome::Unchanged);
                }
                value["status"]["conditions"] = next;
                Ok(Outcome::Store(value))
            },
        )
        .await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn content_and_finalizers_are_named_and_unchanged_conditions_keep_their_time() {
        let remaining = BTreeMap::from([
            ("configmaps".to_string(), 2),
            ("widgets.example.com".to_string(), 1),
        ]);
        let finalizers = BTreeMap::from([("example.com/hold".to_string(), 3)]);
        let first = conditions(&remaining, &finalizers, &Value::Null, "t1");
        assert_eq!(first.as_array().unwrap().len(), 5);
        assert_eq!(
            first[3],
            json!({"type": "NamespaceContentRemaining", "status": "True", "lastTransitionTime": "t1",
                "reason": "SomeResourcesRemain",
                "message": "Some resources are remaining: configmaps has 2 resource instances, widgets.example.com has 1 resource instances"})
        );
        assert_eq!(
            first[4]["message"],
            "Some content in the namespace has finalizers remaining: example.com/hold in 3 resource instances"
        );
        let again = conditions(&remaining, &finalizers, &first, "t2");
        assert_eq!(again, first, "nothing changed, nothing moves");
        let done = conditions(&BTreeMap::new(), &BTreeMap::new(), &first, "t3");
        assert_eq!(done[3]["status"], "False");
        assert_eq!(done[3]["lastTransitionTime"], "t3");
        assert_eq!(done[0]["lastTransitionTime"], "t1");
    }
}
