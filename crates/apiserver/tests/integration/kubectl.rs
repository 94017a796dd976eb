//! The real `kubectl` (1.32) reading from the embedded API server: printer
//! columns, label selectors, `-o yaml`, `describe` with Events, `explain`, and
//! `get -w`. Every test asserts kubectl's exit code and output; each kubectl call
//! has its own cache directory, and independent calls run on parallel threads.
//! Writes (`apply`, `delete`) are in kubectl_apply.rs.

use crate::support;

use std::time::{Duration, Instant};

use apiserver::testing::TestServer;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use support::kubectl::{
    Background, headers, kubectl, kubectl_fails, kubectl_ok, kubectl_required, squeeze, table,
};
use support::objects::{create, create_namespace, install_project_crds, socialweb_api};
use support::scenes::{report_claim, server_with_examples};

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
async fn get_computecontracts_shows_the_infra_label_column_and_the_winner() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.expect("start server");
    let client = server.client();
    install_project_crds(&client).await;
    create_namespace(&client, "socialweb-system").await;
    let contracts = socialweb_api(
        &client,
        "ComputeContract",
        "computecontracts",
        "socialweb-system",
    );
    for (infra, entry) in [
        ("nodes-b27d3c1c71666568b47a", "node-0123456789abcdef0123"),
        ("nodes-5f0c6e1d2a3b4c5d6e7f", "node-aaaaaaaaaaaaaaaaaaaa"),
    ] {
        create(
            &contracts,
            &json!({
                "apiVersion": "socialweb.computer/v1alpha1", "kind": "ComputeContract",
                "metadata": {"name": format!("{infra}-{entry}"), "labels": {
                    "infra.socialweb.computer/name": infra,
                    "infra.socialweb.computer/contract": entry}},
                "spec": {"resources": {"cpus": 2, "memory": 4096, "disk": 40, "network": 1000},
                    "location": {"country": "DE"}},
            }),
        )
        .await;
    }
    let won = json!({"status": {"phase": "Deployed",
        "winner": {"bidder": "did:web:compute.hetzner-reseller.example", "cost": 1200, "currency": "EUR"}}});
    contracts
        .patch_status(
            "nodes-b27d3c1c71666568b47a-node-0123456789abcdef0123",
            &PatchParams::default(),
            &Patch::Merge(&won),
        )
        .await
        .expect("report the winner");
    let out = kubectl_ok(
        &server,
        &[
            "get",
            "cc",
            "-n",
            "socialweb-system",
            "-l",
            "infra.socialweb.computer/name=nodes-b27d3c1c71666568b47a",
        ],
    );
    assert_eq!(
        headers(&out),
        ["NAME", "INFRA", "PHASE", "WINNER", "COST", "AGE"],
        "{out}"
    );
    let rows = table(&out);
    assert_eq!(rows.len(), 1, "{out}");
    // The INFRA column's path escapes the dots of the label key: .metadata.labels.infra\.socialweb\.computer/name
    assert_eq!(rows[0]["INFRA"], "nodes-b27d3c1c71666568b47a", "{out}");
    assert_eq!(rows[0]["PHASE"], "Deployed", "{out}");
    assert_eq!(
        rows[0]["WINNER"], "did:web:compute.hetzner-reseller.example",
        "{out}"
    );
    assert_eq!(rows[0]["COST"], "1200", "{out}");
    // The schema default of ttlSecondsAfterFinished (8 days) shows through jsonpath.
    let ttl = kubectl_ok(
        &server,
        &[
            "get",
            "cc",
            "nodes-5f0c6e1d2a3b4c5d6e7f-node-aaaaaaaaaaaaaaaaaaaa",
            "-n",
            "socialweb-system",
            "-o",
            "jsonpath={.spec.ttlSecondsAfterFinished}",
        ],
    );
    assert_eq!(ttl, "691200");
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
                out.contains("Name of the Cluster, in the claim's own namespace, that the node joins (at most 63 characters, as a Cluster's name). Immutable: a node cannot move to another cluster."),
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
