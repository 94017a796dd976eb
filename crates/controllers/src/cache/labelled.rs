//! [`Labelled`]: an object's labels, wherever the cache keeps them.
//!
//! A cached kind keeps its labels in its metadata, except a projection that
//! keeps them beside it in a smaller form ([`CachedJoinSecret`]): code that
//! reads the labels of objects of several kinds (the indexes, the mappers
//! that find a Cluster from an Infra name label) reads them through this
//! trait, so no projection's labels look empty to it.

use api::{ComputeContract, Infra};
use kube::Resource;

use super::join_secret::CachedJoinSecret;

/// Reads one label of a cached object.
pub trait Labelled {
    /// The value of its label `key`.
    fn label(&self, key: &str) -> Option<&str>;
}

/// The label `key` in `object`'s metadata.
fn metadata_label<'a, K: Resource>(object: &'a K, key: &str) -> Option<&'a str> {
    object.meta().labels.as_ref()?.get(key).map(String::as_str)
}

impl Labelled for ComputeContract {
    fn label(&self, key: &str) -> Option<&str> {
        metadata_label(self, key)
    }
}

impl Labelled for Infra {
    fn label(&self, key: &str) -> Option<&str> {
        metadata_label(self, key)
    }
}

impl Labelled for CachedJoinSecret {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }
}
