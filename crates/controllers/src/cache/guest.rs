//! [`CachedGuest`]: a guest (`status.guest` of a contract or a claim) as the
//! caches keep it.
//!
//! Every contract and every claim of a running node names its guest, and a
//! market has a few bidders for thousands of guests: an `api::Guest` held a
//! copy of its bidder's DID in each (72 bytes inline and three strings).
//! Here the provider is interned (`api::intern`, bounded) and the address
//! and node id are one boxed text: 32 bytes inline and one allocation (plan
//! 0018 R7).
//!
//! # Guarantees
//! - [`Guest::from`] a [`CachedGuest`] gives back the guest it was made
//!   from, equal in every field.

use api::{Guest, Text};

use super::packed::{pack, unpack};

/// A guest as the caches keep it. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedGuest {
    /// `provider`: the DID of the bidder that runs it. Interned.
    pub provider: Text,
    /// `address` and `nodeId` in one allocation ([`Network`]).
    network: Network,
}

/// A guest's `address` and `nodeId` packed in one text ([`pack`]) behind a tag
/// of which it has (`a` the address alone, `n` the node id alone, `b` both),
/// or `None` without either: one allocation where two took 16 bytes more
/// inline (plan 0018 R7).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Network(Option<Box<str>>);

impl Network {
    fn new(address: Option<&str>, node_id: Option<&str>) -> Self {
        let packed = match (address, node_id) {
            (None, None) => return Self(None),
            (Some(address), None) => pack("a", address, ""),
            (None, Some(node_id)) => pack("n", "", node_id),
            (Some(address), Some(node_id)) => pack("b", address, node_id),
        };
        Self(Some(packed))
    }

    /// The address and the node id.
    fn parts(&self) -> (Option<&str>, Option<&str>) {
        let Some(text) = self.0.as_deref() else {
            return (None, None);
        };
        let (which, rest) = text.split_at_checked(1).unwrap_or(("", text));
        let (address, node_id) = unpack(rest);
        match which {
            "a" => (Some(address), None),
            "n" => (None, Some(node_id)),
            _ => (Some(address), Some(node_id)),
        }
    }
}

impl CachedGuest {
    /// `address`.
    #[must_use]
    pub fn address(&self) -> Option<&str> {
        self.network.parts().0
    }

    /// `nodeId`: set once the guest registered as a node.
    #[must_use]
    pub fn node_id(&self) -> Option<&str> {
        self.network.parts().1
    }
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
            network: Network::new(address.as_deref(), node_id.as_deref()),
        }
    }
}

impl From<&CachedGuest> for Guest {
    fn from(guest: &CachedGuest) -> Self {
        let (address, node_id) = guest.network.parts();
        Self {
            provider: guest.provider.as_str().to_owned(),
            address: address.map(str::to_owned),
            node_id: node_id.map(str::to_owned),
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
            address in proptest::option::of(".{0,15}"),
            node_id in proptest::option::of(".{0,20}"),
        ) {
            let guest = Guest { provider, address, node_id };
            prop_assert_eq!(Guest::from(&CachedGuest::from(guest.clone())), guest);
        }
    }
}
