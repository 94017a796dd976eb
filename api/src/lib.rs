//! CRD types, names, labels and the pure contract mapping of `socialweb.computer`.
//!
//! Six namespaced kinds in `socialweb.computer/v1alpha1`: [`Cluster`],
//! [`NodeClaim`], [`Infra`], [`ComputeContract`], [`Requester`] and
//! [`AtprotoRecord`]. The doc
//! comments on every field are the schema descriptions `kubectl explain` shows.
//! [`names`] holds the labels, finalizers and derived names every controller
//! agrees on; [`mapping`] turns an Infra entry into a ComputeContract spec and
//! an Infra into its publishable declaration, its hash and its atproto record.
#![deny(missing_docs)]

pub mod atproto_market;
pub mod atproto_record;
pub mod cluster;
pub mod common;
pub mod compute_contract;
pub mod condition;
pub mod infra;
pub mod mapping;
pub mod names;
pub mod nodeclaim;
pub mod requester;
pub mod string_map;
pub mod text;

pub use atproto_market::*;
pub use atproto_record::*;
pub use cluster::*;
pub use common::*;
pub use compute_contract::*;
pub use condition::*;
pub use infra::*;
pub use mapping::*;
pub use names::*;
pub use nodeclaim::*;
pub use requester::*;
pub use string_map::StringMap;
pub use text::{Text, intern};

/// The API group of every kind.
pub const GROUP: &str = "socialweb.computer";
/// The API version of every kind.
pub const VERSION: &str = "v1alpha1";

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// The CustomResourceDefinitions of every kind, in a fixed order
/// (Cluster, NodeClaim, Infra, ComputeContract, Requester, AtprotoRecord).
#[must_use]
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        Cluster::crd(),
        NodeClaim::crd(),
        Infra::crd(),
        ComputeContract::crd(),
        Requester::crd(),
        AtprotoRecord::crd(),
    ]
}
