//! [`Labelled`]: an object's labels, wherever the cache keeps them.
//!
//! A cached kind keeps its labels in its metadata, except a projection that
//! keeps them beside it in a smaller form ([`super::CachedContract`],
//! [`super::WatchedJoinSecret`] and the kept [`super::CachedJoinSecret`],
//! each implementing this beside its type):
//! code that reads the labels of objects of several kinds (the indexes, the
//! mappers that find a Cluster from an Infra name label) reads them through
//! this trait, so no projection's labels look empty to it.

use api::Infra;

/// Reads one label of a cached object.
pub trait Labelled {
    /// The value of its label `key`.
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labelled for Infra {
    fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(key).map(String::as_str)
    }
}
