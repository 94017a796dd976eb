//! Labels, finalizers, annotations, field managers, schema patterns and the
//! derived object names, as constants and pure functions.
//!
//! Derived names are deterministic so that every controller (and a restarted
//! one) computes the same name for the same input without reading anything.

use sha2::{Digest, Sha256};

/// Label on an Infra: the name of the Cluster it serves.
pub const CLUSTER_LABEL: &str = "infra.socialweb.computer/cluster";
/// Label on an Infra: the namespace of the Cluster it serves.
pub const CLUSTER_NAMESPACE_LABEL: &str = "infra.socialweb.computer/cluster-namespace";
/// Label on a ComputeContract and a join Secret: the name of its Infra.
pub const INFRA_NAME_LABEL: &str = "infra.socialweb.computer/name";
/// Label on a ComputeContract and a join Secret: the name of its contract entry.
pub const CONTRACT_LABEL: &str = "infra.socialweb.computer/contract";

/// Finalizer on an Infra: its contracts are released and deleted before it goes.
pub const INFRA_RELEASE_FINALIZER: &str = "infra.socialweb.computer/release";
/// Finalizer on a NodeClaim: its contract is released and its join Secret removed before it goes.
pub const NODECLAIM_FINALIZER: &str = "nodeclaim.socialweb.computer/release";
/// Finalizer on a Cluster that has an Infra: the Infra is deleted (and gone) before the Cluster goes.
pub const CLUSTER_FINALIZER: &str = "nodeclaim.socialweb.computer/cluster-infra";
/// Finalizer on a Requester: the root delete order (Infras first, releases still sent, then the Requester).
pub const REQUESTER_FINALIZER: &str = "requester.socialweb.computer/root-delete-order";
/// Finalizer on a ComputeContract (put there by the Infra controller when it creates the
/// contract, removed by the Requester): the contract's guest is released before the object
/// goes, however it is deleted (directly, by the garbage collector, with its namespace).
pub const CONTRACT_RELEASE_FINALIZER: &str = "requester.socialweb.computer/release";

/// Finalizer on an AtprotoRecord (put there by the Infra controller when it
/// creates the object, removed by the record controller): with deletion policy
/// Delete the record is deleted from the repository before the object goes.
pub const RECORD_DELETE_FINALIZER: &str = "atprotorecord.socialweb.computer/delete-record";

/// Annotation on a ComputeContract holding its receipt as JSON `{"uri":..,"cid":..}`,
/// so a restore that drops status does not leak a machine.
pub const RECEIPT_ANNOTATION: &str = "socialweb.computer/receipt";

/// Annotation the Infra controller puts on a ComputeContract in the same
/// write that sets its `spec.release`: a released contract without it was
/// released by someone else, and its entry is never rented again.
pub const INFRA_RELEASED_ANNOTATION: &str = "infra.socialweb.computer/released";
/// kubectl's annotation holding the whole object it last applied; the
/// manager's caches drop it (no reconcile reads it).
pub const KUBECTL_LAST_APPLIED_ANNOTATION: &str =
    "kubectl.kubernetes.io/last-applied-configuration";

/// Server-side apply field manager of the Infra controller.
pub const INFRA_MANAGER: &str = "socialweb/infra";
/// Server-side apply field manager of the NodeClaim controller.
pub const NODECLAIM_MANAGER: &str = "socialweb/nodeclaim";
/// Server-side apply field manager of the Requester controller.
pub const REQUESTER_MANAGER: &str = "socialweb/requester";
/// Server-side apply field manager of the record controller (AtprotoRecord status).
pub const RECORD_MANAGER: &str = "socialweb/record";

/// The `type` of a join Secret (grant token, apiserver URL, CA, node name).
pub const JOIN_SECRET_TYPE: &str = "socialweb.computer/join-bundle";
/// The namespace where Infras, ComputeContracts, join Secrets and the Requester live by default.
pub const DEFAULT_CONTRACT_NAMESPACE: &str = "socialweb-system";

/// Schema pattern of a DID: `did:<method>:<method-specific id>` (W3C DID syntax).
pub const DID_PATTERN: &str = r"^did:[a-z0-9]+:([A-Za-z0-9._%-]*:)*[A-Za-z0-9._%-]+$";
/// Schema pattern of a DNS-1123 label (use with a maximum length of 63).
pub const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// Schema pattern of an ISO 3166-1 alpha-2 country code.
pub const COUNTRY_PATTERN: &str = r"^[A-Z]{2}$";
/// Maximum length of a DNS-1123 label.
pub const DNS_LABEL_MAX_LEN: usize = 63;

/// Prefix of an Infra name.
const INFRA_PREFIX: &str = "nodes-";
/// Prefix of a contract entry name.
const ENTRY_PREFIX: &str = "node-";
/// Prefix of a join Secret name ([`join_secret_name`]).
pub const JOIN_SECRET_PREFIX: &str = "join-";
/// Hex digits of sha256 kept in a derived name (80 bits: collisions are not a practical concern).
const HASH_HEX_LEN: usize = 20;
/// The lowercase hex digits, by value.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `prefix` + the first [`HASH_HEX_LEN`] hex digits of sha256 of `parts`
/// joined. Built in one allocation, and only the digits kept are encoded:
/// the mappers derive these names for every watch event they see (plan 0016
/// C3), where encoding all 64 digits char by char and formatting the input
/// first took 2 % of the manager's CPU.
fn hashed_name(prefix: &str, parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    let mut name = String::with_capacity(prefix.len() + HASH_HEX_LEN);
    name.push_str(prefix);
    // Digit by digit from a table: a `{:02x}` per byte through the
    // formatter cost more than the hash itself.
    for byte in &digest[..HASH_HEX_LEN / 2] {
        for digit in [byte >> 4, byte & 0x0f] {
            name.push(char::from(HEX_DIGITS[usize::from(digit)]));
        }
    }
    name
}

/// Name of the Infra of the Cluster `<cluster_namespace>/<cluster_name>`:
/// `nodes-` + the first 20 hex digits of sha256(`<ns>/<name>`).
///
/// # Guarantees
/// A DNS-1123 label of 26 characters; the same Cluster always gets the same name.
#[must_use]
pub fn infra_name(cluster_namespace: &str, cluster_name: &str) -> String {
    hashed_name(INFRA_PREFIX, &[cluster_namespace, "/", cluster_name])
}

/// Name of the contract entry of the NodeClaim with uid `claim_uid`:
/// `node-` + the first 20 hex digits of sha256(uid).
///
/// # Guarantees
/// A DNS-1123 label of 25 characters. A claim recreated under the same name has
/// a new uid and so gets a new entry: an old entry is never reused.
#[must_use]
pub fn entry_name(claim_uid: &str) -> String {
    hashed_name(ENTRY_PREFIX, &[claim_uid])
}

/// Name of the ComputeContract of an Infra entry: `<infra>-<entry>`.
///
/// With names from [`infra_name`] and [`entry_name`] this is 52 characters.
#[must_use]
pub fn compute_contract_name(infra: &str, entry: &str) -> String {
    format!("{infra}-{entry}")
}

/// Name of the join Secret of a contract entry: `join-<entry>`.
#[must_use]
pub fn join_secret_name(entry: &str) -> String {
    format!("{JOIN_SECRET_PREFIX}{entry}")
}

/// The base32-sortable alphabet of atproto TIDs.
const TID_ALPHABET: &[u8; 32] = b"234567abcdefghijklmnopqrstuvwxyz";

/// The record key of the declaration record of the Infra `<namespace>/<name>`
/// with uid `uid`: TID-shaped (13 base32-sortable characters, top bit 0), its
/// bits the first 63 of sha256(`<namespace>/<name>/<uid>`).
///
/// # Guarantees
/// A valid TID. The same Infra always gets the same key, so a restart writes
/// the same record again instead of a second one; a recreated Infra (new uid)
/// gets a new key. The key is a hash: it names no tenant, Cluster or namespace.
#[must_use]
pub fn record_key(namespace: &str, name: &str, uid: &str) -> String {
    let digest = Sha256::digest(format!("{namespace}/{name}/{uid}").as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let bits = u64::from_be_bytes(first) >> 1;
    (0..13)
        .map(|i| {
            let shift = 5 * (12 - i);
            // Five bits index a table of 32.
            #[allow(clippy::cast_possible_truncation)]
            let index = ((bits >> shift) & 0x1f) as usize;
            char::from(TID_ALPHABET[index])
        })
        .collect()
}

/// Whether `value` is a DNS-1123 label: 1 to 63 characters of `[a-z0-9-]`,
/// starting and ending with an alphanumeric character.
#[must_use]
pub fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= DNS_LABEL_MAX_LEN
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;

    // Vectors computed outside Rust: printf '%s' 'ns/c1' | sha256sum, and so on.
    #[test]
    fn infra_name_matches_sha256sum() {
        assert_eq!(infra_name("ns", "c1"), "nodes-2b726ab7ba6f76600839");
        assert_eq!(infra_name("tenant-a", "prod"), "nodes-7dbcbbf224afbc008123");
    }

    #[test]
    fn entry_name_matches_sha256sum() {
        assert_eq!(
            entry_name("6f1e4b7a-0c2d-4e5f-8a9b-1c2d3e4f5a6b"),
            "node-1825b1e943648c927b7b"
        );
    }

    #[test]
    fn composed_names() {
        assert_eq!(
            compute_contract_name("nodes-abc", "node-def"),
            "nodes-abc-node-def"
        );
        assert_eq!(join_secret_name("node-def"), "join-node-def");
    }

    #[test]
    fn dns_label_check() {
        assert!(is_dns_label("a"));
        assert!(is_dns_label("node-0a"));
        assert!(!is_dns_label(""));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label("a-"));
        assert!(!is_dns_label("A"));
        assert!(!is_dns_label(&"a".repeat(64)));
    }

    proptest! {
        #[test]
        fn derived_names_are_dns_labels(ns in "[a-z0-9-]{1,63}", name in "\\PC{0,253}", uid in "\\PC{0,64}") {
            let infra = infra_name(&ns, &name);
            let entry = entry_name(&uid);
            prop_assert!(is_dns_label(&infra), "{infra}");
            prop_assert!(is_dns_label(&entry), "{entry}");
            prop_assert!(is_dns_label(&compute_contract_name(&infra, &entry)));
            prop_assert!(is_dns_label(&join_secret_name(&entry)));
        }

        #[test]
        fn names_are_the_prefix_and_the_first_digits_of_the_whole_hex_digest(ns in "\\PC{0,63}", name in "\\PC{0,253}", uid in "\\PC{0,64}") {
            let whole = |input: String| hex::encode(Sha256::digest(input.as_bytes()));
            prop_assert_eq!(infra_name(&ns, &name), format!("nodes-{}", &whole(format!("{ns}/{name}"))[..20]));
            prop_assert_eq!(entry_name(&uid), format!("node-{}", &whole(uid.clone())[..20]));
        }

        #[test]
        fn distinct_clusters_get_distinct_infras(a in ("[a-z0-9-]{1,20}", "[a-z0-9-]{1,20}"), b in ("[a-z0-9-]{1,20}", "[a-z0-9-]{1,20}")) {
            prop_assume!(a != b);
            prop_assert_ne!(infra_name(&a.0, &a.1), infra_name(&b.0, &b.1));
        }

        #[test]
        fn distinct_uids_get_distinct_entries(a in "\\PC{1,40}", b in "\\PC{1,40}") {
            prop_assume!(a != b);
            prop_assert_ne!(entry_name(&a), entry_name(&b));
            prop_assert_ne!(join_secret_name(&entry_name(&a)), join_secret_name(&entry_name(&b)));
        }
    }
}
