//! Who the server says a client is and what it may do (issue 15, item 6), and how a client
//! reaches it (item 7): the review APIs `kubectl auth can-i|whoami` post, and HTTPS with
//! the CA in the kubeconfig.

use apiserver::testing::TestServer;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::kit::{get, post};

const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

/// Upstream (1.32): the review registries create (201) and never store; a
/// SelfSubjectAccessReview is answered by the authorizer for the requesting user
/// (k8s.io/kubernetes/pkg/registry/authorization/selfsubjectaccessreview/rest.go), a
/// SubjectAccessReview for the named user or groups (subjectaccessreview/rest.go), and a
/// SelfSubjectReview echoes the authenticated user (pkg/registry/authentication/
/// selfsubjectreview/rest.go). `kubectl auth can-i` answers "yes" from the first and
/// `kubectl auth whoami` prints the last. Here the token holder is `embedded-admin` in
/// `system:masters`, who may do everything; nobody else can authenticate.
#[tokio::test]
async fn r4_18_permission_checks_are_answered_from_the_servers_own_authentication() {
    let server = TestServer::start().await.unwrap();
    let can_i = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "create",
            "group": "apps", "resource": "deployments"}}});
    let answer = post(&server, SSAR, &can_i).await;
    let review = answer.ok(201);
    assert_eq!(review["kind"], "SelfSubjectAccessReview");
    assert_eq!(review["spec"], can_i["spec"]);
    assert_eq!(review["status"]["allowed"], true, "{review}");
    // Created, not stored: there is no collection to read.
    assert_eq!(get(&server, SSAR).await.code, 405);

    let someone_else = json!({"spec": {"user": "alice", "groups": ["system:authenticated"],
        "resourceAttributes": {"verb": "get", "resource": "secrets"}}});
    let answer = post(
        &server,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        &someone_else,
    )
    .await;
    assert_eq!(
        answer.ok(201)["status"]["allowed"],
        false,
        "{}",
        answer.body
    );

    let answer = post(
        &server,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await;
    let user = &answer.ok(201)["status"]["userInfo"];
    assert_eq!(user["username"], "embedded-admin", "{user}");
    assert!(
        user["groups"]
            .as_array()
            .unwrap()
            .contains(&json!("system:masters")),
        "{user}"
    );

    let invalid = post(&server, SSAR, &json!({"spec": {}})).await;
    invalid.assert_status(422, "Invalid");
}

/// Upstream: kube-apiserver serves HTTPS only (the insecure port went in 1.20; k8s.io/
/// apiserver/pkg/server/options/serving.go `SecureServingOptions`) and a client verifies it
/// against the kubeconfig's `certificate-authority-data`; @kubernetes/client-node refuses
/// an `http://` server unless told to skip verification.
#[tokio::test]
async fn r4_19_the_server_speaks_https_and_its_kubeconfig_carries_the_ca() {
    let server = TestServer::start().await.unwrap();
    assert!(server.url().starts_with("https://"), "{}", server.url());
    let text = std::fs::read_to_string(server.kubeconfig_path()).unwrap();
    let kubeconfig: Value = serde_yaml::from_str(&text).unwrap();
    let cluster = &kubeconfig["clusters"][0]["cluster"];
    assert_eq!(cluster["server"], server.url());
    assert!(
        cluster["certificate-authority-data"].is_string(),
        "{cluster}"
    );
    assert!(
        cluster.get("insecure-skip-tls-verify").is_none(),
        "{cluster}"
    );

    // A client built from the kubeconfig alone verifies the server and works.
    let read = kube::config::Kubeconfig::read_from(server.kubeconfig_path()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(read, &Default::default())
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(kube::Client::try_from(config).unwrap());
    assert!(namespaces.get_opt("default").await.unwrap().is_some());

    // Plain HTTP to the same port gets no API answer.
    let mut plain = server.config();
    plain.cluster_url = server.url().replace("https://", "http://").parse().unwrap();
    let namespaces: Api<Namespace> = Api::all(kube::Client::try_from(plain).unwrap());
    let error = namespaces.list(&ListParams::default()).await.unwrap_err();
    assert!(!matches!(error, kube::Error::Api(_)), "{error}");
}
