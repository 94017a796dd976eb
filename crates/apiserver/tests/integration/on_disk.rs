//! What the server leaves on disk (issue 10 item 10): its data directory and files are
//! its user's only, and a deleted Secret's data is gone from the write-ahead log and the
//! snapshot by the time the delete is answered.

use std::path::Path;

use apiserver::testing::TestServer;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

/// Every file of `dir` whose bytes contain `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.is_file())
        .filter(|path| {
            let bytes = std::fs::read(path).unwrap();
            bytes
                .windows(needle.len())
                .any(|window| window == needle.as_bytes())
        })
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn secret(name: &str, token: &str) -> Secret {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "stringData": {"token": token},
    }))
    .unwrap()
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": name}})).unwrap()
}

fn base64_of(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[tokio::test]
async fn a_deleted_secret_leaves_the_log_and_the_snapshot_before_the_delete_is_answered() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("state");
    // Snapshots every 3 writes: the Secret gets into snapshot.jsonl, then into the log again.
    let server = TestServer::builder()
        .data_dir(&dir)
        .compact_every(3)
        .start()
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::default_namespaced(server.client());
    let configmaps: Api<ConfigMap> = Api::default_namespaced(server.client());
    let first = base64_of("join-token-first-4d1c7e");
    let second = base64_of("join-token-second-93b0aa");
    let pp = PostParams::default();
    secrets
        .create(&pp, &secret("join", "join-token-first-4d1c7e"))
        .await
        .unwrap();
    configmaps.create(&pp, &config_map("a")).await.unwrap();
    configmaps.create(&pp, &config_map("b")).await.unwrap();
    secrets
        .create(&pp, &secret("other", "join-token-second-93b0aa"))
        .await
        .unwrap();
    // The test means something only if both files hold a token first.
    assert_eq!(files_holding(&dir, &first), ["snapshot.jsonl"]);
    assert_eq!(files_holding(&dir, &second), ["wal.log"]);

    secrets
        .delete("join", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        files_holding(&dir, &first).is_empty(),
        "{:?}",
        files_holding(&dir, &first)
    );
    secrets
        .delete("other", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        files_holding(&dir, &second).is_empty(),
        "{:?}",
        files_holding(&dir, &second)
    );

    // Everything else is still there after a restart.
    drop(server);
    let server = TestServer::builder().data_dir(&dir).start().await.unwrap();
    let configmaps: Api<ConfigMap> = Api::default_namespaced(server.client());
    let secrets: Api<Secret> = Api::default_namespaced(server.client());
    assert!(configmaps.get_opt("a").await.unwrap().is_some());
    assert!(configmaps.get_opt("b").await.unwrap().is_some());
    assert!(secrets.get_opt("join").await.unwrap().is_none());
}

#[tokio::test]
async fn replacing_a_secrets_data_erases_the_old_data() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("state");
    let server = TestServer::builder().data_dir(&dir).start().await.unwrap();
    let secrets: Api<Secret> = Api::default_namespaced(server.client());
    let old = base64_of("rotated-away-7f3e21");
    let created = secrets
        .create(
            &PostParams::default(),
            &secret("rotating", "rotated-away-7f3e21"),
        )
        .await
        .unwrap();
    assert_eq!(files_holding(&dir, &old), ["wal.log"]);
    // A label change keeps the data: nothing to erase, the log stays as it is.
    let mut labelled = created.clone();
    labelled.metadata.labels = Some([("k".to_owned(), "v".to_owned())].into());
    let labelled = secrets
        .replace("rotating", &PostParams::default(), &labelled)
        .await
        .unwrap();
    assert_eq!(files_holding(&dir, &old), ["wal.log"]);
    let mut rotated = labelled;
    rotated.data = None;
    rotated.string_data = Some([("token".to_owned(), "the-new-one-0c55d2".to_owned())].into());
    secrets
        .replace("rotating", &PostParams::default(), &rotated)
        .await
        .unwrap();
    assert!(files_holding(&dir, &old).is_empty());
    assert_eq!(
        files_holding(&dir, &base64_of("the-new-one-0c55d2")),
        ["snapshot.jsonl"]
    );
}

#[cfg(unix)]
#[tokio::test]
async fn the_data_directory_and_everything_in_it_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("state");
    let server = TestServer::builder()
        .data_dir(&dir)
        .compact_every(1)
        .start()
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::default_namespaced(server.client());
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "c"}})).unwrap();
    configmaps.create(&Default::default(), &cm).await.unwrap();
    let mode =
        |path: &std::path::Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for name in ["wal.log", "snapshot.jsonl", "token", "ca.key", "ca.crt"] {
        assert!(
            files.iter().any(|f| f.ends_with(name)),
            "{name} missing in {files:?}"
        );
    }
    for file in files {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
    }
}
