//! A ComputeContract as the shared cache keeps it (plan 0017 P2).
//!
//! Every reconciler reads contracts from the cache, and the Requester
//! runs them, so the cached form is a [`Resource`] of the contract's group,
//! version and kind: the Requester's controller, its status writes and its
//! metadata patches all work on it, and their answers decode into it.
//! What differs from a [`ComputeContract`] is where the labels and the
//! annotations are: a `BTreeMap` takes a ~540-byte node however few entries
//! it holds, and a contract has two labels and one annotation (its
//! receipt), so as [`StringMap`]s beside the metadata they take about a
//! tenth of that (`cache_weight`). The creation time, which nothing reads,
//! is left out. Equal condition messages share one allocation.
//!
//! # Guarantees
//! - It decodes from a contract's JSON exactly when a [`ComputeContract`]
//!   does, and is then [`CachedContract::from`] it.
//! - Its JSON is that of the [`ComputeContract`] it converts back to
//!   (labels and annotations in the metadata), so a write of it sends what
//!   a write of the whole contract would, less the creation time.
//! - `metadata.labels` and `metadata.annotations` are always `None`: the
//!   labels are read through [`Labelled`] and the annotations through
//!   [`CachedContract::annotation`].

use api::{ComputeContract, ComputeContractSpec, ComputeContractStatus, StringMap};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::object::HasStatus;
use serde::{Serialize, Serializer};

use super::Labelled;
use super::projection::{KeptMetadata, projection_of};

/// What the shared cache keeps of a ComputeContract. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct CachedContract {
    /// Its metadata without labels, annotations, creation time and managed fields.
    pub metadata: ObjectMeta,
    /// Its labels.
    pub labels: StringMap,
    /// Its annotations.
    pub annotations: StringMap,
    /// Its spec, as written.
    pub spec: ComputeContractSpec,
    /// Its status, as written.
    pub status: Option<ComputeContractStatus>,
}

impl CachedContract {
    /// The value of its annotation `key`.
    #[must_use]
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations.get(key)
    }
}

impl From<ComputeContract> for CachedContract {
    fn from(contract: ComputeContract) -> Self {
        let ComputeContract {
            metadata,
            spec,
            mut status,
        } = contract;
        if let Some(status) = &mut status {
            // Each was decoded apart: the Bidding and Accepted conditions say
            // the same of the bid, Ready, Deployed and the message the same
            // of the guest (about 300 bytes a contract).
            api::share_equal_messages(&mut status.conditions, status.message.as_mut());
        }
        let KeptMetadata {
            metadata,
            labels,
            annotations,
        } = metadata.into();
        Self {
            metadata,
            labels,
            annotations,
            spec,
            status,
        }
    }
}

impl From<CachedContract> for ComputeContract {
    fn from(cached: CachedContract) -> Self {
        let CachedContract {
            mut metadata,
            labels,
            annotations,
            spec,
            status,
        } = cached;
        metadata.labels = (!labels.is_empty()).then(|| labels.into());
        metadata.annotations = (!annotations.is_empty()).then(|| annotations.into());
        Self {
            metadata,
            spec,
            status,
        }
    }
}

impl Serialize for CachedContract {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Only writes serialize one (a status write's body): a copy is cheap there.
        ComputeContract::from(self.clone()).serialize(serializer)
    }
}

projection_of!(CachedContract, ComputeContract);

impl HasStatus for CachedContract {
    type Status = ComputeContractStatus;

    fn status(&self) -> Option<&ComputeContractStatus> {
        self.status.as_ref()
    }

    fn status_mut(&mut self) -> &mut Option<ComputeContractStatus> {
        &mut self.status
    }
}

impl Labelled for CachedContract {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }
}

#[cfg(test)]
mod tests;
