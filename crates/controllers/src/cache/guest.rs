//! [`CachedGuest`]: a guest (`status.guest` of a contract or a claim) as the
//! caches keep it.
//!
//! Every contract and every claim of a running node names its guest, and a
//! market has a few bidders for thousands of guests: an `api::Guest` held a
//! copy of its bidder's DID in each (72 bytes inline and three strings).
//! Here the provider is interned (`api::intern`, bounded) and the address
//! and node id boxed: 48 bytes inline and two strings (plan 0018).
//!
//! # Guarantees
//! - [`Guest::from`] a [`CachedGuest`] gives back the guest it was made
//!   from, equal in every field.

use api::{Guest, Text};

/// A guest as the caches keep it. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedGuest {
    /// `provider`: the DID of the bidder that runs it. Interned.
    pub provider: Text,
    /// `address`.
    pub address: Option<Box<str>>,
    /// `nodeId`: set once the guest registered as a node.
    pub node_id: Option<Box<str>>,
}

impl From<Guest> for CachedGuest {
    fn from(guest: Guest) -> Self {
        let Guest {
            provider,
            address,
            node_id,
        } = guest;
        Self {
            provider: api::intern(&provider),
            address: address.map(String::into_boxed_str),
            node_id: node_id.map(String::into_boxed_str),
        }
    }
}

impl From<&CachedGuest> for Guest {
    fn from(guest: &CachedGuest) -> Self {
        Self {
            provider: guest.provider.as_str().to_owned(),
            address: guest.address.as_deref().map(str::to_owned),
            node_id: guest.node_id.as_deref().map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_guest_reads_back_as_it_was(
            provider in "did:[a-z]{3}:[a-z.]{0,20}",
            address in proptest::option::of("[0-9.]{0,15}"),
            node_id in proptest::option::of("[a-z0-9-]{0,20}"),
        ) {
            let guest = Guest { provider, address, node_id };
            prop_assert_eq!(Guest::from(&CachedGuest::from(guest.clone())), guest);
        }
    }
}
