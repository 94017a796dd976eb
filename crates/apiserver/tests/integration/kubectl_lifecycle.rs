//! The real `kubectl` (1.32) following objects through their lives on the embedded
//! API server: `api-resources` (what discovery tells users), `kubectl wait` for a
//! condition, a status field and deletion, `patch --subresource=status`, and
//! `delete namespace` taking its objects with it.

use crate::support;

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::kubectl::{kubectl_at, kubectl_ok, kubectl_required, stdout_of_success, table};
use support::objects::{install_project_crds, socialweb_api};
use support::scenes::server_with_examples;
use testkit::ListAll;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_lists_the_kinds_with_short_names_and_categories() {
    if !kubectl_required() {
        return;
    }
    let server = apiserver::testing::TestServer::start()
        .await
        .expect("start server");
    install_project_crds(&server.client()).await;
    let out = kubectl_ok(
        &server,
        &[
            "api-resources",
            "--api-group=socialweb.computer",
            "-o",
            "wide",
        ],
    );
    let rows = table(&out);
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["NAME"] == name)
            .unwrap_or_else(|| panic!("{name} missing:\n{out}"))
            .clone()
    };
    for (name, short, kind) in [
        ("atprotorecords", "apr", "AtprotoRecord"),
        ("clusters", "swc", "Cluster"),
        ("computecontracts", "cc", "ComputeContract"),
        ("infras", "inf", "Infra"),
        ("nodeclaims", "nc", "NodeClaim"),
        ("requesters", "req", "Requester"),
    ] {
        let row = row(name);
        assert_eq!(row["SHORTNAMES"], short, "{out}");
        assert_eq!(row["APIVERSION"], "socialweb.computer/v1alpha1", "{out}");
        assert_eq!(row["NAMESPACED"], "true", "{out}");
        assert_eq!(row["KIND"], kind, "{out}");
        assert_eq!(row["CATEGORIES"], "socialweb", "{out}");
        assert!(
            row["VERBS"].contains("watch") && row["VERBS"].contains("deletecollection"),
            "{out}"
        );
    }
    // Selecting by verb and category works off the same discovery.
    let names = kubectl_ok(
        &server,
        &[
            "api-resources",
            "--categories=socialweb",
            "--verbs=list",
            "-o",
            "name",
        ],
    );
    let mut names: Vec<&str> = names.lines().collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "atprotorecords.socialweb.computer",
            "clusters.socialweb.computer",
            "computecontracts.socialweb.computer",
            "infras.socialweb.computer",
            "nodeclaims.socialweb.computer",
            "requesters.socialweb.computer"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_returns_when_the_condition_the_field_or_the_deletion_comes() {
    if !kubectl_required() {
        return;
    }
    let server = server_with_examples().await;
    let claims = socialweb_api(&server.client(), "NodeClaim", "nodeclaims", "tenant-a");
    let kubeconfig = server.kubeconfig_path().to_path_buf();
    let wait = |args: &'static [&'static str]| {
        let kubeconfig = kubeconfig.clone();
        tokio::task::spawn_blocking(move || (args, kubectl_at(&kubeconfig, args, None)))
    };
    let ready = wait(&[
        "wait",
        "nodeclaim/staging-worker-1",
        "-n",
        "tenant-a",
        "--for=condition=Ready",
        "--timeout=20s",
    ]);
    let joined = wait(&[
        "wait",
        "nodeclaim/staging-worker-2",
        "-n",
        "tenant-a",
        "--for=jsonpath={.status.phase}=Joined",
        "--timeout=20s",
    ]);
    let gone = wait(&[
        "wait",
        "nodeclaim/staging-big-1",
        "-n",
        "tenant-a",
        "--for=delete",
        "--timeout=20s",
    ]);
    // Every kubectl must be watching before the changes come: on a loaded machine one
    // may start late, and a wait for the deletion of an object already gone succeeds
    // without a word.
    for name in ["staging-worker-1", "staging-worker-2", "staging-big-1"] {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !server
            .requests()
            .iter()
            .any(|r| r.verb == "watch" && r.uri.contains(name))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "kubectl wait never watched {name}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(!ready.is_finished() && !joined.is_finished() && !gone.is_finished());

    let condition = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
        "reason": "Joined", "message": "the node joined", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    claims
        .patch_status(
            "staging-worker-1",
            &PatchParams::default(),
            &Patch::Merge(&condition),
        )
        .await
        .expect("report Ready");
    claims
        .patch_status(
            "staging-worker-2",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"phase": "Joined"}})),
        )
        .await
        .expect("report Joined");
    claims
        .delete("staging-big-1", &kube::api::DeleteParams::default())
        .await
        .expect("delete");

    for waiting in [ready, joined, gone] {
        let (args, output) = tokio::time::timeout(Duration::from_secs(25), waiting)
            .await
            .expect("kubectl wait returns")
            .unwrap();
        let out = stdout_of_success(args, &output);
        assert!(
            out.contains("condition met") || out.contains("deleted"),
            "kubectl {}: {out}",
            args.join(" ")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_status_subresource_changes_only_status() {
    if !kubectl_required() {
        return;
    }
    let server = server_with_examples().await;
    let claims = socialweb_api(&server.client(), "NodeClaim", "nodeclaims", "tenant-a");
    let before = claims.get("staging-worker-1").await.unwrap();
    let args = [
        "patch",
        "nodeclaim",
        "staging-worker-1",
        "-n",
        "tenant-a",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Deployed"},"spec":{"clusterName":"elsewhere"}}"#,
    ];
    let out = kubectl_ok(&server, &args);
    assert!(
        out.contains("nodeclaim.socialweb.computer/staging-worker-1 patched"),
        "{out}"
    );
    let after = claims.get("staging-worker-1").await.unwrap();
    assert_eq!(after.data["status"]["phase"], "Deployed");
    // The status endpoint takes only .status: spec and generation are untouched.
    assert_eq!(after.data["spec"], before.data["spec"]);
    assert_eq!(after.metadata.generation, before.metadata.generation);
    let phase = kubectl_ok(
        &server,
        &[
            "get",
            "nc",
            "staging-worker-1",
            "-n",
            "tenant-a",
            "-o",
            "jsonpath={.status.phase}",
        ],
    );
    assert_eq!(phase, "Deployed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_namespace_waits_for_its_objects_and_takes_them_along() {
    if !kubectl_required() {
        return;
    }
    let server = server_with_examples().await;
    let claims = socialweb_api(&server.client(), "NodeClaim", "nodeclaims", "tenant-a");
    let out = kubectl_ok(
        &server,
        &["delete", "namespace", "tenant-a", "--timeout=30s"],
    );
    assert!(out.contains(r#"namespace "tenant-a" deleted"#), "{out}");
    // kubectl waited until the namespace was gone, so its objects are gone too.
    let output = support::kubectl::kubectl(&server, &["get", "namespace", "tenant-a"]);
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{text}");
    assert!(
        text.contains(r#"namespaces "tenant-a" not found"#),
        "{text}"
    );
    assert!(claims.list_all().await.is_empty());
}
