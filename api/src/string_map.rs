//! [`StringMap`]: a string-to-string map for the few entries of a node's
//! labels, with the JSON, the schema, the order, the equality and the hash of
//! a `BTreeMap<String, String>`.
//!
//! Why not a `BTreeMap`: it allocates a whole node of eleven entries (about
//! 540 bytes) to hold one, and every node's labels are held twice in the
//! manager's caches (its contract's `spec.nodeJoin` and its entry in the
//! Infra): about 0.9 KiB per node, 9 MiB at 10,000 nodes (plan 0016 C2). A
//! vector sorted by key holds two labels in 80 bytes. Its keys are
//! [`intern`]ed: every node's labels and annotations have the same few keys
//! (plan 0017).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::text::{Text, intern, interned};

/// A map of strings kept as a vector sorted by key, without duplicate keys.
///
/// # Guarantees
/// - Serializes as the `BTreeMap<String, String>` of the same entries would
///   (a JSON object, keys in order), and has its schema.
/// - Reads a JSON object as that `BTreeMap` would: a key given twice keeps its
///   last value.
/// - Equality, ordering and `Hash` are those of that `BTreeMap`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StringMap(Vec<(Text, String)>);

impl StringMap {
    /// An empty map; allocates nothing.
    #[must_use]
    pub const fn new() -> Self {
        Self(Vec::new())
    }

    /// Whether it holds no entry.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The value of `key`, if any.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.position(key).ok().map(|at| self.0[at].1.as_str())
    }

    /// Sets `key` to `value`; returns the value it replaced, if any.
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        self.set(intern(&key), value)
    }

    /// Removes `key`; returns its value, if it had one.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let at = self.position(key).ok()?;
        Some(self.0.remove(at).1)
    }

    /// [`StringMap::insert`] with the key interned already.
    fn set(&mut self, key: Text, value: String) -> Option<String> {
        match self.position(&key) {
            Ok(at) => Some(std::mem::replace(&mut self.0[at].1, value)),
            Err(at) => {
                self.0.insert(at, (key, value));
                None
            }
        }
    }

    /// The entries in the order of their keys.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }
}

impl FromIterator<(String, String)> for StringMap {
    /// As a `BTreeMap` collects: a key given twice keeps its last value.
    fn from_iter<I: IntoIterator<Item = (String, String)>>(entries: I) -> Self {
        let mut map = Self::new();
        for (key, value) in entries {
            map.insert(key, value);
        }
        map.0.shrink_to_fit();
        map
    }
}

impl<const N: usize> From<[(String, String); N]> for StringMap {
    fn from(entries: [(String, String); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl From<BTreeMap<String, String>> for StringMap {
    fn from(map: BTreeMap<String, String>) -> Self {
        Self(
            map.into_iter()
                .map(|(key, value)| (intern(&key), value))
                .collect(),
        )
    }
}

impl From<StringMap> for BTreeMap<String, String> {
    fn from(map: StringMap) -> Self {
        map.0
            .into_iter()
            .map(|(key, value)| (key.into(), value))
            .collect()
    }
}

impl Serialize for StringMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in &self.0 {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for StringMap {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;

        /// A key, [`intern`]ed as it is read.
        #[derive(Deserialize)]
        struct Key(#[serde(deserialize_with = "interned")] Text);

        impl<'de> Visitor<'de> for Entries {
            type Value = StringMap;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings to strings")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<StringMap, A::Error> {
                let mut map = StringMap(Vec::with_capacity(access.size_hint().unwrap_or(0)));
                while let Some((Key(key), value)) = access.next_entry::<Key, String>()? {
                    map.set(key, value);
                }
                map.0.shrink_to_fit();
                Ok(map)
            }
        }

        deserializer.deserialize_map(Entries)
    }
}

/// The schema of `BTreeMap<String, String>`, so the CRDs do not change.
impl JsonSchema for StringMap {
    fn inline_schema() -> bool {
        <BTreeMap<String, String> as JsonSchema>::inline_schema()
    }

    fn schema_name() -> Cow<'static, str> {
        <BTreeMap<String, String> as JsonSchema>::schema_name()
    }

    fn schema_id() -> Cow<'static, str> {
        <BTreeMap<String, String> as JsonSchema>::schema_id()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <BTreeMap<String, String> as JsonSchema>::json_schema(generator)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly
mod tests {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    use proptest::prelude::*;

    use super::*;

    fn hash_of<T: Hash>(value: &T) -> u64 {
        let mut hasher = DefaultHasher::new();
        value.hash(&mut hasher);
        hasher.finish()
    }

    fn entries() -> impl Strategy<Value = Vec<(String, String)>> {
        // Few distinct keys, so that keys repeat.
        prop::collection::vec(("[a-d/.]{0,3}", "[a-z0-9]{0,4}"), 0..8)
    }

    #[test]
    fn maps_read_apart_share_their_keys() {
        let body = r#"{"infra.socialweb.computer/contract": "node-1"}"#;
        let a: StringMap = serde_json::from_str(body).unwrap();
        let b: StringMap = serde_json::from_str(body).unwrap();
        assert!(a.0[0].0.shares(&b.0[0].0), "one key for every map");
        assert!(
            !std::ptr::eq(a.0[0].1.as_ptr(), b.0[0].1.as_ptr()),
            "values are their own"
        );
        let built: StringMap = [(
            "infra.socialweb.computer/contract".to_owned(),
            "node-2".to_owned(),
        )]
        .into();
        assert!(built.0[0].0.shares(&a.0[0].0), "built or read alike");
    }

    proptest! {
        /// Whatever entries, in whatever order and with whatever repeats, the
        /// map is the BTreeMap of them: its JSON both ways, lookups, equality,
        /// order and hash.
        #[test]
        fn behaves_as_the_btreemap_of_the_same_entries(entries in entries(), other in entries()) {
            let tree: BTreeMap<String, String> = entries.iter().cloned().collect();
            let map: StringMap = entries.iter().cloned().collect();
            prop_assert_eq!(serde_json::to_string(&map).unwrap(), serde_json::to_string(&tree).unwrap());
            prop_assert_eq!(BTreeMap::from(map.clone()), tree.clone());
            prop_assert_eq!(map.len(), tree.len());
            for (key, value) in &tree {
                prop_assert_eq!(map.get(key), Some(value.as_str()));
            }
            prop_assert_eq!(map.get("absent key"), None);
            prop_assert_eq!(hash_of(&map), hash_of(&tree));

            // Read from a JSON object whose keys repeat, as the BTreeMap reads it.
            let body = format!(
                "{{{}}}",
                entries
                    .iter()
                    .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), serde_json::to_string(v).unwrap()))
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let read: StringMap = serde_json::from_str(&body).unwrap();
            let read_tree: BTreeMap<String, String> = serde_json::from_str(&body).unwrap();
            prop_assert_eq!(BTreeMap::from(read.clone()), read_tree);
            prop_assert_eq!(&read, &map);

            let other_tree: BTreeMap<String, String> = other.iter().cloned().collect();
            let other_map: StringMap = other.into_iter().collect();
            prop_assert_eq!(map == other_map, tree == other_tree);
            prop_assert_eq!(map.cmp(&other_map), tree.cmp(&other_tree));
        }
    }

    #[test]
    fn its_schema_is_that_of_a_btreemap_of_strings() {
        let ours = schemars::schema_for!(StringMap);
        let theirs = schemars::schema_for!(BTreeMap<String, String>);
        assert_eq!(ours, theirs);
    }

    #[test]
    fn a_value_that_is_not_a_string_is_refused() {
        let error = serde_json::from_str::<StringMap>(r#"{"a": 1}"#).unwrap_err();
        assert!(error.to_string().contains("expected a string"), "{error}");
    }
}
