//! An object's JSON straight into its Rust type, without what no reconcile
//! reads, left out while it is parsed: the typed twin of [`super::trim`].
//!
//! Parsing a watch event into a [`serde_json::Value`] first and the type
//! from it built every string, number and map twice (plan 0016 C3: the
//! `Value` parse 6.2 % and the conversion 1.9 % of the manager's CPU on the
//! way to Deployed). Here the type's own `Deserialize` reads the JSON, and
//! a thin wrapper around the deserializer hides the keys [`Level::skips`]
//! names from it: the maps of the object, its metadata and its annotations
//! are handed to the type through [`TrimmedMap`], which scans a skipped
//! value ([`IgnoredAny`], nothing allocated) instead of passing its key on.
//! Below those three levels the type reads the deserializer itself, so the
//! wrapper costs nothing there.
//!
//! # Guarantees
//! - The object equals the one the type decodes from [`super::trim::object`]'s
//!   `Value`, and one fails exactly when the other does (the tests hold the
//!   two side by side).
//! - Nothing else changes: numbers, strings and nesting reach the type as the
//!   deserializer gives them.

use std::borrow::Cow;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess, Visitor,
};

use super::trim::Level;

/// Deserializes `K` from `deserializer` with the keys [`Level::skips`] names left out.
pub(super) fn object<'de, K: de::Deserialize<'de>, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<K, D::Error> {
    K::deserialize(Trimmed {
        inner: deserializer,
        level: Level::Object,
    })
}

/// A deserializer whose maps are read at `level`.
struct Trimmed<D> {
    inner: D,
    level: Level,
}

/// A visitor that sees the maps of its value through [`TrimmedMap`].
struct TrimmedVisitor<V> {
    inner: V,
    level: Level,
}

/// A map whose keys [`Level::skips`] are scanned past, not handed on.
struct TrimmedMap<A> {
    inner: A,
    level: Level,
    /// The level of the value of the key just handed on, when it is trimmed too.
    below: Option<Level>,
}

/// A seed whose value is read at `level`.
struct TrimmedSeed<S> {
    inner: S,
    level: Level,
}

/// Reads one map key, borrowed from the input when it can be (no escapes in it).
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Cow<'de, str>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key.to_owned()))
    }

    fn visit_string<E>(self, key: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key))
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for TrimmedSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Trimmed {
            inner: deserializer,
            level: self.level,
        })
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for TrimmedMap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        while let Some(key) = self.inner.next_key_seed(KeySeed)? {
            if self.level.skips(&key) {
                self.inner.next_value::<IgnoredAny>()?;
                continue;
            }
            self.below = self.level.below(&key);
            return match key {
                Cow::Borrowed(key) => seed
                    .deserialize(de::value::BorrowedStrDeserializer::new(key))
                    .map(Some),
                Cow::Owned(key) => seed
                    .deserialize(de::value::StringDeserializer::new(key))
                    .map(Some),
            };
        }
        Ok(None)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.below.take() {
            Some(level) => self
                .inner
                .next_value_seed(TrimmedSeed { inner: seed, level }),
            None => self.inner.next_value_seed(seed),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// Hands each `visit_*` on unchanged.
macro_rules! forward_visits {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
                self.inner.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for TrimmedVisitor<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visits! {
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64),
        visit_i128(i128), visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64),
        visit_u128(u128), visit_f32(f32), visit_f64(f64), visit_char(char),
        visit_str(&str), visit_borrowed_str(&'de str), visit_string(String),
        visit_bytes(&[u8]), visit_borrowed_bytes(&'de [u8]), visit_byte_buf(Vec<u8>),
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Trimmed {
            inner: deserializer,
            level: self.level,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Trimmed {
            inner: deserializer,
            level: self.level,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        // No level trims inside a list.
        self.inner.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(TrimmedMap {
            inner: map,
            level: self.level,
            below: None,
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(data)
    }
}

/// Hands each `deserialize_*` on, with its arguments, and the visitor wrapped.
macro_rules! forward_deserializes {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(
                self,
                $($arg: $ty,)*
                visitor: V,
            ) -> Result<V::Value, D::Error> {
                self.inner.$method($($arg,)* TrimmedVisitor { inner: visitor, level: self.level })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Trimmed<D> {
    type Error = D::Error;

    forward_deserializes! {
        deserialize_any(), deserialize_bool(), deserialize_i8(), deserialize_i16(),
        deserialize_i32(), deserialize_i64(), deserialize_i128(), deserialize_u8(),
        deserialize_u16(), deserialize_u32(), deserialize_u64(), deserialize_u128(),
        deserialize_f32(), deserialize_f64(), deserialize_char(), deserialize_str(),
        deserialize_string(), deserialize_bytes(), deserialize_byte_buf(),
        deserialize_option(), deserialize_unit(), deserialize_seq(), deserialize_map(),
        deserialize_identifier(), deserialize_ignored_any(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use api::{ComputeContract, NodeClaim};
    use k8s_openapi::api::core::v1::Secret;
    use proptest::prelude::*;
    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use serde_json::{Value, json};

    use super::super::trim;

    /// `K` as the caches read it before: through the trimmed `Value`.
    fn through_value<K: DeserializeOwned>(text: &str) -> Result<K, String> {
        let value = trim::object(&mut serde_json::Deserializer::from_str(text))
            .map_err(|e| e.to_string())?;
        K::deserialize(value).map_err(|e| e.to_string())
    }

    /// `K` read straight from the text.
    fn straight<K: DeserializeOwned>(text: &str) -> Result<K, String> {
        super::object(&mut serde_json::Deserializer::from_str(text)).map_err(|e| e.to_string())
    }

    /// Both ways give the same object, or both fail.
    fn same<K: DeserializeOwned + Serialize>(text: &str) -> Option<K> {
        let (a, b) = (through_value::<K>(text), straight::<K>(text));
        assert_eq!(
            a.is_ok(),
            b.is_ok(),
            "{text}: {:?} / {:?}",
            a.as_ref().err(),
            b.as_ref().err()
        );
        if let (Ok(a), Ok(b)) = (&a, &b) {
            // The CRD types have no PartialEq: compared as what they write.
            assert_eq!(
                serde_json::to_value(a).unwrap(),
                serde_json::to_value(b).unwrap(),
                "{text}"
            );
        }
        b.ok()
    }

    fn contract(metadata: Value, cpus: Value) -> String {
        json!({
            "apiVersion": "socialweb.computer/v1alpha1",
            "kind": "ComputeContract",
            "metadata": metadata,
            "spec": {
                "resources": {"cpus": cpus, "memory": 1024, "disk": 10, "network": 1},
                "location": {"country": "DE"},
            },
            "status": {"phase": "Bidding", "conditions": [{
                "type": "Ready", "status": "False", "reason": "Bidding",
                "message": "waiting", "lastTransitionTime": "2026-12-04T10:00:00Z",
            }]},
        })
        .to_string()
    }

    fn managed_fields() -> Value {
        json!([{
            "manager": "socialweb/requester", "operation": "Update", "apiVersion": "v1",
            "fieldsType": "FieldsV1", "subresource": "status",
            "fieldsV1": {"f:status": {"f:phase": {}, "f:conditions": {"k:{\"type\":\"Ready\"}": {}}}},
        }])
    }

    #[test]
    fn a_contract_is_read_without_managed_fields_nor_kubectls_copy() {
        let text = contract(
            json!({
                "name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "labels": {"a": "b"},
                "annotations": {
                    api::names::KUBECTL_LAST_APPLIED_ANNOTATION: "{\"kind\":\"ComputeContract\"}",
                    api::names::RECEIPT_ANNOTATION: "{\"id\":\"r\"}",
                },
                "managedFields": managed_fields(),
                "finalizers": ["x"],
            }),
            json!(2),
        );
        let object: ComputeContract = same(&text).unwrap();
        assert_eq!(object.metadata.managed_fields, None);
        assert_eq!(
            object.metadata.annotations,
            Some(
                [(
                    api::names::RECEIPT_ANNOTATION.to_owned(),
                    "{\"id\":\"r\"}".to_owned()
                )]
                .into()
            )
        );
        assert_eq!(object.metadata.finalizers, Some(vec!["x".to_owned()]));
        assert_eq!(object.spec.resources.cpus, 2);
    }

    #[test]
    fn escaped_keys_are_trimmed_as_plain_ones() {
        // `metadata` and `managedFields` spelled with escapes reach the
        // wrapper as owned keys, not borrowed from the text.
        let text = r#"{"apiVersion":"socialweb.computer/v1alpha1","kind":"ComputeContract",
            "meta\u0064ata":{"name":"c","namespace":"ns","m\u0061nagedFields":[{"manager":"m"}],
            "annot\u0061tions":{"kubectl.kubernetes.io/last-applied-configur\u0061tion":"{}","k":"v"}},
            "spec":{"resources":{"cpus":1,"memory":1,"disk":1,"network":1},"location":{"country":"DE"}}}"#;
        let object: ComputeContract = same(text).unwrap();
        assert_eq!(object.metadata.managed_fields, None);
        assert_eq!(
            object.metadata.annotations,
            Some([("k".to_owned(), "v".to_owned())].into())
        );
    }

    #[test]
    fn what_fails_one_way_fails_the_other() {
        let meta = json!({"name": "c", "namespace": "ns", "managedFields": managed_fields()});
        for cpus in [json!(4_294_967_296_u64), json!(-1), json!("2"), json!(null)] {
            assert!(same::<ComputeContract>(&contract(meta.clone(), cpus)).is_none());
        }
        for text in [
            "[]",
            "null",
            r#"{"metadata": []}"#,
            r#"{"metadata": {"managedFields": [], "annotations": ["a"]}}"#,
        ] {
            assert!(same::<ComputeContract>(text).is_none(), "{text}");
        }
    }

    #[test]
    fn other_kinds_read_the_same_both_ways() {
        let secret = json!({
            "apiVersion": "v1", "kind": "Secret", "type": "socialweb.computer/join",
            "metadata": {"name": "s", "namespace": "ns", "managedFields": managed_fields(),
                         "labels": {"infra.socialweb.computer/name": "i"}},
            "data": {"token": "dG9rZW4="},
        });
        let secret: Secret = same(&secret.to_string()).unwrap();
        assert_eq!(secret.metadata.managed_fields, None);
        let claim = json!({
            "apiVersion": "socialweb.computer/v1alpha1", "kind": "NodeClaim",
            "metadata": {"name": "n", "namespace": "t", "managedFields": managed_fields(),
                         "annotations": null},
            "spec": {"clusterRef": {"name": "c"}},
        });
        same::<NodeClaim>(&claim.to_string());
    }

    /// Any JSON value of a few levels, with the keys the wrapper looks at
    /// among the others, so each level is met in every shape.
    fn any_json() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            Just("metadata".to_owned()),
            Just("managedFields".to_owned()),
            Just("annotations".to_owned()),
            Just(api::names::KUBECTL_LAST_APPLIED_ANNOTATION.to_owned()),
            Just("name".to_owned()),
            Just("namespace".to_owned()),
            Just("labels".to_owned()),
            "[a-z]{1,3}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[a-z]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map(key.clone(), inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Whatever the JSON, reading an object's metadata straight from it
        /// agrees with reading it from the trimmed `Value`.
        #[test]
        fn straight_reads_agree_with_the_trimmed_value(metadata in any_json()) {
            let text = json!({"metadata": metadata, "kind": "Secret"}).to_string();
            same::<Secret>(&text);
            same::<Value>(&text);
        }
    }
}
