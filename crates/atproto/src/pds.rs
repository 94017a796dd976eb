//! A session on a PDS, and the repository methods.
//!
//! [`PdsClient`] logs in with an app password (`createSession`), keeps the
//! access and refresh JWTs (as [`Secret`]s), refreshes once when the PDS says
//! the access token expired, and writes records in its own repository. Reads
//! (`getRecord`, `listRecords`) need no session and work on any PDS through
//! [`XrpcClient`].

use std::time::Duration;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::uri::{AtUri, StrongRef};
use crate::xrpc::{Auth, XrpcClient};
use crate::{Error, Result, Secret};

/// Who a session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// The account's DID.
    pub did: String,
    /// The account's handle.
    pub handle: String,
}

#[derive(Clone)]
struct Tokens {
    info: SessionInfo,
    access: Secret<String>,
    refresh: Secret<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionOutput {
    did: String,
    handle: String,
    access_jwt: String,
    refresh_jwt: String,
}

impl From<SessionOutput> for Tokens {
    fn from(out: SessionOutput) -> Self {
        Self {
            info: SessionInfo {
                did: out.did,
                handle: out.handle,
            },
            access: Secret::new(out.access_jwt),
            refresh: Secret::new(out.refresh_jwt),
        }
    }
}

/// One record as `getRecord` / `listRecords` return it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The record's AT-URI.
    pub uri: String,
    /// The CID of this version (as the PDS computed it).
    pub cid: String,
    /// The record.
    pub value: Value,
}

impl Record {
    /// The strong reference to this version.
    #[must_use]
    pub fn strong_ref(&self) -> StrongRef {
        StrongRef {
            uri: self.uri.clone(),
            cid: self.cid.clone(),
        }
    }
}

/// One page of `listRecords`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordPage {
    /// The records, newest first unless `reverse` was asked.
    pub records: Vec<Record>,
    /// Where the next page starts; `None` on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl XrpcClient {
    /// `com.atproto.repo.getRecord`: the latest version of a record.
    ///
    /// # Errors
    /// [`Error::RecordNotFound`] when the repository has no such record (or
    /// no such repository); other errors as [`XrpcClient::query`].
    pub async fn get_record(&self, uri: &AtUri) -> Result<Record> {
        let result = self
            .query(
                "com.atproto.repo.getRecord",
                &[
                    ("repo", &uri.did),
                    ("collection", &uri.collection),
                    ("rkey", &uri.rkey),
                ],
                None,
            )
            .await;
        result.map_err(|e| not_found_as_typed(e, uri))
    }

    /// `com.atproto.repo.listRecords`: one page of a collection.
    ///
    /// # Errors
    /// As [`XrpcClient::query`].
    pub async fn list_records(
        &self,
        repo: &str,
        collection: &str,
        limit: u16,
        cursor: Option<&str>,
    ) -> Result<RecordPage> {
        let limit = limit.to_string();
        let mut params = vec![
            ("repo", repo),
            ("collection", collection),
            ("limit", limit.as_str()),
        ];
        if let Some(cursor) = cursor {
            params.push(("cursor", cursor));
        }
        self.query("com.atproto.repo.listRecords", &params, None)
            .await
    }

    /// Every record of a collection, following cursors (at most `max_pages`
    /// pages of 100, so a hostile repository cannot keep us reading forever).
    ///
    /// # Errors
    /// As [`XrpcClient::list_records`].
    pub async fn list_all_records(
        &self,
        repo: &str,
        collection: &str,
        max_pages: usize,
    ) -> Result<Vec<Record>> {
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..max_pages {
            let page = self
                .list_records(repo, collection, 100, cursor.as_deref())
                .await?;
            let done = page.records.is_empty() || page.cursor.is_none();
            all.extend(page.records);
            cursor = page.cursor;
            if done {
                break;
            }
        }
        Ok(all)
    }
}

/// A PDS answers a missing record with 400 `RecordNotFound`, and a missing
/// repository with 400 `InvalidRequest` "Could not locate record" (Bluesky's
/// PDS 0.5) or `RepoNotFound`, or a 404 (others): all mean no record.
fn not_found_as_typed(error: Error, uri: &AtUri) -> Error {
    match &error {
        Error::Xrpc {
            status,
            error: name,
            message,
            ..
        } if name == "RecordNotFound"
            || name == "RepoNotFound"
            || *status == 404
            || (name == "InvalidRequest"
                && (message.starts_with("Could not locate record")
                    || message.starts_with("Could not find repo"))) =>
        {
            Error::RecordNotFound {
                uri: uri.to_string(),
            }
        }
        _ => error,
    }
}

/// A logged-in client of one PDS account.
pub struct PdsClient {
    xrpc: XrpcClient,
    tokens: RwLock<Option<Tokens>>,
}

impl std::fmt::Debug for PdsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PdsClient")
            .field("pds", &self.xrpc.base_url())
            .field("session", &self.session().map(|s| s.did))
            .finish()
    }
}

impl PdsClient {
    /// A client of the PDS at `pds_url`, not logged in yet.
    #[must_use]
    pub fn new(http: reqwest::Client, pds_url: &str, timeout: Duration) -> Self {
        Self {
            xrpc: XrpcClient::new(http, pds_url, timeout),
            tokens: RwLock::new(None),
        }
    }

    /// The XRPC client of the PDS (for unauthenticated reads).
    #[must_use]
    pub const fn xrpc(&self) -> &XrpcClient {
        &self.xrpc
    }

    /// Who is logged in, if anyone.
    #[must_use]
    pub fn session(&self) -> Option<SessionInfo> {
        self.tokens.read().as_ref().map(|t| t.info.clone())
    }

    /// `com.atproto.server.createSession` with a handle or DID and an app
    /// password.
    ///
    /// # Errors
    /// [`Error::Xrpc`] with status 401 `AuthenticationRequired` for bad
    /// credentials (see [`Error::is_auth`]); transport errors.
    pub async fn login(&self, identifier: &str, password: &Secret<String>) -> Result<SessionInfo> {
        let out: SessionOutput = self
            .xrpc
            .procedure(
                "com.atproto.server.createSession",
                &json!({ "identifier": identifier, "password": password.expose() }),
                None,
            )
            .await?;
        Ok(self.store(out))
    }

    /// `com.atproto.server.createAccount`; logs in as the new account.
    /// (Tests and fakes; an operator brings an existing account.)
    ///
    /// # Errors
    /// [`Error::Xrpc`] as the PDS answers (e.g. `InvalidInviteCode`, `HandleNotAvailable`).
    pub async fn create_account(
        &self,
        handle: &str,
        email: &str,
        password: &Secret<String>,
        invite_code: Option<&str>,
    ) -> Result<SessionInfo> {
        let mut input = json!({ "handle": handle, "email": email, "password": password.expose() });
        if let Some(code) = invite_code {
            input["inviteCode"] = Value::from(code);
        }
        let out: SessionOutput = self
            .xrpc
            .procedure("com.atproto.server.createAccount", &input, None)
            .await?;
        Ok(self.store(out))
    }

    /// `com.atproto.server.createAppPassword` for the logged-in account.
    ///
    /// # Errors
    /// [`Error::Xrpc`]; [`Error::Unauthorized`] when not logged in.
    pub async fn create_app_password(&self, name: &str) -> Result<Secret<String>> {
        #[derive(Deserialize)]
        struct Out {
            password: String,
        }
        let out: Out = self
            .authed_procedure(
                "com.atproto.server.createAppPassword",
                &json!({ "name": name }),
            )
            .await?;
        Ok(Secret::new(out.password))
    }

    /// `com.atproto.server.refreshSession` with the refresh JWT.
    ///
    /// # Errors
    /// [`Error::Unauthorized`] when not logged in; [`Error::Xrpc`] when the
    /// refresh token was revoked or expired (log in again).
    pub async fn refresh(&self) -> Result<()> {
        let refresh = self.tokens()?.refresh;
        let out: SessionOutput = self
            .xrpc
            .procedure_without_input(
                "com.atproto.server.refreshSession",
                Some(&Auth::Bearer(refresh)),
            )
            .await?;
        self.store(out);
        Ok(())
    }

    /// `com.atproto.server.getServiceAuth`: a service-auth JWT signed by the
    /// PDS with the account's `#atproto` key, for `lxm` at `aud`, expiring at
    /// `exp` (seconds since the epoch; the PDS's default, 60 s, when `None`).
    ///
    /// # Errors
    /// As [`PdsClient::refresh`] and [`XrpcClient::query`].
    pub async fn service_auth(
        &self,
        aud: &str,
        lxm: &str,
        exp: Option<u64>,
    ) -> Result<Secret<String>> {
        #[derive(Deserialize)]
        struct Out {
            token: String,
        }
        let exp = exp.map(|e| e.to_string());
        let mut params = vec![("aud", aud), ("lxm", lxm)];
        if let Some(exp) = &exp {
            params.push(("exp", exp));
        }
        let nsid = "com.atproto.server.getServiceAuth";
        let out: Out = match self.xrpc.query(nsid, &params, Some(&self.access()?)).await {
            Err(e) if is_expired(&e) => {
                self.refresh().await?;
                self.xrpc
                    .query(nsid, &params, Some(&self.access()?))
                    .await?
            }
            other => other?,
        };
        Ok(Secret::new(out.token))
    }

    /// `com.atproto.repo.putRecord` in our repository: creates or replaces
    /// the record at `rkey`. With `swap_record`, only if the current version
    /// has that CID (compare-and-swap).
    ///
    /// # Errors
    /// [`Error::Xrpc`] (`InvalidSwap` when the swap failed, `InvalidRequest`
    /// for a record the PDS refuses); auth and transport errors.
    pub async fn put_record(
        &self,
        collection: &str,
        rkey: &str,
        record: &Value,
        swap_record: Option<&str>,
    ) -> Result<StrongRef> {
        let repo = self.did()?;
        let mut input =
            json!({ "repo": repo, "collection": collection, "rkey": rkey, "record": record });
        if let Some(cid) = swap_record {
            input["swapRecord"] = Value::from(cid);
        }
        self.authed_procedure("com.atproto.repo.putRecord", &input)
            .await
    }

    /// `com.atproto.repo.createRecord`: a new record (the PDS picks a TID
    /// rkey when `rkey` is `None`).
    ///
    /// # Errors
    /// As [`PdsClient::put_record`].
    pub async fn create_record(
        &self,
        collection: &str,
        rkey: Option<&str>,
        record: &Value,
    ) -> Result<StrongRef> {
        let repo = self.did()?;
        let mut input = json!({ "repo": repo, "collection": collection, "record": record });
        if let Some(rkey) = rkey {
            input["rkey"] = Value::from(rkey);
        }
        self.authed_procedure("com.atproto.repo.createRecord", &input)
            .await
    }

    /// `com.atproto.repo.deleteRecord` in our repository. Deleting a record
    /// that does not exist succeeds (the PDS treats it as done).
    ///
    /// # Errors
    /// As [`PdsClient::put_record`].
    pub async fn delete_record(&self, collection: &str, rkey: &str) -> Result<()> {
        let repo = self.did()?;
        let input = json!({ "repo": repo, "collection": collection, "rkey": rkey });
        let _: Value = self
            .authed_procedure("com.atproto.repo.deleteRecord", &input)
            .await?;
        Ok(())
    }

    /// The logged-in DID.
    ///
    /// # Errors
    /// [`Error::Unauthorized`] when not logged in.
    pub fn did(&self) -> Result<String> {
        Ok(self.tokens()?.info.did)
    }

    async fn authed_procedure<T: serde::de::DeserializeOwned>(
        &self,
        nsid: &str,
        input: &Value,
    ) -> Result<T> {
        match self
            .xrpc
            .procedure(nsid, input, Some(&self.access()?))
            .await
        {
            Err(e) if is_expired(&e) => {
                self.refresh().await?;
                self.xrpc
                    .procedure(nsid, input, Some(&self.access()?))
                    .await
            }
            other => other,
        }
    }

    fn store(&self, out: SessionOutput) -> SessionInfo {
        let tokens = Tokens::from(out);
        let info = tokens.info.clone();
        *self.tokens.write() = Some(tokens);
        info
    }

    fn tokens(&self) -> Result<Tokens> {
        self.tokens
            .read()
            .clone()
            .ok_or_else(|| Error::Unauthorized("not logged in to the pds".to_owned()))
    }

    fn access(&self) -> Result<Auth> {
        Ok(Auth::Bearer(self.tokens()?.access))
    }
}

/// A PDS says an access token expired with 400 `ExpiredToken`.
fn is_expired(error: &Error) -> bool {
    error.xrpc_error() == Some("ExpiredToken")
}
