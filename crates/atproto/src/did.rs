//! DID documents and their resolution (did:plc through a PLC directory,
//! did:web through `/.well-known/did.json`).
//!
//! Hand-written (about 200 lines): atrium-identity resolves DIDs too, but
//! brings atrium-api's generated types and its own HTTP abstraction, while the
//! market needs a handful of fields, a configurable PLC URL, and the service
//! lookup by `#id` that the reference uses for `did#service` endpoints.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::keys::{Algorithm, PublicKey};
use crate::{Error, Result};

/// The fragment of the key that signs service-auth JWTs and repo commits.
pub const ATPROTO_KEY: &str = "atproto";
/// The fragment of the key that signs market records (reference practice).
pub const ATTESTATION_KEY: &str = "attestation";
/// The PDS service.
pub const PDS_SERVICE: &str = "atproto_pds";
/// The requester's `submitBid` endpoint.
pub const MARKET_SERVICE: &str = "pdr_temp_market";
/// The requester's `submitEvent` endpoint.
pub const COMPUTE_EVENT_SERVICE: &str = "pdr_temp_compute_event";

/// A DID document, with the fields atproto uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DidDocument {
    /// The DID.
    pub id: String,
    /// `at://<handle>` entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_known_as: Vec<String>,
    /// Keys.
    #[serde(default)]
    pub verification_method: Vec<VerificationMethod>,
    /// Endpoints.
    #[serde(default)]
    pub service: Vec<Service>,
}

/// One key of a DID document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerificationMethod {
    /// `#atproto` or `<did>#atproto`.
    pub id: String,
    /// `Multikey`, or a legacy `EcdsaSecp256k1VerificationKey2019` /
    /// `EcdsaSecp256r1VerificationKey2019`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The DID that controls the key.
    pub controller: String,
    /// The key, multibase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_key_multibase: Option<String>,
}

/// One service of a DID document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// `#atproto_pds` or `<did>#atproto_pds`.
    pub id: String,
    /// E.g. `AtprotoPersonalDataServer`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The URL (a string in atproto; other shapes are kept, never used).
    pub service_endpoint: serde_json::Value,
}

/// Whether a DID-document `id` names `fragment` of `did` (`#x` or `<did>#x`).
fn names(id: &str, did: &str, fragment: &str) -> bool {
    id.strip_prefix(did)
        .unwrap_or(id)
        .strip_prefix('#')
        .is_some_and(|f| f == fragment)
}

impl DidDocument {
    /// The key with id `#fragment`.
    ///
    /// # Errors
    /// [`Error::Resolve`] when there is none or it does not parse.
    pub fn key(&self, fragment: &str) -> Result<PublicKey> {
        let method = self
            .verification_method
            .iter()
            .find(|m| names(&m.id, &self.id, fragment))
            .ok_or_else(|| self.error(format!("no #{fragment} key")))?;
        let encoded = method
            .public_key_multibase
            .as_deref()
            .ok_or_else(|| self.error(format!("#{fragment} has no publicKeyMultibase")))?;
        let legacy = match method.kind.as_str() {
            "EcdsaSecp256k1VerificationKey2019" => Some(Algorithm::K256),
            "EcdsaSecp256r1VerificationKey2019" => Some(Algorithm::P256),
            _ => None,
        };
        let parsed = match legacy {
            // The legacy types carry the bare compressed point, no multicodec.
            Some(algorithm) => multibase::decode(encoded)
                .map_err(|e| Error::invalid("multibase key", e))
                .and_then(|(_, bytes)| PublicKey::from_sec1(algorithm, &bytes)),
            None => PublicKey::from_multibase(encoded),
        };
        parsed.map_err(|e| self.error(format!("#{fragment} key: {e}")))
    }

    /// The endpoint of the service with id `#fragment`, when it has one.
    #[must_use]
    pub fn service_endpoint(&self, fragment: &str) -> Option<&str> {
        self.service
            .iter()
            .find(|s| names(&s.id, &self.id, fragment))
            .and_then(|s| s.service_endpoint.as_str())
    }

    /// The PDS URL (`#atproto_pds`).
    ///
    /// # Errors
    /// [`Error::Resolve`] when the document names no PDS.
    pub fn pds(&self) -> Result<&str> {
        self.service_endpoint(PDS_SERVICE)
            .ok_or_else(|| self.error("no #atproto_pds service".to_owned()))
    }

    /// The first `at://` handle, without the scheme.
    #[must_use]
    pub fn handle(&self) -> Option<&str> {
        self.also_known_as
            .iter()
            .find_map(|aka| aka.strip_prefix("at://"))
    }

    fn error(&self, reason: String) -> Error {
        Error::Resolve {
            did: self.id.clone(),
            reason,
        }
    }
}

/// Resolves a service reference as the market writes them: an `https://`
/// URL as is, or `did#id` through that DID's document.
///
/// # Errors
/// [`Error::Resolve`] when the DID cannot be resolved or has no such service.
pub async fn resolve_service(resolver: &DidResolver, reference: &str) -> Result<String> {
    match reference.split_once('#') {
        Some((did, id)) if did.starts_with("did:") => {
            let doc = resolver.resolve(did).await?;
            doc.service_endpoint(id)
                .map(str::to_owned)
                .ok_or_else(|| doc.error(format!("no #{id} service")))
        }
        _ => Ok(reference.to_owned()),
    }
}

/// Resolves did:plc (GET `<plc>/<did>`) and did:web documents.
#[derive(Debug, Clone)]
pub struct DidResolver {
    http: reqwest::Client,
    plc_url: String,
    timeout: Duration,
}

impl DidResolver {
    /// The public PLC directory.
    pub const PUBLIC_PLC: &'static str = "https://plc.directory";

    /// A resolver using `plc_url` for did:plc.
    #[must_use]
    pub fn new(http: reqwest::Client, plc_url: &str, timeout: Duration) -> Self {
        Self {
            http,
            plc_url: plc_url.trim_end_matches('/').to_owned(),
            timeout,
        }
    }

    /// The document of `did`; its `id` must be `did`.
    ///
    /// # Errors
    /// [`Error::Resolve`] when the method is unsupported, the document is
    /// missing (404), unreachable, not JSON, or about another DID.
    pub async fn resolve(&self, did: &str) -> Result<DidDocument> {
        let url = document_url(&self.plc_url, did)?;
        let failed = |reason: String| Error::Resolve {
            did: did.to_owned(),
            reason,
        };
        let response = self
            .http
            .get(&url)
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| failed(format!("get {url}: {e}")))?;
        let status = response.status();
        if !status.is_success() {
            return Err(failed(format!("get {url}: {status}")));
        }
        let doc: DidDocument = response
            .json()
            .await
            .map_err(|e| failed(format!("document is not json: {e}")))?;
        if doc.id != did {
            return Err(failed(format!("document is about {}", doc.id)));
        }
        Ok(doc)
    }
}

/// Where the document of `did` lives.
///
/// # Errors
/// [`Error::Resolve`] for a method other than plc and web.
pub fn document_url(plc_url: &str, did: &str) -> Result<String> {
    if did.starts_with("did:plc:") {
        return Ok(format!("{}/{did}", plc_url.trim_end_matches('/')));
    }
    if let Some(rest) = did.strip_prefix("did:web:") {
        // did:web:host%3Aport:path:segments. atproto uses bare hosts; the
        // port is percent-encoded. Loopback hosts are served over http, as
        // @atproto/identity does for local development.
        let host = rest.split(':').next().unwrap_or(rest).replace("%3A", ":");
        let bare = host.split(':').next().unwrap_or(&host);
        let scheme = if matches!(bare, "localhost" | "127.0.0.1") {
            "http"
        } else {
            "https"
        };
        return Ok(format!("{scheme}://{host}/.well-known/did.json"));
    }
    Err(Error::Resolve {
        did: did.to_owned(),
        reason: "only did:plc and did:web are supported".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::SigningKey;

    fn document(atproto: &PublicKey) -> DidDocument {
        serde_json::from_value(serde_json::json!({
            "@context": ["https://www.w3.org/ns/did/v1"],
            "id": "did:plc:requester",
            "alsoKnownAs": ["at://requester.test"],
            "verificationMethod": [
                {"id": "did:plc:requester#atproto", "type": "Multikey", "controller": "did:plc:requester", "publicKeyMultibase": atproto.multibase()},
                {"id": "#attestation", "type": "EcdsaSecp256k1VerificationKey2019", "controller": "did:plc:requester",
                 "publicKeyMultibase": multibase::encode(multibase::Base::Base58Btc, atproto.compressed())}
            ],
            "service": [
                {"id": "#atproto_pds", "type": "AtprotoPersonalDataServer", "serviceEndpoint": "https://pds.test"},
                {"id": "did:plc:requester#pdr_temp_market", "type": "x", "serviceEndpoint": "https://market.test"},
                {"id": "#pdr_temp_compute_event", "type": "x", "serviceEndpoint": {"not": "a string"}}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn finds_keys_and_services_by_fragment_in_both_id_forms() {
        let key = SigningKey::generate(Algorithm::K256).public_key();
        let doc = document(&key);
        assert_eq!(doc.key(ATPROTO_KEY).unwrap(), key);
        assert_eq!(
            doc.key(ATTESTATION_KEY).unwrap(),
            key,
            "legacy type, bare point"
        );
        assert!(doc.key("other").is_err());
        assert_eq!(doc.pds().unwrap(), "https://pds.test");
        assert_eq!(
            doc.service_endpoint(MARKET_SERVICE),
            Some("https://market.test")
        );
        assert_eq!(doc.service_endpoint(COMPUTE_EVENT_SERVICE), None);
        assert_eq!(
            doc.service_endpoint("atproto"),
            None,
            "keys are not services"
        );
        assert_eq!(doc.handle(), Some("requester.test"));
    }

    #[test]
    fn document_urls() {
        assert_eq!(
            document_url("http://plc.test/", "did:plc:abc").unwrap(),
            "http://plc.test/did:plc:abc"
        );
        assert_eq!(
            document_url("", "did:web:example.com").unwrap(),
            "https://example.com/.well-known/did.json"
        );
        assert_eq!(
            document_url("", "did:web:localhost%3A8080").unwrap(),
            "http://localhost:8080/.well-known/did.json"
        );
        assert!(document_url("", "did:key:z").is_err());
    }
}
