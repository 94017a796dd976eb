//! The adapter's atproto connections: our session (logged in lazily, again
//! when it dies), reads of any repository through its PDS, and calls to
//! bidders with a service-auth JWT from our PDS.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use atproto::did::{self, MARKET_SERVICE};
use atproto::{AtUri, Auth, DidResolver, PdsClient, Record, Secret, StrongRef, XrpcClient};
use serde_json::Value;

type Result<T> = std::result::Result<T, atproto::Error>;

/// At most this many pages of 100 are read from one collection of a
/// bidder's repository (newest first), so a large or hostile repository
/// cannot keep us reading.
pub const MAX_PAGES: usize = 5;

/// Our account and the network.
pub struct Net {
    http: reqwest::Client,
    pds: PdsClient,
    identifier: String,
    password: Secret<String>,
    resolver: DidResolver,
    timeout: Duration,
    login: tokio::sync::Mutex<()>,
    pds_of: Mutex<HashMap<String, String>>,
}

impl Net {
    pub fn new(
        http: reqwest::Client,
        pds_url: &str,
        identifier: &str,
        password: Secret<String>,
        resolver: DidResolver,
        timeout: Duration,
    ) -> Self {
        let pds_of = if identifier.starts_with("did:") {
            HashMap::from([(
                identifier.to_owned(),
                pds_url.trim_end_matches('/').to_owned(),
            )])
        } else {
            HashMap::new()
        };
        Self {
            pds: PdsClient::new(http.clone(), pds_url, timeout),
            http,
            identifier: identifier.to_owned(),
            password,
            resolver,
            timeout,
            login: tokio::sync::Mutex::new(()),
            pds_of: Mutex::new(pds_of),
        }
    }

    pub const fn resolver(&self) -> &DidResolver {
        &self.resolver
    }

    /// Our DID, logging in first if no session exists.
    pub async fn did(&self) -> Result<String> {
        if let Some(session) = self.pds.session() {
            return Ok(session.did);
        }
        let _one_login = self.login.lock().await;
        if let Some(session) = self.pds.session() {
            return Ok(session.did);
        }
        self.log_in().await
    }

    async fn log_in(&self) -> Result<String> {
        let session = self.pds.login(&self.identifier, &self.password).await?;
        self.pds_of
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(session.did.clone(), self.pds.xrpc().base_url().to_owned());
        Ok(session.did)
    }

    /// Runs an authenticated call; when the session is dead (refresh
    /// refused), logs in again and runs it once more.
    async fn with_session<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        self.did().await?;
        match call().await {
            Err(error) if error.is_auth() => {
                tracing::info!(%error, "pds session refused; logging in again");
                {
                    let _one_login = self.login.lock().await;
                    self.log_in().await?;
                }
                call().await
            }
            other => other,
        }
    }

    /// One of our records, `None` when it does not exist.
    pub async fn get_own(&self, collection: &str, rkey: &str) -> Result<Option<Record>> {
        let uri = AtUri::new(&self.did().await?, collection, rkey);
        absent_as_none(self.pds.xrpc().get_record(&uri).await)
    }

    /// Writes one of our records at `rkey` (created or replaced).
    pub async fn put_own(&self, collection: &str, rkey: &str, record: &Value) -> Result<StrongRef> {
        self.with_session(|| self.pds.put_record(collection, rkey, record, None))
            .await
    }

    /// Deletes one of our records (absent counts as deleted).
    pub async fn delete_own(&self, collection: &str, rkey: &str) -> Result<()> {
        self.with_session(|| self.pds.delete_record(collection, rkey))
            .await
    }

    /// A reader of `did`'s repository, on the PDS its DID document names.
    async fn repo(&self, did: &str) -> Result<XrpcClient> {
        let known = self
            .pds_of
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(did)
            .cloned();
        let url = match known {
            Some(url) => url,
            None => {
                let url = self.resolver.resolve(did).await?.pds()?.to_owned();
                self.pds_of
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(did.to_owned(), url.clone());
                url
            }
        };
        Ok(XrpcClient::new(self.http.clone(), &url, self.timeout))
    }

    /// Forgets where `did`'s repository is (after a failure there).
    fn forget(&self, did: &str) {
        if did != self.identifier {
            self.pds_of
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(did);
        }
    }

    /// The latest version of any record, `None` when it does not exist.
    pub async fn get(&self, uri: &AtUri) -> Result<Option<Record>> {
        let result = self.repo(&uri.did).await?.get_record(uri).await;
        if result.as_ref().is_err_and(atproto::Error::is_retryable) {
            self.forget(&uri.did);
        }
        absent_as_none(result)
    }

    /// The newest records of a collection of `did`'s repository (at most
    /// [`MAX_PAGES`] pages).
    pub async fn list(&self, did: &str, collection: &str) -> Result<Vec<Record>> {
        let result = self
            .repo(did)
            .await?
            .list_all_records(did, collection, MAX_PAGES)
            .await;
        if result.as_ref().is_err_and(atproto::Error::is_retryable) {
            self.forget(did);
        }
        result
    }

    /// Calls `lxm` at `endpoint` (an URL, or `did#service`) of `bidder`, with
    /// a service-auth JWT from our PDS naming the bidder by its DID (what
    /// any PDS mints, unlike a did:web with a port).
    pub async fn call_bidder<T: serde::de::DeserializeOwned>(
        &self,
        bidder: &str,
        endpoint: &str,
        lxm: &str,
        input: &Value,
    ) -> Result<T> {
        let url = did::resolve_service(&self.resolver, endpoint).await?;
        let aud = format!("{bidder}#{MARKET_SERVICE}");
        let token = self
            .with_session(|| self.pds.service_auth(&aud, lxm, None))
            .await?;
        XrpcClient::new(self.http.clone(), &url, self.timeout)
            .procedure(lxm, input, Some(&Auth::Bearer(token)))
            .await
    }

    /// The repositories the relay at `relay_url` lists under `collection`.
    pub async fn repos_with(&self, relay_url: &str, collection: &str) -> Result<Vec<String>> {
        #[derive(serde::Deserialize)]
        struct Page {
            #[serde(default)]
            repos: Vec<Repo>,
        }
        #[derive(serde::Deserialize)]
        struct Repo {
            did: String,
        }
        let relay = XrpcClient::new(self.http.clone(), relay_url, self.timeout);
        let page: Page = relay
            .query(
                "com.atproto.sync.listReposByCollection",
                &[("collection", collection), ("limit", "1000")],
                None,
            )
            .await?;
        Ok(page.repos.into_iter().map(|r| r.did).collect())
    }
}

fn absent_as_none(result: Result<Record>) -> Result<Option<Record>> {
    match result {
        Ok(record) => Ok(Some(record)),
        Err(atproto::Error::RecordNotFound { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}
