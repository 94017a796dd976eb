#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};

use super::tests::{T1, T2, T3, TestSchema, applied, apply_as, fields_of, object};
use super::*;

fn update_as(old: Option<&Value>, mut new: Value, manager: &str, now: &str) -> Value {
    update(old, &mut new, manager, None, &TestSchema, now);
    new
}

#[test]
fn create_owns_everything_with_container_markers() {
    let mut new = object(json!({"replicas": 1, "contracts": [{"name": "a"}]}));
    new["metadata"]["labels"] = json!({"app": "x"});
    let created = update_as(None, new, "kubectl-create", T1);
    assert_eq!(
        created["metadata"]["managedFields"],
        json!([{
            "apiVersion": "x.io/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {".": {}, "f:contracts": {".": {}, "k:{\"name\":\"a\"}": {".": {}, "f:name": {}}}, "f:replicas": {}}
            },
            "manager": "kubectl-create",
            "operation": "Update",
            "time": T1
        }])
    );
}

#[test]
fn an_update_takes_changed_fields_from_other_managers() {
    let live = applied(None, json!({"replicas": 1, "paused": false}), "ctl", T1);
    let mut new = live.clone();
    new["spec"]["replicas"] = json!(5);
    new["spec"]["extra"] = json!("x");
    let updated = update_as(Some(&live), new, "hpa", T2);
    assert_eq!(
        fields_of(&updated, "ctl"),
        json!({"f:spec": {"f:paused": {}}})
    );
    assert_eq!(
        fields_of(&updated, "hpa"),
        json!({"f:spec": {"f:extra": {}, "f:replicas": {}}})
    );
    // ctl applying its old replicas now conflicts with the Update manager, described as the real server does.
    let error = apply_as(
        Some(&updated),
        &object(json!({"replicas": 1, "paused": false})),
        "ctl",
        false,
        T3,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "Apply failed with 1 conflict: conflict with \"hpa\" using x.io/v1 at {T2}: .spec.replicas"
        )
    );
}

#[test]
fn removed_fields_are_dropped_from_everyone() {
    let live = applied(None, json!({"replicas": 1, "paused": false}), "ctl", T1);
    let mut new = live.clone();
    new["spec"].as_object_mut().unwrap().remove("paused");
    let updated = update_as(Some(&live), new, "editor", T2);
    assert_eq!(
        fields_of(&updated, "ctl"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert_eq!(
        fields_of(&updated, "editor"),
        Value::Null,
        "removing only takes nothing"
    );
}

#[test]
fn a_no_op_update_changes_no_managed_fields() {
    let live = update_as(None, object(json!({"replicas": 1})), "a", T1);
    let again = update_as(Some(&live), live.clone(), "b", T2);
    assert_eq!(again, live);
}

#[test]
fn repeated_updates_merge_into_one_entry() {
    let live = update_as(None, object(json!({"replicas": 1})), "a", T1);
    let mut new = live.clone();
    new["spec"]["paused"] = json!(true);
    let updated = update_as(Some(&live), new, "a", T2);
    let entries = updated["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["time"], T2);
    assert_eq!(
        entries[0]["fieldsV1"],
        json!({"f:spec": {".": {}, "f:paused": {}, "f:replicas": {}}})
    );
}

#[test]
fn clients_may_rewrite_or_strip_managed_fields() {
    let live = update_as(None, object(json!({"replicas": 1})), "a", T1);
    // An empty list keeps the stored entries.
    let mut new = live.clone();
    new["metadata"]["managedFields"] = json!([]);
    assert_eq!(update_as(Some(&live), new, "b", T2), live);
    // Absent keeps them too.
    let mut new = live.clone();
    new["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    assert_eq!(update_as(Some(&live), new, "b", T2), live);
    // A single empty entry strips them.
    let mut new = live.clone();
    new["metadata"]["managedFields"] = json!([{}]);
    let stripped = update_as(Some(&live), new, "b", T2);
    assert!(stripped["metadata"].get("managedFields").is_none());
    // A rewritten list is kept.
    let mut new = live.clone();
    new["metadata"]["managedFields"][0]["manager"] = json!("renamed");
    let renamed = update_as(Some(&live), new, "b", T2);
    assert_eq!(
        renamed["metadata"]["managedFields"][0]["manager"],
        "renamed"
    );
}

#[test]
fn status_updates_are_their_own_entry() {
    let live = update_as(None, object(json!({"replicas": 1})), "a", T1);
    let mut new = live.clone();
    new["status"] = json!({"phase": "Ready"});
    update(Some(&live), &mut new, "a", Some("status"), &TestSchema, T2);
    let entries = new["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[1]["subresource"], "status");
    assert_eq!(
        entries[1]["fieldsV1"],
        json!({"f:status": {".": {}, "f:phase": {}}})
    );
}

#[test]
fn server_managed_metadata_is_never_owned() {
    let mut new = object(json!({}));
    new["metadata"]["uid"] = json!("u");
    new["metadata"]["resourceVersion"] = json!("1");
    new["metadata"]["generation"] = json!(1);
    new["metadata"]["creationTimestamp"] = json!(T1);
    let created = update_as(None, new, "a", T1);
    assert_eq!(fields_of(&created, "a"), json!({"f:spec": {}}));
}

#[test]
fn a_changed_kind_of_value_removes_the_old_children() {
    let live = update_as(None, object(json!({"x": {"a": 1, "b": 2}})), "a", T1);
    let mut new = live.clone();
    new["spec"]["x"] = json!("flat");
    let updated = update_as(Some(&live), new, "b", T2);
    assert_eq!(fields_of(&updated, "a"), json!({"f:spec": {}}));
    assert_eq!(fields_of(&updated, "b"), json!({"f:spec": {"f:x": {}}}));
    let mut back = updated.clone();
    back["spec"]["x"] = json!({"c": 3});
    let updated = update_as(Some(&updated), back, "c", T3);
    assert_eq!(fields_of(&updated, "b"), Value::Null);
    assert_eq!(
        fields_of(&updated, "c"),
        json!({"f:spec": {"f:x": {".": {}, "f:c": {}}}})
    );
}

#[test]
fn an_update_of_one_field_changes_only_that_fields_ownership() {
    // The comparison skips subtrees equal on both sides: an unchanged list-map and
    // unchanged metadata keep their owners, the one changed field moves.
    let mut new = object(json!({"replicas": 1, "contracts": [{"name": "a", "port": 1}]}));
    new["metadata"]["labels"] = json!({"app": "x"});
    let created = update_as(None, new, "creator", T1);
    let mut changed = created.clone();
    changed["spec"]["replicas"] = json!(2);
    let updated = update_as(Some(&created), changed, "scaler", T2);
    assert_eq!(
        fields_of(&updated, "creator"),
        json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {".": {}, "f:contracts": {".": {}, "k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:port": {}}}}
        })
    );
    assert_eq!(
        fields_of(&updated, "scaler"),
        json!({"f:spec": {"f:replicas": {}}})
    );
    // The object itself is the one written, with the entries re-encoded.
    assert_eq!(updated["spec"]["replicas"], json!(2));
    assert_eq!(
        updated["metadata"]["managedFields"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
}

#[test]
fn an_update_writing_the_same_object_owns_nothing_new() {
    let created = update_as(None, object(json!({"replicas": 1})), "creator", T1);
    let updated = update_as(Some(&created), created.clone(), "other", T2);
    assert_eq!(updated, created);
}
