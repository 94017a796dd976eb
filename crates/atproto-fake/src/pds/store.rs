//! The fake PDS's accounts and repositories (in memory).

use std::collections::{BTreeMap, HashMap};

use atproto::{Secret, SigningKey, TidGenerator, data};
use serde_json::Value;

use crate::http::XrpcError;

/// One stored record version.
#[derive(Debug, Clone)]
pub struct Stored {
    /// The CID a standard PDS computes (`$bytes` as bytes).
    pub cid: String,
    /// The record.
    pub value: Value,
}

/// An account and its repository.
#[derive(Debug)]
pub struct Account {
    /// The DID.
    pub did: String,
    /// The handle.
    pub handle: String,
    /// The account password.
    pub password: Secret<String>,
    /// App passwords (name, password).
    pub app_passwords: Vec<(String, Secret<String>)>,
    /// The `#atproto` key: signs service-auth JWTs.
    pub signing_key: SigningKey,
    /// `(collection, rkey)` -> record.
    pub records: BTreeMap<(String, String), Stored>,
    /// The rkeys of createRecord.
    pub tids: TidGenerator,
}

impl Account {
    /// Whether `password` is the account password or one of its app passwords.
    #[must_use]
    pub fn accepts(&self, password: &str) -> bool {
        self.password.expose() == password
            || self
                .app_passwords
                .iter()
                .any(|(_, p)| p.expose() == password)
    }

    /// Writes a record; `$type` defaults to the collection and must equal it.
    ///
    /// # Errors
    /// 400 `InvalidRequest` for a record that is not an object or has another
    /// `$type`; 400 `InvalidSwap` when `swap` is not the current CID.
    pub fn put(
        &mut self,
        collection: &str,
        rkey: &str,
        mut value: Value,
        swap: Option<&str>,
    ) -> Result<Stored, XrpcError> {
        let Value::Object(fields) = &mut value else {
            return Err(XrpcError::invalid("record must be an object"));
        };
        match fields.get("$type") {
            None => {
                fields.insert("$type".to_owned(), Value::from(collection));
            }
            Some(Value::String(t)) if t == collection => {}
            Some(other) => {
                return Err(XrpcError::invalid(format!(
                    "Invalid $type: expected {collection}, got {other}"
                )));
            }
        }
        let key = (collection.to_owned(), rkey.to_owned());
        if let Some(swap) = swap
            && self.records.get(&key).map(|r| r.cid.as_str()) != Some(swap)
        {
            return Err(XrpcError::new(
                axum::http::StatusCode::BAD_REQUEST,
                "InvalidSwap",
                format!("Record was at {:?}", self.records.get(&key).map(|r| &r.cid)),
            ));
        }
        let cid = data::record_cid(&value)
            .map_err(|e| XrpcError::invalid(e.to_string()))?
            .to_string();
        let stored = Stored { cid, value };
        self.records.insert(key, stored.clone());
        Ok(stored)
    }
}

/// Session tokens: opaque random strings (a client must treat them so).
#[derive(Debug, Default)]
pub struct Sessions {
    /// access token -> (did, expired).
    pub access: HashMap<String, (String, bool)>,
    /// refresh token -> did.
    pub refresh: HashMap<String, String>,
}

impl Sessions {
    /// A new access/refresh pair for `did`.
    pub fn issue(&mut self, did: &str) -> (String, String) {
        let access = format!("fake-access-{}", hex::encode(rand::random::<[u8; 16]>()));
        let refresh = format!("fake-refresh-{}", hex::encode(rand::random::<[u8; 16]>()));
        self.access.insert(access.clone(), (did.to_owned(), false));
        self.refresh.insert(refresh.clone(), did.to_owned());
        (access, refresh)
    }
}

/// Everything the fake PDS holds.
#[derive(Debug, Default)]
pub struct Store {
    /// DID -> account.
    pub accounts: HashMap<String, Account>,
    /// Handle -> DID.
    pub handles: HashMap<String, String>,
    /// Sessions.
    pub sessions: Sessions,
    /// Invite codes, when the PDS requires them.
    pub invite_codes: Vec<String>,
}

impl Store {
    /// The DID of a handle or DID.
    #[must_use]
    pub fn resolve_actor(&self, actor: &str) -> Option<String> {
        if self.accounts.contains_key(actor) {
            Some(actor.to_owned())
        } else {
            self.handles.get(actor).cloned()
        }
    }
}
