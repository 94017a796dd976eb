#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn patched(mut target: Value, ops: Value) -> Result<Value, PatchError> {
    json_patch(&mut target, &ops).map(|()| target)
}

#[test]
fn merge_patch_merges_deletes_and_replaces() {
    let mut target = json!({"a": {"b": 1, "c": 2}, "list": [1, 2], "gone": true});
    merge_patch(
        &mut target,
        &json!({"a": {"b": null, "d": {"e": null, "f": 3}}, "list": [3], "gone": null}),
    );
    assert_eq!(target, json!({"a": {"c": 2, "d": {"f": 3}}, "list": [3]}));
}

#[test]
fn merge_patch_non_object_cases() {
    let mut target = json!({"a": 1});
    merge_patch(&mut target, &json!([1]));
    assert_eq!(target, json!([1]));
    let mut target = json!("x");
    merge_patch(&mut target, &json!({"a": {"b": null}}));
    assert_eq!(target, json!({"a": {}}));
}

#[test]
fn merge_patch_prunes_nulls_like_evanphx() {
    let mut target = json!({"status": {"conditions": [{"type": "A"}]}, "obj": {"x": 1}});
    merge_patch(
        &mut target,
        &json!({
            "status": {"conditions": [{"type": "Ready", "message": null}, null]},
            "new": {"a": null, "b": {"c": null, "d": 1}},
            "obj": [{"kept": null}]
        }),
    );
    assert_eq!(
        target,
        json!({
            "status": {"conditions": [{"type": "Ready"}, null]},
            "new": {"b": {"d": 1}},
            // an object replaced by a non-object takes the patch value as is
            "obj": [{"kept": null}]
        })
    );
}

#[test]
fn merge_patch_bodies_the_server_refuses() {
    assert!(check_merge_patch(&json!({"a": 1})).is_ok());
    for body in [json!(null), json!(5), json!("x"), json!([1])] {
        let error = check_merge_patch(&body).unwrap_err();
        assert_eq!(error.to_string(), "Invalid JSON Patch");
        assert!(error.is_bad_request());
    }
}

#[test]
fn kube_finalizer_helper_patch_adds_to_absent_list() {
    let object = json!({"metadata": {"name": "a"}});
    let ops = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["x/cleanup"]}
    ]);
    assert_eq!(
        patched(object, ops).unwrap(),
        json!({"metadata": {"name": "a", "finalizers": ["x/cleanup"]}})
    );
}

#[test]
fn kube_finalizer_helper_patch_fails_when_list_appeared() {
    let object = json!({"metadata": {"finalizers": ["other"]}});
    let ops = json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["x/cleanup"]}
    ]);
    let error = patched(object.clone(), ops).unwrap_err();
    assert_eq!(
        error,
        PatchError::Failed {
            index: 0,
            op: "test".to_owned(),
            message: "testing value /metadata/finalizers failed: test failed".to_owned()
        }
    );
    assert!(!error.is_bad_request());
}

#[test]
fn test_op_compares_present_values() {
    let object = json!({"metadata": {"finalizers": ["a", "b"], "n": null}});
    let guarded_remove = json!([
        {"op": "test", "path": "/metadata/finalizers/1", "value": "b"},
        {"op": "remove", "path": "/metadata/finalizers/1"}
    ]);
    assert_eq!(
        patched(object.clone(), guarded_remove).unwrap(),
        json!({"metadata": {"finalizers": ["a"], "n": null}})
    );
    assert!(
        patched(
            object.clone(),
            json!([{"op": "test", "path": "/metadata/n", "value": null}])
        )
        .is_ok()
    );
    assert!(
        patched(
            object.clone(),
            json!([{"op": "test", "path": "/metadata/n", "value": 1}])
        )
        .is_err()
    );
    assert!(
        patched(
            object.clone(),
            json!([{"op": "test", "path": "/metadata/finalizers/5", "value": null}])
        )
        .is_err()
    );
    // The parent must exist.
    let error = patched(
        object,
        json!([{"op": "test", "path": "/spec/x", "value": null}]),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "test operation does not apply: doc is missing path: \"/spec/x\": missing value"
    );
}

#[test]
fn failed_patch_changes_nothing() {
    let mut object = json!({"a": 1});
    let ops = json!([{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/zzz"}]);
    let error = json_patch(&mut object, &ops).unwrap_err();
    assert_eq!(object, json!({"a": 1}));
    assert_eq!(
        error.to_string(),
        "error in remove for path: '/zzz': Unable to remove nonexistent key: zzz: missing value"
    );
    assert!(matches!(error, PatchError::Failed { index: 1, ref op, .. } if op == "remove"));
}

#[test]
fn add_semantics() {
    let object = json!({"list": [1, 2], "map": {"k": 1}});
    assert_eq!(
        patched(
            object.clone(),
            json!([{"op": "add", "path": "/list/-", "value": 3}])
        )
        .unwrap()["list"],
        json!([1, 2, 3])
    );
    assert_eq!(
        patched(
            object.clone(),
            json!([{"op": "add", "path": "/list/0", "value": 0}])
        )
        .unwrap()["list"],
        json!([0, 1, 2])
    );
    assert_eq!(
        patched(
            object.clone(),
            json!([{"op": "add", "path": "/list/2", "value": 3}])
        )
        .unwrap()["list"],
        json!([1, 2, 3])
    );
    assert_eq!(
        patched(
            object.clone(),
            json!([{"op": "add", "path": "/list/-1", "value": 9}])
        )
        .unwrap()["list"],
        json!([1, 2, 9])
    );
    assert!(
        patched(
            object.clone(),
            json!([{"op": "add", "path": "/list/3", "value": 3}])
        )
        .is_err()
    );
    // add replaces an existing member
    assert_eq!(
        patched(
            object.clone(),
            json!([{"op": "add", "path": "/map/k", "value": 2}])
        )
        .unwrap()["map"],
        json!({"k": 2})
    );
    // never creates parents
    assert_eq!(
        patched(
            object.clone(),
            json!([{"op": "add", "path": "/spec/x", "value": 1}])
        )
        .unwrap_err()
        .to_string(),
        "add operation does not apply: doc is missing path: \"/spec/x\": missing value"
    );
    // escaped tokens
    assert_eq!(
        patched(
            object,
            json!([{"op": "add", "path": "/map/a~1b~0c", "value": 1}])
        )
        .unwrap()["map"]["a/b~c"],
        json!(1)
    );
}

#[test]
fn replace_move_copy() {
    let object = json!({"a": {"x": 1}, "b": [1, 2]});
    assert_eq!(
        patched(
            object.clone(),
            json!([{"op": "replace", "path": "/a/x", "value": 5}])
        )
        .unwrap()["a"],
        json!({"x": 5})
    );
    assert_eq!(
        patched(
            object.clone(),
            json!([{"op": "replace", "path": "/a/y", "value": 5}])
        )
        .unwrap_err()
        .to_string(),
        "replace operation does not apply: doc is missing key: /a/y: missing value"
    );
    assert_eq!(
        patched(
            object.clone(),
            json!([{"op": "move", "from": "/a/x", "path": "/c"}])
        )
        .unwrap(),
        json!({"a": {}, "b": [1, 2], "c": 1})
    );
    assert_eq!(
        patched(
            object.clone(),
            json!([{"op": "copy", "from": "/b/0", "path": "/b/-"}])
        )
        .unwrap()["b"],
        json!([1, 2, 1])
    );
    assert!(patched(object, json!([{"op": "copy", "from": "/zz", "path": "/c"}])).is_err());
}

#[test]
fn malformed_patches() {
    let error = patched(json!({}), json!({"op": "add"})).unwrap_err();
    assert!(error.is_bad_request());
    assert!(patched(json!({}), json!([1])).unwrap_err().is_bad_request());
    let error = patched(json!({}), json!([{"op": "frobnicate", "path": "/a"}])).unwrap_err();
    assert_eq!(error.to_string(), "Unexpected kind: frobnicate");
    assert!(!error.is_bad_request());
    let error = patched(json!({}), json!([null])).unwrap_err();
    assert_eq!(error.to_string(), "Unexpected kind: unknown");
    let error = patched(json!({}), json!([{"op": "add", "value": 1}])).unwrap_err();
    assert!(error.to_string().contains("missing path"));
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        (-5i64..5).prop_map(Value::from),
        "[a-c]{0,2}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            // Nulls are allowed in arrays (arrays are replaced whole), not as members.
            proptest::collection::vec(prop_oneof![inner.clone(), Just(Value::Null)], 0..3)
                .prop_map(Value::Array),
            proptest::collection::btree_map("[a-d]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn merge_patch_of_a_diff_reproduces_the_target(original in json_value(), modified in json_value()) {
        let patch = diff_merge_patch(&original, &modified);
        let mut result = original.clone();
        merge_patch(&mut result, &patch);
        prop_assert_eq!(result, modified);
    }

    #[test]
    fn merge_patch_is_idempotent(original in json_value(), patch in json_value()) {
        let mut once = original.clone();
        merge_patch(&mut once, &patch);
        let mut twice = once.clone();
        merge_patch(&mut twice, &patch);
        prop_assert_eq!(once, twice);
    }
}
