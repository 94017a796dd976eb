//! [`CachedReceipt`]: a receipt as the shared cache keeps it, its uri and cid
//! in one allocation.
//!
//! Every Deployed contract holds one, and the contract is kept as one
//! allocation whose size class counts (plan 0018 R7): as two `String`s a
//! receipt took 48 bytes inline and two allocations; here it takes 16 and
//! one of the same total length.

use api::Receipt;

use super::packed::{pack, unpack};

/// A receipt kept as its uri and cid packed in one text ([`pack`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedReceipt(Box<str>);

impl CachedReceipt {
    /// The uri and the cid.
    fn parts(&self) -> (&str, &str) {
        unpack(&self.0)
    }

    /// The receipt's `uri`.
    #[must_use]
    pub fn uri(&self) -> &str {
        self.parts().0
    }

    /// The receipt's `cid`.
    #[must_use]
    pub fn cid(&self) -> &str {
        self.parts().1
    }

    /// The receipt as the API types hold it.
    #[must_use]
    pub fn receipt(&self) -> Receipt {
        let (uri, cid) = self.parts();
        Receipt {
            uri: uri.to_owned(),
            cid: cid.to_owned(),
        }
    }
}

impl From<Receipt> for CachedReceipt {
    fn from(receipt: Receipt) -> Self {
        Self(pack("", &receipt.uri, &receipt.cid))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any texts come back as they went in, colons and all.
        #[test]
        fn reads_back_what_it_keeps(uri in ".*", cid in ".*") {
            let receipt = Receipt { uri, cid };
            let cached = CachedReceipt::from(receipt.clone());
            prop_assert_eq!(cached.uri(), receipt.uri.as_str());
            prop_assert_eq!(cached.cid(), receipt.cid.as_str());
            prop_assert_eq!(cached.receipt(), receipt);
        }
    }

    #[test]
    fn is_one_allocation_of_the_texts_and_their_length() {
        let cached = CachedReceipt::from(Receipt {
            uri: "local://guests/g-1".to_owned(),
            cid: "sha256:00".to_owned(),
        });
        assert_eq!(&*cached.0, "18:local://guests/g-1sha256:00");
        assert_eq!(size_of::<Option<CachedReceipt>>(), 16);
    }
}
