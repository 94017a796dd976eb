//! [`KeptUid`]: an object's uid as the caches keep it.
//!
//! The API server makes every uid a UUID in its text form (36 characters,
//! lowercase hex and hyphens): as a `String` that is 24 bytes inline and a
//! 48-byte allocation, and the caches hold one in each node's Infra entry.
//! Its 16 bytes are enough; any other text (a uid written by another
//! server, or in capitals) is kept as it came.
//!
//! # Guarantees
//! - [`KeptUid::to_string`] of [`KeptUid::from`] a text is that text.

use std::fmt;

/// Where the hyphens of a UUID's text form are.
const HYPHENS: [usize; 4] = [8, 13, 18, 23];
/// The length of a UUID's text form.
const UUID_LEN: usize = 36;

/// A uid as the caches keep it. See the [module docs](self).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum KeptUid {
    /// A UUID in lowercase text form, as its 16 bytes.
    Uuid([u8; 16]),
    /// Any other text.
    Text(Box<str>),
}

impl KeptUid {
    /// The 16 bytes of `text` when it is a UUID in lowercase text form.
    fn uuid(text: &str) -> Option<[u8; 16]> {
        let bytes = text.as_bytes();
        if bytes.len() != UUID_LEN || HYPHENS.iter().any(|&at| bytes[at] != b'-') {
            return None;
        }
        let mut digits = bytes
            .iter()
            .enumerate()
            .filter(|(at, _)| !HYPHENS.contains(at))
            .map(|(_, &digit)| match digit {
                b'0'..=b'9' => Some(digit - b'0'),
                b'a'..=b'f' => Some(digit - b'a' + 10),
                _ => None,
            });
        let mut uuid = [0u8; 16];
        for byte in &mut uuid {
            let high = digits.next()??;
            let low = digits.next()??;
            *byte = (high << 4) | low;
        }
        Some(uuid)
    }
}

impl From<String> for KeptUid {
    fn from(text: String) -> Self {
        Self::uuid(&text).map_or_else(|| Self::Text(text.into_boxed_str()), Self::Uuid)
    }
}

impl fmt::Display for KeptUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Text(text) => f.write_str(text),
            // Written into one buffer and out in one call: a `{:02x}` per
            // byte through the formatter was 3 % of the manager's CPU under
            // `bench_scale --throughput`, the read models turning uids back
            // into text for every object a reconcile reads.
            Self::Uuid(uuid) => {
                let mut text = [b'-'; UUID_LEN];
                // Each group of bytes and where its digits start, between the hyphens.
                for (bytes, at) in [(0..4, 0), (4..6, 9), (6..8, 14), (8..10, 19), (10..16, 24)] {
                    let digits = &mut text[at..at + 2 * bytes.len()];
                    hex::encode_to_slice(&uuid[bytes], digits).map_err(|_| fmt::Error)?;
                }
                // Only ASCII digits and hyphens were written.
                f.write_str(std::str::from_utf8(&text).map_err(|_| fmt::Error)?)
            }
        }
    }
}

impl fmt::Debug for KeptUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_uuid_is_kept_as_its_bytes() {
        let uid = "711a412c-000f-4fbc-a9fe-91156f58ed2b";
        let kept = KeptUid::from(uid.to_owned());
        assert!(matches!(kept, KeptUid::Uuid(_)));
        assert_eq!(kept.to_string(), uid);
        assert_eq!(std::mem::size_of::<KeptUid>(), 24);
    }

    #[test]
    fn other_texts_are_kept_as_they_came() {
        for uid in [
            "",
            "u-1",
            "711A412C-000F-4FBC-A9FE-91156F58ED2B",
            "711a412c0000f-4fbc-a9fe-91156f58ed2b",
            "711a412c-000f-4fbc-a9fe-91156f58ed2",
            "711a412c-000f-4fbc-a9fe-91156f58ed2g",
        ] {
            let kept = KeptUid::from(uid.to_owned());
            assert!(matches!(kept, KeptUid::Text(_)), "{uid}");
            assert_eq!(kept.to_string(), uid);
        }
    }

    proptest! {
        #[test]
        fn a_uid_reads_back_as_it_was(
            uid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-fA-F-]{30,40}|.{0,40}"
        ) {
            prop_assert_eq!(KeptUid::from(uid.clone()).to_string(), uid);
        }
    }
}
