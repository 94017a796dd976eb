//! The Helm chart as an operator meets it: the CRDs it ships are the generated ones, Helm
//! lints it clean, and `helm install` onto the embedded API server creates a hardened,
//! least-privilege manager that `helm uninstall` removes again.
//!
//! Helm runs through helm-sdkpy (Helm's Go library behind Python bindings, driven by
//! tests/helm_chart.py), installed by this test into a venv under the target dir.
//! Without python3, pip or PyPI the Helm tests skip with a message; under CI=true they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use api::Requester;
use apiserver::testing::TestServer;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use serde_json::{Value, json};
use testkit::ListAll;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const NAMESPACE: &str = "socialweb-system";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chart() -> PathBuf {
    repo_root().join("deploy/helm/socialweb-manager")
}

fn yaml_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    names.sort();
    names
}

#[test]
fn the_charts_crds_are_byte_identical_to_the_generated_ones() {
    let generated = repo_root().join("deploy/crds");
    let shipped = chart().join("crds");
    let names = yaml_files(&generated);
    assert_eq!(names.len(), 6, "{names:?}");
    assert_eq!(
        yaml_files(&shipped),
        names,
        "the chart ships other CRD files than deploy/crds: cp deploy/crds/*.yaml {}",
        shipped.display()
    );
    for name in names {
        assert!(
            std::fs::read(generated.join(&name)).unwrap()
                == std::fs::read(shipped.join(&name)).unwrap(),
            "{name} differs from deploy/crds: cp deploy/crds/*.yaml deploy/helm/socialweb-manager/crds/"
        );
    }
}

/// The one helm-sdkpy venv of the workspace (`<target>/helm-venv`, pinned,
/// built once under a file lock), shared with the API server's Helm test.
#[path = "../../../apiserver/tests/integration/support/helm_venv.rs"]
mod helm_venv;

use helm_venv::helm_python;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/helm_chart.py")
}

#[test]
fn helm_lints_the_chart_without_warnings() {
    let Some(python) = helm_python() else { return };
    let output = Command::new(python)
        .arg(script())
        .arg("lint")
        .arg(chart())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lint: Value = serde_json::from_slice(&output.stdout).unwrap();
    // Severity 1 is "info" (e.g. "icon is recommended"); 2 warning, 3 error.
    // helm-sdkpy 0.1.32 drops the messages' text, so the paths are what we can show.
    let serious: Vec<&Value> = lint["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["severity"].as_u64().unwrap() >= 2)
        .collect();
    assert!(serious.is_empty(), "helm lint complains about {serious:?}");
    assert_eq!(lint["errors"], 0, "{lint}");
}

/// A running `helm_chart.py cycle`: installed, waiting to uninstall.
struct Cycle {
    child: tokio::process::Child,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Cycle {
    async fn install(
        python: &Path,
        server: &TestServer,
        release: &str,
        values: &Value,
    ) -> Result<(Self, Value), String> {
        let mut child = tokio::process::Command::new(python)
            .arg(script())
            .arg("cycle")
            .arg(chart())
            .arg(server.kubeconfig_path())
            .args([NAMESPACE, release, &values.to_string()])
            // The embedded server speaks JSON only; Helm's Secret driver writes protobuf.
            .env("HELM_DRIVER", "memory")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(120), stdout.next_line())
            .await
            .expect("helm install answers within 120s")
            .unwrap();
        match line {
            Some(line) => Ok((Self { child, stdout }, serde_json::from_str(&line).unwrap())),
            None => {
                let output = child.wait_with_output().await.unwrap();
                Err(String::from_utf8_lossy(&output.stderr).into_owned())
            }
        }
    }

    async fn uninstall(mut self) -> Value {
        let mut stdin = self.child.stdin.take().unwrap();
        stdin.write_all(b"uninstall\n").await.unwrap();
        let line = tokio::time::timeout(Duration::from_secs(120), self.stdout.next_line())
            .await
            .expect("helm uninstall answers within 120s")
            .unwrap();
        let output = self.child.wait_with_output().await.unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "helm uninstall failed: {stderr}");
        serde_json::from_str(&line.expect("helm uninstall printed its result")).unwrap()
    }
}

/// Whether the rules, together, grant every one of `verbs` on `group`/`resource` (as RBAC adds them up).
fn rule_has(rules: &[PolicyRule], group: &str, resource: &str, verbs: &[&str]) -> bool {
    verbs.iter().all(|verb| {
        rules.iter().any(|rule| {
            rule.api_groups.iter().flatten().any(|g| g == group)
                && rule.resources.iter().flatten().any(|r| r == resource)
                && rule.verbs.iter().any(|v| v == verb)
        })
    })
}

fn assert_no_wildcards(rules: &[PolicyRule], what: &str) {
    for rule in rules {
        let words = rule
            .api_groups
            .iter()
            .flatten()
            .chain(rule.resources.iter().flatten())
            .chain(rule.verbs.iter());
        for word in words {
            assert_ne!(word, "*", "{what} grants a wildcard: {rule:?}");
        }
    }
}

#[tokio::test]
async fn helm_installs_a_hardened_least_privilege_manager_and_uninstalls_it() {
    let Some(python) = helm_python() else { return };
    let server = TestServer::start().await.unwrap();
    let values = json!({
        "market": {"requester": {"enabled": true}},
        "extraArgs": ["--guest-poll-seconds=30"],
    });
    let (cycle, installed) = Cycle::install(&python, &server, "sw", &values)
        .await
        .unwrap_or_else(|stderr| panic!("helm install failed: {stderr}"));
    assert_eq!(installed["status"], "deployed", "{installed}");
    assert_eq!(installed["listed"], json!(["sw"]));

    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd_names: Vec<String> = crds
        .list_all()
        .await
        .into_iter()
        .filter_map(|crd| crd.metadata.name)
        .collect();
    assert_eq!(crd_names.len(), 6, "{crd_names:?}");

    let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .get("sw-socialweb-manager")
        .await
        .unwrap();
    let spec = deployment.spec.unwrap();
    assert_eq!(spec.replicas, Some(2));
    let pod = spec.template.spec.unwrap();
    let pod_security = pod.security_context.unwrap();
    assert_eq!(pod_security.run_as_non_root, Some(true));
    assert_eq!(pod_security.run_as_user, Some(65532));
    assert_eq!(
        pod_security.seccomp_profile.unwrap().type_,
        "RuntimeDefault"
    );
    assert_eq!(
        pod.service_account_name.as_deref(),
        Some("sw-socialweb-manager")
    );
    assert_eq!(pod.termination_grace_period_seconds, Some(30));

    let container = &pod.containers[0];
    let security = container.security_context.clone().unwrap();
    assert_eq!(security.read_only_root_filesystem, Some(true));
    assert_eq!(security.allow_privilege_escalation, Some(false));
    assert_eq!(security.run_as_non_root, Some(true));
    assert_eq!(
        security.capabilities.unwrap().drop,
        Some(vec!["ALL".to_owned()])
    );
    assert_eq!(security.seccomp_profile.unwrap().type_, "RuntimeDefault");
    let probe_path = |probe: Option<&k8s_openapi::api::core::v1::Probe>| {
        probe
            .and_then(|p| p.http_get.as_ref())
            .and_then(|get| get.path.clone())
    };
    assert_eq!(
        probe_path(container.liveness_probe.as_ref()).as_deref(),
        Some("/healthz")
    );
    assert_eq!(
        probe_path(container.readiness_probe.as_ref()).as_deref(),
        Some("/readyz")
    );
    let resources = container.resources.clone().unwrap();
    for needed in ["cpu", "memory"] {
        assert!(
            resources.requests.as_ref().unwrap().contains_key(needed),
            "no {needed} request"
        );
        assert!(
            resources.limits.as_ref().unwrap().contains_key(needed),
            "no {needed} limit"
        );
    }
    let args = container.args.clone().unwrap();
    for expected in [
        "run",
        "--log-format=json",
        "--contract-namespace=socialweb-system",
        "--leader-elect=true",
        "--lease-name=socialweb-manager",
        "--lease-namespace=socialweb-system",
        "--shutdown-deadline=25s",
        "--http-addr=0.0.0.0:8080",
        "--guest-poll-seconds=30",
    ] {
        assert!(
            args.iter().any(|arg| arg == expected),
            "{expected} missing in {args:?}"
        );
    }
    // Every flag the chart passes is one `manager` knows, with a value it accepts.
    let parsed = <manager::cli::Cli as clap::Parser>::try_parse_from(
        std::iter::once("manager".to_owned()).chain(args.iter().cloned()),
    );
    assert!(parsed.is_ok(), "the chart's args do not parse: {parsed:?}");
    let pdb = Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::namespaced(
        client.clone(),
        NAMESPACE,
    )
    .get("sw-socialweb-manager")
    .await
    .unwrap();
    assert_eq!(
        pdb.spec.unwrap().min_available,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1)),
        "a node drain keeps one replica running"
    );
    let env = container.env.clone().unwrap();
    let pod_name = env.iter().find(|var| var.name == "POD_NAME").unwrap();
    assert_eq!(
        pod_name
            .value_from
            .as_ref()
            .unwrap()
            .field_ref
            .as_ref()
            .unwrap()
            .field_path,
        "metadata.name",
        "the Lease identity is the pod name"
    );

    let cluster_role = Api::<ClusterRole>::all(client.clone())
        .get("sw-socialweb-manager")
        .await
        .unwrap();
    let cluster_rules = cluster_role.rules.unwrap();
    assert_no_wildcards(&cluster_rules, "the ClusterRole");
    for resource in ["clusters", "nodeclaims"] {
        assert!(rule_has(
            &cluster_rules,
            "socialweb.computer",
            resource,
            &["list", "watch", "patch"]
        ));
        // Statuses are replaced guarded by the resourceVersion they were
        // decided from (the Cluster's with only status.nodes changed).
        assert!(rule_has(
            &cluster_rules,
            "socialweb.computer",
            &format!("{resource}/status"),
            &["update"]
        ));
        assert!(!rule_has(
            &cluster_rules,
            "socialweb.computer",
            resource,
            &["delete"]
        ));
    }
    assert!(
        !cluster_rules
            .iter()
            .any(|rule| rule.resources.iter().flatten().any(|r| r == "secrets")),
        "Secrets are readable cluster-wide: {cluster_rules:?}"
    );

    let role = Api::<Role>::namespaced(client.clone(), NAMESPACE)
        .get("sw-socialweb-manager")
        .await
        .unwrap();
    let rules = role.rules.unwrap();
    assert_no_wildcards(&rules, "the contract namespace Role");
    for resource in ["infras", "computecontracts"] {
        assert!(rule_has(
            &rules,
            "socialweb.computer",
            resource,
            &["list", "watch", "create", "patch"]
        ));
    }
    assert!(rule_has(
        &rules,
        "socialweb.computer",
        "requesters",
        &["patch"]
    ));
    // Requesters of every namespace are watched, so one outside the contract
    // namespace is told in its status that it runs nothing.
    assert!(rule_has(
        &cluster_rules,
        "socialweb.computer",
        "requesters",
        &["list", "watch"]
    ));
    assert!(rule_has(
        &cluster_rules,
        "socialweb.computer",
        "requesters/status",
        &["update"]
    ));
    assert!(rule_has(
        &rules,
        "socialweb.computer",
        "computecontracts/status",
        &["update"]
    ));
    assert!(rule_has(
        &rules,
        "socialweb.computer",
        "infras/status",
        &["update"]
    ));
    assert!(rule_has(
        &rules,
        "",
        "secrets",
        &["list", "watch", "create", "patch", "delete"]
    ));
    assert!(rule_has(
        &rules,
        "events.k8s.io",
        "events",
        &["create", "patch"]
    ));

    let leader_rules = Api::<Role>::namespaced(client.clone(), NAMESPACE)
        .get("sw-socialweb-manager-leader-election")
        .await
        .unwrap()
        .rules
        .unwrap();
    assert!(rule_has(
        &leader_rules,
        "coordination.k8s.io",
        "leases",
        &["create"]
    ));
    let named = leader_rules
        .iter()
        .find(|rule| rule.verbs.iter().any(|verb| verb == "patch"))
        .unwrap();
    assert_eq!(
        named.resource_names,
        Some(vec!["socialweb-manager".to_owned()])
    );

    let service = Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .get("sw-socialweb-manager-metrics")
        .await
        .unwrap();
    let port = &service.spec.unwrap().ports.unwrap()[0];
    assert_eq!(port.port, 8080);
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("http".into()))
    );
    Api::<ServiceAccount>::namespaced(client.clone(), NAMESPACE)
        .get("sw-socialweb-manager")
        .await
        .unwrap();

    let requester = Api::<Requester>::namespaced(client.clone(), NAMESPACE)
        .get("default")
        .await
        .unwrap();
    assert_eq!(requester.spec.market.local.unwrap().bidders.len(), 2);

    let uninstalled = cycle.uninstall().await;
    assert_eq!(uninstalled["listed"], json!([]), "{uninstalled}");
    let gone = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .get_opt("sw-socialweb-manager")
        .await
        .unwrap();
    assert!(gone.is_none(), "the Deployment outlived helm uninstall");
    // The Requester is kept: deleting it releases every machine, which must be a decision.
    Api::<Requester>::namespaced(client, NAMESPACE)
        .get("default")
        .await
        .unwrap();
}

#[tokio::test]
async fn the_chart_refuses_two_replicas_without_leader_election() {
    let Some(python) = helm_python() else { return };
    let server = TestServer::start().await.unwrap();
    let values =
        json!({"leaderElection": {"enabled": false}, "podDisruptionBudget": {"enabled": false}});
    let Err(stderr) = Cycle::install(&python, &server, "unsafe", &values).await else {
        panic!("two replicas without leader election were installed");
    };
    assert!(
        stderr.contains("leaderElection.enabled=false needs replicas: 1"),
        "{stderr}"
    );
}

/// The embedded server has no Ingress kind; this CRD of the same group,
/// version and name stores the chart's Ingress as Helm renders it (Helm
/// creates objects as unstructured JSON, whatever serves them).
async fn serve_ingresses(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "ingresses.networking.k8s.io"},
        "spec": {
            "group": "networking.k8s.io",
            "scope": "Namespaced",
            "names": {"plural": "ingresses", "singular": "ingress", "kind": "Ingress", "listKind": "IngressList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    }))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&kube::api::PostParams::default(), &crd)
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        kube::runtime::wait::await_condition(
            crds,
            "ingresses.networking.k8s.io",
            kube::runtime::wait::conditions::is_crd_established(),
        ),
    )
    .await
    .unwrap()
    .unwrap();
}

const SUBMIT_PATHS: [&str; 2] = [
    "/xrpc/com.publicdomainrelay.temp.market.submitBid",
    "/xrpc/com.publicdomainrelay.temp.market.submitEvent",
];

#[tokio::test]
async fn helm_installs_the_market_port_its_ingress_and_an_atproto_requester() {
    let Some(python) = helm_python() else { return };
    let server = TestServer::start().await.unwrap();
    let client = server.client();
    serve_ingresses(&client).await;
    let values = json!({
        "market": {
            "requester": {"enabled": true, "kind": "atproto"},
            "atproto": {
                "account": "market.example.org",
                "bidders": ["did:plc:ewvi7nxzyoun6zhxrhs64oiz"],
            },
            "inbound": {
                "enabled": true,
                "ingress": {
                    "enabled": true,
                    "className": "nginx",
                    "host": "market.example.org",
                    "tls": [{"secretName": "market-tls"}],
                },
            },
        },
    });
    let (cycle, installed) = Cycle::install(&python, &server, "sw", &values)
        .await
        .unwrap_or_else(|stderr| panic!("helm install failed: {stderr}"));
    assert_eq!(installed["status"], "deployed", "{installed}");

    let deployment = Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .get("sw-socialweb-manager")
        .await
        .unwrap();
    let container = &deployment.spec.unwrap().template.spec.unwrap().containers[0];
    let args = container.args.clone().unwrap();
    assert!(
        args.iter().any(|arg| arg == "--market-addr=0.0.0.0:8081"),
        "{args:?}"
    );
    let parsed = <manager::cli::Cli as clap::Parser>::try_parse_from(
        std::iter::once("manager".to_owned()).chain(args.iter().cloned()),
    );
    assert!(parsed.is_ok(), "the chart's args do not parse: {parsed:?}");
    let ports = container.ports.clone().unwrap();
    let market = ports
        .iter()
        .find(|p| p.name.as_deref() == Some("market"))
        .unwrap();
    assert_eq!(market.container_port, 8081);

    let service = Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .get("sw-socialweb-manager-market")
        .await
        .unwrap();
    let port = &service.spec.unwrap().ports.unwrap()[0];
    assert_eq!(port.port, 80);
    assert_eq!(
        port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("market".into()))
    );

    let ingresses: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("networking.k8s.io", "v1", "Ingress"),
            "ingresses",
        ),
    );
    let ingress = ingresses.get("sw-socialweb-manager-market").await.unwrap();
    let spec = &ingress.data["spec"];
    assert_eq!(spec["ingressClassName"], "nginx");
    assert_eq!(
        spec["tls"],
        json!([{"secretName": "market-tls", "hosts": ["market.example.org"]}])
    );
    let rules = spec["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0]["host"], "market.example.org");
    let paths = rules[0]["http"]["paths"].as_array().unwrap();
    // Exactly the two procedures, nothing else of the manager (no /metrics).
    let routed: Vec<&str> = paths.iter().map(|p| p["path"].as_str().unwrap()).collect();
    assert_eq!(routed, SUBMIT_PATHS);
    for path in paths {
        assert_eq!(path["pathType"], "Exact");
        assert_eq!(
            path["backend"]["service"],
            json!({"name": "sw-socialweb-manager-market", "port": {"name": "market"}})
        );
    }

    // The Requester passed the CRD's schema (the server created it) and uses the Ingress host.
    let requester = Api::<Requester>::namespaced(client.clone(), NAMESPACE)
        .get("default")
        .await
        .unwrap();
    assert!(requester.spec.market.local.is_none());
    let atproto = requester.spec.market.atproto.unwrap();
    assert_eq!(atproto.public_url, "https://market.example.org");
    assert_eq!(atproto.account, "market.example.org");
    assert_eq!(atproto.app_password_secret_ref.name, "atproto-market");
    assert_eq!(atproto.app_password_secret_ref.key, "app-password");
    assert_eq!(atproto.signing_key_secret_ref.key, "signing-key");
    assert_eq!(atproto.bidders, ["did:plc:ewvi7nxzyoun6zhxrhs64oiz"]);

    let uninstalled = cycle.uninstall().await;
    assert_eq!(uninstalled["listed"], json!([]), "{uninstalled}");
    assert!(
        ingresses
            .get_opt("sw-socialweb-manager-market")
            .await
            .unwrap()
            .is_none(),
        "the Ingress outlived helm uninstall"
    );
}

#[tokio::test]
async fn the_chart_refuses_an_atproto_requester_it_cannot_complete() {
    let Some(python) = helm_python() else { return };
    let server = TestServer::start().await.unwrap();
    let atproto_requester = |atproto: Value| json!({"market": {"requester": {"enabled": true, "kind": "atproto"}, "atproto": atproto}});
    let bidders = json!(["did:plc:ewvi7nxzyoun6zhxrhs64oiz"]);
    for (values, expected) in [
        (
            atproto_requester(json!({"bidders": bidders})),
            "market.atproto.account is required",
        ),
        (
            atproto_requester(json!({"account": "a.example.org", "bidders": bidders})),
            "market.atproto.publicUrl is required",
        ),
        (
            atproto_requester(
                json!({"account": "a.example.org", "publicUrl": "https://m.example.org"}),
            ),
            "market.atproto needs bidders or a relayUrl",
        ),
    ] {
        let Err(stderr) = Cycle::install(&python, &server, "refused", &values).await else {
            panic!("installed {values}");
        };
        assert!(stderr.contains(expected), "{values}: {stderr}");
    }
}
