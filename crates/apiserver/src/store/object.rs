//! A stored object: its serialized JSON plus the few fields the server indexes.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;

/// `(namespace or "", name)`.
pub type ObjKey = (String, String);

/// An ownerReference, reduced to what the garbage collector needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerLink {
    /// The owner's uid.
    pub uid: String,
    /// `blockOwnerDeletion`.
    pub block: bool,
}

/// An object as kept by the store.
#[derive(Debug, Clone)]
pub struct StoredObject {
    /// The full object as JSON (metadata.resourceVersion included).
    pub json: Bytes,
    /// Its resourceVersion.
    pub rv: u64,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// uid.
    pub uid: String,
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// ownerReferences.
    pub owners: Vec<OwnerLink>,
    /// metadata.finalizers.
    pub finalizers: Vec<String>,
    /// Whether deletionTimestamp is set.
    pub deleting: bool,
}

impl StoredObject {
    /// Indexes and serializes `value`; None if it cannot be serialized.
    #[must_use]
    pub fn new(value: &Value, rv: u64) -> Option<Self> {
        let json = serde_json::to_vec(value).ok()?;
        let meta = &value["metadata"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let labels = meta["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default();
        let owners = meta["ownerReferences"]
            .as_array()
            .map(|refs| {
                refs.iter()
                    .map(|r| OwnerLink {
                        uid: text(&r["uid"]),
                        block: r["blockOwnerDeletion"].as_bool().unwrap_or(false),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let finalizers = meta["finalizers"]
            .as_array()
            .map(|f| f.iter().map(text).collect())
            .unwrap_or_default();
        Some(Self {
            json: Bytes::from(json),
            rv,
            namespace: text(&meta["namespace"]),
            name: text(&meta["name"]),
            uid: text(&meta["uid"]),
            labels,
            owners,
            finalizers,
            deleting: !meta["deletionTimestamp"].is_null(),
        })
    }

    /// The object parsed back (Null if the stored bytes are somehow unreadable).
    #[must_use]
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }

    /// The store key.
    #[must_use]
    pub fn key(&self) -> ObjKey {
        (self.namespace.clone(), self.name.clone())
    }
}

/// Sets `metadata.resourceVersion`.
pub fn set_rv(value: &mut Value, rv: u64) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}
