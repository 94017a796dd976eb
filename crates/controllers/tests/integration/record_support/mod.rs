//! A world for the record controller's end-to-end tests: the embedded API
//! server, the fake PDS (and PLC) with the Requester's account, a Requester
//! on the atproto market naming it, the Infra and record controllers over
//! one shared cache, and a fake Requester that walks contract statuses.

use crate::infra_support::e2e as infra_e2e;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use api::{AtprotoRecord, DECLARATION_COLLECTION, Infra, Requester};
use apiserver::testing::TestServer;
use atproto::AtUri;
use atproto_fake::FakeNetwork;
use controllers::{SharedCaches, SystemClock, infra, record};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testkit::ListAll;
use tokio::task::JoinHandle;

pub use infra_e2e::{eventually, fake_requester};

pub const NS: &str = "socialweb-system";
/// The Infra of Cluster `tenant/c1` (`api::names::infra_name`): a node
/// entry is rented only for a claim of its own Cluster.
pub const INFRA: &str = "nodes-e6f9f44f99453784bad4";
pub const HANDLE: &str = "requester.test";
pub const APP_PASSWORD: &str = "abcd-efgh-ijkl-mnop";
pub const SECRET: &str = "atproto-market";
/// Put in every private field of the Infra and in the join Secret: it must
/// never reach a record.
pub const MARKER: &str = "ZQXmarker";

pub struct World {
    pub server: TestServer,
    pub client: Client,
    pub net: FakeNetwork,
    pub did: String,
    /// Hold contracts at Releasing while set.
    pub hold: Arc<AtomicBool>,
    controllers: Option<JoinHandle<()>>,
    requester: JoinHandle<()>,
}

impl World {
    /// Deletes the Infra (its deletion then takes its course).
    pub async fn delete_infra(&self, params: &DeleteParams) {
        self.infras().delete(INFRA, params).await.unwrap();
    }

    /// Everything but the controllers, which [`World::start`] runs; the
    /// Requester's account is on the fake PDS.
    pub async fn new() -> Self {
        let net = FakeNetwork::start().await.unwrap();
        let account = net
            .pds
            .create_account(HANDLE, &APP_PASSWORD.into())
            .unwrap();
        let pds_url = net.pds_url.clone();
        Self::with_account(net, &pds_url, account.did, APP_PASSWORD).await
    }

    /// Everything but the controllers, the Requester's account `HANDLE`
    /// (`did`, app password `password`) on the PDS at `pds_url`; `net`'s PLC
    /// resolves it.
    pub async fn with_account(
        net: FakeNetwork,
        pds_url: &str,
        did: String,
        password: &str,
    ) -> Self {
        let server = TestServer::start().await.unwrap();
        let client = server.client();
        testkit::install_crds(&client).await;
        testkit::create_namespaces(&client, &[NS]).await;
        let hold = Arc::new(AtomicBool::new(false));
        let requester = tokio::spawn(fake_requester(client.clone(), Arc::clone(&hold)));
        let world = Self {
            server,
            client,
            net,
            did,
            hold,
            controllers: None,
            requester,
        };
        world.put_secret(password).await;
        world.create_requester(pds_url).await;
        world
    }

    /// Starts (or starts again) the Infra and record controllers.
    pub fn start(&mut self) {
        self.stop();
        let caches = SharedCaches::new(self.client.clone(), NS);
        let infra_ctx =
            Arc::new(infra::IDENTITY.context(self.client.clone(), Arc::new(SystemClock), NS));
        let record_ctx = Arc::new(record::context(
            self.client.clone(),
            Arc::new(SystemClock),
            NS,
        ));
        let infra = infra::controller(infra_ctx, &caches);
        let record = record::controller(record_ctx, &caches);
        let reflectors = caches.run();
        self.controllers = Some(tokio::spawn(async move {
            tokio::select! {
                () = reflectors => {}
                _ = futures::future::join(infra, record) => {}
            }
        }));
    }

    /// Stops the controllers at once (a crash: nothing finishes).
    pub fn stop(&mut self) {
        if let Some(running) = self.controllers.take() {
            running.abort();
        }
    }

    pub async fn put_secret(&self, password: &str) {
        let secret = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(SECRET.into()),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                (
                    "app-password".to_owned(),
                    ByteString(password.as_bytes().to_vec()),
                ),
                ("signing-key".to_owned(), ByteString(b"01".repeat(32))),
            ])),
            ..Default::default()
        };
        self.secrets()
            .patch(
                SECRET,
                &PatchParams::apply("test").force(),
                &Patch::Apply(secret),
            )
            .await
            .unwrap();
    }

    async fn create_requester(&self, pds_url: &str) {
        let requester: Requester = serde_json::from_value(json!({
            "apiVersion": "socialweb.computer/v1alpha1",
            "kind": "Requester",
            "metadata": {"name": "atproto", "namespace": NS},
            "spec": {"market": {"atproto": {
                "pdsUrl": pds_url,
                "account": HANDLE,
                "appPasswordSecretRef": {"name": SECRET, "key": "app-password"},
                "signingKeySecretRef": {"name": SECRET, "key": "signing-key"},
                "plcUrl": self.net.plc_url,
                "bidders": ["did:web:bidder.example"],
                "publicUrl": "https://market.example.org"
            }}}
        }))
        .unwrap();
        Api::<Requester>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &requester)
            .await
            .unwrap();
    }

    /// Changes the Requester's spec (maxInFlight), which wakes the record
    /// controller at once, as an operator's fix would.
    pub async fn touch_requester(&self) {
        let api: Api<Requester> = Api::namespaced(self.client.clone(), NS);
        let current = api.get("atproto").await.unwrap().spec.max_in_flight;
        api.patch(
            "atproto",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"maxInFlight": current % 100 + 1}})),
        )
        .await
        .unwrap();
    }

    /// The join Secret of `node-a`, holding a token with the marker.
    pub async fn create_join_secret(&self) {
        let secret = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some("join-node-a".into()),
                namespace: Some(NS.into()),
                labels: Some(BTreeMap::from([
                    (api::names::CONTRACT_LABEL.to_owned(), "node-a".to_owned()),
                    (api::names::INFRA_NAME_LABEL.to_owned(), INFRA.to_owned()),
                ])),
                ..Default::default()
            },
            type_: Some(api::names::JOIN_SECRET_TYPE.into()),
            data: Some(BTreeMap::from([
                (
                    "token".to_owned(),
                    ByteString(format!("{MARKER}-join-token").into_bytes()),
                ),
                (
                    "ca.crt".to_owned(),
                    ByteString(format!("{MARKER}-ca").into_bytes()),
                ),
            ])),
            ..Default::default()
        };
        self.secrets()
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
    }

    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn infras(&self) -> Api<Infra> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn records(&self) -> Api<AtprotoRecord> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Creates the Infra with one contract, `spec.record` as given, the
    /// marker in clusterRef, nodes and secrets, and the NodeClaim its node
    /// entry serves (only an existing claim's entry is rented).
    pub async fn create_infra(&self, record: Option<bool>) -> Infra {
        let mut spec = infra_e2e::served_spec_with(&self.client, &["node-a"]).await;
        spec.record = record;
        self.infras()
            .create(&PostParams::default(), &Infra::new(INFRA, spec))
            .await
            .unwrap()
    }

    /// Merge-patches the Infra's spec.
    pub async fn patch_infra(&self, spec: Value) {
        self.infras()
            .patch(
                INFRA,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await
            .unwrap();
    }

    /// The declaration records in the account's repository, by rkey.
    pub fn published(&self) -> Vec<(String, Value)> {
        self.net
            .pds
            .records(&self.did, DECLARATION_COLLECTION)
            .into_iter()
            .map(|(rkey, stored)| (rkey, stored.value))
            .collect()
    }

    /// The record at `uri`, if stored.
    pub fn stored(&self, uri: &str) -> Option<Value> {
        let uri: AtUri = uri.parse().unwrap();
        self.net.pds.record(&uri).map(|s| s.value)
    }

    /// Waits until the AtprotoRecord says Published with the Infra's current hash.
    pub async fn wait_published(&self) -> AtprotoRecord {
        eventually(
            "the AtprotoRecord holds the current declaration",
            || async {
                let infra = self.infras().get(INFRA).await.ok()?;
                let hash = api::infra_declaration_hash(&infra.spec).ok()?;
                let record = self.records().get(INFRA).await.ok()?;
                let status = record.status.as_ref()?;
                (status.phase == Some(api::AtprotoRecordPhase::Published)
                    && status.declaration_hash.as_deref() == Some(hash.as_str()))
                .then_some(record)
            },
        )
        .await
    }

    /// The Ready condition's reason of the AtprotoRecord, if any.
    pub async fn ready_reason(&self) -> Option<String> {
        let record = self.records().get_opt(INFRA).await.ok()??;
        let status = record.status?;
        api::find_condition(&status.conditions, "Ready").map(|c| c.reason.to_string())
    }

    /// Event reasons about `name` (of any kind) in the namespace.
    pub async fn event_reasons(&self, name: &str) -> Vec<String> {
        let events: Api<k8s_openapi::api::events::v1::Event> =
            Api::namespaced(self.client.clone(), NS);
        events
            .list_all()
            .await
            .into_iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .filter_map(|e| e.reason)
            .collect()
    }

    /// Every Secret value of the namespace that holds the marker.
    pub async fn marked_secret_values(&self) -> Vec<String> {
        self.secrets()
            .list_all()
            .await
            .iter()
            .flat_map(|s| s.data.iter().flatten())
            .map(|(_, v)| String::from_utf8_lossy(&v.0).into_owned())
            .filter(|v| v.contains(MARKER))
            .collect()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.stop();
        self.requester.abort();
    }
}

/// Whether `name` is an AtprotoRecord that no longer exists.
pub async fn record_gone(world: &World) -> bool {
    matches!(world.records().get_opt(INFRA).await, Ok(None))
}
