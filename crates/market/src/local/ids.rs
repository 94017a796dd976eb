//! The ids the local market derives, kept as their bytes.
//!
//! An RFP's id is `rfp-` and 20 hex digits of a hash of its contract and
//! round, its guest's `g-` and 20 of a hash of the RFP's
//! ([`bidders::rfp_id`](super::bidders::rfp_id),
//! [`bidders::guest_id`](super::bidders::guest_id)). As `String`s each was
//! 24 bytes and a 32-byte allocation, in every guest record and every key of
//! the guests' table: about 80 bytes a guest of a market that holds every
//! guest of a fleet (plan 0018 R12). Kept here as their 10 bytes; any other
//! id (one an older market wrote, read from its journal) is kept as it came.

use std::fmt;

/// The prefix of the RFP ids the local market gives.
pub(crate) const RFP_PREFIX: &str = "rfp-";
/// The prefix of the guest ids the local market gives.
pub(crate) const GUEST_PREFIX: &str = "g-";

/// Bytes of a derived id's hash that its hex digits spell.
const DERIVED_BYTES: usize = 10;

/// An id of one prefix (the caller's to know), as its bytes when it is
/// the prefix and lowercase hex digits of [`DERIVED_BYTES`] bytes: each id
/// has one form, so two are equal exactly when their texts are.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum KeptId {
    Derived([u8; DERIVED_BYTES]),
    Given(Box<str>),
}

impl KeptId {
    /// `id`, kept.
    pub fn new(id: &str, prefix: &str) -> Self {
        let derived = id.strip_prefix(prefix).and_then(|digits| {
            // Only a form that reads back the same: lowercase, no more digits.
            let lowercase = digits
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            let mut bytes = [0; DERIVED_BYTES];
            (lowercase && hex::decode_to_slice(digits, &mut bytes).is_ok()).then_some(bytes)
        });
        derived.map_or_else(|| Self::Given(id.into()), Self::Derived)
    }

    /// The id's text.
    pub fn text(&self, prefix: &str) -> String {
        match self {
            Self::Derived(bytes) => format!("{prefix}{}", hex::encode(bytes)),
            Self::Given(id) => id.to_string(),
        }
    }
}

impl fmt::Debug for KeptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Derived(bytes) => write!(f, "Derived({})", hex::encode(bytes)),
            Self::Given(id) => write!(f, "Given({id:?})"),
        }
    }
}

/// A guest's id as the market's tables key it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GuestKey(KeptId);

impl GuestKey {
    /// The key of guest `id`.
    pub fn of(id: &str) -> Self {
        Self(KeptId::new(id, GUEST_PREFIX))
    }

    /// The guest's id.
    pub fn id(&self) -> String {
        self.0.text(GUEST_PREFIX)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::ContractKey;
    use crate::local::bidders;

    #[test]
    fn the_markets_own_ids_are_kept_as_bytes() {
        let rfp = bidders::rfp_id(&ContractKey::new("ns", "c"), 0);
        let kept = KeptId::new(rfp.as_str(), RFP_PREFIX);
        assert!(matches!(kept, KeptId::Derived(_)));
        assert_eq!(kept.text(RFP_PREFIX), rfp.as_str());
        let guest = bidders::guest_id(&rfp);
        let key = GuestKey::of(&guest);
        assert!(matches!(key.0, KeptId::Derived(_)));
        assert_eq!(key.id(), guest);
    }

    proptest::proptest! {
        /// Any id reads back as it came, and two keep equal exactly when
        /// they are equal.
        #[test]
        fn any_id_reads_back_as_it_came(
            id in "g-[0-9a-fA-F]{19,21}|g-[0-9a-f]{20}|[a-z0-9-]{0,12}",
            other in "g-[0-9a-f]{20}|[a-z0-9-]{0,3}",
        ) {
            let key = GuestKey::of(&id);
            proptest::prop_assert_eq!(key.id(), id.clone());
            proptest::prop_assert_eq!(key == GuestKey::of(&other), id == other);
        }
    }
}
