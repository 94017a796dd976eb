//! Least-privilege RBAC, proven (issue 6): the real manager (leader-elected, as `run`
//! starts it) runs a representative scenario on the embedded API server; every request
//! it made must be allowed by the chart's rendered ClusterRole/Roles, and every
//! (group, resource, verb) the chart grants must have been used, or be listed in
//! [`UNUSED_ON_PURPOSE`] with a reason the chart also writes next to the rule.
//!
//! The chart's RBAC templates are rendered here by a small, explicit substitution of the
//! few template expressions they use (with the chart's defaults); any other template
//! expression fails the test, so a chart change cannot slip past unrendered.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use controllers::metrics::Metrics;
use controllers::requester::Markets;
use http::{HeaderName, HeaderValue};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use manager::leader::{LeaderConfig, run_while_leader};
use manager::shutdown::Shutdown;
use manager::wiring::{ControllerOptions, Controllers};
use serde_json::json;
use support::{CONTRACT_NS, Env, NS};

/// The User-Agent of the manager's client: how its requests are told from the test's own.
const MANAGER_AGENT: &str = "socialweb-manager-rbac-test";
/// The release name used for rendering: it contains the chart name, so the full name is it.
const RELEASE: &str = "socialweb-manager";
/// Namespace-free grants the chart keeps although this scenario never uses them:
/// (group, resource, verb, a phrase of the chart's comment on that rule saying why).
const UNUSED_ON_PURPOSE: &[(&str, &str, &str, &str)] = &[
    // An Event repeated within kube-runtime's series window is patched, not re-created;
    // one scenario run does not repeat an Event.
    (
        "events.k8s.io",
        "events",
        "patch",
        "creates an Event, then patches its series",
    ),
    // Read directly only when the cache lags behind an Infra's status.
    (
        "socialweb.computer",
        "computecontracts",
        "get",
        "only when the cache lags",
    ),
    // Server-side apply creates these. kube-apiserver authorizes an apply that
    // creates as `create`; the embedded server logs it as the `patch` it is.
    (
        "socialweb.computer",
        "infras",
        "create",
        "authorizes an apply that creates a missing object",
    ),
    (
        "socialweb.computer",
        "computecontracts",
        "create",
        "authorizes an apply that creates a missing object",
    ),
    // A join Secret is re-applied (its token kept) only when its content changes.
    (
        "",
        "secrets",
        "patch",
        "patch re-applies a Secret whose token is kept",
    ),
    // The atproto market's credentials; this scenario runs the local market.
    ("", "secrets", "get", "not with a local market"),
    // An Infra's spec.record (the NodeClaim controller's Infras set none): the
    // record controller's tests (controllers/tests/record_*.rs) use these.
    (
        "socialweb.computer",
        "atprotorecords",
        "create",
        "AtprotoRecords (an Infra's spec.record)",
    ),
    (
        "socialweb.computer",
        "atprotorecords",
        "patch",
        "AtprotoRecords (an Infra's spec.record)",
    ),
    (
        "socialweb.computer",
        "atprotorecords",
        "delete",
        "AtprotoRecords (an Infra's spec.record)",
    ),
    (
        "socialweb.computer",
        "atprotorecords",
        "get",
        "only when the cache shows none",
    ),
    (
        "socialweb.computer",
        "atprotorecords/status",
        "update",
        "replaces AtprotoRecord status",
    ),
];

fn templates() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/helm/socialweb-manager/templates")
}

/// Renders one RBAC template with the chart's default values (leader election on,
/// contract namespace = release namespace = [`CONTRACT_NS`]).
fn render(file: &str) -> String {
    let text = std::fs::read_to_string(templates().join(file)).unwrap();
    let values = std::fs::read_to_string(templates().join("../values.yaml")).unwrap();
    assert!(
        values.contains("leaderElection:\n  # Keep true whenever replicas > 1: without it every replica writes.\n  enabled: true\n  leaseName: socialweb-manager\n"),
        "values.yaml's leaderElection defaults changed: update the rendering in this test"
    );
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        // Labels are irrelevant to what is allowed; the leader-election block is rendered
        // (enabled by default).
        if trimmed.starts_with("{{- include \"socialweb-manager.labels\"")
            || trimmed == "{{- if .Values.leaderElection.enabled }}"
            || trimmed == "{{- end }}"
        {
            continue;
        }
        let line = line
            .replace("{{ include \"socialweb-manager.fullname\" . }}", RELEASE)
            .replace(
                "{{ include \"socialweb-manager.serviceAccountName\" . }}",
                RELEASE,
            )
            .replace(
                "{{ include \"socialweb-manager.contractNamespace\" . }}",
                CONTRACT_NS,
            )
            .replace("{{ .Release.Namespace }}", CONTRACT_NS)
            .replace(
                "{{ .Values.leaderElection.leaseName | quote }}",
                "\"socialweb-manager\"",
            );
        assert!(
            !line.contains("{{"),
            "{file}: this test does not render `{line}`; extend render()"
        );
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// One granted rule and where it applies: `None` is cluster-wide (a bound ClusterRole).
#[derive(Debug)]
struct Grant {
    role: String,
    namespace: Option<String>,
    rule: PolicyRule,
}

fn grants() -> Vec<Grant> {
    let mut grants = Vec::new();
    let mut bound = BTreeSet::new();
    let mut roles = Vec::new();
    for file in ["clusterrole.yaml", "role.yaml"] {
        for doc in serde_yaml::Deserializer::from_str(&render(file)) {
            let value: serde_json::Value = serde::Deserialize::deserialize(doc).unwrap();
            let kind = value["kind"].as_str().unwrap().to_owned();
            let name = value["metadata"]["name"].as_str().unwrap().to_owned();
            match kind.as_str() {
                "ClusterRole" | "Role" => {
                    let namespace = (kind == "Role")
                        .then(|| value["metadata"]["namespace"].as_str().unwrap().to_owned());
                    let rules: Vec<PolicyRule> =
                        serde_json::from_value(value["rules"].clone()).unwrap();
                    roles.push((kind.clone(), name.clone()));
                    for rule in rules {
                        grants.push(Grant {
                            role: format!("{kind} {name}"),
                            namespace: namespace.clone(),
                            rule,
                        });
                    }
                }
                "ClusterRoleBinding" | "RoleBinding" => {
                    let subject = &value["subjects"][0];
                    assert_eq!(subject["kind"], "ServiceAccount");
                    assert_eq!(subject["name"], RELEASE);
                    bound.insert((
                        value["roleRef"]["kind"].as_str().unwrap().to_owned(),
                        value["roleRef"]["name"].as_str().unwrap().to_owned(),
                    ));
                }
                other => panic!("{file}: unexpected kind {other}"),
            }
        }
    }
    for role in &roles {
        assert!(bound.contains(role), "{role:?} is bound to nothing");
    }
    grants
}

/// One API request, as RBAC sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Access {
    verb: String,
    group: String,
    /// Plural, with `/subresource`.
    resource: String,
    /// Empty for a cluster-wide (all namespaces or cluster-scoped) request.
    namespace: String,
    name: String,
}

/// Parses `/api/v1/...` and `/apis/<group>/<version>/...`; `None` for a non-resource URL.
fn access(verb: &str, uri: &str) -> Option<Access> {
    let path = uri.split('?').next().unwrap_or_default();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", namespace, rest @ ..] if !rest.is_empty() => (*namespace, rest),
        _ => ("", rest),
    };
    let (resource, name, sub) = match rest {
        [resource] => (*resource, "", None),
        [resource, name] => (*resource, *name, None),
        [resource, name, sub] => (*resource, *name, Some(*sub)),
        _ => return None,
    };
    Some(Access {
        verb: verb.to_owned(),
        group: group.to_owned(),
        resource: sub.map_or_else(|| resource.to_owned(), |sub| format!("{resource}/{sub}")),
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

fn rule_allows(rule: &PolicyRule, group: &str, resource: &str, verb: &str, name: &str) -> bool {
    rule.api_groups.iter().flatten().any(|g| g == group)
        && rule.resources.iter().flatten().any(|r| r == resource)
        && rule.verbs.iter().any(|v| v == verb)
        && rule
            .resource_names
            .as_ref()
            .is_none_or(|names| names.is_empty() || names.iter().any(|n| n == name))
}

fn grant_allows(grant: &Grant, access: &Access) -> bool {
    let in_scope = match &grant.namespace {
        None => true,
        Some(namespace) => *namespace == access.namespace,
    };
    in_scope
        && rule_allows(
            &grant.rule,
            &access.group,
            &access.resource,
            &access.verb,
            &access.name,
        )
}

fn manager_client(env: &Env) -> kube::Client {
    let mut config = env.server.config();
    config.headers.push((
        HeaderName::from_static("user-agent"),
        HeaderValue::from_static(MANAGER_AGENT),
    ));
    kube::Client::try_from(config).unwrap()
}

/// Scales up two claims, scales one down, deletes the Cluster, then the Requester, with
/// the manager leader-elected on a Lease in the release namespace; returns its requests.
async fn run_scenario() -> Vec<apiserver::audit::RequestRecord> {
    let mut env = Env::start().await;
    // Env's manager uses the test's client; ours has its own User-Agent.
    env.kill_manager().await;
    let client = manager_client(&env);
    let shutdown = Shutdown::new(Duration::from_secs(3));
    let make_controllers = {
        let client = client.clone();
        let stop_on = shutdown.clone();
        let clock = Arc::clone(&env.clock);
        let market = Arc::clone(&env.market);
        move || {
            let running = Controllers {
                client: client.clone(),
                clock: Arc::clone(&clock),
                markets: Arc::new(Markets::with_injected(
                    Arc::clone(&clock),
                    controllers::market_adapter::Injected::Local(Arc::clone(&market)),
                )),
                metrics: Metrics::default(),
                options: ControllerOptions::default(),
                stop: controllers::StopSignal::on(stop_on.signaled()),
            }
            .start();
            async move {
                running.done.await;
                Ok(())
            }
        }
    };
    let manager = tokio::spawn(run_while_leader(
        client,
        LeaderConfig {
            namespace: CONTRACT_NS.into(),
            lease_name: "socialweb-manager".into(),
            identity: "rbac-test".into(),
            duration: Duration::from_secs(3),
            renew_period: Duration::from_secs(1),
        },
        Metrics::default(),
        make_controllers,
        shutdown.clone(),
    ));

    let [released, _] = env.two_joined_contracts().await;
    // The manager publishes only Events a person acts on; a contract released by
    // hand is one (a Warning on its Infra), so the scenario uses the Events grant.
    env.contracts()
        .patch(
            &released,
            &PatchParams {
                field_manager: Some("by-hand".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(json!({"spec": {"release": true}})),
        )
        .await
        .unwrap();
    let events: Api<Event> = Api::namespaced(env.client.clone(), CONTRACT_NS);
    testkit::eventually("the Warning about the hand release", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("ContractReleasedByHand"))
            .then_some(())
    })
    .await;
    testkit::delete_and_wait(&env.claims(NS), "worker-a").await;
    testkit::delete_and_wait(&env.clusters(NS), "c1").await;
    let _ = env
        .claims(NS)
        .delete("worker-b", &DeleteParams::default())
        .await;
    env.wait_gone(&env.claims(NS), "worker-b").await;
    testkit::delete_and_wait(&env.requesters(), "root").await;

    shutdown.trigger();
    tokio::time::timeout(Duration::from_secs(10), manager)
        .await
        .expect("the manager stops on shutdown")
        .unwrap()
        .unwrap();
    env.server
        .requests()
        .into_iter()
        .filter(|r| r.user_agent == MANAGER_AGENT)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_rbac_allows_exactly_what_the_manager_uses() {
    let grants = grants();
    let requests = run_scenario().await;
    assert!(
        requests.len() > 20,
        "too few manager requests: {requests:?}"
    );

    let mut denied = BTreeSet::new();
    let mut used = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for request in &requests {
        let Some(access) = access(&request.verb, &request.uri) else {
            denied.insert(format!("non-resource {} {}", request.method, request.uri));
            continue;
        };
        seen.insert((
            access.verb.clone(),
            access.group.clone(),
            access.resource.clone(),
            access.namespace.clone(),
        ));
        let allowing: Vec<&Grant> = grants.iter().filter(|g| grant_allows(g, &access)).collect();
        if allowing.is_empty() {
            denied.insert(format!("{access:?}"));
        }
        for grant in allowing {
            used.insert((
                grant.role.clone(),
                access.group.clone(),
                access.resource.clone(),
                access.verb.clone(),
            ));
        }
    }
    eprintln!("manager requests (verb, group, resource, namespace): {seen:#?}");
    assert!(
        denied.is_empty(),
        "the chart's RBAC denies requests the manager makes: {denied:#?}"
    );

    let chart = format!(
        "{}\n{}",
        std::fs::read_to_string(templates().join("clusterrole.yaml")).unwrap(),
        std::fs::read_to_string(templates().join("role.yaml")).unwrap()
    );
    let mut unused = Vec::new();
    for grant in &grants {
        for group in grant.rule.api_groups.iter().flatten() {
            for resource in grant.rule.resources.iter().flatten() {
                for verb in &grant.rule.verbs {
                    let key = (
                        grant.role.clone(),
                        group.clone(),
                        resource.clone(),
                        verb.clone(),
                    );
                    if used.contains(&key) {
                        continue;
                    }
                    match UNUSED_ON_PURPOSE
                        .iter()
                        .find(|(g, r, v, _)| g == group && r == resource && v == verb)
                    {
                        Some((_, _, _, why)) => assert!(
                            chart.contains(why),
                            "the reason for {key:?} is not written in the chart: {why}"
                        ),
                        None => unused.push(key),
                    }
                }
            }
        }
    }
    assert!(
        unused.is_empty(),
        "the chart grants what the manager never used (remove it, or justify it in the \
         chart and in UNUSED_ON_PURPOSE): {unused:#?}"
    );
}

#[test]
fn requests_map_to_what_rbac_checks() {
    let a = access(
        "patch",
        "/apis/socialweb.computer/v1alpha1/namespaces/t/nodeclaims/w/status?fieldManager=x",
    )
    .unwrap();
    assert_eq!(
        (
            a.group.as_str(),
            a.resource.as_str(),
            a.namespace.as_str(),
            a.name.as_str()
        ),
        ("socialweb.computer", "nodeclaims/status", "t", "w")
    );
    let a = access(
        "watch",
        "/apis/socialweb.computer/v1alpha1/clusters?watch=true",
    )
    .unwrap();
    assert_eq!(
        (a.resource.as_str(), a.namespace.as_str()),
        ("clusters", "")
    );
    let a = access("get", "/api/v1/namespaces/socialweb-system").unwrap();
    assert_eq!(
        (a.group.as_str(), a.resource.as_str(), a.namespace.as_str()),
        ("", "namespaces", "")
    );
    assert!(access("get", "/apis").is_none());

    // A Role grants only in its namespace; resourceNames restrict by name.
    let grants = grants();
    let lease = |ns: &str, name: &str| Access {
        verb: "patch".into(),
        group: "coordination.k8s.io".into(),
        resource: "leases".into(),
        namespace: ns.into(),
        name: name.into(),
    };
    assert!(
        grants
            .iter()
            .any(|g| grant_allows(g, &lease(CONTRACT_NS, RELEASE)))
    );
    assert!(
        !grants
            .iter()
            .any(|g| grant_allows(g, &lease(CONTRACT_NS, "other")))
    );
    assert!(!grants.iter().any(|g| grant_allows(g, &lease(NS, RELEASE))));
}
