//! The real `kubectl` (1.32) against the embedded API server: what a user does
//! with the project's CRDs and examples must work as on a real cluster. Every
//! test asserts kubectl's exit code and output; each kubectl call has its own
//! cache directory, and independent calls run on parallel threads.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::{Duration, Instant};

use apiserver::testing::TestServer;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::kubectl::{
    Background, headers, kubectl, kubectl_at, kubectl_fails, kubectl_ok, kubectl_required,
    kubectl_stdin, squeeze, stdout_of_success, table,
};
use support::objects::{create, create_namespace, install_project_crds, repo_root, socialweb_api};

fn path(relative: &str) -> String {
    repo_root().join(relative).display().to_string()
}

/// A server with the project's CRDs, the tenant's Cluster and its 3 NodeClaims
/// applied with kubectl from examples/.
async fn server_with_examples() -> TestServer {
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
async fn report_claim(server: &TestServer, name: &str, phase: &str, address: &str) {
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
async fn get_prints_printer_columns_selects_by_label_and_prints_yaml() {
    if !kubectl_required() {
        return;
    }
    let server = server_with_examples().await;
    report_claim(&server, "staging-worker-1", "Requesting", "203.0.113.7").await;
    kubectl_ok(
        &server,
        &[
            "label",
            "nodeclaim",
            "staging-big-1",
            "-n",
            "tenant-a",
            "size=big",
        ],
    );
    kubectl_ok(
        &server,
        &[
            "label",
            "nodeclaim",
            "staging-worker-1",
            "-n",
            "tenant-a",
            "size=small",
        ],
    );

    let server = &server;
    std::thread::scope(|s| {
        s.spawn(|| {
            let out = kubectl_ok(server, &["get", "nodeclaims", "-n", "tenant-a"]);
            assert_eq!(
                headers(&out),
                ["NAME", "CLUSTER", "PHASE", "CONTRACT", "ADDRESS", "AGE"],
                "{out}"
            );
            let rows = table(&out);
            assert_eq!(rows.len(), 3, "{out}");
            let worker = rows
                .iter()
                .find(|r| r["NAME"] == "staging-worker-1")
                .expect(&out);
            assert_eq!(worker["CLUSTER"], "staging");
            assert_eq!(worker["PHASE"], "Requesting");
            assert_eq!(
                worker["CONTRACT"],
                "nodes-b27d3c1c71666568b47a-node-0123456789abcdef0123"
            );
            assert_eq!(worker["ADDRESS"], "203.0.113.7");
            assert!(worker["AGE"].ends_with('s'), "age in seconds: {out}");
        });
        s.spawn(|| {
            // Short name, all namespaces: a NAMESPACE column comes first.
            let out = kubectl_ok(server, &["get", "nc", "-A"]);
            assert_eq!(headers(&out)[..2], ["NAMESPACE", "NAME"], "{out}");
            assert!(
                table(&out).iter().all(|r| r["NAMESPACE"] == "tenant-a"),
                "{out}"
            );
        });
        s.spawn(|| {
            // The category "socialweb" spans the kinds.
            let out = kubectl_ok(
                server,
                &["get", "socialweb", "-n", "tenant-a", "-o", "name"],
            );
            let mut names: Vec<&str> = out.lines().collect();
            names.sort_unstable();
            assert_eq!(
                names,
                [
                    "cluster.socialweb.computer/staging",
                    "nodeclaim.socialweb.computer/staging-big-1",
                    "nodeclaim.socialweb.computer/staging-worker-1",
                    "nodeclaim.socialweb.computer/staging-worker-2",
                ],
                "{out}"
            );
        });
        s.spawn(|| {
            let names = |selector: &str| {
                let out = kubectl_ok(
                    server,
                    &["get", "nc", "-n", "tenant-a", "-l", selector, "-o", "name"],
                );
                let mut names: Vec<String> = out
                    .lines()
                    .map(|l| l.replace("nodeclaim.socialweb.computer/", ""))
                    .collect();
                names.sort_unstable();
                names
            };
            assert_eq!(names("size=big"), ["staging-big-1"]);
            // != and notin match objects without the key.
            assert_eq!(names("size!=big"), ["staging-worker-1", "staging-worker-2"]);
            assert_eq!(
                names("size notin (small)"),
                ["staging-big-1", "staging-worker-2"]
            );
            assert_eq!(names("size"), ["staging-big-1", "staging-worker-1"]);
            assert_eq!(names("!size"), ["staging-worker-2"]);
            let none = kubectl(server, &["get", "nc", "-n", "tenant-a", "-l", "size=huge"]);
            let text = String::from_utf8_lossy(&none.stderr);
            assert!(none.status.success(), "{text}");
            assert!(
                text.contains("No resources found in tenant-a namespace."),
                "{text}"
            );
        });
        s.spawn(|| {
            let out = kubectl_ok(
                server,
                &[
                    "get",
                    "nodeclaim",
                    "staging-worker-1",
                    "-n",
                    "tenant-a",
                    "-o",
                    "yaml",
                ],
            );
            let object: serde_json::Value = serde_yaml::from_str(&out).expect("yaml");
            assert_eq!(object["apiVersion"], "socialweb.computer/v1alpha1");
            assert_eq!(object["kind"], "NodeClaim");
            assert_eq!(object["metadata"]["labels"]["size"], "small");
            assert!(
                object["metadata"]["uid"].is_string()
                    && object["metadata"]["resourceVersion"].is_string()
            );
            assert_eq!(
                object["metadata"]["generation"], 1,
                "labels and status do not bump generation"
            );
            assert_eq!(object["status"]["phase"], "Requesting");
        });
        s.spawn(|| {
            let output = kubectl(server, &["get", "nodeclaim", "nope", "-n", "tenant-a"]);
            let text = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(1), "{text}");
            assert!(
                text.contains(r#"Error from server (NotFound): nodeclaims.socialweb.computer "nope" not found"#),
                "{text}"
            );
        });
    });
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
async fn get_prints_absent_column_values_as_blank_cells() {
    if !kubectl_required() {
        return;
    }
    let server = server_with_examples().await;
    report_claim(&server, "staging-worker-1", "Requesting", "203.0.113.7").await;
    let out = kubectl_ok(&server, &["get", "nodeclaims", "-n", "tenant-a"]);
    let rows = table(&out);
    // The server sends null for a path that finds nothing; kubectl prints nothing for it.
    let big = rows
        .iter()
        .find(|r| r["NAME"] == "staging-big-1")
        .expect(&out);
    assert_eq!(
        [
            big["CLUSTER"].as_str(),
            big["PHASE"].as_str(),
            big["CONTRACT"].as_str(),
            big["ADDRESS"].as_str()
        ],
        ["staging", "", "", ""],
        "{out}"
    );
    assert!(!out.contains("<none>"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_yaml_shows_the_schema_defaults() {
    if !kubectl_required() {
        return;
    }
    let server = server_with_examples().await;
    let out = kubectl_ok(
        &server,
        &[
            "get",
            "nodeclaim",
            "staging-worker-1",
            "-n",
            "tenant-a",
            "-o",
            "yaml",
        ],
    );
    let object: serde_json::Value = serde_yaml::from_str(&out).expect("yaml");
    // examples/nodeclaims.yaml sets neither grace: both come from the CRD's defaults.
    assert_eq!(object["spec"]["joinGraceSeconds"], 900, "{out}");
    assert_eq!(object["spec"]["lossGraceSeconds"], 300, "{out}");
    // staging-worker-2 sets joinGraceSeconds itself; the default does not override it.
    let out = kubectl_ok(
        &server,
        &[
            "get",
            "nodeclaim",
            "staging-worker-2",
            "-n",
            "tenant-a",
            "-o",
            "jsonpath={.spec.joinGraceSeconds}",
        ],
    );
    assert_eq!(out, "600");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_infra_by_cluster_label_finds_exactly_that_clusters_infra() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.expect("start server");
    let client = server.client();
    install_project_crds(&client).await;
    create_namespace(&client, "socialweb-system").await;
    let infras = socialweb_api(&client, "Infra", "infras", "socialweb-system");
    for (name, cluster, namespace) in [
        ("nodes-b27d3c1c71666568b47a", "staging", "tenant-a"),
        ("nodes-5f0c6e1d2a3b4c5d6e7f", "production", "tenant-a"),
    ] {
        create(&infras, &json!({
            "apiVersion": "socialweb.computer/v1alpha1", "kind": "Infra",
            "metadata": {"name": name, "labels": {
                "infra.socialweb.computer/cluster": cluster,
                "infra.socialweb.computer/cluster-namespace": namespace}},
            "spec": {"clusterRef": {"namespace": namespace, "name": cluster, "kind": "Cluster"}},
        }))
        .await;
    }
    let out = kubectl_ok(
        &server,
        &[
            "get",
            "infra",
            "-A",
            "-l",
            "infra.socialweb.computer/cluster=staging",
        ],
    );
    assert_eq!(
        headers(&out),
        [
            "NAMESPACE",
            "NAME",
            "CLUSTER",
            "PHASE",
            "CONTRACTS",
            "READY",
            "AGE"
        ],
        "{out}"
    );
    let rows = table(&out);
    assert_eq!(rows.len(), 1, "exactly the staging Infra:\n{out}");
    assert_eq!(rows[0]["NAMESPACE"], "socialweb-system");
    assert_eq!(rows[0]["NAME"], "nodes-b27d3c1c71666568b47a");
    assert_eq!(rows[0]["CLUSTER"], "staging");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_the_events_posted_for_an_object() {
    if !kubectl_required() {
        return;
    }
    let server = server_with_examples().await;
    let client = server.client();
    let claims = socialweb_api(&client, "NodeClaim", "nodeclaims", "tenant-a");
    let claim = claims.get("staging-worker-2").await.expect("claim");
    let events: Api<Event> = Api::namespaced(client.clone(), "tenant-a");
    let event: Event = serde_json::from_value(json!({
        "metadata": {"generateName": "staging-worker-2."},
        "eventTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
        "type": "Warning",
        "reason": "NoBidder",
        "action": "Request",
        "note": "no bidder answered within the bid window",
        "reportingController": "socialweb.computer/nodeclaim",
        "reportingInstance": "manager-0",
        "regarding": {"apiVersion": "socialweb.computer/v1alpha1", "kind": "NodeClaim",
            "namespace": "tenant-a", "name": "staging-worker-2",
            "uid": claim.metadata.uid, "resourceVersion": claim.metadata.resource_version},
    }))
    .unwrap();
    events
        .create(&PostParams::default(), &event)
        .await
        .expect("post event");

    let server = &server;
    std::thread::scope(|s| {
        s.spawn(|| {
            let out = kubectl_ok(
                server,
                &[
                    "describe",
                    "nodeclaim",
                    "staging-worker-2",
                    "-n",
                    "tenant-a",
                ],
            );
            assert!(out.contains("Name:         staging-worker-2"), "{out}");
            assert!(squeeze(&out).contains("Cluster Name: staging"), "{out}");
            let events = out
                .split("Events:")
                .nth(1)
                .unwrap_or_else(|| panic!("no Events section:\n{out}"));
            let events = squeeze(events);
            assert!(
                events.contains("Warning NoBidder")
                    && events.contains("no bidder answered within the bid window"),
                "the posted Event is shown:\n{out}"
            );
            assert!(
                events.contains("socialweb.computer/nodeclaim"),
                "From column:\n{out}"
            );
        });
        s.spawn(|| {
            // Another claim's describe does not show it.
            let out = kubectl_ok(
                server,
                &[
                    "describe",
                    "nodeclaim",
                    "staging-worker-1",
                    "-n",
                    "tenant-a",
                ],
            );
            assert!(!out.contains("NoBidder"), "{out}");
            assert!(out.contains("Events:") && out.contains("<none>"), "{out}");
        });
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_the_field_descriptions_of_the_crds() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.expect("start server");
    install_project_crds(&server.client()).await;
    let server = &server;
    std::thread::scope(|s| {
        s.spawn(|| {
            let out = squeeze(&kubectl_ok(server, &["explain", "nodeclaim.spec.clusterName"]));
            assert!(out.contains("GROUP: socialweb.computer"), "{out}");
            assert!(out.contains("KIND: NodeClaim"), "{out}");
            assert!(out.contains("VERSION: v1alpha1"), "{out}");
            assert!(out.contains("FIELD: clusterName <string>"), "{out}");
            assert!(
                out.contains("Name of the Cluster, in the claim's own namespace, that the node joins. Immutable: a node cannot move to another cluster."),
                "{out}"
            );
        });
        s.spawn(|| {
            let out = squeeze(&kubectl_ok(server, &["explain", "nodeclaims.spec"]));
            assert!(out.contains("clusterName <string> -required-"), "{out}");
            assert!(out.contains("joinGraceSeconds <integer>"), "{out}");
        });
        s.spawn(|| {
            let out = squeeze(&kubectl_ok(server, &["explain", "requester"]));
            assert!(out.contains("The root of a contract namespace: runs its ComputeContracts against one market."), "{out}");
        });
        s.spawn(|| {
            let text = kubectl_fails(server, &["explain", "nodeclaim.spec.noSuchField"]);
            assert!(text.contains("noSuchField"), "{text}");
        });
    });
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
async fn get_watch_prints_a_change() {
    if !kubectl_required() {
        return;
    }
    let server = server_with_examples().await;
    let watch = Background::spawn(
        &server,
        &[
            "get",
            "nodeclaims",
            "-n",
            "tenant-a",
            "-w",
            "--output-watch-events",
        ],
    );
    let wait_for = |what: &str, pred: &dyn Fn(&str) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut seen = Vec::new();
        while Instant::now() < deadline {
            if let Some(line) = watch.next_line(Duration::from_millis(200)) {
                if pred(&line) {
                    return line;
                }
                seen.push(line);
            }
        }
        panic!(
            "kubectl get -w never printed {what}; it printed:\n{}",
            seen.join("\n")
        );
    };
    let header = wait_for("the header", &|l| l.contains("NAME") && l.contains("PHASE"));
    assert!(
        header.starts_with("EVENT"),
        "--output-watch-events adds an EVENT column: {header}"
    );
    wait_for("the initial claims", &|l| {
        l.starts_with("ADDED") && l.contains("staging-worker-1")
    });
    report_claim(&server, "staging-worker-1", "Deployed", "203.0.113.9").await;
    let line = wait_for("the change", &|l| l.contains("Deployed"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cells[..4],
        ["MODIFIED", "staging-worker-1", "staging", "Deployed"],
        "{line}"
    );
    assert!(line.contains("203.0.113.9"), "{line}");
}
