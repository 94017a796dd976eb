//! Section 3, namespaces: the ones that exist from the start, termination and what it
//! does to the namespace's objects.

use apiserver::testing::TestServer;
use serde_json::{Value, json};

use crate::kit::{configmap, delete, drop_finalizers, eventually, get, post};

const NAMESPACES: &str = "/api/v1/namespaces";
const TEAM_CONFIGMAPS: &str = "/api/v1/namespaces/team/configmaps";

/// A namespace `team` with a plain ConfigMap `plain` and one `held` by a finalizer.
async fn team_namespace() -> TestServer {
    let server = TestServer::start().await.unwrap();
    post(&server, NAMESPACES, &json!({"metadata": {"name": "team"}}))
        .await
        .ok(201);
    post(&server, TEAM_CONFIGMAPS, &configmap("plain", &json!({})))
        .await
        .ok(201);
    let mut held = configmap("held", &json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    post(&server, TEAM_CONFIGMAPS, &held).await.ok(201);
    server
}

#[tokio::test]
async fn r3_12_the_system_namespaces_exist_from_the_start() {
    let server = TestServer::start().await.unwrap();
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let namespace = get(&server, &format!("{NAMESPACES}/{name}")).await;
        assert_eq!(namespace.ok(200)["status"]["phase"], "Active", "{name}");
    }
}

#[tokio::test]
async fn r3_13_create_in_a_terminating_namespace_is_403_forbidden() {
    let server = team_namespace().await;
    delete(&server, &format!("{NAMESPACES}/team"), &Value::Null)
        .await
        .ok(200);
    let answer = post(&server, TEAM_CONFIGMAPS, &configmap("late", &json!({}))).await;
    answer.assert_status(403, "Forbidden");
    answer.assert_message_contains("is being terminated");
}

#[tokio::test]
async fn r3_14_deleting_a_namespace_deletes_its_objects_then_itself() {
    let server = team_namespace().await;
    let path = format!("{NAMESPACES}/team");
    delete(&server, &path, &Value::Null).await.ok(200);
    let terminating = get(&server, &path).await;
    assert_eq!(terminating.body["status"]["phase"], "Terminating");
    assert!(terminating.body["metadata"]["deletionTimestamp"].is_string());
    eventually(
        "the plain object is deleted and the held one marked",
        || async {
            get(&server, &format!("{TEAM_CONFIGMAPS}/plain")).await.code == 404
            && get(&server, &format!("{TEAM_CONFIGMAPS}/held")).await.body["metadata"]
                ["deletionTimestamp"]
                .is_string()
        },
    )
    .await;
    assert_eq!(
        get(&server, &path).await.code,
        200,
        "finalizers still block"
    );
    drop_finalizers(&server, &format!("{TEAM_CONFIGMAPS}/held")).await;
    eventually("the namespace goes", || async {
        get(&server, &path).await.code == 404
    })
    .await;
}

/// Upstream: the namespace controller (kubernetes/pkg/controller/namespace/deletion)
/// writes five conditions on a terminating namespace; NamespaceContentRemaining and
/// NamespaceFinalizersRemaining say what holds it.
#[tokio::test]
async fn r3_33_a_stuck_namespace_names_its_remaining_content_and_finalizers() {
    let server = team_namespace().await;
    delete(&server, &format!("{NAMESPACES}/team"), &Value::Null)
        .await
        .ok(200);
    let condition = |namespace: &Value, kind: &str| {
        namespace["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == kind).cloned())
            .unwrap_or(Value::Null)
    };
    eventually("the namespace says what holds it", || async {
        let namespace = get(&server, &format!("{NAMESPACES}/team")).await.body;
        condition(&namespace, "NamespaceFinalizersRemaining")["status"] == "True"
    })
    .await;
    let namespace = get(&server, &format!("{NAMESPACES}/team")).await.body;
    assert_eq!(namespace["status"]["phase"], "Terminating");
    assert_eq!(
        namespace["status"]["conditions"].as_array().unwrap().len(),
        5
    );
    let content = condition(&namespace, "NamespaceContentRemaining");
    assert_eq!(
        (
            content["status"].as_str(),
            content["reason"].as_str(),
            content["message"].as_str()
        ),
        (
            Some("True"),
            Some("SomeResourcesRemain"),
            Some("Some resources are remaining: configmaps has 1 resource instances")
        )
    );
    let finalizers = condition(&namespace, "NamespaceFinalizersRemaining");
    assert_eq!(finalizers["reason"], "SomeFinalizersRemain");
    assert_eq!(
        finalizers["message"],
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances"
    );
    assert_eq!(
        condition(&namespace, "NamespaceDeletionDiscoveryFailure")["status"],
        "False"
    );
    drop_finalizers(&server, &format!("{TEAM_CONFIGMAPS}/held")).await;
    eventually("the namespace goes once its content has", || async {
        get(&server, &format!("{NAMESPACES}/team")).await.code == 404
    })
    .await;
}
