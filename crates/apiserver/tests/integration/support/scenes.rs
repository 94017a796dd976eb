//! Starting points shared by the kubectl suites: a server with the examples
//! applied, and a claim reported as its controller would.

use apiserver::testing::TestServer;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::kubectl::kubectl_ok;
use super::objects::{install_project_crds, repo_root, socialweb_api};

/// The absolute path of a repository file, as a kubectl argument.
#[must_use]
pub fn path(relative: &str) -> String {
    repo_root().join(relative).display().to_string()
}

/// A server with the project's CRDs, the tenant's Cluster and its 3 NodeClaims
/// applied with kubectl from examples/.
pub async fn server_with_examples() -> TestServer {
    let server = TestServer::start().await.expect("start server");
    install_project_crds(&server.client()).await;
    let out = kubectl_ok(
        &server,
        &[
            "apply",
            "-f",
            &path("examples/cluster.yaml"),
            "-f",
            &path("examples/nodeclaims.yaml"),
        ],
    );
    assert!(
        out.contains("nodeclaim.socialweb.computer/staging-big-1 created"),
        "{out}"
    );
    server
}

/// Reports a claim as the NodeClaim controller would, through /status.
pub async fn report_claim(server: &TestServer, name: &str, phase: &str, address: &str) {
    let claims = socialweb_api(&server.client(), "NodeClaim", "nodeclaims", "tenant-a");
    let status = json!({"status": {
        "phase": phase,
        "infra": {"namespace": "socialweb-system", "name": "nodes-b27d3c1c71666568b47a",
            "contract": "node-0123456789abcdef0123",
            "computeContract": "nodes-b27d3c1c71666568b47a-node-0123456789abcdef0123"},
        "guest": {"provider": "did:web:compute.hetzner-reseller.example", "address": address},
    }});
    claims
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("patch claim status");
}
