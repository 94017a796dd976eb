//! The AtprotoRecord kind: one Infra's declaration, published as an atproto
//! record in the repository of the Requester that runs its namespace.
//!
//! The Infra controller writes the spec (which Infra, collection, key, and
//! what deleting the object does to the record); the record controller
//! writes the status and is the only one that talks to the PDS.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::MAX_EXACT_INTEGER;
use crate::condition::Condition;
use crate::names::{DNS_LABEL_MAX_LEN, DNS_LABEL_PATTERN};

/// The collection every declaration record is written in: our own NSID
/// (authority `infra.socialweb.computer`), described by
/// `lexicons/computer/socialweb/infra/declaration.json`.
pub const DECLARATION_COLLECTION: &str = "computer.socialweb.infra.declaration";

/// Schema pattern of an NSID (reversed domain authority, then a name).
pub const NSID_PATTERN: &str = r"^[a-zA-Z]([a-zA-Z0-9-]{0,62})?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+\.[a-zA-Z]([a-zA-Z0-9]{0,62})?$";
/// Schema pattern of a record key (atproto's record-key syntax, without `.` and `..`).
pub const RKEY_PATTERN: &str = r"^[A-Za-z0-9._:~-]{1,512}$";

fn default_collection() -> String {
    DECLARATION_COLLECTION.to_owned()
}

/// One Infra's declaration (its description and contracts, nothing else),
/// published as an atproto record and kept current.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "socialweb.computer",
    version = "v1alpha1",
    kind = "AtprotoRecord",
    plural = "atprotorecords",
    namespaced,
    status = "AtprotoRecordStatus",
    shortname = "apr",
    category = "socialweb",
    derive = "PartialEq",
    doc = "An Infra's declaration, published as an atproto record in the Requester's repository.",
    printcolumn = r#"{"name":"Infra","type":"string","jsonPath":".spec.infraName"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"URI","type":"string","jsonPath":".status.uri"}"#,
    printcolumn = r#"{"name":"Policy","type":"string","priority":1,"jsonPath":".spec.deletionPolicy"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AtprotoRecordSpec {
    /// The Infra, in this namespace, whose declaration the record holds. Immutable.
    #[schemars(pattern(DNS_LABEL_PATTERN), length(max = DNS_LABEL_MAX_LEN))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "infraName is immutable"}]))]
    pub infra_name: String,
    /// The collection (an NSID) the record is written in. Immutable: the
    /// published record is found again by it.
    #[serde(default = "default_collection")]
    #[schemars(pattern(NSID_PATTERN), length(max = 317))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "collection is immutable"}]))]
    pub collection: String,
    /// The record key, derived from the Infra (the same Infra always writes
    /// the same key). Immutable: the published record is found again by it.
    #[schemars(pattern(RKEY_PATTERN), length(min = 1, max = 512))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "rkey is immutable"}]))]
    pub rkey: String,
    /// What deleting this object does to the published record: `Delete`
    /// removes it from the repository first, `Orphan` leaves it published.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,
}

/// What deleting an AtprotoRecord does to its published record (as
/// Crossplane's managed resources say it).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum DeletionPolicy {
    /// The record is deleted from the repository before the object goes.
    #[default]
    Delete,
    /// The record stays published; only the object goes.
    Orphan,
}

/// The observed state of an AtprotoRecord, written by the record controller.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AtprotoRecordStatus {
    /// Where the record is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AtprotoRecordPhase>,
    /// The DID of the repository the record was written in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// The record's AT-URI (`at://<did>/<collection>/<rkey>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    /// The CID of the version last written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cid: Option<String>,
    /// The declaration hash (as the Infra's `status.declarationHash`) of the
    /// declaration the record holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declaration_hash: Option<String>,
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = MAX_EXACT_INTEGER))]
    pub observed_generation: Option<i64>,
    /// Observations; Ready says why the record is not (yet) current or not deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// Where an AtprotoRecord is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[schemars(transform = crate::common::drop_description)]
pub enum AtprotoRecordPhase {
    /// Not written yet, or the declaration changed and is being written.
    Pending,
    /// The record holds the current declaration.
    Published,
    /// The last write failed; the Ready condition says why.
    Failed,
    /// The object is being deleted: the record is deleted (policy Delete,
    /// after the Infra's contracts are gone) or left published (Orphan).
    Deleting,
}
