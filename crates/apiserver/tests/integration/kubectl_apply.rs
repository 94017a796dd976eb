//! The real `kubectl` (1.32) writing to the embedded API server: `apply` of the
//! CRDs and examples with default (Strict) validation, client-side and
//! server-side apply with their field ownership and conflicts, and `delete -l`
//! waiting for finalizers. Reads are in kubectl.rs.

use crate::support;

use std::time::Duration;

use apiserver::testing::TestServer;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::kubectl::{
    kubectl_at, kubectl_fails, kubectl_ok, kubectl_required, kubectl_stdin, stdout_of_success,
};
use support::objects::{create_namespace, install_project_crds, socialweb_api};
use support::scenes::{path, server_with_examples};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_registers_the_crds_and_the_examples_with_default_validation() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.expect("start server");
    // Default validation: kubectl reads /openapi/v3, sees fieldValidation and sends Strict.
    let out = kubectl_ok(&server, &["apply", "-f", &path("deploy/crds/")]);
    for plural in [
        "clusters",
        "computecontracts",
        "infras",
        "nodeclaims",
        "requesters",
    ] {
        let line = format!(
            "customresourcedefinition.apiextensions.k8s.io/{plural}.socialweb.computer created"
        );
        assert!(out.contains(&line), "missing {line:?} in:\n{out}");
    }
    for example in ["requester", "cluster", "nodeclaims"] {
        let out = kubectl_ok(
            &server,
            &["apply", "-f", &path(&format!("examples/{example}.yaml"))],
        );
        assert!(out.contains(" created"), "{example}: {out}");
    }
    let again = kubectl_ok(&server, &["apply", "-f", &path("examples/nodeclaims.yaml")]);
    assert_eq!(
        again.matches(" unchanged").count(),
        3,
        "a re-apply changes nothing:\n{again}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_refuses_unknown_fields_and_schema_violations() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.expect("start server");
    install_project_crds(&server.client()).await;
    create_namespace(&server.client(), "tenant-a").await;
    // Strict field validation is honoured: an unknown field is refused, not pruned.
    let typo = "apiVersion: socialweb.computer/v1alpha1\nkind: Cluster\nmetadata:\n  name: typo\n  namespace: tenant-a\nspec:\n  account: did:plc:abc\n  running: true\n  runing: false\n";
    let output = kubectl_stdin(&server, &["apply", "-f", "-"], typo);
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "an unknown field must fail under Strict:\n{text}"
    );
    assert!(text.contains(r#"unknown field "spec.runing""#), "{text}");
    // A schema violation is refused with the field named.
    let bad = typo
        .replace("  runing: false\n", "")
        .replace("did:plc:abc", "not-a-did");
    let output = kubectl_stdin(&server, &["apply", "-f", "-"], &bad);
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{text}");
    assert!(
        text.contains("spec.account") && text.contains("Invalid"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_side_apply_changes_and_removes_fields_through_its_last_applied_annotation() {
    if !kubectl_required() {
        return;
    }
    let server = server_with_examples().await;
    let claim = |extra: &str| {
        format!(
            "apiVersion: socialweb.computer/v1alpha1\nkind: NodeClaim\nmetadata:\n  name: staging-worker-1\n  namespace: tenant-a\nspec:\n  clusterName: staging\n  resources: {{cpus: 2, memory: 4096, disk: 40, network: 1000}}\n  location: {{country: DE}}\n{extra}"
        )
    };
    // A new field: "configured", and generation moves on (resources are as the example
    // has them: the CRD makes them immutable).
    let output = kubectl_stdin(
        &server,
        &["apply", "-f", "-"],
        &claim("  ownerDid: did:web:team.example\n"),
    );
    let out = stdout_of_success(&["apply", "-f", "-"], &output);
    assert!(
        out.contains("nodeclaim.socialweb.computer/staging-worker-1 configured"),
        "{out}"
    );
    let claims = socialweb_api(&server.client(), "NodeClaim", "nodeclaims", "tenant-a");
    let stored = claims.get("staging-worker-1").await.unwrap();
    assert_eq!(stored.data["spec"]["resources"]["cpus"], 2);
    assert_eq!(stored.data["spec"]["ownerDid"], "did:web:team.example");
    assert_eq!(stored.metadata.generation, Some(2));
    // Dropping ownerDid from the manifest removes it (kubectl sends it as null in a merge patch).
    let output = kubectl_stdin(&server, &["apply", "-f", "-"], &claim(""));
    stdout_of_success(&["apply", "-f", "-"], &output);
    let stored = claims.get("staging-worker-1").await.unwrap();
    assert!(
        stored.data["spec"].get("ownerDid").is_none(),
        "{:?}",
        stored.data
    );
    // An immutable field: the CRD's CEL rule refuses to move the claim to another cluster.
    let moved = claim("").replace("clusterName: staging", "clusterName: production");
    let output = kubectl_stdin(&server, &["apply", "-f", "-"], &moved);
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{text}");
    assert!(text.contains("clusterName is immutable"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_by_label_waits_until_the_objects_are_gone() {
    if !kubectl_required() {
        return;
    }
    let server = server_with_examples().await;
    let client = server.client();
    let claims = socialweb_api(&client, "NodeClaim", "nodeclaims", "tenant-a");
    kubectl_ok(
        &server,
        &[
            "label",
            "nodeclaim",
            "staging-worker-1",
            "staging-worker-2",
            "-n",
            "tenant-a",
            "tier=worker",
        ],
    );
    // A finalizer holds one of them, as the NodeClaim controller's would until its machine is released.
    let hold = json!({"metadata": {"finalizers": ["infra.socialweb.computer/release"]}});
    claims
        .patch(
            "staging-worker-2",
            &PatchParams::default(),
            &Patch::Merge(&hold),
        )
        .await
        .expect("add finalizer");

    let args = [
        "delete",
        "nodeclaims",
        "-n",
        "tenant-a",
        "-l",
        "tier=worker",
        "--timeout=30s",
    ];
    let kubeconfig = server.kubeconfig_path().to_path_buf();
    let deleting = tokio::task::spawn_blocking(move || kubectl_at(&kubeconfig, &args, None));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !deleting.is_finished(),
        "kubectl delete must wait while a finalizer holds the object"
    );
    let release = json!({"metadata": {"finalizers": null}});
    claims
        .patch(
            "staging-worker-2",
            &PatchParams::default(),
            &Patch::Merge(&release),
        )
        .await
        .expect("remove finalizer");
    let output = tokio::time::timeout(Duration::from_secs(20), deleting)
        .await
        .expect("kubectl delete returns once the object is gone")
        .unwrap();
    let out = stdout_of_success(&args, &output);
    assert!(
        out.contains(r#"nodeclaim.socialweb.computer "staging-worker-1" deleted"#),
        "{out}"
    );
    assert!(
        out.contains(r#"nodeclaim.socialweb.computer "staging-worker-2" deleted"#),
        "{out}"
    );
    assert!(claims.get_opt("staging-worker-1").await.unwrap().is_none());
    assert!(claims.get_opt("staging-worker-2").await.unwrap().is_none());
    assert!(
        claims.get_opt("staging-big-1").await.unwrap().is_some(),
        "the unlabelled claim stays"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_owns_fields_and_reports_conflicts() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.expect("start server");
    let client = server.client();
    install_project_crds(&client).await;
    let cluster_yaml = path("examples/cluster.yaml");
    let out = kubectl_ok(&server, &["apply", "--server-side", "-f", &cluster_yaml]);
    assert!(
        out.contains("namespace/tenant-a serverside-applied"),
        "{out}"
    );
    assert!(
        out.contains("cluster.socialweb.computer/staging serverside-applied"),
        "{out}"
    );

    let clusters = socialweb_api(&client, "Cluster", "clusters", "tenant-a");
    let cluster = clusters.get("staging").await.unwrap();
    let managers: Vec<(String, String)> = cluster
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                m.manager.clone().unwrap_or_default(),
                m.operation.clone().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(managers, [("kubectl".to_owned(), "Apply".to_owned())]);

    // Another manager takes spec.running by force.
    let stop = json!({"apiVersion": "socialweb.computer/v1alpha1", "kind": "Cluster",
        "metadata": {"name": "staging"}, "spec": {"running": false}});
    clusters
        .patch(
            "staging",
            &PatchParams::apply("socialweb/operator").force(),
            &Patch::Apply(&stop),
        )
        .await
        .expect("forced apply");
    let text = kubectl_fails(&server, &["apply", "--server-side", "-f", &cluster_yaml]);
    assert!(
        text.contains(r#"conflict with "socialweb/operator""#),
        "{text}"
    );
    assert!(text.contains(".spec.running"), "{text}");
    assert_eq!(
        clusters.get("staging").await.unwrap().data["spec"]["running"],
        false
    );

    let out = kubectl_ok(
        &server,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &cluster_yaml,
        ],
    );
    assert!(
        out.contains("cluster.socialweb.computer/staging serverside-applied"),
        "{out}"
    );
    assert_eq!(
        clusters.get("staging").await.unwrap().data["spec"]["running"],
        true
    );
    let again = kubectl_ok(
        &server,
        &[
            "get",
            "cluster",
            "staging",
            "-n",
            "tenant-a",
            "-o",
            "yaml",
            "--show-managed-fields",
        ],
    );
    assert!(
        again.contains("manager: kubectl") && again.contains("operation: Apply"),
        "{again}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_of_the_examples_directory_creates_every_object_once() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.expect("start server");
    install_project_crds(&server.client()).await;
    // examples/README.md promises `kubectl apply -f examples/` works: files in name order,
    // README.md skipped, each namespace before the objects in it.
    let out = kubectl_ok(&server, &["apply", "-f", &path("examples/")]);
    let mut created: Vec<&str> = out.lines().collect();
    created.sort_unstable();
    assert_eq!(
        created,
        [
            "cluster.socialweb.computer/staging created",
            "namespace/socialweb-system created",
            "namespace/tenant-a created",
            "nodeclaim.socialweb.computer/staging-big-1 created",
            "nodeclaim.socialweb.computer/staging-worker-1 created",
            "nodeclaim.socialweb.computer/staging-worker-2 created",
            "requester.socialweb.computer/local created",
        ],
        "{out}"
    );
}
