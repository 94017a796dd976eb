#![allow(clippy::unwrap_used, clippy::expect_used)]

//! Keeping untouched stored entries answers as decoding and re-encoding them all.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::apply::apply_keeping;
use super::stored::{self, is_canonical};
use super::tests::{TestSchema, spec};
use super::update::update_keeping;
use super::*;

/// One write of the history: what it sets, who writes it, how.
#[derive(Debug, Clone)]
struct Write {
    spec: Value,
    status: Value,
    label: Option<String>,
    manager: usize,
    to_status: bool,
    by_apply: bool,
    force: bool,
    sends_managed_fields: bool,
    /// Makes one stored entry non-canonical before the write (its decoding unchanged).
    mangle: Option<(usize, usize)>,
}

fn write() -> impl Strategy<Value = Write> {
    (
        spec(),
        spec(),
        proptest::option::of("[xy]"),
        0..3usize,
        any::<bool>(),
        0..4usize,
        any::<bool>(),
        proptest::option::of((0..4usize, 0..4usize)),
    )
        .prop_map(
            |(spec, status, label, manager, to_status, how, sends_managed_fields, mangle)| Write {
                spec,
                status,
                label,
                manager,
                to_status,
                // Applies half the time, a third of them unforced (which may conflict).
                by_apply: how < 2,
                force: how != 1 || sends_managed_fields,
                sends_managed_fields,
                mangle,
            },
        )
}

/// Changes one stored entry's text in a way decoding reads the same.
fn mangle(object: &mut Value, (which, how): (usize, usize)) {
    let Some(entries) = object["metadata"]["managedFields"].as_array_mut() else {
        return;
    };
    if entries.is_empty() {
        return;
    }
    let position = which % entries.len();
    let entry = entries[position].as_object_mut().unwrap();
    match how {
        0 => {
            entry.remove("fieldsType");
        }
        1 => {
            entry.insert("extra".into(), json!("x"));
        }
        2 => {
            // A leaf written as {".": {}}: still a member without members below it.
            fn first_leaf(node: &mut Value) {
                let children = node.as_object_mut().unwrap();
                if children.is_empty() {
                    children.insert(".".into(), json!({}));
                    return;
                }
                // A leaf mangled before has only "." now.
                let Some(name) = children.keys().find(|k| *k != ".").cloned() else {
                    return;
                };
                first_leaf(children.get_mut(&name).unwrap());
            }
            first_leaf(entry.get_mut("fieldsV1").unwrap());
        }
        _ => {
            entry.insert("subresource".into(), json!(""));
        }
    }
}

fn the_write(
    live: Option<&Value>,
    step: &Write,
    now: &str,
    keep: bool,
) -> Result<Value, ApplyError> {
    let manager = ["a", "b", "c"][step.manager];
    let subresource = step.to_status.then_some("status");
    if step.by_apply {
        let mut config = json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "a", "namespace": "ns"}});
        if step.to_status {
            config["status"] = step.status.clone();
        } else {
            config["spec"] = step.spec.clone();
        }
        return apply_keeping(
            live,
            &config,
            manager,
            subresource,
            step.force,
            &TestSchema,
            now,
            keep,
        );
    }
    let mut new = live.cloned().unwrap_or_else(|| {
        json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "a", "namespace": "ns"}})
    });
    if step.to_status {
        new["status"] = step.status.clone();
    } else {
        new["spec"] = step.spec.clone();
        match &step.label {
            Some(label) => new["metadata"]["labels"] = json!({"l": label}),
            None => {
                new["metadata"].as_object_mut().unwrap().remove("labels");
            }
        }
    }
    if !step.sends_managed_fields {
        new["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
    }
    update_keeping(live, &mut new, manager, subresource, &TestSchema, now, keep);
    Ok(new)
}

proptest! {
    #[test]
    fn keeping_untouched_entries_answers_as_re_encoding_them(
        steps in proptest::collection::vec(write(), 1..8),
    ) {
        let mut live: Option<Value> = None;
        for (position, step) in steps.iter().enumerate() {
            let now = format!("2026-01-01T00:00:{position:02}Z");
            if let (Some(object), Some(how)) = (live.as_mut(), step.mangle) {
                mangle(object, how);
            }
            let kept = the_write(live.as_ref(), step, &now, true);
            let re_encoded = the_write(live.as_ref(), step, &now, false);
            prop_assert_eq!(&kept, &re_encoded);
            // A refused apply (a conflict) leaves the object as it was.
            let Ok(kept) = kept else { continue };
            // What the server writes is in the form a later write keeps.
            for entry in kept["metadata"]["managedFields"].as_array().into_iter().flatten() {
                prop_assert!(is_canonical(entry), "not canonical: {}", entry);
            }
            live = Some(kept);
        }
    }

    #[test]
    fn a_kept_entry_owns_exactly_what_its_decoding_owns(
        paths in proptest::collection::vec(
            proptest::collection::vec(
                prop_oneof![Just("f:a".to_owned()), Just("f:b".to_owned()), Just("k:{\"name\":\"x\"}".to_owned()), Just("v:1".to_owned())],
                1..4,
            ),
            1..6,
        ),
        probes in proptest::collection::vec(
            proptest::collection::vec(
                prop_oneof![Just("f:a".to_owned()), Just("f:b".to_owned()), Just("k:{\"name\":\"x\"}".to_owned()), Just("v:1".to_owned()), Just(".".to_owned())],
                0..4,
            ),
            0..8,
        ),
    ) {
        let set: FieldSet = paths.into_iter().collect();
        let fields = set.to_fields_v1();
        for probe in &probes {
            prop_assert_eq!(stored::owns(&fields, probe), set.contains(probe));
            prop_assert_eq!(stored::has_member_below(&fields, probe), set.has_descendant(probe));
        }
        prop_assert!(is_canonical(&update_entry(set).to_json()));
    }

    #[test]
    fn an_edited_tree_is_the_rendering_of_the_edited_set(
        paths in path_set(),
        removed in path_set(),
        inserted in path_set(),
    ) {
        let mut tree = paths.to_fields_v1();
        let Value::Object(children) = &mut tree else { unreachable!() };
        for path in removed.iter() {
            prop_assert_eq!(stored::remove_member(children, path), paths.contains(path));
        }
        for path in inserted.iter() {
            stored::insert_member(children, path);
        }
        let mut expected = paths.clone();
        expected.remove_all(&removed);
        expected.insert_all(inserted.clone());
        prop_assert_eq!(&tree, &expected.to_fields_v1());
        if !expected.is_empty() {
            let entry = update_entry(FieldSet::new());
            prop_assert!(is_canonical(&entry.json_with_fields(tree)));
        }
    }
}

/// An Update entry of manager `m` owning `fields`.
fn update_entry(fields: FieldSet) -> ManagedEntry {
    ManagedEntry {
        manager: "m".into(),
        operation: UPDATE.into(),
        api_version: "x.io/v1".into(),
        subresource: String::new(),
        time: None,
        fields,
    }
}

/// Sets of short paths over few elements, so that they share prefixes, nest and repeat.
fn path_set() -> impl Strategy<Value = FieldSet> {
    proptest::collection::vec(
        proptest::collection::vec(
            prop_oneof![
                Just("f:a".to_owned()),
                Just("f:b".to_owned()),
                Just("k:{\"name\":\"x\"}".to_owned()),
                Just("v:1".to_owned()),
            ],
            1..4,
        ),
        0..6,
    )
    .prop_map(|paths| paths.into_iter().collect())
}

#[test]
fn a_write_edits_its_managers_own_stored_entry_in_place() {
    let own = json!({
        "apiVersion": "x.io/v1", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:phase": {}}},
        "manager": "m", "operation": "Update", "subresource": "status",
        "time": "2026-01-01T00:00:01Z"
    });
    assert!(is_canonical(&own));
    let live = json!({
        "apiVersion": "x.io/v1", "kind": "Thing",
        "metadata": {"name": "a", "namespace": "ns", "managedFields": [own]},
        "status": {"phase": "A"}
    });
    let mut entries = stored::decode(&live);
    let phase: FieldSet = [vec!["f:status".to_owned(), "f:phase".to_owned()]]
        .into_iter()
        .collect();
    let mut changed = phase.clone();
    changed.insert(vec!["f:status".to_owned(), "f:ready".to_owned()]);
    entries[0].remove_all(&changed, &FieldSet::new());
    assert!(entries[0].is_edited());
    entries[0].insert_all(changed);
    entries[0].set_time(Some("2026-01-01T00:00:02Z".to_owned()));
    assert!(entries[0].is_edited() && entries[0].contains(&phase.iter().next().unwrap()[..]));
    let mut written = live.clone();
    stored::encode(&mut written, entries);
    assert_eq!(
        written["metadata"]["managedFields"],
        json!([{
            "apiVersion": "x.io/v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {"f:phase": {}, "f:ready": {}}},
            "manager": "m", "operation": "Update", "subresource": "status",
            "time": "2026-01-01T00:00:02Z"
        }])
    );
}

#[test]
fn a_status_write_keeps_another_managers_spec_entry_as_stored() {
    let spec_writer = json!({
        "apiVersion": "x.io/v1", "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}}},
        "manager": "spec-writer", "operation": "Update", "time": "2026-01-01T00:00:01Z"
    });
    assert!(is_canonical(&spec_writer));
    let live = json!({
        "apiVersion": "x.io/v1", "kind": "Thing",
        "metadata": {"name": "a", "namespace": "ns", "managedFields": [spec_writer.clone()]},
        "spec": {"replicas": 1}
    });
    let mut entries = stored::decode(&live);
    let changed: FieldSet = [vec!["f:status".to_owned(), "f:phase".to_owned()]]
        .into_iter()
        .collect();
    entries[0].remove_all(&changed, &FieldSet::new());
    assert!(entries[0].is_kept());
    let mut written = live.clone();
    stored::encode(&mut written, entries);
    assert_eq!(written["metadata"]["managedFields"], json!([spec_writer]));
    // A write to the field it owns decodes it and takes the field.
    let mut entries = stored::decode(&live);
    let replicas: FieldSet = [vec!["f:spec".to_owned(), "f:replicas".to_owned()]]
        .into_iter()
        .collect();
    entries[0].remove_all(&replicas, &FieldSet::new());
    assert!(!entries[0].is_kept());
    // Not canonical: decoded, and written as the server writes it.
    assert!(!is_canonical(
        &json!({"manager": "m", "fieldsV1": {"f:a": {}}})
    ));
    assert!(!is_canonical(&json!({
        "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:a": {".": {}}},
        "manager": "m", "operation": "Update"
    })));
}
