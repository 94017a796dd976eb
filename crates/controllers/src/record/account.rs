//! The repository a record is written in: the account of the Requester that
//! runs the namespace, its app password read from the Secret its
//! `spec.market.atproto` names, and one logged-in session per account.
//!
//! # Why a session is kept
//!
//! A PDS limits logins (Bluesky's: 30 per 5 minutes, 300 a day per
//! account), and a session refreshes itself. So a session is made once per
//! (Requester, PDS, account, password) and kept; a changed password (compared
//! by a sha256 fingerprint, never by value) or account makes a new one. A
//! session the PDS refuses even after a refresh is logged in again once.
//!
//! The same lazy-login-and-retry is the market adapter's (`market::atproto`
//! keeps its own, private to it); the record controller needs only its
//! three calls, so they are written here rather than widening that API.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use api::Requester;
use atproto::{PdsClient, Secret, StrongRef};
use kube::{Client, ResourceExt};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::conditions::reason;
use crate::market_adapter::atproto::{CredentialsError, read_credentials};

/// Why no call could be made, as the Ready condition says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The condition reason (a constant of [`reason`]).
    pub reason: &'static str,
    /// What happened and what to do; never a secret.
    pub message: String,
    /// Whether trying again soon may help (the PDS was unreachable).
    pub retryable: bool,
}

impl Failure {
    fn new(reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
            retryable: false,
        }
    }

    /// The failure a PDS error stands for.
    #[must_use]
    pub fn from_pds(error: &atproto::Error, doing: &str) -> Self {
        if error.is_auth() {
            Self::new(
                reason::INVALID_CREDENTIALS,
                format!(
                    "{doing}: the PDS refused the account's app password ({error}); check the \
                     Secret the Requester's spec.market.atproto.appPasswordSecretRef names"
                ),
            )
        } else if error.is_retryable() {
            Self {
                reason: reason::PDS_UNREACHABLE,
                message: format!("{doing}: {error}"),
                retryable: true,
            }
        } else {
            Self::new(reason::RECORD_REFUSED, format!("{doing}: {error}"))
        }
    }
}

/// What logs in to the Requester's account: plain data, the password redacted.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// `namespace/name` of the Requester.
    pub requester: String,
    /// Its PDS.
    pub pds_url: String,
    /// Its account (handle or DID).
    pub identifier: String,
    /// Its app password.
    pub password: Secret<String>,
    /// How long one call may take.
    pub timeout: Duration,
}

impl Credentials {
    /// Everything that, changed, makes a new session: never the password itself.
    fn fingerprint(&self) -> String {
        let mut hash = Sha256::new();
        for part in [
            self.pds_url.as_str(),
            self.identifier.as_str(),
            self.password.expose().as_str(),
        ] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        hex::encode(hash.finalize())
    }
}

/// The credentials of `requester` (the Requester that runs the namespace,
/// `None` when none does), its app password read from its Secret.
///
/// # Errors
/// A [`Failure`] saying what is missing: NoRequester, NoAtprotoAccount,
/// SecretMissing, InvalidCredentials (the signing key does not parse); a
/// failed read of the Secret is retried soon.
pub async fn credentials(
    client: &Client,
    requester: Option<&Requester>,
) -> Result<Credentials, Failure> {
    let Some(requester) = requester else {
        return Err(Failure::new(
            reason::NO_REQUESTER,
            "no Requester runs this namespace: there is no repository to write the record in",
        ));
    };
    let namespace = requester.namespace().unwrap_or_default();
    let name = format!("{namespace}/{}", requester.name_any());
    let Some(market) = requester.spec.market.atproto.as_ref() else {
        return Err(Failure::new(
            reason::NO_ATPROTO_ACCOUNT,
            format!(
                "the Requester {name} does not use the atproto market: it has no account whose \
                 repository could hold the record"
            ),
        ));
    };
    // The same read the Requester's market makes (and the same checks of the signing key).
    let password = read_credentials(client, &namespace, market)
        .await
        .map_err(|error| match error {
            CredentialsError::Missing(message) => Failure::new(reason::SECRET_MISSING, message),
            CredentialsError::Invalid(message) => {
                Failure::new(reason::INVALID_CREDENTIALS, message)
            }
            CredentialsError::Unreadable(message) => Failure {
                reason: reason::SECRET_MISSING,
                message,
                retryable: true,
            },
        })?
        .app_password()
        .clone();
    Ok(Credentials {
        requester: name,
        pds_url: market.pds_url.clone(),
        identifier: market.account.clone(),
        password,
        timeout: Duration::from_secs(u64::from(market.timeouts.request_seconds)),
    })
}

/// One logged-in session of one account.
pub struct Session {
    fingerprint: String,
    identifier: String,
    password: Secret<String>,
    pds: PdsClient,
    login: tokio::sync::Mutex<()>,
}

impl Session {
    fn new(credentials: &Credentials) -> Result<Self, Failure> {
        let http = atproto::xrpc::http_client()
            .map_err(|e| Failure::from_pds(&e, "create the HTTP client"))?;
        Ok(Self {
            fingerprint: credentials.fingerprint(),
            identifier: credentials.identifier.clone(),
            password: credentials.password.clone(),
            pds: PdsClient::new(http, &credentials.pds_url, credentials.timeout),
            login: tokio::sync::Mutex::new(()),
        })
    }

    /// The account's DID, logging in first when no session exists.
    ///
    /// # Errors
    /// The login's error.
    pub async fn did(&self) -> atproto::Result<String> {
        if let Some(session) = self.pds.session() {
            return Ok(session.did);
        }
        let _one_login = self.login.lock().await;
        if let Some(session) = self.pds.session() {
            return Ok(session.did);
        }
        Ok(self.pds.login(&self.identifier, &self.password).await?.did)
    }

    /// Runs an authenticated call; when the PDS refuses the session (after
    /// the client's own refresh), logs in again and runs it once more.
    async fn with_session<T, F, Fut>(&self, call: F) -> atproto::Result<T>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = atproto::Result<T>>,
    {
        self.did().await?;
        match call().await {
            Err(error) if error.is_auth() => {
                tracing::info!(%error, "pds session refused; logging in again");
                {
                    let _one_login = self.login.lock().await;
                    self.pds.login(&self.identifier, &self.password).await?;
                }
                call().await
            }
            other => other,
        }
    }

    /// `putRecord` of `record` at `collection`/`rkey` in the account's repository.
    ///
    /// # Errors
    /// The PDS's error.
    pub async fn put(
        &self,
        collection: &str,
        rkey: &str,
        record: &Value,
    ) -> atproto::Result<StrongRef> {
        self.with_session(|| self.pds.put_record(collection, rkey, record, None))
            .await
    }

    /// `deleteRecord` at `collection`/`rkey`; a record already absent counts as deleted.
    ///
    /// # Errors
    /// The PDS's error.
    pub async fn delete(&self, collection: &str, rkey: &str) -> atproto::Result<()> {
        match self
            .with_session(|| self.pds.delete_record(collection, rkey))
            .await
        {
            Err(atproto::Error::RecordNotFound { .. }) => Ok(()),
            other => other,
        }
    }
}

/// The sessions of every Requester's account, shared by the reconciles.
#[derive(Default)]
pub struct Sessions {
    by_requester: tokio::sync::Mutex<HashMap<String, Arc<Session>>>,
}

impl Sessions {
    /// The session of `credentials`' account: the kept one while nothing
    /// about the account changed, else a new one (logged in on first use).
    ///
    /// # Errors
    /// A [`Failure`] when no HTTP client can be built.
    pub async fn session(&self, credentials: &Credentials) -> Result<Arc<Session>, Failure> {
        let mut sessions = self.by_requester.lock().await;
        if let Some(session) = sessions.get(&credentials.requester)
            && session.fingerprint == credentials.fingerprint()
        {
            return Ok(Arc::clone(session));
        }
        let session = Arc::new(Session::new(credentials)?);
        sessions.insert(credentials.requester.clone(), Arc::clone(&session));
        Ok(session)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn xrpc(status: u16, error: &str) -> atproto::Error {
        atproto::Error::Xrpc {
            nsid: "com.atproto.repo.putRecord".into(),
            status,
            error: error.into(),
            message: "because".into(),
        }
    }

    #[test]
    fn pds_errors_become_reasons() {
        let auth = Failure::from_pds(&xrpc(401, "AuthenticationRequired"), "log in");
        assert_eq!(auth.reason, reason::INVALID_CREDENTIALS);
        assert!(!auth.retryable);
        let down = Failure::from_pds(&xrpc(503, "InternalServerError"), "put");
        assert_eq!(down.reason, reason::PDS_UNREACHABLE);
        assert!(down.retryable);
        let refused = Failure::from_pds(&xrpc(400, "InvalidRequest"), "put");
        assert_eq!(refused.reason, reason::RECORD_REFUSED);
        assert!(
            refused.message.contains("InvalidRequest"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn the_fingerprint_follows_the_password_and_never_shows_it() {
        let credentials = Credentials {
            requester: "ns/r".into(),
            pds_url: "https://pds.example".into(),
            identifier: "alice.example".into(),
            password: Secret::new("abcd-efgh-ijkl-mnop".into()),
            timeout: Duration::from_secs(10),
        };
        let mut rotated = credentials.clone();
        rotated.password = Secret::new("qrst-uvwx-yzab-cdef".into());
        assert_ne!(credentials.fingerprint(), rotated.fingerprint());
        assert!(!credentials.fingerprint().contains("abcd"));
        assert!(!format!("{credentials:?}").contains("abcd-efgh"));
    }
}
