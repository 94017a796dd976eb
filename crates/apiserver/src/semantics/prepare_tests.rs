//! Unit tests of [`super`]: what a create and an update may change, and the schema pass.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use super::*;

fn stored() -> Value {
    json!({
        "apiVersion": "x.io/v1",
        "kind": "Thing",
        "metadata": {
            "name": "a",
            "resourceVersion": "7",
            "managedFields": [
                {"manager": "m", "operation": "Update", "time": "2026-01-01T00:00:01Z", "fieldsV1": {"f:spec": {}}},
                "not an object"
            ]
        },
        "spec": {"replicas": 1},
        "status": {"phase": "Up"}
    })
}

#[test]
fn a_write_differing_only_in_resource_version_and_entry_times_is_a_noop() {
    let old = stored();
    let mut new = stored();
    new["metadata"]["resourceVersion"] = json!("8");
    new["metadata"]["managedFields"][0]["time"] = json!("2026-01-01T00:00:09Z");
    assert!(is_noop(&old, &new));
    new["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    new["metadata"]["managedFields"][0]
        .as_object_mut()
        .unwrap()
        .remove("time");
    assert!(is_noop(&old, &new));
    assert!(is_noop(&json!("x"), &json!("x")));
}

#[test]
fn any_other_difference_is_not_a_noop() {
    let old = stored();
    let changes: [fn(&mut Value); 8] = [
        |v| v["spec"]["replicas"] = json!(2),
        |v| v["status"]["phase"] = json!("Down"),
        |v| v["metadata"]["labels"] = json!({"a": "b"}),
        |v| v["metadata"]["managedFields"][0]["manager"] = json!("n"),
        |v| v["metadata"]["managedFields"][1] = json!("another"),
        |v| v["metadata"]["managedFields"] = json!([]),
        |v| v["metadata"] = json!("not an object"),
        |v| {
            v.as_object_mut().unwrap().remove("status");
        },
    ];
    for change in changes {
        let mut new = stored();
        change(&mut new);
        assert!(!is_noop(&old, &new), "{new}");
        assert!(!is_noop(&new, &old), "{new}");
    }
    assert!(!is_noop(&old, &json!("x")));
}

/// The resource a minimal CRD serves, as the registry makes it when one is applied.
fn custom(has_status: bool) -> Resource {
    custom_with(has_status, None)
}

/// As [`custom`], with an `openAPIV3Schema`.
fn custom_with(has_status: bool, schema: Option<Value>) -> Resource {
    let subresources = if has_status {
        json!({"status": {}})
    } else {
        json!({})
    };
    let mut version =
        json!({"name": "v1", "served": true, "storage": true, "subresources": subresources});
    if let Some(schema) = schema {
        version["schema"] = json!({"openAPIV3Schema": schema});
    }
    let crd = json!({
        "spec": {
            "group": "x.io",
            "names": {"plural": "things", "kind": "Thing"},
            "scope": "Namespaced",
            "versions": [version]
        }
    });
    let mut resources = crate::registry::resources_of_crd(&crd).unwrap();
    assert_eq!(resources.len(), 1);
    let resource = resources.remove(0);
    assert_eq!(resource.has_status, has_status);
    resource
}

#[test]
fn spec_changed_looks_outside_metadata_and_a_subresources_status() {
    let with_status = custom(true);
    let without_status = custom(false);
    let old = stored();
    let mut new = stored();
    new["metadata"]["labels"] = json!({"a": "b"});
    new["status"]["phase"] = json!("Down");
    assert!(!spec_changed(&with_status, &old, &new));
    assert!(spec_changed(&without_status, &old, &new));
    new["spec"]["replicas"] = json!(2);
    assert!(spec_changed(&with_status, &old, &new));
    let mut removed = stored();
    removed.as_object_mut().unwrap().remove("spec");
    assert!(spec_changed(&with_status, &old, &removed));
    assert!(spec_changed(&with_status, &removed, &old));
    assert!(!spec_changed(
        &with_status,
        &json!(1),
        &json!({"metadata": {}})
    ));
}

/// A Thing schema: `spec.size` at most 10 and carrying `size_rules`, `spec.mode`
/// defaulted.
fn sized(size_rules: Value) -> Resource {
    custom_with(
        true,
        Some(json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer", "maximum": 10, "x-kubernetes-validations": size_rules},
                "mode": {"type": "string", "default": "Auto"}
            }},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }})),
    )
}

fn thing(size: i64) -> Value {
    json!({
        "apiVersion": "x.io/v1",
        "kind": "Thing",
        "metadata": {"name": "a", "namespace": "d"},
        "spec": {"size": size, "mode": "Auto"}
    })
}

fn finalized(object: &Value) -> Value {
    let mut new = object.clone();
    new["metadata"]["finalizers"] = json!(["x.io/f"]);
    new
}

#[test]
fn a_metadata_only_update_of_content_this_schema_made_only_prunes_metadata() {
    let res = sized(json!([{"rule": "self > oldSelf", "message": "size only grows"}]));
    let schema = res.schema.clone().unwrap();
    let mark = schema.mark();
    // Content this schema refuses, as if it had made it (it never does): shows that the
    // content is not walked again.
    let mut old = thing(50);
    old["spec"].as_object_mut().unwrap().remove("mode");
    let mut new = finalized(&old);
    new["metadata"]["bogus"] = json!(1);
    let pass = |new: &mut Value, mark: u32, validation| {
        schema_pass(&res, new, Some((&old, mark)), validation, WriteKind::Patch)
    };
    assert!(
        !schema.passes_metadata_only_updates(),
        "a transition rule other than self == oldSelf"
    );
    let refused = pass(&mut new.clone(), mark, FieldValidation::Warn).unwrap_err();
    assert_eq!(
        refused.code, 422,
        "transition rules are never ratcheted: {refused:?}"
    );

    let res = sized(json!([{"rule": "self == oldSelf", "message": "immutable"}]));
    let schema = res.schema.clone().unwrap();
    assert!(schema.passes_metadata_only_updates());
    let pass = |new: &mut Value, mark: u32, validation| {
        schema_pass(&res, new, Some((&old, mark)), validation, WriteKind::Patch)
    };
    let mut skipped = new.clone();
    let warnings = pass(&mut skipped, schema.mark(), FieldValidation::Warn).unwrap();
    assert_eq!(warnings, ["unknown field \"metadata.bogus\""]);
    assert_eq!(
        skipped,
        finalized(&old),
        "metadata pruned, content not walked"
    );
    let strict = pass(&mut new.clone(), schema.mark(), FieldValidation::Strict).unwrap_err();
    assert_eq!(strict.code, 400, "{strict:?}");

    // Content another schema made (0: unknown) gets the whole pass: defaults, and a
    // validation that ratchets the unchanged size.
    let mut whole = finalized(&old);
    assert!(
        pass(&mut whole, 0, FieldValidation::Strict)
            .unwrap()
            .is_empty()
    );
    assert_eq!(whole["spec"]["mode"], "Auto");
    assert_eq!(whole["spec"]["size"], 50);

    // A status write walks status only: the spec, this schema's (as the mark says), is
    // not defaulted again.
    let mut status_only = finalized(&old);
    status_only["status"] = json!({"phase": "Up"});
    assert!(
        pass(&mut status_only, schema.mark(), FieldValidation::Strict)
            .unwrap()
            .is_empty()
    );
    assert!(status_only["spec"].get("mode").is_none(), "{status_only}");

    // Changed content gets the whole pass too: a changed invalid value is refused.
    let mut bigger = finalized(&old);
    bigger["spec"]["size"] = json!(60);
    let refused = pass(&mut bigger, schema.mark(), FieldValidation::Warn).unwrap_err();
    assert_eq!(refused.code, 422, "{refused:?}");
    let mut status = finalized(&old);
    status["status"] = json!({"phase": 3});
    let refused = pass(&mut status, schema.mark(), FieldValidation::Warn).unwrap_err();
    assert_eq!(refused.code, 422, "{refused:?}");
}

#[test]
fn a_schema_rule_on_the_root_sees_metadata_so_metadata_only_updates_are_judged() {
    let res = custom_with(
        false,
        Some(json!({"type": "object",
            "x-kubernetes-validations": [{"rule": "!has(self.metadata.generateName) || self.metadata.generateName.size() < 3"}],
            "properties": {"spec": {"type": "object"}}})),
    );
    let schema = res.schema.clone().unwrap();
    assert!(!schema.passes_metadata_only_updates());
    let old = thing(1);
    let mut new = old.clone();
    new["metadata"]["generateName"] = json!("long-");
    let refused = schema_pass(
        &res,
        &mut new,
        Some((&old, schema.mark())),
        FieldValidation::Warn,
        WriteKind::Patch,
    )
    .unwrap_err();
    assert_eq!(refused.code, 422, "{refused:?}");
}
