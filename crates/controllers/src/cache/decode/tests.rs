//! One object that does not decode is skipped, kept at its last readable
//! version, reported once, and never makes the others or the list fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use api::ComputeContract;
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher::Event;
use serde_json::{Value, json};

use super::*;

fn contract_json(name: &str, cpus: Value, version: &str) -> Value {
    json!({
        "apiVersion": "socialweb.computer/v1alpha1",
        "kind": "ComputeContract",
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                     "resourceVersion": version},
        "spec": {
            "resources": {"cpus": cpus, "memory": 1024, "disk": 10, "network": 1},
            "location": {"country": "DE"},
        },
    })
}

fn decoded(name: &str, cpus: Value, version: &str) -> Decoded<ComputeContract> {
    serde_json::from_value(contract_json(name, cpus, version)).unwrap()
}

fn good(name: &str, version: &str) -> Decoded<ComputeContract> {
    decoded(name, json!(2), version)
}

fn bad(name: &str, version: &str) -> Decoded<ComputeContract> {
    decoded(name, json!(4_294_967_296_u64), version)
}

/// The store, the writer and the converter, as the reflector holds them.
struct Reflector {
    writer: Writer<ComputeContract>,
    lenient: Lenient<ComputeContract>,
    reports: Vec<Undecodable>,
}

impl Reflector {
    fn new() -> Self {
        Self {
            writer: Writer::default(),
            lenient: Lenient::default(),
            reports: Vec::new(),
        }
    }

    /// Applies one watch event; returns what the subscribers hear (names).
    fn step(&mut self, event: Event<Decoded<ComputeContract>>) -> Option<Event<ComputeContract>> {
        let store = self.writer.as_reader();
        let converted = self.lenient.convert(event, &store);
        self.reports.extend(converted.report);
        if let Some(event) = &converted.event {
            self.writer.apply_watcher_event(event);
        }
        converted.event
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .writer
            .as_reader()
            .state()
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        names.sort();
        names
    }

    fn cpus(&self, name: &str) -> u32 {
        let key = ObjectRef::new(name).within("ns");
        self.writer
            .as_reader()
            .get(&key)
            .unwrap()
            .spec
            .resources
            .cpus
    }

    fn list(&mut self, objects: Vec<Decoded<ComputeContract>>) {
        self.step(Event::Init);
        for object in objects {
            self.step(Event::InitApply(object));
        }
        self.step(Event::InitDone);
    }
}

#[test]
fn an_undecodable_object_names_its_field_and_not_its_value() {
    let Decoded::Undecodable(bad) = bad("c1", "7") else {
        panic!("a u32 of 2^32 decoded");
    };
    assert_eq!(bad.field, "spec.resources.cpus");
    assert_eq!(bad.problem, "expected u32");
    assert_eq!(bad.meta.name.as_deref(), Some("c1"));
    assert_eq!(bad.meta.resource_version.as_deref(), Some("7"));
    assert!(!format!("{bad:?}").contains("4294967296"));
    let mut missing = contract_json("c2", json!(1), "1");
    missing["spec"]["resources"]
        .as_object_mut()
        .unwrap()
        .remove("cpus");
    let Decoded::Undecodable(missing) =
        serde_json::from_value::<Decoded<ComputeContract>>(missing).unwrap()
    else {
        panic!("decoded without cpus");
    };
    assert_eq!(missing.problem, "missing field `cpus`");
}

#[test]
fn a_list_with_one_bad_object_still_lists_the_others() {
    // serde_json::from_value of the whole list: what kube's list call does.
    let list: Vec<Decoded<ComputeContract>> = serde_json::from_value(json!([
        contract_json("a", json!(1), "1"),
        contract_json("bad", json!(4_294_967_296_u64), "2"),
        contract_json("c", json!(3), "3"),
    ]))
    .unwrap();
    let mut reflector = Reflector::new();
    reflector.list(list);
    assert_eq!(reflector.names(), ["a", "c"]);
    assert_eq!(reflector.lenient.undecodable(), 1);
    assert_eq!(reflector.reports.len(), 1);
    assert_eq!(reflector.reports[0].field, "spec.resources.cpus");
}

#[test]
fn an_object_that_turns_unreadable_keeps_its_last_readable_version() {
    let mut reflector = Reflector::new();
    reflector.list(vec![good("a", "1")]);
    // A watch event with a version that does not decode: nobody hears of it,
    // and the claim or contract does not look deleted.
    assert!(reflector.step(Event::Apply(bad("a", "2"))).is_none());
    assert_eq!(reflector.cpus("a"), 2);
    // A re-list keeps it too (it must not count as vanished).
    reflector.list(vec![bad("a", "2")]);
    assert_eq!(reflector.names(), ["a"]);
    assert_eq!(reflector.reports.len(), 1, "one report per version");
    assert_eq!(reflector.lenient.undecodable(), 1);
    // Fixed: the new version is taken and it is no longer counted.
    let fixed = reflector.step(Event::Apply(decoded("a", json!(8), "3")));
    assert!(matches!(fixed, Some(Event::Apply(_))));
    assert_eq!(reflector.cpus("a"), 8);
    assert_eq!(reflector.lenient.undecodable(), 0);
}

#[test]
fn the_deletion_of_an_unreadable_object_reaches_the_store_and_the_subscribers() {
    let mut reflector = Reflector::new();
    reflector.list(vec![good("a", "1"), bad("never-read", "2")]);
    reflector.step(Event::Apply(bad("a", "3")));
    let told = reflector.step(Event::Delete(bad("a", "4")));
    assert!(
        matches!(&told, Some(Event::Delete(c)) if c.metadata.name.as_deref() == Some("a")),
        "{told:?}"
    );
    assert!(reflector.names().is_empty());
    // One never read: nothing to tell, but it is no longer counted.
    assert!(
        reflector
            .step(Event::Delete(bad("never-read", "5")))
            .is_none()
    );
    assert_eq!(reflector.lenient.undecodable(), 0);
}

#[test]
fn a_relist_forgets_the_unreadable_objects_that_are_gone() {
    let mut reflector = Reflector::new();
    reflector.list(vec![bad("x", "1"), bad("y", "2")]);
    assert_eq!(reflector.lenient.undecodable(), 2);
    reflector.list(vec![bad("y", "2")]);
    assert_eq!(reflector.lenient.undecodable(), 1);
    assert_eq!(reflector.reports.len(), 2, "y was already reported");
}

#[test]
fn cached_objects_carry_no_managed_fields_nor_kubectls_copy() {
    let mut with_fields = contract_json("c", json!(2), "1");
    with_fields["metadata"]["managedFields"] = json!([{
        "manager": "socialweb/requester", "operation": "Apply", "apiVersion": "v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:phase": {}}},
    }]);
    let Decoded::Object(object) =
        serde_json::from_value::<Decoded<ComputeContract>>(with_fields).unwrap()
    else {
        panic!("a readable object decodes");
    };
    assert_eq!(object.metadata.managed_fields, None);
    assert_eq!(object.metadata.name.as_deref(), Some("c"));
    let mut applied = contract_json("e", json!(2), "1");
    applied["metadata"]["annotations"] = json!({
        api::names::KUBECTL_LAST_APPLIED_ANNOTATION: "{\"kind\":\"ComputeContract\"}",
        api::names::RECEIPT_ANNOTATION: "kept",
    });
    let Decoded::Object(object) =
        serde_json::from_value::<Decoded<ComputeContract>>(applied).unwrap()
    else {
        panic!("a readable object decodes");
    };
    assert_eq!(
        object.metadata.annotations,
        Some([(api::names::RECEIPT_ANNOTATION.to_owned(), "kept".to_owned())].into()),
        "kubectl's copy of the object is dropped, the annotations reconciles read are kept"
    );
    with_fields = contract_json("d", json!(4_294_967_296_u64), "1");
    with_fields["metadata"]["managedFields"] = json!([{"manager": "x"}]);
    let Decoded::Undecodable(bad) =
        serde_json::from_value::<Decoded<ComputeContract>>(with_fields).unwrap()
    else {
        panic!("an unreadable object is reported");
    };
    assert_eq!(bad.meta.managed_fields, None);
}
