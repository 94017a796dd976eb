//! A ComputeContract as the Requester reads it from the API server to run
//! it (plan 0018 R2): whole, as every decision and write of the lifecycle
//! needs it, and held only while a reconcile runs. The shared cache keeps
//! less ([`crate::cache::CachedContract`]).
//!
//! It is a [`Resource`](kube::Resource) of the contract's group, version and
//! kind: the Requester's reads, its status writes and its metadata patches
//! all work on it, and their answers decode into it. What differs from a
//! [`ComputeContract`] is where the labels and the annotations are (as
//! [`StringMap`]s beside the metadata), and the receipt annotation, written
//! before the status holds the receipt so that a restart cannot lose it:
//! when it is `status.receipt` as JSON it is not kept twice but marked
//! ([`WholeContract::receipt_annotated`]). The creation time, which nothing
//! reads, is left out. (This was the shared cache's form of a contract
//! before the cache kept a read model; it stays compact for the tests and
//! properties built on it.)
//!
//! # Guarantees
//! - It decodes from a contract's JSON exactly when a [`ComputeContract`]
//!   does, and is then [`WholeContract::from`] it.
//! - Its JSON is that of the [`ComputeContract`] it converts back to
//!   (labels and annotations in the metadata), so a write of it sends what
//!   a write of the whole contract would, less the creation time. A decoded
//!   contract converts back to the contract it was decoded from, less the
//!   creation time. (A copy whose `status.receipt` was changed converts back
//!   with the receipt annotation of the new receipt; only a status write
//!   sends such a copy, and the server takes only its status.)
//! - `metadata.labels` and `metadata.annotations` are always `None`: the
//!   labels are read through [`Labelled`], the receipt annotation through
//!   [`WholeContract::annotated_receipt`], any other annotation through
//!   [`WholeContract::annotation`].

use api::names::RECEIPT_ANNOTATION;
use api::{ComputeContract, ComputeContractSpec, ComputeContractStatus, Receipt, StringMap};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::object::HasStatus;
use serde::{Serialize, Serializer};

use crate::cache::projection::{KeptMetadata, projection_of};
use crate::cache::{CachedContract, Labelled};

/// A ComputeContract as the Requester runs it. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct WholeContract {
    /// Its metadata without labels, annotations, creation time and managed fields.
    pub metadata: ObjectMeta,
    /// Its labels.
    pub labels: StringMap,
    /// Its annotations, less the receipt annotation when
    /// [`Self::receipt_annotated`].
    pub annotations: StringMap,
    /// Whether its receipt annotation, left out of `annotations`, is
    /// `status.receipt` as JSON (as the Requester writes it).
    pub receipt_annotated: bool,
    /// Its spec, as written.
    pub spec: ComputeContractSpec,
    /// Its status, as written.
    pub status: Option<ComputeContractStatus>,
}

impl WholeContract {
    /// The value of its annotation `key`; not the receipt annotation (see
    /// [`Self::annotated_receipt`]).
    #[must_use]
    pub fn annotation(&self, key: &str) -> Option<&str> {
        debug_assert_ne!(key, RECEIPT_ANNOTATION, "read by annotated_receipt");
        self.annotations.get(key)
    }

    /// The receipt its receipt annotation records, if it has one that parses.
    #[must_use]
    pub fn annotated_receipt(&self) -> Option<Receipt> {
        if self.receipt_annotated {
            return self.status.as_ref().and_then(|s| s.receipt.clone());
        }
        self.annotations
            .get(RECEIPT_ANNOTATION)
            .and_then(|json| serde_json::from_str(json).ok())
    }
}

/// The receipt annotation's value for `receipt`: its JSON. The Requester
/// writes the annotation with it, and the cache recognises it by it.
///
/// # Errors
/// The receipt does not serialize (it always does: two strings).
pub fn receipt_annotation(receipt: &Receipt) -> serde_json::Result<String> {
    serde_json::to_string(receipt)
}

impl From<ComputeContract> for WholeContract {
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
            mut annotations,
        } = metadata.into();
        let receipt_annotated = match (
            annotations.get(RECEIPT_ANNOTATION),
            status.as_ref().and_then(|s| s.receipt.as_ref()),
        ) {
            (Some(written), Some(receipt)) => {
                receipt_annotation(receipt).is_ok_and(|json| json == written)
            }
            _ => false,
        };
        if receipt_annotated {
            annotations.remove(RECEIPT_ANNOTATION);
        }
        Self {
            metadata,
            labels,
            annotations,
            receipt_annotated,
            spec,
            status,
        }
    }
}

impl From<WholeContract> for ComputeContract {
    fn from(cached: WholeContract) -> Self {
        let WholeContract {
            mut metadata,
            labels,
            mut annotations,
            receipt_annotated,
            spec,
            status,
        } = cached;
        if receipt_annotated
            && let Some(json) = status
                .as_ref()
                .and_then(|s| s.receipt.as_ref())
                .and_then(|receipt| receipt_annotation(receipt).ok())
        {
            annotations.insert(RECEIPT_ANNOTATION.to_owned(), json);
        }
        metadata.labels = (!labels.is_empty()).then(|| labels.into());
        metadata.annotations = (!annotations.is_empty()).then(|| annotations.into());
        Self {
            metadata,
            spec,
            status,
        }
    }
}

impl From<&WholeContract> for CachedContract {
    /// What the shared cache keeps of this contract.
    fn from(whole: &WholeContract) -> Self {
        CachedContract::from(ComputeContract::from(whole.clone()))
    }
}

impl Serialize for WholeContract {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Only writes serialize one (a status write's body): a copy is cheap there.
        ComputeContract::from(self.clone()).serialize(serializer)
    }
}

projection_of!(WholeContract, ComputeContract);

impl HasStatus for WholeContract {
    type Status = ComputeContractStatus;

    fn status(&self) -> Option<&ComputeContractStatus> {
        self.status.as_ref()
    }

    fn status_mut(&mut self) -> &mut Option<ComputeContractStatus> {
        &mut self.status
    }
}

impl Labelled for WholeContract {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }
}

#[cfg(test)]
pub(crate) mod tests;
