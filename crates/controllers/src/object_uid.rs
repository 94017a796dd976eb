//! [`ObjectUid`]: where an object's uid is read.
//!
//! A write's precondition ([`crate::write::Seen`]: a delete removes only
//! the object read, never a newer one of the same name) and the record of a
//! controller's own writes ([`crate::own_writes::OwnWrites`]) key on an
//! object's uid. Most kinds keep it in their metadata; the cached contract
//! keeps a UUID apart in 16 bytes ([`crate::cache::CachedContract::uid`],
//! plan 0018 R9), where `ResourceExt::uid` would not find it. So each kind
//! those read says where its uid is, and the compiler finds every caller of
//! a kind that has not.

use std::borrow::Cow;

use api::{AtprotoRecord, Cluster, ComputeContract, Infra, NodeClaim, Requester};
use k8s_openapi::api::core::v1::Secret;
use kube::Resource;

use crate::cache::{CachedClaim, CachedContract, CachedInfra};
use crate::requester::WholeContract;

/// An object whose uid a write precondition or [`crate::own_writes`] reads.
/// Implemented per kind, not for every `Resource`: the default reads the
/// metadata, which a projection that keeps the uid apart overrides.
pub trait ObjectUid: Resource {
    /// The object's uid, if it has one: borrowed from the metadata, made
    /// only where it is kept apart (OwnWrites asks at every contract event).
    fn object_uid(&self) -> Option<Cow<'_, str>> {
        self.meta().uid.as_deref().map(Cow::Borrowed)
    }
}

/// A UUID is kept apart from its metadata ([`CachedContract::uid`]).
impl ObjectUid for CachedContract {
    fn object_uid(&self) -> Option<Cow<'_, str>> {
        self.uid().map(Cow::Owned)
    }
}

impl ObjectUid for AtprotoRecord {}
impl ObjectUid for CachedClaim {}
impl ObjectUid for CachedInfra {}
impl ObjectUid for Cluster {}
impl ObjectUid for ComputeContract {}
impl ObjectUid for Infra {}
impl ObjectUid for NodeClaim {}
impl ObjectUid for Requester {}
impl ObjectUid for Secret {}
impl ObjectUid for WholeContract {}
