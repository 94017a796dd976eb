//! Who may use the server (issue 10 item 10, issue 15 item 7): the holder of its token,
//! over HTTPS with its own CA, through a loopback `Host`, with a declared body format.
//! (What it leaves on disk: `on_disk.rs`.)

use apiserver::testing::TestServer;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams};
use serde_json::Value;
use testkit::ListAll;

/// Sends one request with exactly these headers (plus what `config` adds: the token
/// unless removed) and returns the status code and the JSON body.
async fn send(
    config: kube::Config,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Value) {
    let mut request = http::Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    apiserver::testing::send(config, request.body(body.to_vec()).unwrap()).await
}

/// A GET of `path` with this `Host`.
async fn get_from_host(config: kube::Config, path: &str, host: &str) -> (u16, Value) {
    send(config, "GET", path, &[("Host", host)], b"").await
}

fn without_token(server: &TestServer) -> kube::Config {
    let mut config = server.config();
    config.auth_info.token = None;
    config
}

fn with_token(server: &TestServer, token: &str) -> kube::Config {
    let mut config = server.config();
    config.auth_info.token = Some(token.to_owned().into());
    config
}

#[tokio::test]
async fn requests_without_the_token_get_401_with_the_status_kube_apiserver_sends() {
    let server = TestServer::start().await.unwrap();
    let secrets = "/api/v1/namespaces/default/secrets";
    let wrong = format!("{}x", server.token());
    for config in [without_token(&server), with_token(&server, &wrong)] {
        for (method, path) in [
            ("GET", secrets),
            ("GET", "/api"),
            ("GET", "/apis"),
            ("GET", "/openapi/v3"),
            ("DELETE", "/api/v1/namespaces/default"),
        ] {
            let (code, status) = send(config.clone(), method, path, &[], b"").await;
            assert_eq!(code, 401, "{method} {path}");
            assert_eq!(
                status,
                serde_json::json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
                }),
                "{method} {path}"
            );
        }
    }
    // Nothing was deleted, and the token holder reads everything.
    let namespaces: Api<Namespace> = Api::all(server.client());
    assert!(namespaces.get_opt("default").await.unwrap().is_some());
    let (code, _) = send(server.config(), "GET", secrets, &[], b"").await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn health_and_version_answer_anyone_but_a_wrong_token_is_still_401() {
    let server = TestServer::start().await.unwrap();
    for path in ["/healthz", "/livez", "/readyz", "/readyz/ping", "/version"] {
        let anonymous = send(without_token(&server), "GET", path, &[], b"").await;
        assert_eq!(anonymous.0, 200, "{path}");
        let wrong = with_token(&server, "not-the-token-at-all");
        assert_eq!(send(wrong, "GET", path, &[], b"").await.0, 401, "{path}");
    }
}

#[tokio::test]
async fn a_host_that_is_not_loopback_is_refused_before_anything_else() {
    let server = TestServer::start().await.unwrap();
    let port = server.authority().rsplit_once(':').unwrap().1.to_owned();
    for host in ["evil.example", "127.0.0.1.nip.io", "localhost.evil.example"] {
        let host = format!("{host}:{port}");
        let (code, status) = get_from_host(server.config(), "/api/v1/namespaces", &host).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (403, Some("Forbidden")),
            "{host}"
        );
        // Even public paths: a rebinding page must learn nothing.
        let (code, _) = get_from_host(without_token(&server), "/version", &host).await;
        assert_eq!(code, 403, "{host}");
    }
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let (code, _) = get_from_host(server.config(), "/api/v1/namespaces", &host).await;
        assert_eq!(code, 200, "{host}");
    }
}

#[tokio::test]
async fn a_body_without_content_type_is_415_and_changes_nothing() {
    let server = TestServer::start().await.unwrap();
    let cms = "/api/v1/namespaces/default/configmaps";
    let body = br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"untyped"}}"#;
    for (method, path) in [
        ("POST", cms.to_owned()),
        ("PUT", format!("{cms}/untyped")),
        ("PATCH", format!("{cms}/untyped")),
    ] {
        let (code, status) = send(server.config(), method, &path, &[], body).await;
        assert_eq!(
            (code, status["reason"].as_str()),
            (415, Some("UnsupportedMediaType")),
            "{method}"
        );
    }
    let (code, _) = send(server.config(), "POST", cms, &[], b"").await;
    assert_eq!(code, 415, "an empty POST without Content-Type");
    // A delete with a body must say what the body is, too.
    let (code, _) = send(
        server.config(),
        "DELETE",
        &format!("{cms}/untyped"),
        &[],
        b"{}",
    )
    .await;
    assert_eq!(code, 415);
    let configmaps: Api<ConfigMap> = Api::default_namespaced(server.client());
    assert!(configmaps.get_opt("untyped").await.unwrap().is_none());
    let (code, _) = send(
        server.config(),
        "POST",
        cms,
        &[("Content-Type", "application/json")],
        body,
    )
    .await;
    assert_eq!(code, 201);
    // A body-less DELETE needs none.
    let (code, _) = send(
        server.config(),
        "DELETE",
        &format!("{cms}/untyped"),
        &[],
        b"",
    )
    .await;
    assert_eq!(code, 200);
}

#[tokio::test]
async fn the_kubeconfig_is_private_and_names_the_https_url_the_ca_and_the_token() {
    let server = TestServer::start().await.unwrap();
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(server.kubeconfig_path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let text = std::fs::read_to_string(server.kubeconfig_path()).unwrap();
    let document: Value = serde_yaml::from_str(&text).unwrap();
    assert_eq!(document["clusters"][0]["cluster"]["server"], server.url());
    assert_eq!(document["users"][0]["user"]["token"], server.token());
    let ca = document["clusters"][0]["cluster"]["certificate-authority-data"]
        .as_str()
        .unwrap();
    use base64::Engine;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(ca)
        .unwrap();
    assert_eq!(std::str::from_utf8(&pem).unwrap(), server.ca_pem().unwrap());
    // kube reads it as a user's program would, and the client works.
    let kubeconfig = kube::config::Kubeconfig::read_from(server.kubeconfig_path()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    let namespaces: Api<Namespace> = Api::all(kube::Client::try_from(config).unwrap());
    assert!(!namespaces.list_all().await.is_empty());
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_ca_cannot_connect() {
    let server = TestServer::start().await.unwrap();
    let other = TestServer::start().await.unwrap();
    let mut config = server.config();
    config.root_cert = other.config().root_cert;
    let namespaces: Api<Namespace> = Api::all(kube::Client::try_from(config).unwrap());
    let error = namespaces.list(&ListParams::default()).await.unwrap_err();
    assert!(!matches!(error, kube::Error::Api(_)), "{error}");
}

#[tokio::test]
async fn plain_http_is_served_only_when_asked_and_still_needs_the_token() {
    let server = TestServer::builder().plain_http().start().await.unwrap();
    assert!(server.url().starts_with("http://"), "{}", server.url());
    assert!(server.ca_pem().is_none());
    let namespaces: Api<Namespace> = Api::all(server.client());
    assert!(namespaces.get_opt("default").await.unwrap().is_some());
    let (code, _) = send(
        without_token(&server),
        "GET",
        "/api/v1/namespaces",
        &[],
        b"",
    )
    .await;
    assert_eq!(code, 401);

    // An HTTPS server does not answer plain HTTP.
    let tls = TestServer::start().await.unwrap();
    let mut config = tls.config();
    config.cluster_url = tls.url().replace("https://", "http://").parse().unwrap();
    let namespaces: Api<Namespace> = Api::all(kube::Client::try_from(config).unwrap());
    assert!(namespaces.get_opt("default").await.is_err());
}
