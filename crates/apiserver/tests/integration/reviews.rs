//! The permission-check APIs (issue 15 item 6), as kube-apiserver 1.32 answers them:
//! created (201) and answered from the server's own authentication, never stored,
//! validated as upstream validates them, and listed in discovery with the verb `create`.

use apiserver::testing::{TestServer, send};
use serde_json::{Value, json};

async fn post(server: &TestServer, path: &str, body: &Value) -> (u16, Value) {
    let request = http::Request::builder()
        .method("POST")
        .uri(path)
        .header("Content-Type", "application/json")
        .body(serde_json::to_vec(body).unwrap())
        .unwrap();
    send(server.config(), request).await
}

const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const SAR: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

#[tokio::test]
async fn a_self_subject_access_review_is_allowed_and_echoes_its_spec() {
    let server = TestServer::start().await.unwrap();
    let spec = json!({"resourceAttributes": {
        "namespace": "default", "verb": "delete", "resource": "secrets", "name": "s",
    }});
    let (code, review) = post(
        &server,
        SSAR,
        &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": spec}),
    )
    .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(review["kind"], "SelfSubjectAccessReview");
    assert_eq!(review["apiVersion"], "authorization.k8s.io/v1");
    assert_eq!(review["spec"], spec);
    assert_eq!(review["status"]["allowed"], true);
    assert!(review["status"].get("denied").is_none());
    // Non-resource URLs too.
    let (code, review) = post(
        &server,
        SSAR,
        &json!({"spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}}}),
    )
    .await;
    assert_eq!((code, &review["status"]["allowed"]), (201, &json!(true)));
    // Nothing is stored: there is nothing to read back.
    let request = http::Request::get(SSAR).body(Vec::new()).unwrap();
    let (code, status) = send(server.config(), request).await;
    assert_eq!(
        (code, status["reason"].as_str()),
        (405, Some("MethodNotAllowed"))
    );
}

#[tokio::test]
async fn invalid_reviews_are_422_as_upstream_validates_them() {
    let server = TestServer::start().await.unwrap();
    for (path, body, field) in [
        (SSAR, json!({"spec": {}}), "spec.resourceAttributes"),
        (
            SSAR,
            json!({"spec": {"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/", "verb": "get"}}}),
            "spec.nonResourceAttributes",
        ),
        (
            SSAR,
            json!({"metadata": {"name": "named"}, "spec": {"resourceAttributes": {"verb": "get"}}}),
            "metadata",
        ),
        (
            SAR,
            json!({"spec": {"resourceAttributes": {"verb": "get"}}}),
            "spec.user",
        ),
        (
            "/apis/authorization.k8s.io/v1/namespaces/team/localsubjectaccessreviews",
            json!({"spec": {"user": "u", "resourceAttributes": {"namespace": "other", "verb": "get"}}}),
            "spec.resourceAttributes.namespace",
        ),
    ] {
        let (code, status) = post(&server, path, &body).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (422, Some("Invalid")),
            "{body}: {status}"
        );
        assert_eq!(status["details"]["causes"][0]["field"], field, "{status}");
    }
    let (code, status) = post(
        &server,
        SSAR,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "spec": {}}),
    )
    .await;
    assert_eq!(code, 400, "{status}");
}

#[tokio::test]
async fn a_subject_access_review_allows_the_token_holder_and_no_one_else() {
    let server = TestServer::start().await.unwrap();
    let attributes = json!({"resourceAttributes": {"verb": "list", "resource": "pods"}});
    let ask = |who: Value| {
        let mut spec = attributes.clone();
        spec.as_object_mut()
            .unwrap()
            .extend(who.as_object().unwrap().clone());
        json!({"spec": spec})
    };
    for (who, allowed) in [
        (json!({"user": "embedded-admin"}), true),
        (
            json!({"user": "someone", "groups": ["system:masters"]}),
            true,
        ),
        (
            json!({"user": "someone", "groups": ["system:authenticated"]}),
            false,
        ),
    ] {
        let (code, review) = post(&server, SAR, &ask(who.clone())).await;
        assert_eq!(code, 201, "{review}");
        assert_eq!(review["status"]["allowed"], allowed, "{who}");
    }
    let (code, review) = post(
        &server,
        "/apis/authorization.k8s.io/v1/namespaces/team/localsubjectaccessreviews",
        &json!({"spec": {"user": "embedded-admin", "resourceAttributes": {"namespace": "team", "verb": "get", "resource": "secrets"}}}),
    )
    .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(review["metadata"]["namespace"], "team");
    assert_eq!(review["status"]["allowed"], true);
}

#[tokio::test]
async fn self_subject_rules_and_self_subject_reviews_describe_the_token_holder() {
    let server = TestServer::start().await.unwrap();
    let (code, review) = post(
        &server,
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        &json!({"spec": {"namespace": "default"}}),
    )
    .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(
        review["status"]["resourceRules"],
        json!([{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}])
    );
    assert_eq!(review["status"]["incomplete"], false);
    let (code, review) = post(
        &server,
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await;
    assert_eq!(code, 201, "{review}");
    assert_eq!(
        review["status"]["userInfo"],
        json!({"username": "embedded-admin", "groups": ["system:masters", "system:authenticated"]})
    );
    assert!(review["metadata"]["creationTimestamp"].is_string());
}

#[tokio::test]
async fn discovery_lists_the_review_kinds_with_the_verb_create_only() {
    let server = TestServer::start().await.unwrap();
    for (group_version, names) in [
        (
            "authorization.k8s.io/v1",
            &[
                "localsubjectaccessreviews",
                "selfsubjectaccessreviews",
                "selfsubjectrulesreviews",
                "subjectaccessreviews",
            ][..],
        ),
        ("authentication.k8s.io/v1", &["selfsubjectreviews"][..]),
    ] {
        let request = http::Request::get(format!("/apis/{group_version}"))
            .body(Vec::new())
            .unwrap();
        let (code, list) = send(server.config(), request).await;
        assert_eq!(code, 200);
        let listed: Vec<&str> = list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                assert_eq!(r["verbs"], json!(["create"]), "{r}");
                r["name"].as_str().unwrap()
            })
            .collect();
        assert_eq!(listed, names);
    }
}

#[tokio::test]
async fn impersonation_is_refused_rather_than_ignored() {
    let server = TestServer::start().await.unwrap();
    let request = http::Request::get("/api/v1/namespaces/default/secrets")
        .header("Impersonate-User", "bob")
        .body(Vec::new())
        .unwrap();
    let (code, status) = send(server.config(), request).await;
    assert_eq!((code, status["reason"].as_str()), (403, Some("Forbidden")));
}
