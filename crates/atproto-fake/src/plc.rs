//! A fake PLC directory: `GET /<did>` (404 for an unknown DID), `POST /<did>`
//! with a signed PLC operation (how a real PDS registers a new account),
//! `GET /<did>/log/last` and `GET /<did>/data`.
//!
//! Faithful where a client can tell: a genesis operation must hash to its DID
//! (`did:plc:` + the first 24 base32 characters of sha256 of its signed
//! DAG-CBOR), and every operation must be signed by one of the rotation keys
//! in force (ECDSA over the unsigned operation's DAG-CBOR, base64url `sig`).

use std::collections::HashMap;
use std::sync::Arc;

use atproto::{DidDocument, PublicKey, SigningKey, data};
use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use parking_lot::RwLock;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::http::XrpcError;

const B64URL: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The PLC directory's state: the operation log of each DID.
#[derive(Debug, Default, Clone)]
pub struct Plc {
    logs: Arc<RwLock<HashMap<String, Vec<Value>>>>,
}

impl Plc {
    /// The routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/{did}", get(resolve).post(submit))
            .route("/{did}/log/last", get(last_op))
            .route("/{did}/data", get(data_of))
            .with_state(self.clone())
    }

    /// Creates a did:plc from a genesis operation signed with `rotation_key`,
    /// naming `signing_key` as `#atproto`, `handle` and the PDS at `pds_url`.
    ///
    /// # Errors
    /// When the operation cannot be encoded (never, for these inputs).
    pub fn create(
        &self,
        rotation_key: &SigningKey,
        signing_key: &PublicKey,
        handle: &str,
        pds_url: &str,
    ) -> Result<String, XrpcError> {
        let mut op = json!({
            "type": "plc_operation",
            "rotationKeys": [rotation_key.public_key().did_key()],
            "verificationMethods": { "atproto": signing_key.did_key() },
            "alsoKnownAs": [format!("at://{handle}")],
            "services": { "atproto_pds": { "type": "AtprotoPersonalDataServer", "endpoint": pds_url } },
            "prev": null,
        });
        let unsigned = data::encode(&op).map_err(|e| XrpcError::invalid(e.to_string()))?;
        op["sig"] = Value::from(B64URL.encode(rotation_key.sign(&unsigned)));
        let did = did_of_genesis(&op)?;
        self.apply(&did, op)?;
        Ok(did)
    }

    /// The DID document of `did`, if it exists.
    #[must_use]
    pub fn document(&self, did: &str) -> Option<DidDocument> {
        let logs = self.logs.read();
        let op = logs.get(did)?.last()?;
        serde_json::from_value(document_of(did, op)).ok()
    }

    fn apply(&self, did: &str, op: Value) -> Result<(), XrpcError> {
        let mut logs = self.logs.write();
        let log = logs.entry(did.to_owned()).or_default();
        let keys_in_force = match log.last() {
            None => {
                if did_of_genesis(&op)? != did {
                    return Err(XrpcError::invalid(
                        "genesis operation does not hash to the did",
                    ));
                }
                &op
            }
            Some(last) => last,
        };
        verify_op(&op, keys_in_force)?;
        log.push(op);
        Ok(())
    }
}

fn did_of_genesis(op: &Value) -> Result<String, XrpcError> {
    let bytes = data::encode(op).map_err(|e| XrpcError::invalid(e.to_string()))?;
    let hash = Sha256::digest(bytes);
    let encoded = multibase::Base::Base32Lower.encode(hash);
    Ok(format!("did:plc:{}", &encoded[..24]))
}

fn verify_op(op: &Value, keys_in_force: &Value) -> Result<(), XrpcError> {
    let sig = op
        .get("sig")
        .and_then(Value::as_str)
        .and_then(|s| B64URL.decode(s).ok())
        .ok_or_else(|| XrpcError::invalid("operation has no base64url sig"))?;
    let mut unsigned = op.clone();
    if let Value::Object(map) = &mut unsigned {
        map.remove("sig");
    }
    let bytes = data::encode(&unsigned).map_err(|e| XrpcError::invalid(e.to_string()))?;
    let keys = keys_in_force
        .get("rotationKeys")
        .and_then(Value::as_array)
        .ok_or_else(|| XrpcError::invalid("no rotationKeys in force"))?;
    let signed = keys
        .iter()
        .filter_map(Value::as_str)
        .any(|key| PublicKey::from_did_key(key).is_ok_and(|key| key.verify(&bytes, &sig).is_ok()));
    if signed {
        Ok(())
    } else {
        Err(XrpcError::invalid("invalid signature on operation"))
    }
}

/// The DID document a PLC operation describes (as plc.directory renders it).
fn document_of(did: &str, op: &Value) -> Value {
    let methods: Vec<Value> = op["verificationMethods"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(id, key)| {
            let multibase = key.as_str()?.strip_prefix("did:key:")?;
            Some(json!({
                "id": format!("{did}#{id}"),
                "type": "Multikey",
                "controller": did,
                "publicKeyMultibase": multibase,
            }))
        })
        .collect();
    let services: Vec<Value> = op["services"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(id, service)| {
            json!({ "id": format!("#{id}"), "type": service["type"], "serviceEndpoint": service["endpoint"] })
        })
        .collect();
    json!({
        "@context": [
            "https://www.w3.org/ns/did/v1",
            "https://w3id.org/security/multikey/v1",
            "https://w3id.org/security/suites/secp256k1-2019/v1"
        ],
        "id": did,
        "alsoKnownAs": op["alsoKnownAs"],
        "verificationMethod": methods,
        "service": services,
    })
}

fn not_found(did: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({ "message": format!("DID not registered: {did}") })),
    )
        .into_response()
}

async fn resolve(State(plc): State<Plc>, Path(did): Path<String>) -> Response {
    let logs = plc.logs.read();
    match logs.get(&did).and_then(|log| log.last()) {
        Some(op) if op["type"] != "plc_tombstone" => Json(document_of(&did, op)).into_response(),
        _ => not_found(&did),
    }
}

async fn submit(
    State(plc): State<Plc>,
    Path(did): Path<String>,
    Json(op): Json<Value>,
) -> Response {
    match plc.apply(&did, op) {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => (
            StatusCode::BAD_REQUEST,
            Json(json!({ "message": e.message })),
        )
            .into_response(),
    }
}

async fn last_op(State(plc): State<Plc>, Path(did): Path<String>) -> Response {
    match plc.logs.read().get(&did).and_then(|log| log.last()) {
        Some(op) => Json(op.clone()).into_response(),
        None => not_found(&did),
    }
}

async fn data_of(State(plc): State<Plc>, Path(did): Path<String>) -> Response {
    match plc.logs.read().get(&did).and_then(|log| log.last()) {
        Some(op) => {
            let mut data = op.clone();
            if let Value::Object(map) = &mut data {
                map.remove("sig");
                map.remove("prev");
                map.remove("type");
            }
            data["did"] = Value::from(did.as_str());
            Json(data).into_response()
        }
        None => not_found(&did),
    }
}
