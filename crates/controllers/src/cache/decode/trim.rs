//! An object's JSON as a [`Value`] without what no reconcile reads, left out
//! while it is parsed.
//!
//! `metadata.managedFields` is about half of a contract's JSON, and every
//! entry's `fieldsV1` a tree of small maps: built as a `Value` only to be
//! removed, it was most of the JSON and allocation work of every watch event
//! (plan 0016 C3). Here it is skipped in the parse ([`IgnoredAny`] scans it
//! and allocates nothing), as is kubectl's copy of the object in the
//! annotation [`api::names::KUBECTL_LAST_APPLIED_ANNOTATION`].
//!
//! # Guarantees
//! - The [`Value`] equals the one a plain `Value` parse gives with those two
//!   removed; everything else is kept as it came.
//! - An object whose `metadata` or `metadata.annotations` is not a JSON
//!   object is parsed as it is: what it means is the object's type's call.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

/// The key under which an object keeps its metadata.
const METADATA: &str = "metadata";
/// The metadata's list of who wrote which field.
const MANAGED_FIELDS: &str = "managedFields";
/// The metadata's annotations.
const ANNOTATIONS: &str = "annotations";

/// Parses one object as a [`Value`] without `managedFields` and kubectl's copy.
pub(super) fn object<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Value, D::Error> {
    deserializer.deserialize_any(Level::Object)
}

/// Which level of the object a map is at: each skips its own keys.
#[derive(Clone, Copy)]
pub(super) enum Level {
    /// The object: its `metadata` is trimmed.
    Object,
    /// Its metadata: `managedFields` is skipped, `annotations` trimmed.
    Metadata,
    /// Its annotations: kubectl's copy of the object is skipped.
    Annotations,
}

impl Level {
    /// Whether `key` is left out at this level.
    pub(super) fn skips(self, key: &str) -> bool {
        match self {
            Self::Object => false,
            Self::Metadata => key == MANAGED_FIELDS,
            Self::Annotations => key == api::names::KUBECTL_LAST_APPLIED_ANNOTATION,
        }
    }

    /// The level of `key`'s value, when it is trimmed too.
    pub(super) fn below(self, key: &str) -> Option<Self> {
        match (self, key) {
            (Self::Object, METADATA) => Some(Self::Metadata),
            (Self::Metadata, ANNOTATIONS) => Some(Self::Annotations),
            _ => None,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Level {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        serde::Deserialize::deserialize(deserializer)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if self.skips(&key) {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            let value = match self.below(&key) {
                Some(level) => map.next_value_seed(level)?,
                None => map.next_value::<Value>()?,
            };
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    /// What a plain parse gives with the two left out: the trimmed parse must equal it.
    fn plainly_trimmed(text: &str) -> Value {
        let mut value: Value = serde_json::from_str(text).unwrap();
        if let Some(meta) = value.get_mut(METADATA).and_then(Value::as_object_mut) {
            meta.remove(MANAGED_FIELDS);
            if let Some(annotations) = meta.get_mut(ANNOTATIONS).and_then(Value::as_object_mut) {
                annotations.remove(api::names::KUBECTL_LAST_APPLIED_ANNOTATION);
            }
        }
        value
    }

    fn trimmed(text: &str) -> Value {
        object(&mut serde_json::Deserializer::from_str(text)).unwrap()
    }

    #[test]
    fn only_managed_fields_and_kubectls_copy_are_left_out() {
        let text = json!({
            "apiVersion": "socialweb.computer/v1alpha1",
            "kind": "ComputeContract",
            "metadata": {
                "name": "c", "namespace": "ns", "resourceVersion": "7",
                "labels": {"a": "b"},
                "annotations": {
                    api::names::KUBECTL_LAST_APPLIED_ANNOTATION: "{\"kind\":\"ComputeContract\"}",
                    api::names::RECEIPT_ANNOTATION: "{\"id\":\"r\"}",
                },
                "managedFields": [{
                    "manager": "socialweb/requester", "operation": "Apply",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:phase": {}, "f:conditions": {"k:{\"type\":\"Ready\"}": {}}}},
                }],
                "finalizers": ["x"],
            },
            "spec": {"resources": {"cpus": 2, "memory": 1.5, "disk": -1, "gpu": null},
                     "list": [true, "s", {"managedFields": "kept below metadata"}]},
            "status": {"annotations": {api::names::KUBECTL_LAST_APPLIED_ANNOTATION: "kept"}},
        })
        .to_string();
        let value = trimmed(&text);
        assert_eq!(value, plainly_trimmed(&text));
        assert_eq!(value["metadata"].get(MANAGED_FIELDS), None);
        assert_eq!(
            value["metadata"][ANNOTATIONS],
            json!({api::names::RECEIPT_ANNOTATION: "{\"id\":\"r\"}"})
        );
        assert_eq!(
            value["spec"]["list"][2]["managedFields"],
            "kept below metadata"
        );
        assert_eq!(
            value["status"]["annotations"][api::names::KUBECTL_LAST_APPLIED_ANNOTATION],
            "kept"
        );
    }

    #[test]
    fn metadata_of_another_shape_is_parsed_as_it_is() {
        for text in [
            r#"{"metadata": null}"#,
            r#"{"metadata": {"annotations": null, "managedFields": []}}"#,
            r#"{"metadata": {"annotations": ["a"]}}"#,
            r#"[1, {"metadata": {"managedFields": []}}]"#,
            r#""text""#,
        ] {
            assert_eq!(trimmed(text), plainly_trimmed(text), "{text}");
        }
    }
}
