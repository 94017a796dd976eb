//! AT-URIs and strong references.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// `at://<did>/<collection>/<rkey>`: one record. (Handles as authority and
/// URIs naming a whole repo or collection are not used by the market.)
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AtUri {
    /// The repository's DID.
    pub did: String,
    /// The collection NSID.
    pub collection: String,
    /// The record key.
    pub rkey: String,
}

impl AtUri {
    /// The URI of a record.
    #[must_use]
    pub fn new(did: &str, collection: &str, rkey: &str) -> Self {
        Self {
            did: did.to_owned(),
            collection: collection.to_owned(),
            rkey: rkey.to_owned(),
        }
    }
}

impl fmt::Display for AtUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at://{}/{}/{}", self.did, self.collection, self.rkey)
    }
}

impl FromStr for AtUri {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let rest = s
            .strip_prefix("at://")
            .ok_or_else(|| Error::invalid("at-uri", "does not start with at://"))?;
        let mut parts = rest.split('/');
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(did), Some(collection), Some(rkey), None)
                if did.starts_with("did:") && !collection.is_empty() && !rkey.is_empty() =>
            {
                Ok(Self::new(did, collection, rkey))
            }
            _ => Err(Error::invalid(
                "at-uri",
                "expected at://<did>/<collection>/<rkey>",
            )),
        }
    }
}

/// `com.atproto.repo.strongRef`: a record and the CID of one version of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StrongRef {
    /// The record's AT-URI.
    pub uri: String,
    /// The CID of the version referred to.
    pub cid: String,
}

impl StrongRef {
    /// The `$type` a strongRef carries when embedded in a record.
    pub const TYPE: &'static str = "com.atproto.repo.strongRef";

    /// The JSON a record embeds (with `$type`, as the reference writes it).
    #[must_use]
    pub fn to_record_value(&self) -> serde_json::Value {
        serde_json::json!({ "$type": Self::TYPE, "uri": self.uri, "cid": self.cid })
    }

    /// The parsed URI.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the URI is not `at://<did>/<collection>/<rkey>`.
    pub fn at_uri(&self) -> Result<AtUri> {
        self.uri.parse()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_and_prints_record_uris() {
        let text = "at://did:plc:o3stzy6qojgmdtdzjq6tynqs/com.publicdomainrelay.temp.market.rfp/3mq4ger7lvs23";
        let uri: AtUri = text.parse().unwrap();
        assert_eq!(uri.did, "did:plc:o3stzy6qojgmdtdzjq6tynqs");
        assert_eq!(uri.rkey, "3mq4ger7lvs23");
        assert_eq!(uri.to_string(), text);
        for bad in [
            "https://x/y/z",
            "at://did:plc:a/c",
            "at://handle.test/c/r",
            "at://did:plc:a/c/r/x",
        ] {
            assert!(bad.parse::<AtUri>().is_err(), "{bad}");
        }
    }
}
