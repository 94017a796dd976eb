//! An atproto compute market on this machine: the fake PLC directory, PDS,
//! relay and bidders of `atproto-fake`, each on a loopback port, with the
//! Requester's account on that PDS. `manager dev --market atproto-fake` and
//! the end-to-end tests run the whole product against it over real HTTP.
//!
//! # Expected flow
//! 1. [`FakeMarket::start`]: the services, the Requester's account, one
//!    bidder per [`FakeOffer`] (each publishes its offering, so the relay
//!    lists it).
//! 2. [`FakeMarket::credentials_secret`]: the Secret with the account's app
//!    password and a fresh signing key, for the contract namespace.
//! 3. [`FakeMarket::requester_market`]: the `spec.market.atproto` pointing at
//!    all of it, with the public URL where the manager serves its market port.

use atproto::{Algorithm, Secret, SigningKey};
use atproto_fake::FakeNetwork;
use atproto_fake::bidder::{BidderOptions, FakeBidder, Offer};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret as KubeSecret;
use kube::api::ObjectMeta;

/// The handle of the Requester's account on the fake PDS.
pub const REQUESTER_HANDLE: &str = "requester.test";
/// The Secret key of the app password.
pub const APP_PASSWORD_KEY: &str = "app-password";
/// The Secret key of the signing key.
pub const SIGNING_KEY_KEY: &str = "signing-key";

/// What one fake bidder asks, per hour.
#[derive(Debug, Clone, PartialEq)]
pub struct FakeOffer {
    /// Its handle on the fake PDS, e.g. `south.bidders.test`.
    pub handle: String,
    /// Its price per hour.
    pub cost: f64,
    /// The currency of `cost`.
    pub currency: String,
}

impl FakeOffer {
    /// A bidder `handle` asking `cost` USD per hour.
    #[must_use]
    pub fn usd_hourly(handle: &str, cost: f64) -> Self {
        Self {
            handle: handle.to_owned(),
            cost,
            currency: "USD".to_owned(),
        }
    }
}

/// The running fake market and the Requester's account on it.
#[derive(Debug)]
pub struct FakeMarket {
    /// PLC, PDS and relay (their URLs, in-process access and fault knobs).
    pub net: FakeNetwork,
    /// The bidders, in the order of the offers.
    pub bidders: Vec<FakeBidder>,
    /// The Requester's DID.
    pub requester_did: String,
    app_password: Secret<String>,
    signing_key: Secret<String>,
}

impl FakeMarket {
    /// Starts the services, the Requester's account and one bidder per offer.
    ///
    /// # Errors
    /// When a port cannot be bound or the fake PDS refuses an account.
    pub async fn start(offers: &[FakeOffer]) -> std::io::Result<Self> {
        let mut net = FakeNetwork::start().await?;
        let app_password = Secret::new(format!("app-password-{}", uuid::Uuid::new_v4()));
        let account = net
            .pds
            .create_account(REQUESTER_HANDLE, &app_password)
            .map_err(|e| std::io::Error::other(e.message))?;
        let mut bidders = Vec::with_capacity(offers.len());
        for offer in offers {
            let options = BidderOptions::new(
                &offer.handle,
                Offer::X402 {
                    cost: offer.cost,
                    currency: offer.currency.clone(),
                    frequency: "hourly".to_owned(),
                },
            );
            bidders.push(net.start_bidder(options).await?);
        }
        Ok(Self {
            net,
            bidders,
            requester_did: account.did,
            app_password,
            signing_key: SigningKey::generate(Algorithm::K256).to_hex(),
        })
    }

    /// The Secret `namespace/name` holding the account's app password and
    /// the signing key, under [`APP_PASSWORD_KEY`] and [`SIGNING_KEY_KEY`].
    #[must_use]
    pub fn credentials_secret(&self, namespace: &str, name: &str) -> KubeSecret {
        let bytes = |secret: &Secret<String>| ByteString(secret.expose().as_bytes().to_vec());
        KubeSecret {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            type_: Some("Opaque".to_owned()),
            data: Some(
                [
                    (APP_PASSWORD_KEY.to_owned(), bytes(&self.app_password)),
                    (SIGNING_KEY_KEY.to_owned(), bytes(&self.signing_key)),
                ]
                .into(),
            ),
            ..KubeSecret::default()
        }
    }

    /// `spec.market.atproto` for this market: the account by DID, the
    /// Secret `secret_name`, bidders found through the relay (and `bidders`
    /// named too when `name_bidders`), bidders' calls to `public_url`.
    #[must_use]
    pub fn requester_market(
        &self,
        secret_name: &str,
        public_url: &str,
        name_bidders: bool,
    ) -> api::AtprotoMarket {
        let key_ref = |key: &str| api::SecretKeyRef {
            name: secret_name.to_owned(),
            key: key.to_owned(),
        };
        api::AtprotoMarket {
            pds_url: self.net.pds_url.clone(),
            account: self.requester_did.clone(),
            app_password_secret_ref: key_ref(APP_PASSWORD_KEY),
            signing_key_secret_ref: key_ref(SIGNING_KEY_KEY),
            signing_key_algorithm: api::SigningKeyAlgorithm::Secp256k1,
            plc_url: self.net.plc_url.clone(),
            bidders: if name_bidders {
                self.bidders.iter().map(|b| b.did().to_owned()).collect()
            } else {
                Vec::new()
            },
            relay_url: Some(self.net.relay_url.clone()),
            public_url: public_url.to_owned(),
            scope: api::DEFAULT_SCOPE.to_owned(),
            timeouts: api::AtprotoTimeouts::default(),
        }
    }
}
