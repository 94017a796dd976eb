//! The real `kubectl` (1.32) asking what it may do and who it is (issue 15 item 6):
//! `auth can-i` (SelfSubjectAccessReview and SelfSubjectRulesReview, sent as protobuf)
//! and `auth whoami` (SelfSubjectReview) answer from the server's token, and `--as`
//! (impersonation) is refused instead of silently acting as the token holder.

use crate::support;

use apiserver::testing::TestServer;
use support::kubectl::{kubectl, kubectl_fails, kubectl_ok, kubectl_required};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_can_i_says_yes_to_the_token_holder() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.unwrap();
    for args in [
        &["auth", "can-i", "create", "pods"][..],
        &["auth", "can-i", "delete", "secrets", "-n", "kube-system"][..],
        &["auth", "can-i", "*", "*"][..],
        &["auth", "can-i", "get", "/healthz"][..],
    ] {
        assert_eq!(kubectl_ok(&server, args).trim(), "yes", "{args:?}");
    }
    let rules = kubectl_ok(&server, &["auth", "can-i", "--list"]);
    let first_row = rules.lines().nth(1).unwrap_or_default();
    assert!(
        first_row.starts_with("*.*") && first_row.trim_end().ends_with("[*]"),
        "{rules}"
    );
    // With another token nothing is answered at all. (Without any credentials kubectl
    // prompts for a user name instead of asking.)
    let anonymous = server.kubeconfig_path().with_file_name("wrong-token");
    let text = std::fs::read_to_string(server.kubeconfig_path()).unwrap();
    let mut kubeconfig: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    kubeconfig["users"][0]["user"] = serde_json::json!({"token": "not-the-token-of-this-server"});
    std::fs::write(&anonymous, serde_yaml::to_string(&kubeconfig).unwrap()).unwrap();
    let output = support::kubectl::kubectl_at(&anonymous, &["auth", "can-i", "get", "pods"], None);
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        said.contains("You must be logged in to the server (Unauthorized)"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_whoami_names_the_token_holder() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.unwrap();
    let out = kubectl_ok(&server, &["auth", "whoami"]);
    assert!(
        out.contains("Username") && out.contains("embedded-admin"),
        "{out}"
    );
    assert!(
        out.contains("[system:masters system:authenticated]"),
        "{out}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&kubectl_ok(&server, &["auth", "whoami", "-o", "json"])).unwrap();
    assert_eq!(json["kind"], "SelfSubjectReview");
    assert_eq!(json["status"]["userInfo"]["username"], "embedded-admin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_as_another_user_is_refused() {
    if !kubectl_required() {
        return;
    }
    let server = TestServer::start().await.unwrap();
    // (kubectl prints discovery's 403 as "Forbidden: unknown"; the Status says why.)
    let said = kubectl_fails(&server, &["get", "secrets", "--as", "bob"]);
    assert!(said.contains("Error from server (Forbidden)"), "{said}");
    // And a plain request still works.
    assert!(kubectl(&server, &["get", "secrets"]).status.success());
}
