//! Record keys derived from what the caller keeps, so a restarted adapter
//! finds every record it wrote without remembering anything.
//!
//! Each key is TID-shaped (13 base32-sortable characters, top bit 0), as the
//! market's lexicons ask, but its bits are a hash: of the scope, the
//! contract key and the round for the request's records, and of the
//! request's key for the accept, and of the accept's key for the release.
//! An RFP id (its URI) is therefore enough to find its accept and release.

use atproto::Tid;
use sha2::{Digest, Sha256};

use crate::ContractKey;

/// A TID-shaped key from the hash of `parts`.
fn derive(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        // A separator, so ("ab", "c") and ("a", "bc") differ.
        hasher.update([0]);
    }
    let digest = hasher.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let bits = u64::from_be_bytes(first);
    // 53 bits of "time", 10 of clock id; Tid::new masks both.
    let clock_id = u16::try_from(bits & 0x3ff).unwrap_or(0);
    Tid::new(bits >> 11, clock_id).to_string()
}

/// The keys of one round's request records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoundKeys {
    /// The `compute.vm` payload.
    pub vm: String,
    /// The `market.rfp`.
    pub rfp: String,
}

/// The request keys of `contract`'s `round` under `scope`.
#[must_use]
pub fn round(scope: &str, contract: &ContractKey, round: u32) -> RoundKeys {
    let round = round.to_string();
    let parts = |kind| [kind, scope, &contract.namespace, &contract.name, &round];
    RoundKeys {
        vm: derive(&parts("vm")),
        rfp: derive(&parts("rfp")),
    }
}

/// The key of the accept of the rfp at `rfp_rkey`.
#[must_use]
pub fn accept(rfp_rkey: &str) -> String {
    derive(&["accept", rfp_rkey])
}

/// The keys of the release (the `vm.delete` payload and its `market.event`)
/// of the accept at `accept_rkey`.
#[must_use]
pub fn release(accept_rkey: &str) -> (String, String) {
    (
        derive(&["vm.delete", accept_rkey]),
        derive(&["event", accept_rkey]),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keys_are_stable_and_distinct_per_kind_scope_and_round() {
        let key = ContractKey::new("ns", "c");
        let first = round("s", &key, 0);
        assert_eq!(first, round("s", &key, 0), "derived again after a restart");
        assert_ne!(first.vm, first.rfp);
        assert_ne!(first, round("s", &key, 1));
        assert_ne!(first, round("t", &key, 0));
        assert_ne!(first, round("s", &ContractKey::new("n", "sc"), 0));
        let accept = accept(&first.rfp);
        let (delete, event) = release(&accept);
        assert_ne!(delete, event);
        assert_ne!(accept, delete);
    }

    proptest! {
        #[test]
        fn every_derived_key_is_a_valid_tid(scope in ".{0,12}", ns in "[a-z-]{1,20}", name in "[a-z0-9-]{1,40}", n in 0u32..1000) {
            let keys = round(&scope, &ContractKey::new(ns, name), n);
            for key in [keys.vm, keys.rfp.clone(), accept(&keys.rfp)] {
                let parsed: Tid = key.parse().unwrap();
                prop_assert_eq!(parsed.to_string(), key);
            }
        }
    }
}
