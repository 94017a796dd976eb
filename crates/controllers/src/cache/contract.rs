//! A ComputeContract as the shared cache keeps it: its read model (plan
//! 0018 R2).
//!
//! Every reconciler reads contracts from the cache, and 10,000 nodes are
//! 10,000 cached contracts, so the cache keeps of each what a decision or a
//! mapper outside the contract's own lifecycle reads, and a digest of what
//! is only compared: its phase, message, guest and receipt (the claims'
//! status and the guest watch), its labels (the indexes, the Infra's
//! entries), its release and adoption (the Infra's and the NodeClaim
//! controller's decisions), the machine it was rented with, and digests of
//! its spec and ownerReferences (whether the Infra's apply would change
//! it). Whatever writes a contract from what it holds (the Requester's
//! lifecycle, the Infra's release) reads the whole contract from the API
//! server first ([`crate::requester::WholeContract`], one GET).
//!
//! It is a [`Resource`](kube::Resource) of the contract's group, version and
//! kind, as kube-runtime's store and the Requester's controller need, and it
//! decodes from a contract's JSON exactly when a [`ComputeContract`] does
//! (and is then [`CachedContract::from`] it).
//!
//! # Guarantees
//! - [`CachedContract::receipt`] is what the Requester's `known_receipt` of
//!   the whole contract is.
//! - [`Labelled::label`] reads each label as the contract has it; the
//!   Infra's two are read off the name when they make it up
//!   (`infra_label_split`).
//! - [`CachedContract::uid`] is the contract's uid. `metadata` keeps the
//!   name, namespace, resourceVersion, generation, deletionTimestamp and
//!   finalizers, and the uid only when it is not a UUID (a UUID is kept in
//!   16 bytes beside it, so that kube-runtime's store key does not copy it
//!   either); `metadata.labels`, `annotations`, `ownerReferences`,
//!   `creationTimestamp` and `managedFields` are always `None` (labels are
//!   read through [`Labelled`], owners through [`CachedContract::owned_by`]).
//!   Generic code reads the uid through [`crate::object_uid::ObjectUid`].
//! - [`CachedContractSpec::digest`] of two decoded contracts are equal
//!   exactly when their specs are (up to a 64-bit hash collision), and equal
//!   [`spec_digest`] of the same spec built in this process.

use std::collections::HashSet;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use api::names::{CONTRACT_LABEL, INFRA_NAME_LABEL, INFRA_RELEASED_ANNOTATION, RECEIPT_ANNOTATION};
use api::{
    ComputeContract, ComputeContractPhase, ComputeContractSpec, ComputeContractStatus, Location,
    Receipt, Resources, StringMap, Text,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::Serialize;

use super::projection::{KeptMetadata, projection_of};
use super::uid::KeptUid;
use super::{CachedGuest, CachedReceipt, Labelled};
use crate::requester::conditions::RELEASED;

/// What the shared cache keeps of a ComputeContract. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct CachedContract {
    /// Its metadata, less labels, annotations, ownerReferences, creation
    /// time and managed fields, and less its uid when that is a UUID (kept
    /// in `uid`). Read through [`kube::Resource::meta`] and the methods
    /// below; private so that nothing reads the uid where it is not.
    metadata: ObjectMeta,
    /// Its uid's 16 bytes when `uid_packed` (a UUID, as the API server
    /// makes every uid). Not in `metadata`, it is not in kube-runtime's
    /// store key either: two 40-byte strings a contract (plan 0018 R9).
    uid: [u8; 16],
    /// The digest of its one ownerReference ([`owner_digest`]), unless
    /// `rare` holds its owners.
    owner: u64,
    /// What few contracts have, boxed ([`Rare`]).
    rare: Option<Box<Rare>>,
    /// Its receipt: `status.receipt`, else the receipt annotation's (written
    /// first, so that a restart in between cannot lose it).
    pub receipt: Option<CachedReceipt>,
    /// What is read of its spec.
    pub spec: CachedContractSpec,
    /// What is read of its status; `None` while it has none.
    pub status: Option<CachedContractStatus>,
    /// Where its name splits into the Infra's two labels, unless `rare`
    /// holds its labels ([`infra_label_split`]).
    labels_split: Option<u16>,
    /// Whether `uid` holds its uid.
    uid_packed: bool,
}

/// The shared cache holds each contract as one allocation (an `Arc`'s 16
/// bytes and this), which the allocator serves from a size class: mimalloc's
/// are 512 and 640 bytes here, so a field that takes it past 496 costs 128
/// bytes a contract (plan 0018 R7). What keeps it under: its receipt, its
/// guest's address and node id each one boxed text, its machine shared,
/// what is rare boxed, its labels read off its name.
const _: () = assert!(size_of::<CachedContract>() <= 496);

/// What few contracts have, kept in one box beside the rest: a contract the
/// Infra controller wrote has its two labels in its name, exactly one owner
/// (its Infra) and, unless a claim adopts a guest, no `spec.adopt`.
#[derive(Clone, Debug, Default, PartialEq)]
struct Rare {
    /// Its labels, when they are not the Infra's two read off its name
    /// (a contract written by hand).
    labels: Option<StringMap>,
    /// A digest of each of its ownerReferences, when it has not exactly one.
    owners: Option<Box<[u64]>>,
    /// `spec.adopt`: the guest it takes over.
    adopt: Option<Receipt>,
}

/// Where the contract `name` splits into the Infra controller's two labels,
/// when `labels` are exactly those (the Infra labels each contract
/// `<infra>-<entry>` with its Infra's name and its entry's): the name up to
/// the character at the split is [`INFRA_NAME_LABEL`], the name after it
/// [`CONTRACT_LABEL`]. Read off the name, they take no map and no copies
/// (168 bytes a contract).
fn infra_label_split(labels: &StringMap, name: &str) -> Option<u16> {
    let (infra, entry) = (labels.get(INFRA_NAME_LABEL)?, labels.get(CONTRACT_LABEL)?);
    (labels.len() == 2
        && name.len() == infra.len() + 1 + entry.len()
        && name.starts_with(infra)
        && name.ends_with(entry))
    .then(|| u16::try_from(infra.len()).ok())
    .flatten()
}

/// What the cache keeps of a contract's spec.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedContractSpec {
    /// `spec.release`.
    pub release: bool,
    /// Whether the Infra controller itself released it (its release carries
    /// [`INFRA_RELEASED_ANNOTATION`]). An annotation's, kept here beside the
    /// release it marks.
    pub released_by_infra: bool,
    /// `spec.resources` and `spec.location`: the machine it was rented
    /// with, shared by the contracts rented alike ([`Machine::shared`]).
    pub machine: Arc<Machine>,
    /// [`spec_digest`] of the whole spec.
    pub digest: u64,
}

/// What the cache keeps of a contract's status.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CachedContractStatus {
    /// `status.phase`.
    pub phase: Option<ComputeContractPhase>,
    /// `status.message`.
    pub message: Option<Text>,
    /// `status.guest`, its provider interned.
    pub guest: Option<CachedGuest>,
    /// Whether `status.receipt` is set (not only the receipt annotation).
    pub receipt_recorded: bool,
    /// Whether `status.winner` is set: a bid was accepted or a guest taken over.
    pub won: bool,
    /// Whether `status.nextAttemptAt` is set: a failed rent is asked again.
    pub retrying: bool,
    /// Whether its `Released` condition is True: the market confirmed its
    /// guest gone or acknowledged the release.
    pub guest_released: bool,
}

impl CachedContractStatus {
    /// Whether the contract failed to rent a machine and will try again (no
    /// bid came; the Requester asks the market again at `nextAttemptAt`): a
    /// claim on it waits, it has not failed.
    #[must_use]
    pub fn renting_retried(&self) -> bool {
        self.phase == Some(ComputeContractPhase::Failed) && !self.receipt_recorded && self.retrying
    }
}

impl CachedContract {
    /// The contract's phase, `None` while its status has none.
    #[must_use]
    pub fn phase(&self) -> Option<ComputeContractPhase> {
        self.status.as_ref().and_then(|s| s.phase)
    }

    /// Whether one of its ownerReferences is `owner`.
    #[must_use]
    pub fn owned_by(&self, owner: &OwnerReference) -> bool {
        let digest = owner_digest(owner);
        match self.rare.as_ref().and_then(|rare| rare.owners.as_ref()) {
            Some(owners) => owners.contains(&digest),
            None => self.owner == digest,
        }
    }

    /// Its uid. Shadows `ResourceExt::uid`, which reads only the metadata;
    /// generic code reads it through [`ObjectUid`](crate::object_uid::ObjectUid).
    #[must_use]
    pub fn uid(&self) -> Option<String> {
        if self.uid_packed {
            Some(KeptUid::Uuid(self.uid).to_string())
        } else {
            self.metadata.uid.clone()
        }
    }

    /// `metadata.name`.
    #[must_use]
    pub fn name(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    /// `metadata.resourceVersion`.
    #[must_use]
    pub fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }

    /// Whether it is being deleted (`metadata.deletionTimestamp` is set).
    #[must_use]
    pub fn is_deleting(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// `spec.adopt`: the guest it takes over.
    #[must_use]
    pub fn adopt(&self) -> Option<&Receipt> {
        self.rare.as_ref().and_then(|rare| rare.adopt.as_ref())
    }
}

/// A digest of `value`'s JSON: equal for equal values, within one process
/// (the hasher's keys are fixed, its algorithm is the toolchain's).
fn json_digest<T: Serialize>(value: &T) -> u64 {
    use std::hash::{DefaultHasher, Hasher as _};
    use std::sync::atomic::{AtomicU64, Ordering};
    /// Handed out when a value does not serialize, each once.
    static UNMATCHED: AtomicU64 = AtomicU64::new(0);
    match serde_json::to_vec(value) {
        Ok(json) => {
            let mut hasher = DefaultHasher::new();
            hasher.write(&json);
            hasher.finish()
        }
        // These types always serialize. Were one not to, a digest no other
        // equals makes the Infra apply again (harmless), where a shared one
        // would let it skip a change.
        Err(_) => UNMATCHED.fetch_add(1, Ordering::Relaxed) ^ u64::MAX,
    }
}

/// The digest the cache keeps of a contract's spec, to compare with the spec
/// an Infra would apply.
#[must_use]
pub fn spec_digest(spec: &ComputeContractSpec) -> u64 {
    json_digest(spec)
}

/// The digest the cache keeps of an ownerReference.
#[must_use]
pub fn owner_digest(owner: &OwnerReference) -> u64 {
    json_digest(owner)
}

impl From<ComputeContract> for CachedContract {
    fn from(contract: ComputeContract) -> Self {
        let ComputeContract {
            mut metadata,
            spec,
            status,
        } = contract;
        let owners: Box<[u64]> = metadata
            .owner_references
            .take()
            .unwrap_or_default()
            .iter()
            .map(owner_digest)
            .collect();
        let KeptMetadata {
            mut metadata,
            labels,
            annotations,
        } = metadata.into();
        let (uid, uid_packed) = match metadata.uid.take().map(KeptUid::from) {
            Some(KeptUid::Uuid(uid)) => (uid, true),
            other => {
                metadata.uid = other.map(|uid| uid.to_string());
                ([0; 16], false)
            }
        };
        let mut receipt = None;
        let status = status.map(|status| {
            let ComputeContractStatus {
                phase,
                winner,
                receipt: recorded,
                guest,
                message,
                next_attempt_at,
                conditions,
                ..
            } = status;
            let receipt_recorded = recorded.is_some();
            receipt = recorded;
            CachedContractStatus {
                phase,
                message,
                guest: guest.map(CachedGuest::from),
                receipt_recorded,
                won: winner.is_some(),
                retrying: next_attempt_at.is_some(),
                guest_released: api::find_condition(&conditions, RELEASED)
                    .is_some_and(api::Condition::is_true),
            }
        });
        let receipt = receipt.or_else(|| {
            annotations
                .get(RECEIPT_ANNOTATION)
                .and_then(|json| serde_json::from_str::<Receipt>(json).ok())
        });
        let labels_split = infra_label_split(&labels, metadata.name.as_deref().unwrap_or_default());
        let (owner, owners) = match *owners {
            [owner] => (owner, None),
            _ => (0, Some(owners)),
        };
        let digest = spec_digest(&spec);
        let rare = Rare {
            labels: (labels_split.is_none() && !labels.is_empty()).then_some(labels),
            owners,
            adopt: spec.adopt.map(|adopt| *adopt),
        };
        Self {
            metadata,
            uid,
            owner,
            rare: (rare != Rare::default()).then(|| Box::new(rare)),
            receipt: receipt.map(CachedReceipt::from),
            spec: CachedContractSpec {
                release: spec.release,
                released_by_infra: annotations.get(INFRA_RELEASED_ANNOTATION).is_some(),
                digest,
                machine: Machine::shared(spec.resources, spec.location),
            },
            status,
            labels_split,
            uid_packed,
        }
    }
}

projection_of!(CachedContract, ComputeContract);

/// What a machine was rented with: a contract's `spec.resources` and
/// `spec.location`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Machine {
    /// `spec.resources`.
    pub resources: Resources,
    /// `spec.location`.
    pub location: Location,
}

/// At most this many machines are shared; others are allocated apart.
const MOST_SHARED_MACHINES: usize = 256;

impl Machine {
    /// The machine of `resources` at `location`, as one allocation shared
    /// with every contract rented alike: a fleet rents a few shapes in a few
    /// places, and each contract held 72 bytes and a string or two of them
    /// (plan 0018 R7). The table holds at most [`MOST_SHARED_MACHINES`],
    /// the first met, for the process's life.
    pub fn shared(resources: Resources, location: Location) -> Arc<Self> {
        static SHARED: LazyLock<Mutex<HashSet<Arc<Machine>>>> = LazyLock::new(Mutex::default);
        let machine = Self {
            resources,
            location,
        };
        // The table stays consistent whatever panicked while holding it.
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(machine) = shared.get(&machine) {
            return Arc::clone(machine);
        }
        let machine = Arc::new(machine);
        if shared.len() < MOST_SHARED_MACHINES {
            shared.insert(Arc::clone(&machine));
        }
        machine
    }
}

impl Labelled for CachedContract {
    fn label(&self, key: &str) -> Option<&str> {
        if let Some(labels) = self.rare.as_ref().and_then(|rare| rare.labels.as_ref()) {
            return labels.get(key);
        }
        let name = self.metadata.name.as_deref().unwrap_or_default();
        let split = usize::from(self.labels_split?);
        match key {
            INFRA_NAME_LABEL => name.get(..split),
            CONTRACT_LABEL => name.get(split + 1..),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
