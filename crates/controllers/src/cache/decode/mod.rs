//! Decoding each object of a watch on its own, so that one object the
//! manager cannot read does not fail the whole list.
//!
//! kube-runtime's watcher decodes a list as one `ObjectList<K>`: one object
//! with a number its Rust type cannot hold (a `cpus: 4294967296` stored
//! before the schema had a maximum, or written past validation) failed every
//! list, so the caches never synced, no reconcile ran for any tenant and
//! `/readyz` stayed 503 (issue 10, item 2). Here the watcher decodes
//! [`Decoded<K>`] instead: the object, or what is known of one that did not
//! decode (its metadata, the field that failed, what was wrong with it).
//! kube has no per-item tolerant decoding (its `DynamicObject` would decode,
//! but converting each one costs a second full serialization), hence this
//! wrapper.
//!
//! # Guarantees
//! - An object that does not decode never reaches the store as a new
//!   version: the store keeps its last readable version, or never has it.
//!   A claim or contract that turns unreadable is not seen as deleted, so
//!   nothing is released because of it.
//! - Its deletion still reaches the store and the subscribers (with the last
//!   readable version).
//! - No object in the caches has `managedFields` or the annotation
//!   `kubectl.kubernetes.io/last-applied-configuration`: they are dropped before the object is decoded.
//! - Each unreadable version is reported once ([`Lenient::convert`] returns
//!   it); the values themselves are never in the report (a Secret's data may
//!   be what failed), only the field's path and what was expected.

use std::borrow::Cow;
use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

mod trim;
mod typed;

use super::keep::Kept;

/// One object as the watch delivered it.
#[derive(Clone, Debug)]
pub enum Decoded<K> {
    /// It decoded.
    Object(K),
    /// It did not; what is known of it (boxed: rare, and larger than most objects' handle).
    Undecodable(Box<Undecodable>),
}

/// An object that did not decode as its kind.
#[derive(Clone, Debug, PartialEq)]
pub struct Undecodable {
    /// Its metadata (the API server guarantees its shape).
    pub meta: ObjectMeta,
    /// The field that failed, as `spec.resources.cpus` (`.` for the object itself).
    pub field: String,
    /// What was wrong with it, without its value: `expected u32`, `missing field \`cpus\``.
    pub problem: String,
}

impl<'de, K: DeserializeOwned + 'static> Deserialize<'de> for Decoded<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // No reconcile reads who wrote which field (writes are server-side
        // apply, and the replacing writes drop it), nor the whole object
        // `kubectl apply` keeps in an annotation: left out while parsing, they
        // were most of every cached object's memory and of its decoding.
        // The object's text is kept aside (a copy, no parse) so that one that
        // does not decode as `K` can still be read for its metadata and the
        // failing field; a readable one is parsed once, straight into `K`.
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        if let Ok(object) =
            typed::object::<K, _>(&mut serde_json::Deserializer::from_str(raw.get()))
        {
            return Ok(Self::Object(object));
        }
        let value = trim::object(&mut serde_json::Deserializer::from_str(raw.get()))
            .map_err(D::Error::custom)?;
        let meta = match value.get("metadata") {
            Some(meta) => ObjectMeta::deserialize(meta).map_err(D::Error::custom)?,
            None => return Err(D::Error::missing_field("metadata")),
        };
        // Decoded again only when it failed, for the path of the failing field.
        let (field, problem) = match serde_path_to_error::deserialize::<_, K>(&value) {
            Ok(_) => (".".to_owned(), "is not valid".to_owned()),
            Err(error) => (
                error.path().to_string(),
                without_value(&error.inner().to_string()),
            ),
        };
        Ok(Self::Undecodable(Box::new(Undecodable {
            meta,
            field,
            problem,
        })))
    }
}

/// One object's JSON (a write's answer) as the caches hold objects: parsed
/// without `managedFields` and kubectl's copy of the object (see [`trim`]).
///
/// # Errors
/// `json` is not one JSON value.
pub fn trimmed(json: &str) -> serde_json::Result<serde_json::Value> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let value = trim::object(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// One object's JSON (a write's answer) as `K`, parsed as the caches parse
/// objects: straight into `K`, without `managedFields` and kubectl's copy
/// of the object (the same object as `K` from [`trimmed`]'s value).
///
/// # Errors
/// `json` is not one JSON value, or not a `K`.
pub fn trimmed_as<K: DeserializeOwned>(json: &str) -> serde_json::Result<K> {
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let object = typed::object(&mut deserializer)?;
    deserializer.end()?;
    Ok(object)
}

/// What serde says was wrong, with the offending value left out.
fn without_value(message: &str) -> String {
    if let Some(at) = message.find(", expected ") {
        return message[at + 2..].to_owned();
    }
    if message.starts_with("missing field") {
        return message.to_owned();
    }
    "is not valid".to_owned()
}

impl<K: Resource<DynamicType = ()>> Resource for Decoded<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            Self::Object(object) => object.meta(),
            Self::Undecodable(undecodable) => &undecodable.meta,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Self::Object(object) => object.meta_mut(),
            Self::Undecodable(undecodable) => &mut undecodable.meta,
        }
    }
}

/// The key of an object in a `Store<K>`, from its metadata.
fn key_of<K: Resource<DynamicType = ()>>(meta: &ObjectMeta) -> ObjectRef<K> {
    let key = ObjectRef::new(meta.name.as_deref().unwrap_or_default());
    match meta.namespace.as_deref() {
        Some(namespace) => key.within(namespace),
        None => key,
    }
}

/// Turns the watch events of [`Decoded`] objects into the events the store
/// takes, and remembers which objects it could not read.
#[derive(Debug)]
pub struct Lenient<K: Resource<DynamicType = ()>> {
    /// Objects whose latest version did not decode, with that version.
    undecodable: HashMap<ObjectRef<K>, Option<String>>,
    /// The undecodable objects met so far in the list under way.
    relisted: HashMap<ObjectRef<K>, Option<String>>,
}

impl<K: Resource<DynamicType = ()>> Default for Lenient<K> {
    fn default() -> Self {
        Self {
            undecodable: HashMap::new(),
            relisted: HashMap::new(),
        }
    }
}

/// What one watch event becomes.
#[derive(Debug)]
pub struct Converted<K> {
    /// The event for the store and the subscribers, if there is one.
    pub event: Option<watcher::Event<K>>,
    /// A version that did not decode and was not reported yet.
    pub report: Option<Undecodable>,
}

impl<K> Lenient<K>
where
    K: Resource<DynamicType = ()> + Clone,
{
    /// How many objects have no readable latest version now.
    #[must_use]
    pub fn undecodable(&self) -> usize {
        self.undecodable.len()
    }

    /// The store event of `event`; `store` is what the cache keeps before it takes it.
    pub fn convert(
        &mut self,
        event: watcher::Event<Decoded<K>>,
        store: &impl Kept<K>,
    ) -> Converted<K> {
        let mut report = None;
        let event = match event {
            watcher::Event::Init => {
                self.relisted.clear();
                Some(watcher::Event::Init)
            }
            watcher::Event::InitApply(Decoded::Object(object)) => {
                Some(watcher::Event::InitApply(object))
            }
            watcher::Event::InitApply(Decoded::Undecodable(bad)) => {
                let key = key_of::<K>(&bad.meta);
                report = self.remember(&key, &bad);
                self.relisted
                    .insert(key.clone(), bad.meta.resource_version.clone());
                // Kept as it was: it must not look deleted after the list.
                store
                    .get(&key)
                    .map(|old| watcher::Event::InitApply((*old).clone()))
            }
            watcher::Event::InitDone => {
                // Those not met again are gone.
                self.undecodable = std::mem::take(&mut self.relisted);
                Some(watcher::Event::InitDone)
            }
            watcher::Event::Apply(Decoded::Object(object)) => {
                self.undecodable.remove(&ObjectRef::from_obj(&object));
                Some(watcher::Event::Apply(object))
            }
            watcher::Event::Apply(Decoded::Undecodable(bad)) => {
                let key = key_of::<K>(&bad.meta);
                report = self.remember(&key, &bad);
                None
            }
            watcher::Event::Delete(Decoded::Object(object)) => {
                self.undecodable.remove(&ObjectRef::from_obj(&object));
                Some(watcher::Event::Delete(object))
            }
            watcher::Event::Delete(Decoded::Undecodable(bad)) => {
                let key = key_of::<K>(&bad.meta);
                self.undecodable.remove(&key);
                store
                    .get(&key)
                    .map(|old| watcher::Event::Delete((*old).clone()))
            }
        };
        Converted { event, report }
    }

    /// Records `bad` as the latest version of `key`; it is returned when that
    /// version was not reported before.
    fn remember(&mut self, key: &ObjectRef<K>, bad: &Undecodable) -> Option<Undecodable> {
        let version = bad.meta.resource_version.clone();
        let known = self.undecodable.insert(key.clone(), version.clone());
        (known != Some(version)).then(|| bad.clone())
    }
}

#[cfg(test)]
mod tests;
