//! The atproto market arm of the seam: `spec.market.atproto` and the two
//! Secret keys it names to a [`market::atproto::AtprotoMarket`], and what the
//! Requester's Ready condition says about it.
//!
//! # Expected flow
//! 1. [`read_credentials`] reads the app password and the signing key from
//!    the Secrets of the Requester's namespace (`get`; the manager's Role
//!    allows nothing wider there), and checks the key parses.
//! 2. [`build`] makes the market from the spec, those credentials, the
//!    controllers' clock and the process's one [`Inbox`] (the manager serves
//!    its router on the market port).
//! 3. [`readiness`] asks the built market whether its account logs in and
//!    which bidders it finds.
//!
//! # Guarantees
//! The credentials are wrapped in [`Secret`] (redacted `Debug`) the moment
//! they are read and are never part of an error, a log line or a condition:
//! messages name the Secret and key, never the value.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret as KubeSecret;
use kube::{Api, Client};
use market::atproto::{
    Algorithm, AtprotoMarket, AtprotoMarketConfig, Inbox, Secret, Timeouts, Unhealthy,
};

use super::Readiness;
use crate::Clock;

/// The account's app password and the records' signing key, as read.
#[derive(Clone, Debug)]
pub struct Credentials {
    app_password: Secret<String>,
    signing_key: Secret<String>,
}

impl Credentials {
    /// Credentials from their values (tests; the manager reads them with [`read_credentials`]).
    #[must_use]
    pub const fn new(app_password: Secret<String>, signing_key: Secret<String>) -> Self {
        Self {
            app_password,
            signing_key,
        }
    }

    /// The account's app password (the record controller logs in with it).
    #[must_use]
    pub const fn app_password(&self) -> &Secret<String> {
        &self.app_password
    }

    /// Whether both values are the same as `other`'s: a changed Secret
    /// rebuilds the market (compared in memory, never printed).
    #[must_use]
    pub fn same_as(&self, other: &Self) -> bool {
        self.app_password.expose() == other.app_password.expose()
            && self.signing_key.expose() == other.signing_key.expose()
    }
}

/// Why the credentials cannot be used; each is a Requester condition reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    /// A named Secret or key does not exist (or is empty).
    #[error("{0}")]
    Missing(String),
    /// A value is there but unusable (the signing key does not parse).
    #[error("{0}")]
    Invalid(String),
    /// The Secret could not be read (forbidden, the API server unavailable).
    #[error("{0}")]
    Unreadable(String),
}

impl CredentialsError {
    /// What the Requester's Ready condition says.
    #[must_use]
    pub fn readiness(&self) -> Readiness {
        match self {
            Self::Missing(message) => Readiness::SecretMissing(message.clone()),
            Self::Invalid(message) => Readiness::InvalidCredentials(message.clone()),
            Self::Unreadable(message) => Readiness::NoMarket(message.clone()),
        }
    }
}

/// The curve of the spec's signing key, in the market's terms.
#[must_use]
pub const fn algorithm(spec: &api::AtprotoMarket) -> Algorithm {
    match spec.signing_key_algorithm {
        api::SigningKeyAlgorithm::Secp256k1 => Algorithm::K256,
        api::SigningKeyAlgorithm::P256 => Algorithm::P256,
    }
}

/// Reads the app password and signing key that `spec` names from the
/// Secrets of `namespace`, and checks the key.
///
/// # Errors
/// [`CredentialsError`] saying which Secret or key is missing, that the key
/// does not parse, or that the Secret could not be read.
pub async fn read_credentials(
    client: &Client,
    namespace: &str,
    spec: &api::AtprotoMarket,
) -> Result<Credentials, CredentialsError> {
    let secrets: Api<KubeSecret> = Api::namespaced(client.clone(), namespace);
    let app_password = read_key(
        &secrets,
        namespace,
        &spec.app_password_secret_ref,
        "appPasswordSecretRef",
    )
    .await?;
    let signing_key = read_key(
        &secrets,
        namespace,
        &spec.signing_key_secret_ref,
        "signingKeySecretRef",
    )
    .await?;
    AtprotoMarketConfig::check_signing_key(algorithm(spec), &signing_key).map_err(|why| {
        CredentialsError::Invalid(format!(
            "the signing key in Secret {namespace}/{} key {} is not a {:?} private key as 64 hex \
             digits ({why}); fix the Secret",
            spec.signing_key_secret_ref.name,
            spec.signing_key_secret_ref.key,
            spec.signing_key_algorithm,
        ))
    })?;
    Ok(Credentials {
        app_password,
        signing_key,
    })
}

async fn read_key(
    secrets: &Api<KubeSecret>,
    namespace: &str,
    reference: &api::SecretKeyRef,
    field: &str,
) -> Result<Secret<String>, CredentialsError> {
    let name = &reference.name;
    let secret = secrets.get_opt(name).await.map_err(|error| {
        CredentialsError::Unreadable(format!(
            "cannot read Secret {namespace}/{name} (spec.market.atproto.{field}): {error}"
        ))
    })?;
    let Some(secret) = secret else {
        return Err(CredentialsError::Missing(format!(
            "Secret {namespace}/{name} (spec.market.atproto.{field}) does not exist: create it"
        )));
    };
    let value = secret
        .data
        .as_ref()
        .and_then(|data| data.get(&reference.key))
        .map(|bytes| String::from_utf8(bytes.0.clone()));
    match value {
        Some(Ok(value)) if !value.trim().is_empty() => Ok(Secret::new(value.trim().to_owned())),
        Some(Ok(_)) | None => Err(CredentialsError::Missing(format!(
            "Secret {namespace}/{name} has no key {} (spec.market.atproto.{field}), or it is \
             empty: add it",
            reference.key
        ))),
        Some(Err(_)) => Err(CredentialsError::Invalid(format!(
            "key {} of Secret {namespace}/{name} (spec.market.atproto.{field}) is not UTF-8 text",
            reference.key
        ))),
    }
}

/// The market's configuration from the spec and the credentials.
#[must_use]
pub fn config(spec: &api::AtprotoMarket, credentials: &Credentials) -> AtprotoMarketConfig {
    let seconds = |s: u32| Duration::from_secs(u64::from(s));
    AtprotoMarketConfig {
        pds_url: spec.pds_url.clone(),
        identifier: spec.account.clone(),
        app_password: credentials.app_password.clone(),
        signing_key: credentials.signing_key.clone(),
        signing_key_algorithm: algorithm(spec),
        plc_url: spec.plc_url.clone(),
        bidders: spec.bidders.clone(),
        relay_url: spec.relay_url.clone(),
        public_url: spec.public_url.clone(),
        scope: spec.scope.clone(),
        timeouts: Timeouts {
            call: seconds(spec.timeouts.request_seconds),
            provisioning: seconds(spec.timeouts.provisioning_seconds),
            accept_resend_after: seconds(spec.timeouts.accept_resend_seconds),
            ..Timeouts::default()
        },
    }
}

/// The market of `spec`; no I/O (it logs in on its first call).
///
/// # Errors
/// The market's own refusal of the configuration (a public URL without a host).
pub fn build(
    spec: &api::AtprotoMarket,
    credentials: &Credentials,
    clock: &Arc<dyn Clock>,
    inbox: &Inbox,
) -> Result<Arc<AtprotoMarket>, String> {
    AtprotoMarket::new(config(spec, credentials), Arc::clone(clock), inbox.clone())
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// What the Requester's Ready condition says about a built market: whether
/// its account logs in and which bidders it finds.
pub async fn readiness(market: &AtprotoMarket, spec: &api::AtprotoMarket) -> Readiness {
    match market.health().await {
        Ok(health) => Readiness::Ready(format!(
            "the atproto market is configured: logged in to {} as {}, {} bidders found",
            spec.pds_url,
            health.did,
            health.bidders.len()
        )),
        Err(error @ Unhealthy::Credentials(_)) => Readiness::InvalidCredentials(format!(
            "{error}; check spec.market.atproto.account and the app password in Secret {} key {}",
            spec.app_password_secret_ref.name, spec.app_password_secret_ref.key
        )),
        Err(error @ Unhealthy::Unreachable(_)) => Readiness::PdsUnreachable(format!(
            "{error}; check spec.market.atproto.pdsUrl ({}), DNS and egress",
            spec.pds_url
        )),
        Err(error @ Unhealthy::NoBidders(_)) => Readiness::NoBidders(format!(
            "{error}; check spec.market.atproto.bidders and relayUrl"
        )),
    }
}

/// A complete `spec.market.atproto`, for the unit tests of the crate.
#[cfg(test)]
pub(crate) fn test_spec() -> api::AtprotoMarket {
    let spec = serde_json::from_value(serde_json::json!({
        "pdsUrl": "https://pds.example.org",
        "account": "market.example.org",
        "appPasswordSecretRef": {"name": "atproto", "key": "app-password"},
        "signingKeySecretRef": {"name": "atproto", "key": "signing-key"},
        "signingKeyAlgorithm": "P256",
        "bidders": ["did:plc:bidder"],
        "publicUrl": "https://market.example.org",
        "scope": "prod",
        "timeouts": {"requestSeconds": 7, "provisioningSeconds": 600, "acceptResendSeconds": 90},
    }));
    // A literal of the schema: a failure here is a broken fixture.
    spec.unwrap_or_else(|error| panic!("the atproto test spec does not parse: {error}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_spec_maps_onto_the_markets_configuration() {
        let credentials = Credentials::new("pw".into(), "ab".into());
        let config = config(&test_spec(), &credentials);
        assert_eq!(config.pds_url, "https://pds.example.org");
        assert_eq!(config.identifier, "market.example.org");
        assert_eq!(config.signing_key_algorithm, Algorithm::P256);
        assert_eq!(config.plc_url, api::DEFAULT_PLC_URL);
        assert_eq!(config.bidders, ["did:plc:bidder"]);
        assert_eq!(config.scope, "prod");
        assert_eq!(config.timeouts.call, Duration::from_secs(7));
        assert_eq!(config.timeouts.provisioning, Duration::from_secs(600));
        assert_eq!(config.timeouts.accept_resend_after, Duration::from_secs(90));
        assert_eq!(config.app_password.expose(), "pw");
    }

    #[test]
    fn credentials_compare_by_value_and_never_print_it() {
        let a = Credentials::new("pw-1".into(), "key-1".into());
        assert!(a.same_as(&Credentials::new("pw-1".into(), "key-1".into())));
        assert!(!a.same_as(&Credentials::new("pw-2".into(), "key-1".into())));
        assert!(!a.same_as(&Credentials::new("pw-1".into(), "key-2".into())));
        let printed = format!("{a:?}");
        assert!(
            !printed.contains("pw-1") && !printed.contains("key-1"),
            "{printed}"
        );
    }
}
