//! [`projection_of!`]: what makes a cached projection stand for its kind.
//!
//! A projection ([`super::CachedContract`], [`super::WatchedJoinSecret`])
//! keeps less of an object than its kind's type, but the shared cache
//! watches it, kube-runtime's stores and controllers hold it and the writes
//! decode their answers into it: so it is a kube [`Resource`](kube::Resource)
//! with its kind's group, version, kind and plural, and it decodes from the
//! kind's JSON exactly when the kind's type does, through its
//! `From<kind>`. Its metadata is trimmed the same way for every projection
//! ([`KeptMetadata`]).

use api::StringMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// An object's metadata as a projection keeps it, and its labels and
/// annotations, which the projection keeps beside it: a `BTreeMap` takes a
/// ~540-byte node however few entries it holds. The creation time and the
/// managed fields, which nothing reads, are dropped.
pub(crate) struct KeptMetadata {
    /// The metadata without labels, annotations, creation time and managed fields.
    pub metadata: ObjectMeta,
    /// Its labels.
    pub labels: StringMap,
    /// Its annotations.
    pub annotations: StringMap,
}

impl From<ObjectMeta> for KeptMetadata {
    fn from(mut metadata: ObjectMeta) -> Self {
        let labels = metadata.labels.take().map(StringMap::from);
        let annotations = metadata.annotations.take().map(StringMap::from);
        metadata.creation_timestamp = None;
        metadata.managed_fields = None;
        Self {
            metadata,
            labels: labels.unwrap_or_default(),
            annotations: annotations.unwrap_or_default(),
        }
    }
}

/// Implements `Resource` (the group, version, kind and plural of `$kind`,
/// the projection's own `metadata`) and `Deserialize` (as a `$kind`, then
/// `From`) for the projection `$cached`.
macro_rules! projection_of {
    ($cached:ty, $kind:ty) => {
        impl kube::Resource for $cached {
            type DynamicType = ();
            type Scope = <$kind as kube::Resource>::Scope;

            fn kind(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::kind(dt)
            }

            fn group(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::group(dt)
            }

            fn version(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::version(dt)
            }

            fn plural(dt: &()) -> std::borrow::Cow<'_, str> {
                <$kind as kube::Resource>::plural(dt)
            }

            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }

            fn meta_mut(
                &mut self,
            ) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }

        impl<'de> serde::Deserialize<'de> for $cached {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                // The whole object lives only while it is read.
                <$kind as serde::Deserialize>::deserialize(deserializer).map(Self::from)
            }
        }
    };
}

pub(crate) use projection_of;
