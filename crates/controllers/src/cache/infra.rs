//! An Infra as the shared cache keeps it: the whole Infra, each text it
//! repeats held once (plan 0018 R4).
//!
//! One Infra holds a Cluster's every node, and each node's entry name is
//! written four times (its contract entry, Secret entry, node entry and
//! status row) and once more in its join labels, beside texts every node of
//! the Infra shares (the owner's DID, the API server, the claims'
//! namespace, the country) and two names derived from it (its join Secret
//! `join-<entry>` and its contract `<infra>-<entry>`). As `api::Infra` each
//! was a `String` of its own: about 1 KiB a node. Here each text of one
//! Infra is a [`Text`] shared through a pool made for that Infra, a derived
//! name is kept only when it is not the derived one, and the texts of one
//! node alone (its node name, claim name and uid) are boxed.
//!
//! Nothing is left out: every reader gets the Infra back whole
//! ([`CachedInfra::infra`], built at each read: an Infra is read once per
//! reconcile of it or of its Cluster, and building one of ten nodes is a
//! few hundred small allocations). So no reader decides from less than the
//! Infra, and none reads it from the API server; the plan's alternative, a
//! read model of what each reader compares with a GET before each write,
//! fell on most of the scale-up's Infra reconciles (they create contracts).
//!
//! It is a [`Resource`](kube::Resource) of the Infra's group, version and
//! kind (the Infra controller's kube-runtime store and `Controller` hold
//! it) and decodes from an Infra's JSON exactly when an [`Infra`] does.
//!
//! # Guarantees
//! - [`CachedInfra::infra`] of [`CachedInfra::from`] an Infra is that Infra,
//!   equal in every field (the metadata included, kept as it came).
//! - [`Labelled::label`] reads each label as the Infra has it. Its
//!   [`kube::Resource::meta`] has no labels and no annotations: they are
//!   kept beside it, in a map that takes a fifth of a `BTreeMap`'s bytes.
//! - [`CachedInfra::cluster_ref`] is the Infra's `spec.clusterRef`.

mod kept;

use std::collections::BTreeMap;

use api::{ClusterRef, Infra, Receipt, StringMap};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::Labelled;
use super::projection::projection_of;
use kept::{KeptSpec, KeptStatus, Pool};

/// An Infra as the shared cache keeps it. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct CachedInfra {
    /// Its metadata as it came (one per Infra, not per node), less its
    /// labels and annotations, kept beside it. Read through
    /// [`kube::Resource::meta`], the labels through [`Labelled`].
    metadata: ObjectMeta,
    /// Its labels: as a `BTreeMap` each Infra's two took a 540-byte node
    /// and four strings; here the keys are interned (the same two in every
    /// Infra).
    labels: Option<StringMap>,
    /// Its annotations, likewise.
    annotations: Option<StringMap>,
    spec: KeptSpec,
    status: Option<Box<KeptStatus>>,
}

impl CachedInfra {
    /// The Infra whole, as the API server gave it.
    #[must_use]
    pub fn infra(&self) -> Infra {
        Infra {
            metadata: ObjectMeta {
                labels: self.labels.as_ref().map(btree_map),
                annotations: self.annotations.as_ref().map(btree_map),
                ..self.metadata.clone()
            },
            spec: self.spec.spec(self.name()),
            status: self
                .status
                .as_deref()
                .map(|status| status.status(self.name())),
        }
    }

    /// Whether it is being deleted.
    #[must_use]
    pub fn is_deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// `spec.clusterRef`: the tenant Cluster it serves.
    #[must_use]
    pub fn cluster_ref(&self) -> Option<&ClusterRef> {
        self.spec.cluster_ref.as_deref()
    }

    /// The receipts its node entries adopt, with the entry of each.
    pub fn adopted(&self) -> impl Iterator<Item = (&str, &Receipt)> {
        self.spec.adopted()
    }

    fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }
}

/// `map` as the API type has it.
fn btree_map(map: &StringMap) -> BTreeMap<String, String> {
    map.iter()
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
}

impl From<Infra> for CachedInfra {
    fn from(infra: Infra) -> Self {
        let Infra {
            mut metadata,
            spec,
            status,
        } = infra;
        let labels = metadata.labels.take().map(StringMap::from);
        let annotations = metadata.annotations.take().map(StringMap::from);
        let name = metadata.name.as_deref().unwrap_or_default();
        let mut pool = Pool::default();
        let spec = KeptSpec::new(spec, name, &mut pool);
        let status = status.map(|status| Box::new(KeptStatus::new(status, name, &mut pool)));
        Self {
            metadata,
            labels,
            annotations,
            spec,
            status,
        }
    }
}

impl From<&Infra> for CachedInfra {
    fn from(infra: &Infra) -> Self {
        Self::from(infra.clone())
    }
}

projection_of!(CachedInfra, Infra);

impl Labelled for CachedInfra {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key)
    }
}

#[cfg(test)]
mod tests;
