//! The pure contract mapping: a ComputeContract spec from an Infra entry, and
//! an Infra's publishable declaration and its hash.
//!
//! The declaration is what may be published as a record: the description and
//! the contract entries, nothing else. `clusterRef`, `nodes` and `secrets` name
//! a tenant, its claims and its Secrets, so they never reach it (nor its hash).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::atproto_record::DECLARATION_COLLECTION;
use crate::common::SecretRef;
use crate::compute_contract::{ComputeContractSpec, DEFAULT_TTL_SECONDS_AFTER_FINISHED};
use crate::infra::{ContractEntry, InfraSpec, NodeEntry};

/// The ComputeContract spec of one Infra contract entry.
///
/// `node` is the entry's node fields (`None` for an ordinary entry, which gets
/// no ownerDid, adopt or nodeJoin); `secret` is the entry's Secret reference.
/// `release` is false: the Infra controller sets it when the entry leaves.
///
/// # Guarantees
/// Pure: the same inputs give the same spec, so applying it again writes nothing.
#[must_use]
pub fn compute_contract_spec(
    entry: &ContractEntry,
    node: Option<&NodeEntry>,
    secret: Option<&SecretRef>,
) -> ComputeContractSpec {
    ComputeContractSpec {
        resources: entry.resources.clone(),
        location: entry.location.clone(),
        role: entry.role,
        secrets_ref: secret.cloned(),
        owner_did: node.map(|n| n.owner_did.clone()),
        adopt: node.and_then(|n| n.adopt.clone()),
        node_join: node.and_then(|n| n.node_join.clone()),
        release: false,
        ttl_seconds_after_finished: DEFAULT_TTL_SECONDS_AFTER_FINISHED,
    }
}

/// The ComputeContract spec of the entry named `entry_name` of `spec`, with its
/// node and secret looked up by contract name; `None` when no such entry exists.
#[must_use]
pub fn compute_contract_spec_for(
    spec: &InfraSpec,
    entry_name: &str,
) -> Option<ComputeContractSpec> {
    let entry = spec.contracts.iter().find(|c| c.name == entry_name)?;
    let node = spec.nodes.iter().find(|n| n.contract == entry_name);
    let secret = spec
        .secrets
        .iter()
        .find(|s| s.contract == entry_name)
        .map(|s| &s.secret_ref);
    Some(compute_contract_spec(entry, node, secret))
}

/// What each contract entry of an Infra spec is paired with, by entry name:
/// its entry, node and Secret, found in one pass over the spec's lists.
///
/// For a caller that needs the spec of every entry: the Infra controller
/// does on every reconcile, and [`compute_contract_spec_for`] searching all
/// three lists for each entry cost a 500-entry Infra 375,000 name
/// comparisons a reconcile (4 % of the manager's CPU in a scale-up of two
/// 500-node Clusters).
///
/// # Guarantees
/// [`EntrySpecs::iter`] lists every entry name once, in name order, with the
/// spec [`compute_contract_spec_for`] gives it, duplicates included (the
/// first of a name counts, as a search finds it).
#[derive(Debug)]
pub struct EntrySpecs<'a> {
    entries: BTreeMap<
        &'a str,
        (
            &'a ContractEntry,
            Option<&'a NodeEntry>,
            Option<&'a SecretRef>,
        ),
    >,
}

impl<'a> EntrySpecs<'a> {
    /// The entries of `spec`, each paired with its node and Secret.
    #[must_use]
    pub fn of(spec: &'a InfraSpec) -> Self {
        let mut nodes = BTreeMap::new();
        for node in &spec.nodes {
            nodes.entry(node.contract.as_str()).or_insert(node);
        }
        let mut secrets = BTreeMap::new();
        for secret in &spec.secrets {
            secrets
                .entry(secret.contract.as_str())
                .or_insert(&secret.secret_ref);
        }
        let mut entries = BTreeMap::new();
        for entry in &spec.contracts {
            let name = entry.name.as_str();
            entries
                .entry(name)
                .or_insert_with(|| (entry, nodes.get(name).copied(), secrets.get(name).copied()));
        }
        Self { entries }
    }

    /// Each entry's name and ComputeContract spec, in name order, each name once.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, ComputeContractSpec)> + '_ {
        (self.entries.iter()).map(|(name, (entry, node, secret))| {
            (*name, compute_contract_spec(entry, *node, *secret))
        })
    }
}

/// The publishable part of an Infra: what a record holds and what its hash covers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Declaration {
    /// The Infra's description.
    pub description: String,
    /// The contract entries, sorted by name (a list-map's order carries no meaning).
    pub contracts: Vec<ContractEntry>,
}

/// The declaration of an Infra: its description and contracts, sorted by name.
#[must_use]
pub fn declaration(spec: &InfraSpec) -> Declaration {
    let mut contracts = spec.contracts.clone();
    contracts.sort_by(|a, b| a.name.cmp(&b.name));
    Declaration {
        description: spec.description.clone(),
        contracts,
    }
}

/// The atproto record of a declaration: `$type` (the collection
/// [`DECLARATION_COLLECTION`]), `description` and `contracts`, nothing else.
///
/// Built from a [`Declaration`] only, so nothing of an Infra beyond its
/// description and contracts (its `clusterRef`, `nodes`, `secrets`, the
/// Secrets they name) can reach a record.
///
/// # Errors
/// Only if the declaration cannot be serialized to JSON, which its types rule out.
pub fn declaration_record(declaration: &Declaration) -> Result<Value, serde_json::Error> {
    let mut record = serde_json::Map::new();
    record.insert("$type".to_owned(), Value::from(DECLARATION_COLLECTION));
    record.insert(
        "description".to_owned(),
        Value::from(declaration.description.clone()),
    );
    record.insert(
        "contracts".to_owned(),
        serde_json::to_value(&declaration.contracts)?,
    );
    Ok(Value::Object(record))
}

/// sha256 hex of the canonical JSON of `declaration`: object keys sorted, no
/// whitespace, optional fields that are unset left out.
///
/// # Errors
/// Only if the declaration cannot be serialized to JSON, which its types rule out.
pub fn declaration_hash(declaration: &Declaration) -> Result<String, serde_json::Error> {
    let value = serde_json::to_value(declaration)?;
    let mut canonical = Vec::new();
    write_canonical(&value, &mut canonical)?;
    Ok(hex::encode(Sha256::digest(&canonical)))
}

/// The declaration hash of an Infra spec: `declaration_hash(&declaration(spec))`.
///
/// # Errors
/// As [`declaration_hash`].
pub fn infra_declaration_hash(spec: &InfraSpec) -> Result<String, serde_json::Error> {
    declaration_hash(&declaration(spec))
}

/// Writes `value` as JSON with object keys in byte order, whatever order the
/// map type keeps (serde_json's `preserve_order` may be on in the build).
/// Keys and scalars are written in place: a String for each was most of the
/// hash's cost, and the Infra controller hashes its spec on every reconcile.
fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key)?;
                out.push(b':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out)?;
                }
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar)?,
    }
    Ok(())
}
