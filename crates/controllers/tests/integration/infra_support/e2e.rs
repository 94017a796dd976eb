//! Helpers for the Infra end-to-end tests on the embedded API server.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api::{ComputeContract, ComputeContractPhase as P, Infra, InfraPhase, InfraSpec, NodeClaim};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use super::{CLAIM_NS, CLUSTER, INFRA, NS};

pub const CONTRACTS: &str = "socialweb.computer/computecontracts";

/// The Infra [`INFRA`] once it is Deployed with `count` ready contracts, for [`eventually`].
pub async fn deployed_with(infras: &Api<Infra>, count: u32) -> Option<Infra> {
    let infra = infras.get(INFRA).await.ok()?;
    let status = infra.status.as_ref()?;
    (status.phase == Some(InfraPhase::Deployed) && status.ready_contracts == count).then_some(infra)
}

pub async fn install(client: &Client) {
    testkit::install_crds(client).await;
    testkit::create_namespaces(client, &[NS]).await;
}

/// [`super::spec_with`] whose node entries name NodeClaims that exist: one
/// per entry in [`CLAIM_NS`] of Cluster [`CLUSTER`], created here (nothing
/// composes them; a node entry is rented only for a claim that exists).
pub async fn served_spec_with(client: &Client, entries: &[&str]) -> InfraSpec {
    let claims: Api<NodeClaim> = Api::namespaced(client.clone(), CLAIM_NS);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces.get_opt(CLAIM_NS).await.unwrap().is_none() {
        testkit::create_namespaces(client, &[CLAIM_NS]).await;
    }
    let mut spec = super::spec_with(entries);
    for node in &mut spec.nodes {
        let claim: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "socialweb.computer/v1alpha1",
            "kind": "NodeClaim",
            "metadata": {"name": node.contract, "namespace": CLAIM_NS},
            "spec": {
                "clusterName": CLUSTER,
                "resources": {"cpus": 2, "memory": 4096, "disk": 40, "network": 100},
                "location": {"country": "DE"},
            },
        }))
        .unwrap();
        let created = match claims.get_opt(&node.contract).await.unwrap() {
            Some(existing) => existing,
            None => claims.create(&PostParams::default(), &claim).await.unwrap(),
        };
        node.node_claim_ref.uid = created.uid().unwrap();
    }
    spec
}

/// A Requester that only walks status: Pending -> Deployed, and on release
/// Releasing -> Released (held at Releasing while `hold` is set); like the real
/// one, it removes the release finalizer of a deleted contract once Released.
/// It polls (test code); the controllers never list.
pub async fn fake_requester(client: Client, hold: Arc<AtomicBool>) {
    let api: Api<ComputeContract> = Api::namespaced(client, NS);
    let params = PatchParams::apply("socialweb/requester").force();
    loop {
        if let Ok(list) = api.list(&Default::default()).await {
            for contract in list {
                let phase = contract.status.as_ref().and_then(|s| s.phase);
                if contract.metadata.deletion_timestamp.is_some() && phase == Some(P::Released) {
                    let patch = serde_json::json!({"metadata": {"finalizers": null}});
                    let _ = api
                        .patch(
                            &contract.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(patch),
                        )
                        .await;
                    continue;
                }
                let next = match (contract.spec.release, phase) {
                    (false, None) => Some(P::Pending),
                    (false, Some(P::Pending)) => Some(P::Deployed),
                    (true, Some(P::Released)) | (false, _) => None,
                    (true, Some(P::Releasing)) if hold.load(Ordering::SeqCst) => None,
                    (true, Some(P::Releasing)) => Some(P::Released),
                    (true, _) => Some(P::Releasing),
                };
                if let Some(next) = next {
                    let patch = serde_json::json!({
                        "apiVersion": "socialweb.computer/v1alpha1",
                        "kind": "ComputeContract",
                        "status": { "phase": next },
                    });
                    let _ = api
                        .patch_status(&contract.name_any(), &params, &Patch::Apply(patch))
                        .await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[allow(unused_imports)] // Not every test binary of this support waits.
pub use testkit::eventually;

/// One manager's Infra side: its caches and the Infra controller (on the
/// system clock), as [`start_manager`] starts them.
pub struct InfraManager {
    controller: tokio::task::JoinHandle<()>,
    reflectors: tokio::task::JoinHandle<()>,
}

impl InfraManager {
    /// Stops the controller and its caches at once, as a killed process would.
    pub fn kill(self) {
        self.controller.abort();
        self.reflectors.abort();
    }
}

/// Starts the Infra controller and its caches on `client`.
pub fn start_manager(client: &Client) -> InfraManager {
    use controllers::infra::{self, IDENTITY};
    let caches = controllers::SharedCaches::new(client.clone(), NS);
    let clock = Arc::new(controllers::SystemClock);
    let ctx = Arc::new(IDENTITY.context(client.clone(), clock, NS));
    InfraManager {
        controller: tokio::spawn(infra::controller(ctx, &caches)),
        reflectors: tokio::spawn(caches.run()),
    }
}

/// An embedded API server with the CRDs, the Infra controller and a fake
/// Requester running, and the Infra and contract APIs of [`NS`].
pub struct Rig {
    pub server: apiserver::testing::TestServer,
    pub client: Client,
    pub manager: InfraManager,
    pub requester: tokio::task::JoinHandle<()>,
    pub infras: Api<api::Infra>,
    pub contracts: Api<ComputeContract>,
}

impl Rig {
    /// Starts everything; the fake Requester never holds releases.
    pub async fn start() -> Self {
        let server = apiserver::testing::TestServer::start().await.unwrap();
        let client = server.client();
        install(&client).await;
        let manager = start_manager(&client);
        let requester = tokio::spawn(fake_requester(client.clone(), Arc::default()));
        Self {
            infras: Api::namespaced(client.clone(), NS),
            contracts: Api::namespaced(client.clone(), NS),
            server,
            client,
            manager,
            requester,
        }
    }
}
