//! A fake multi-repo PDS: accounts (did:plc registered in the fake PLC),
//! sessions with passwords and app passwords, `getServiceAuth` signed with the
//! account's `#atproto` key, and the repository methods with TID rkeys,
//! record CIDs, `RecordNotFound`, cursors, swaps, put and delete.
//!
//! It answers as Bluesky's PDS does where a client can tell: the same error
//! names and statuses (`RecordNotFound` 400, `AuthenticationRequired` 401,
//! `ExpiredToken` 400, `InvalidSwap` 400), `listRecords` newest first with the
//! last rkey as cursor, and deleting a missing record succeeds.

mod store;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use atproto::{Algorithm, AtUri, Secret, SigningKey, TidGenerator, jwt};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use parking_lot::RwLock;
use serde_json::{Value, json};

use store::Store;
pub use store::{Account, Stored};

use crate::http::{XrpcError, bearer};
use crate::plc::Plc;
use crate::relay::Relay;

type Answer = Result<Json<Value>, XrpcError>;
type Params = Query<HashMap<String, String>>;

/// An account created in-process (to seed a test).
#[derive(Debug, Clone)]
pub struct CreatedAccount {
    /// The DID.
    pub did: String,
    /// The handle.
    pub handle: String,
    /// The account password (an app password works the same).
    pub password: Secret<String>,
}

/// The fake PDS (cheap to clone; clones share state).
#[derive(Debug, Clone)]
pub struct Pds {
    store: Arc<RwLock<Store>>,
    plc: Plc,
    relay: Relay,
    url: Arc<OnceLock<String>>,
    rotation_key: Arc<SigningKey>,
}

impl Pds {
    /// A PDS registering its accounts in `plc` and announcing writes to `relay`.
    #[must_use]
    pub fn new(plc: Plc, relay: Relay) -> Self {
        Self {
            store: Arc::default(),
            plc,
            relay,
            url: Arc::default(),
            rotation_key: Arc::new(SigningKey::generate(Algorithm::K256)),
        }
    }

    /// Sets the URL the PDS is reached at (once, after binding).
    pub fn set_url(&self, url: &str) {
        let _ = self.url.set(url.to_owned());
    }

    fn url(&self) -> String {
        self.url.get().cloned().unwrap_or_default()
    }

    /// The routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route(
                "/xrpc/_health",
                get(|| async { Json(json!({ "version": "atproto-fake" })) }),
            )
            .route(
                "/xrpc/com.atproto.server.describeServer",
                get(describe_server),
            )
            .route(
                "/xrpc/com.atproto.server.createAccount",
                post(create_account),
            )
            .route(
                "/xrpc/com.atproto.server.createSession",
                post(create_session),
            )
            .route(
                "/xrpc/com.atproto.server.refreshSession",
                post(refresh_session),
            )
            .route(
                "/xrpc/com.atproto.server.createAppPassword",
                post(create_app_password),
            )
            .route(
                "/xrpc/com.atproto.server.getServiceAuth",
                get(get_service_auth),
            )
            .route(
                "/xrpc/com.atproto.identity.resolveHandle",
                get(resolve_handle),
            )
            .route("/xrpc/com.atproto.repo.putRecord", post(put_record))
            .route("/xrpc/com.atproto.repo.createRecord", post(create_record))
            .route("/xrpc/com.atproto.repo.deleteRecord", post(delete_record))
            .route("/xrpc/com.atproto.repo.getRecord", get(get_record))
            .route("/xrpc/com.atproto.repo.listRecords", get(list_records))
            .with_state(self.clone())
    }

    /// Creates an account directly (no HTTP), registered in the PLC.
    ///
    /// # Errors
    /// 400 `HandleNotAvailable` when the handle is taken.
    pub fn create_account(
        &self,
        handle: &str,
        password: &Secret<String>,
    ) -> Result<CreatedAccount, XrpcError> {
        if self.store.read().handles.contains_key(handle) {
            return Err(XrpcError::new(
                StatusCode::BAD_REQUEST,
                "HandleNotAvailable",
                "Handle already taken",
            ));
        }
        let signing_key = SigningKey::generate(Algorithm::K256);
        let did = self.plc.create(
            &self.rotation_key,
            &signing_key.public_key(),
            handle,
            &self.url(),
        )?;
        let mut store = self.store.write();
        store.handles.insert(handle.to_owned(), did.clone());
        store.accounts.insert(
            did.clone(),
            Account {
                did: did.clone(),
                handle: handle.to_owned(),
                password: password.clone(),
                app_passwords: Vec::new(),
                signing_key,
                records: std::collections::BTreeMap::new(),
                tids: TidGenerator::new(),
            },
        );
        Ok(CreatedAccount {
            did,
            handle: handle.to_owned(),
            password: password.clone(),
        })
    }

    /// Makes every access token issued so far answer `ExpiredToken`, as if
    /// its lifetime had passed (refresh tokens stay valid).
    pub fn expire_access_tokens(&self) {
        for (_, expired) in self.store.write().sessions.access.values_mut() {
            *expired = true;
        }
    }

    /// Requires an invite code for createAccount, and returns one.
    #[must_use]
    pub fn require_invite(&self) -> String {
        let code = format!("fake-invite-{}", hex::encode(rand::random::<[u8; 4]>()));
        self.store.write().invite_codes.push(code.clone());
        code
    }

    /// A record as stored (to check what a client wrote).
    #[must_use]
    pub fn record(&self, uri: &AtUri) -> Option<Stored> {
        let store = self.store.read();
        store
            .accounts
            .get(&uri.did)?
            .records
            .get(&(uri.collection.clone(), uri.rkey.clone()))
            .cloned()
    }

    /// Every record of one collection of one repository, by rkey (to
    /// count what a client wrote).
    #[must_use]
    pub fn records(&self, did: &str, collection: &str) -> Vec<(String, Stored)> {
        let store = self.store.read();
        store
            .accounts
            .get(did)
            .map(|account| {
                account
                    .records
                    .iter()
                    .filter(|((c, _), _)| c == collection)
                    .map(|((_, rkey), stored)| (rkey.clone(), stored.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The `#atproto` key of an account: a fake bidder that runs "its own
    /// PDS" mints its service-auth JWTs with it, as the reference's bidders
    /// do (with an `aud` Bluesky's PDS would refuse).
    #[must_use]
    pub fn signing_key(&self, did: &str) -> Option<SigningKey> {
        self.store
            .read()
            .accounts
            .get(did)
            .map(|a| a.signing_key.clone())
    }

    fn session_for(&self, did: &str, handle: &str) -> Value {
        let (access, refresh) = self.store.write().sessions.issue(did);
        json!({ "did": did, "handle": handle, "accessJwt": access, "refreshJwt": refresh, "active": true })
    }

    /// The DID an access token belongs to.
    fn authenticate(&self, headers: &HeaderMap) -> Result<String, XrpcError> {
        let token =
            bearer(headers).ok_or_else(|| XrpcError::auth_required("Authentication Required"))?;
        match self.store.read().sessions.access.get(token) {
            Some((_, true)) => Err(XrpcError::new(
                StatusCode::BAD_REQUEST,
                "ExpiredToken",
                "Token has expired",
            )),
            Some((did, false)) => Ok(did.clone()),
            None => Err(XrpcError::new(
                StatusCode::UNAUTHORIZED,
                "InvalidToken",
                "Token could not be verified",
            )),
        }
    }

    /// The authenticated DID, which must own `repo` (a DID or handle).
    fn authorize_repo(&self, headers: &HeaderMap, repo: &str) -> Result<String, XrpcError> {
        let did = self.authenticate(headers)?;
        if self.store.read().resolve_actor(repo).as_deref() == Some(did.as_str()) {
            Ok(did)
        } else {
            Err(XrpcError::auth_required("Invalid did"))
        }
    }
}

fn field<'a>(input: &'a Value, name: &str) -> Result<&'a str, XrpcError> {
    input
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| XrpcError::invalid(format!("Input must have the property \"{name}\"")))
}

fn record_of(input: &Value) -> Result<Value, XrpcError> {
    input
        .get("record")
        .cloned()
        .ok_or_else(|| XrpcError::invalid("Input must have the property \"record\""))
}

fn param<'a>(params: &'a HashMap<String, String>, name: &str) -> Result<&'a str, XrpcError> {
    params.get(name).map(String::as_str).ok_or_else(|| {
        XrpcError::invalid(format!("Error: Params must have the property \"{name}\""))
    })
}

/// Whether `aud` is what Bluesky's PDS (`@atproto/did`'s `isAtprotoDid` /
/// `isAtprotoDidRefAbsolute`) accepts: a did:plc, or a did:web without path
/// segments and without a port unless the host is `localhost`, optionally
/// with `#serviceId`.
fn is_service_did(aud: &str) -> bool {
    let did = aud.split_once('#').map_or(aud, |(did, _)| did);
    if let Some(id) = did.strip_prefix("did:plc:") {
        return id.len() == 24 && id.chars().all(|c| matches!(c, 'a'..='z' | '2'..='7'));
    }
    let Some(host) = did.strip_prefix("did:web:") else {
        return false;
    };
    let syntax = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._%-".contains(c));
    let port_ok = !host.contains("%3A") || host.starts_with("localhost%3A");
    syntax && port_ok
}

async fn describe_server(State(pds): State<Pds>) -> Json<Value> {
    let host = jwt::audience_for_url(&pds.url()).unwrap_or_default();
    let invite = !pds.store.read().invite_codes.is_empty();
    Json(json!({ "did": host, "availableUserDomains": [".test"], "inviteCodeRequired": invite }))
}

async fn create_account(State(pds): State<Pds>, Json(input): Json<Value>) -> Answer {
    let handle = field(&input, "handle")?;
    let password = Secret::new(field(&input, "password")?.to_owned());
    {
        let mut store = pds.store.write();
        if !store.invite_codes.is_empty() {
            let code = input
                .get("inviteCode")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let Some(at) = store.invite_codes.iter().position(|c| c == code) else {
                return Err(XrpcError::new(
                    StatusCode::BAD_REQUEST,
                    "InvalidInviteCode",
                    "Provided invite code not available",
                ));
            };
            store.invite_codes.remove(at);
        }
    }
    let account = pds.create_account(handle, &password)?;
    Ok(Json(pds.session_for(&account.did, &account.handle)))
}

async fn create_session(State(pds): State<Pds>, Json(input): Json<Value>) -> Answer {
    let identifier = field(&input, "identifier")?;
    let password = field(&input, "password")?;
    let found = {
        let store = pds.store.read();
        store
            .resolve_actor(identifier)
            .and_then(|did| store.accounts.get(&did))
            .filter(|account| account.accepts(password))
            .map(|account| (account.did.clone(), account.handle.clone()))
    };
    let (did, handle) =
        found.ok_or_else(|| XrpcError::auth_required("Invalid identifier or password"))?;
    Ok(Json(pds.session_for(&did, &handle)))
}

async fn refresh_session(
    State(pds): State<Pds>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Answer {
    if !body.is_empty() {
        // As Bluesky's PDS answers a procedure whose lexicon has no input.
        return Err(XrpcError::invalid(
            "A request body was provided when none was expected",
        ));
    }
    let token =
        bearer(&headers).ok_or_else(|| XrpcError::auth_required("Authentication Required"))?;
    let did = pds
        .store
        .write()
        .sessions
        .refresh
        .remove(token)
        .ok_or_else(|| {
            XrpcError::new(
                StatusCode::BAD_REQUEST,
                "ExpiredToken",
                "Token has been revoked",
            )
        })?;
    let handle = pds
        .store
        .read()
        .accounts
        .get(&did)
        .map(|a| a.handle.clone())
        .unwrap_or_default();
    Ok(Json(pds.session_for(&did, &handle)))
}

async fn create_app_password(
    State(pds): State<Pds>,
    headers: HeaderMap,
    Json(input): Json<Value>,
) -> Answer {
    let did = pds.authenticate(&headers)?;
    let name = field(&input, "name")?.to_owned();
    let chunks: Vec<String> = (0..4)
        .map(|_| hex::encode(rand::random::<[u8; 2]>()))
        .collect();
    let password = chunks.join("-");
    let mut store = pds.store.write();
    let account = store
        .accounts
        .get_mut(&did)
        .ok_or_else(|| XrpcError::auth_required("account gone"))?;
    account
        .app_passwords
        .push((name.clone(), Secret::new(password.clone())));
    Ok(Json(
        json!({ "name": name, "password": password, "createdAt": "1970-01-01T00:00:00.000Z" }),
    ))
}

async fn get_service_auth(
    State(pds): State<Pds>,
    headers: HeaderMap,
    Query(params): Params,
) -> Answer {
    let did = pds.authenticate(&headers)?;
    let aud = param(&params, "aud")?;
    if !is_service_did(aud) {
        return Err(XrpcError::invalid(
            "aud must be a valid atproto DID or did#serviceId reference",
        ));
    }
    let lxm = params.get("lxm").map(String::as_str).unwrap_or_default();
    let now = jwt::unix_seconds_now();
    let ttl = match params.get("exp") {
        None => jwt::DEFAULT_TTL_SECONDS,
        Some(exp) => {
            let exp: u64 = exp
                .parse()
                .map_err(|_| XrpcError::invalid("exp must be an integer"))?;
            if exp <= now {
                return Err(XrpcError::new(
                    StatusCode::BAD_REQUEST,
                    "BadExpiration",
                    "expiration is in past",
                ));
            }
            if exp - now > 3600 {
                return Err(XrpcError::new(
                    StatusCode::BAD_REQUEST,
                    "BadExpiration",
                    "cannot request a token with an expiration more than an hour in the future",
                ));
            }
            exp - now
        }
    };
    let store = pds.store.read();
    let account = store
        .accounts
        .get(&did)
        .ok_or_else(|| XrpcError::auth_required("account gone"))?;
    let token = jwt::issue(&account.signing_key, &did, aud, lxm, now, ttl)
        .map_err(|e| XrpcError::invalid(e.to_string()))?;
    Ok(Json(json!({ "token": token.expose() })))
}

async fn resolve_handle(State(pds): State<Pds>, Query(params): Params) -> Answer {
    let handle = param(&params, "handle")?;
    let did = pds.store.read().handles.get(handle).cloned();
    did.map(|did| Json(json!({ "did": did })))
        .ok_or_else(|| XrpcError::invalid("Unable to resolve handle"))
}

async fn put_record(
    State(pds): State<Pds>,
    headers: HeaderMap,
    Json(input): Json<Value>,
) -> Answer {
    let did = pds.authorize_repo(&headers, field(&input, "repo")?)?;
    let collection = field(&input, "collection")?;
    let rkey = field(&input, "rkey")?;
    let record = record_of(&input)?;
    let swap = input.get("swapRecord").and_then(Value::as_str);
    write(&pds, &did, collection, rkey, record, swap)
}

async fn create_record(
    State(pds): State<Pds>,
    headers: HeaderMap,
    Json(input): Json<Value>,
) -> Answer {
    let did = pds.authorize_repo(&headers, field(&input, "repo")?)?;
    let collection = field(&input, "collection")?;
    let record = record_of(&input)?;
    let rkey = match input.get("rkey").and_then(Value::as_str) {
        Some(rkey) => {
            if pds.record(&AtUri::new(&did, collection, rkey)).is_some() {
                return Err(XrpcError::invalid(format!("Record already exists: {rkey}")));
            }
            rkey.to_owned()
        }
        None => {
            let mut store = pds.store.write();
            let account = store
                .accounts
                .get_mut(&did)
                .ok_or_else(|| XrpcError::auth_required("account gone"))?;
            account.tids.next_now().to_string()
        }
    };
    write(&pds, &did, collection, &rkey, record, None)
}

fn write(
    pds: &Pds,
    did: &str,
    collection: &str,
    rkey: &str,
    record: Value,
    swap: Option<&str>,
) -> Answer {
    let stored = {
        let mut store = pds.store.write();
        let account = store
            .accounts
            .get_mut(did)
            .ok_or_else(|| XrpcError::auth_required("account gone"))?;
        account.put(collection, rkey, record, swap)?
    };
    pds.relay.announce(did, collection);
    let uri = AtUri::new(did, collection, rkey);
    Ok(Json(
        json!({ "uri": uri.to_string(), "cid": stored.cid, "validationStatus": "unknown" }),
    ))
}

async fn delete_record(
    State(pds): State<Pds>,
    headers: HeaderMap,
    Json(input): Json<Value>,
) -> Answer {
    let did = pds.authorize_repo(&headers, field(&input, "repo")?)?;
    let key = (
        field(&input, "collection")?.to_owned(),
        field(&input, "rkey")?.to_owned(),
    );
    let mut store = pds.store.write();
    let account = store
        .accounts
        .get_mut(&did)
        .ok_or_else(|| XrpcError::auth_required("account gone"))?;
    if let Some(swap) = input.get("swapRecord").and_then(Value::as_str)
        && account.records.get(&key).map(|r| r.cid.as_str()) != Some(swap)
    {
        return Err(XrpcError::new(
            StatusCode::BAD_REQUEST,
            "InvalidSwap",
            "Record was not at the given cid",
        ));
    }
    // Deleting a missing record is a no-op, as on Bluesky's PDS.
    account.records.remove(&key);
    Ok(Json(json!({})))
}

async fn get_record(State(pds): State<Pds>, Query(params): Params) -> Answer {
    let repo = param(&params, "repo")?;
    let collection = param(&params, "collection")?;
    let rkey = param(&params, "rkey")?;
    let store = pds.store.read();
    // Bluesky's PDS says this of an unknown repository (listRecords says "Could not find repo").
    let did = store
        .resolve_actor(repo)
        .ok_or_else(|| XrpcError::invalid("Could not locate record"))?;
    let uri = AtUri::new(&did, collection, rkey);
    let record = store
        .accounts
        .get(&did)
        .and_then(|a| a.records.get(&(collection.to_owned(), rkey.to_owned())))
        .ok_or_else(|| {
            XrpcError::new(
                StatusCode::BAD_REQUEST,
                "RecordNotFound",
                format!("Could not locate record: {uri}"),
            )
        })?;
    Ok(Json(
        json!({ "uri": uri.to_string(), "cid": record.cid, "value": record.value }),
    ))
}

async fn list_records(State(pds): State<Pds>, Query(params): Params) -> Answer {
    let repo = param(&params, "repo")?;
    let collection = param(&params, "collection")?;
    let limit: usize = match params.get("limit") {
        None => 50,
        Some(l) => l
            .parse()
            .ok()
            .filter(|l| (1..=100).contains(l))
            .ok_or_else(|| XrpcError::invalid("limit must be 1..100"))?,
    };
    let reverse = params.get("reverse").is_some_and(|r| r == "true");
    let cursor = params.get("cursor");
    let store = pds.store.read();
    let did = store
        .resolve_actor(repo)
        .ok_or_else(|| XrpcError::invalid(format!("Could not find repo: {repo}")))?;
    let account = store
        .accounts
        .get(&did)
        .ok_or_else(|| XrpcError::invalid(format!("Could not find repo: {repo}")))?;
    let in_collection = account.records.iter().filter(|((c, _), _)| c == collection);
    // Newest (highest rkey) first unless reversed; the cursor is the last
    // rkey of the previous page.
    let page: Vec<(&String, &Stored)> = if reverse {
        in_collection
            .map(|((_, r), s)| (r, s))
            .filter(|(r, _)| cursor.is_none_or(|c| *r > c))
            .take(limit)
            .collect()
    } else {
        in_collection
            .rev()
            .map(|((_, r), s)| (r, s))
            .filter(|(r, _)| cursor.is_none_or(|c| *r < c))
            .take(limit)
            .collect()
    };
    let next = (page.len() == limit)
        .then(|| page.last().map(|(r, _)| (*r).clone()))
        .flatten();
    let records: Vec<Value> = page
        .iter()
        .map(|(rkey, s)| json!({ "uri": AtUri::new(&did, collection, rkey).to_string(), "cid": s.cid, "value": s.value }))
        .collect();
    let mut out = json!({ "records": records });
    if let Some(next) = next {
        out["cursor"] = Value::from(next);
    }
    Ok(Json(out))
}
