//! A stored object: its serialized JSON plus the few fields the server indexes.
//!
//! Memory matters here (one of these per object, and one per version still in the watch
//! window): the JSON is kept at its exact length; namespace, name and uid are read from
//! where the JSON already spells them (kept as offsets, not copies); labels,
//! ownerReferences and finalizers live behind one optional box that objects without any
//! of them (most Events, plain ConfigMaps) do not allocate.

use std::collections::BTreeMap;

use serde_json::Value;

/// `(namespace or "", name)`.
pub type ObjKey = (String, String);

/// An ownerReference, reduced to what the garbage collector indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerLink {
    /// The owner's uid.
    pub uid: String,
    /// `blockOwnerDeletion`.
    pub block: bool,
}

/// What only some objects have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Extra {
    labels: BTreeMap<String, String>,
    owners: Vec<OwnerLink>,
    finalizers: Vec<String>,
    /// Namespace, name and uid, when one of them is not spelled as is in the JSON (it
    /// holds a character JSON escapes).
    ids: Option<[Box<str>; 3]>,
}

/// The labels of an object without any.
static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// Where a string is in the JSON: offset and length.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    at: u32,
    len: u16,
}

/// Where `"key":"value"` is in `json` (as serde_json writes it), if the value is spelled
/// there as is. Any occurrence will do: they all spell the same text. Searched with
/// memchr's vectorised memmem: `str::find`'s two-way search over the managedFields that
/// come before `name` and `uid` was about 2 % of the API server's samples (plan 0016 C3).
fn find_value(json: &str, key: &str, value: &str) -> Option<Span> {
    if value.is_empty() {
        return Some(Span::default());
    }
    if value.chars().any(|c| c == '"' || c == '\\' || c < ' ') {
        return None;
    }
    let pattern = format!("\"{key}\":\"{value}\"");
    let at = memchr::memmem::find(json.as_bytes(), pattern.as_bytes())? + key.len() + 4;
    Some(Span {
        at: u32::try_from(at).ok()?,
        len: u16::try_from(value.len()).ok()?,
    })
}

/// An object as kept by the store.
#[derive(Debug, Clone)]
pub struct StoredObject {
    /// The full object as JSON (metadata.resourceVersion included).
    pub json: Box<[u8]>,
    /// Its resourceVersion.
    pub rv: u64,
    /// Whether deletionTimestamp is set.
    pub deleting: bool,
    /// The [`crate::schema::CrdSchema::mark`] of the schema whose pass (defaults, pruning,
    /// validation) made everything of the object but `metadata`, or 0 when unknown (a
    /// built-in kind, an object read back from disk, a write outside the request path).
    pub schema_mark: u32,
    /// Where namespace, name and uid start in `json`, and their lengths (unless
    /// `extra.ids` holds them); apart, so no padding grows the struct.
    id_at: [u32; 3],
    id_len: [u16; 3],
    extra: Option<Box<Extra>>,
}

impl StoredObject {
    /// Indexes and serializes `value`; None if it cannot be serialized.
    #[must_use]
    pub fn new(value: &Value, rv: u64) -> Option<Self> {
        let json = serde_json::to_vec(value).ok()?.into_boxed_slice();
        let meta = &value["metadata"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let labels: BTreeMap<String, String> = meta["labels"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), text(v))).collect())
            .unwrap_or_default();
        let owners: Vec<OwnerLink> = meta["ownerReferences"]
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
        let finalizers: Vec<String> = meta["finalizers"]
            .as_array()
            .map(|f| f.iter().map(text).collect())
            .unwrap_or_default();
        let keys = ["namespace", "name", "uid"];
        let values = keys.map(|key| meta[key].as_str().unwrap_or_default());
        let written = std::str::from_utf8(&json).ok()?;
        let found = [0, 1, 2].map(|i| find_value(written, keys[i], values[i]));
        let (ids, owned) = match found {
            [Some(namespace), Some(name), Some(uid)] => ([namespace, name, uid], None),
            _ => ([Span::default(); 3], Some(values.map(Box::from))),
        };
        let extra =
            (!labels.is_empty() || !owners.is_empty() || !finalizers.is_empty() || owned.is_some())
                .then(|| {
                    Box::new(Extra {
                        labels,
                        owners,
                        finalizers,
                        ids: owned,
                    })
                });
        Some(Self {
            json,
            rv,
            deleting: !meta["deletionTimestamp"].is_null(),
            schema_mark: 0,
            id_at: ids.map(|span| span.at),
            id_len: ids.map(|span| span.len),
            extra,
        })
    }

    fn id(&self, which: usize) -> &str {
        if let Some(owned) = self.extra.as_ref().and_then(|e| e.ids.as_ref()) {
            return owned.get(which).map_or("", |id| id);
        }
        let (Some(at), Some(len)) = (self.id_at.get(which), self.id_len.get(which)) else {
            return "";
        };
        let at = *at as usize;
        self.json
            .get(at..at + usize::from(*len))
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .unwrap_or_default()
    }

    /// Namespace ("" for cluster-scoped).
    #[must_use]
    pub fn namespace(&self) -> &str {
        self.id(0)
    }

    /// Name.
    #[must_use]
    pub fn name(&self) -> &str {
        self.id(1)
    }

    /// uid.
    #[must_use]
    pub fn uid(&self) -> &str {
        self.id(2)
    }

    /// Labels.
    #[must_use]
    pub fn labels(&self) -> &BTreeMap<String, String> {
        self.extra.as_ref().map_or(&NO_LABELS, |e| &e.labels)
    }

    /// ownerReferences.
    #[must_use]
    pub fn owners(&self) -> &[OwnerLink] {
        self.extra.as_ref().map_or(&[], |e| &e.owners)
    }

    /// metadata.finalizers.
    #[must_use]
    pub fn finalizers(&self) -> &[String] {
        self.extra.as_ref().map_or(&[], |e| &e.finalizers)
    }

    /// Whether metadata.finalizers holds `finalizer`.
    #[must_use]
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers().iter().any(|f| f == finalizer)
    }

    /// The object parsed back (Null if the stored bytes are somehow unreadable).
    #[must_use]
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }

    /// The store key.
    #[must_use]
    pub fn key(&self) -> ObjKey {
        (self.namespace().to_owned(), self.name().to_owned())
    }
}

/// Sets `metadata.resourceVersion`.
pub fn set_rv(value: &mut Value, rv: u64) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn indexes_the_metadata_it_needs() {
        let value = json!({"metadata": {
            "namespace": "ns", "name": "a", "uid": "u-1",
            "labels": {"app": "x"}, "finalizers": ["f"],
            "ownerReferences": [{"uid": "o-1", "blockOwnerDeletion": true}, {"uid": "o-2"}],
            "deletionTimestamp": "2026-01-01T00:00:00Z",
        }});
        let stored = StoredObject::new(&value, 7).unwrap();
        assert_eq!(
            (stored.namespace(), stored.name(), stored.uid()),
            ("ns", "a", "u-1")
        );
        assert_eq!(stored.labels().get("app").map(String::as_str), Some("x"));
        assert_eq!(stored.finalizers(), ["f".to_owned()]);
        assert!(stored.has_finalizer("f") && !stored.has_finalizer("g"));
        assert_eq!(stored.owners().len(), 2);
        assert!(stored.owners()[0].block && !stored.owners()[1].block);
        assert!(stored.deleting);
        assert_eq!(stored.key(), ("ns".to_owned(), "a".to_owned()));
        assert_eq!(stored.value(), value);
    }

    #[test]
    fn ids_are_read_where_the_json_spells_them_or_kept_when_it_escapes_them() {
        // A label spelled like the name comes first in the JSON: it is the same text.
        let value = json!({"metadata": {"labels": {"name": "a"}, "namespace": "ns",
                           "name": "a", "uid": "u"}});
        let stored = StoredObject::new(&value, 1).unwrap();
        assert_eq!(
            (stored.namespace(), stored.name(), stored.uid()),
            ("ns", "a", "u")
        );
        let odd = json!({"metadata": {"namespace": "ns", "name": "a\"b\\c", "uid": "u"}});
        let stored = StoredObject::new(&odd, 1).unwrap();
        assert_eq!(
            (stored.namespace(), stored.name(), stored.uid()),
            ("ns", "a\"b\\c", "u")
        );
        assert!(stored.labels().is_empty());
    }

    #[test]
    fn a_plain_cluster_scoped_object_has_empty_extras() {
        let stored = StoredObject::new(&json!({"metadata": {"name": "n"}}), 1).unwrap();
        assert_eq!(
            (stored.namespace(), stored.name(), stored.uid()),
            ("", "n", "")
        );
        assert!(stored.labels().is_empty() && stored.owners().is_empty());
        assert!(stored.finalizers().is_empty() && !stored.deleting);
    }
}
