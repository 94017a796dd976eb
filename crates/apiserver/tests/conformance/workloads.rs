//! The API defaults workloads get (issue 15, item 8): this server runs no workload
//! controllers, but the objects it stores read as a cluster's do.
//!
//! Upstream (1.32) defaults in the decoder, before the field manager, on every write:
//! `SetDefaults_Deployment`, `SetDefaults_StatefulSet` (k8s.io/kubernetes/pkg/apis/apps/v1/
//! defaults.go), and for pod templates and Services `SetDefaults_PodSpec`,
//! `SetDefaults_Container`, `SetDefaults_Service` and the `+default` markers
//! (pkg/apis/core/v1/defaults.go, zz_generated.defaults.go). So an Update-type writer's
//! managedFields include what was defaulted (`kubectl create` owns `f:dnsPolicy`), an
//! applier's do not, and sending the same object again changes nothing.

use apiserver::testing::TestServer;
use serde_json::json;

use crate::kit::{APPLY, patch, post, put};

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/default/deployments";

/// What `kubectl create deployment <name> --image=<image> --port=80` sends.
fn deployment(name: &str, image: &str) -> serde_json::Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": image,
                    "ports": [{"containerPort": 80}]}]}}}})
}

#[tokio::test]
async fn r3_34_workloads_and_services_get_upstreams_api_defaults() {
    let server = TestServer::start().await.unwrap();
    let sent = deployment("web", "nginx");
    let created = post(&server, DEPLOYMENTS, &sent).await;
    let spec = &created.ok(201)["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["securityContext"], json!({}));
    let container = &pod["containers"][0];
    assert_eq!(container["imagePullPolicy"], "Always", "no tag is :latest");
    assert_eq!(container["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(container["terminationMessagePolicy"], "File");
    assert_eq!(container["ports"][0]["protocol"], "TCP");
    let owned = &created.body["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"];
    assert!(owned.get("f:progressDeadlineSeconds").is_some(), "{owned}");

    // The same body again (as `kubectl replace` sends it) is a no-op.
    let mut again = sent.clone();
    again["metadata"]["resourceVersion"] = created.body["metadata"]["resourceVersion"].clone();
    let replaced = put(&server, &format!("{DEPLOYMENTS}/web"), &again).await;
    assert_eq!(
        replaced.ok(200)["metadata"]["resourceVersion"],
        created.body["metadata"]["resourceVersion"]
    );
    assert_eq!(replaced.body["metadata"]["generation"], 1);

    // Explicit values stay: zero replicas, Recreate (no rollingUpdate), a tagged image.
    let mut explicit = deployment("batch", "nginx:1.27");
    explicit["spec"]["replicas"] = json!(0);
    explicit["spec"]["strategy"] = json!({"type": "Recreate"});
    let created = post(&server, DEPLOYMENTS, &explicit).await;
    let spec = &created.ok(201)["spec"];
    assert_eq!(spec["replicas"], 0);
    assert_eq!(spec["strategy"], json!({"type": "Recreate"}));
    assert_eq!(
        spec["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );

    // An applier owns what it sent, not the defaults.
    let applied = patch(
        &server,
        &format!("{DEPLOYMENTS}/applied?fieldManager=applier"),
        APPLY,
        &deployment("applied", "nginx"),
    )
    .await;
    assert_eq!(applied.ok(201)["spec"]["replicas"], 1);
    let owned = &applied.body["metadata"]["managedFields"][0];
    assert_eq!(owned["manager"], "applier");
    let owned = &owned["fieldsV1"]["f:spec"];
    assert!(owned.get("f:replicas").is_none(), "{owned}");
    assert!(owned.get("f:selector").is_some(), "{owned}");

    let stateful = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "c", "image": "postgres:17"}]}}}});
    let created = post(
        &server,
        "/apis/apps/v1/namespaces/default/statefulsets",
        &stateful,
    )
    .await;
    let spec = &created.ok(201)["spec"];
    assert_eq!(spec["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        spec["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    assert_eq!(
        spec["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
    );
    assert_eq!(
        (&spec["replicas"], &spec["revisionHistoryLimit"]),
        (&json!(1), &json!(10))
    );

    let service = json!({"metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}});
    let created = post(&server, "/api/v1/namespaces/default/services", &service).await;
    let spec = &created.ok(201)["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(spec["internalTrafficPolicy"], "Cluster");
    assert_eq!(
        spec["ports"][0],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80})
    );
}
