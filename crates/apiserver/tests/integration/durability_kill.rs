//! Durability under SIGKILL (issue 3): the standalone binary with `--data-dir` is killed
//! in the middle of a burst of creates from 4 concurrent clients and restarted on the
//! same directory. Every acknowledged create must be back with its resourceVersion,
//! new writes must get resourceVersions above every recovered one, and the server must
//! serve normally. The restarted server keeps its CA and token (both in the data
//! directory), so what a client trusted before the kill still holds after it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use parking_lot::Mutex;
use serde_json::json;
use testkit::ListAll;
use testkit::apiserver_process::ApiServerProcess;

const WRITERS: usize = 4;
const PER_WRITER: usize = 75;
/// Kill once this many creates are acknowledged: the middle of the burst.
const KILL_AFTER_ACKS: usize = WRITERS * PER_WRITER / 2;

/// A client built from the kubeconfig the server wrote, as a user's would be.
async fn client_of(server: &ApiServerProcess) -> kube::Client {
    let mut config = server.config().await;
    config.read_timeout = Some(Duration::from_secs(10));
    kube::Client::try_from(config).unwrap()
}

/// The kubeconfig's credentials: the CA and the token.
fn credentials(server: &ApiServerProcess) -> (Option<String>, Option<String>) {
    let text = std::fs::read_to_string(server.kubeconfig()).unwrap();
    let kubeconfig: serde_json::Value = serde_yaml::from_str(&text).unwrap();
    let field = |value: &serde_json::Value| value.as_str().map(str::to_owned);
    (
        field(&kubeconfig["clusters"][0]["cluster"]["certificate-authority-data"]),
        field(&kubeconfig["users"][0]["user"]["token"]),
    )
}

fn rv_number(cm: &ConfigMap) -> u64 {
    cm.metadata
        .resource_version
        .as_deref()
        .expect("resourceVersion")
        .parse()
        .expect("numeric resourceVersion")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_creates_survive_sigkill_and_versions_continue_upward() {
    let started = Instant::now();
    let data_dir = tempfile::tempdir().unwrap();
    let kubeconfigs = tempfile::tempdir().unwrap();
    let mut server = ApiServerProcess::start(
        Path::new(env!("CARGO_BIN_EXE_apiserver")),
        data_dir.path(),
        &kubeconfigs.path().join("kubeconfig"),
        &[],
    );
    let client = client_of(&server).await;

    // name -> resourceVersion of every create the server acknowledged.
    let acked: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let mut writers = Vec::new();
    for writer in 0..WRITERS {
        let api: Api<ConfigMap> = Api::default_namespaced(client.clone());
        let acked = Arc::clone(&acked);
        writers.push(tokio::spawn(async move {
            for i in 0..PER_WRITER {
                let name = format!("w{writer}-{i}");
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": name},
                    "data": {"payload": format!("{writer}/{i}")},
                }))
                .unwrap();
                match api.create(&PostParams::default(), &cm).await {
                    Ok(created) => {
                        acked.lock().insert(name, rv_number(&created));
                    }
                    // The server is gone: unacknowledged writes may or may not be there.
                    Err(_) => return,
                }
            }
        }));
    }
    let kill_deadline = Instant::now() + Duration::from_secs(10);
    while acked.lock().len() < KILL_AFTER_ACKS {
        assert!(
            Instant::now() < kill_deadline,
            "the burst never got halfway"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    server.kill();
    for writer in writers {
        writer.await.unwrap();
    }
    let acked = acked.lock().clone();
    assert!(
        acked.len() < WRITERS * PER_WRITER,
        "the kill landed after the burst ({} acknowledged): it proves nothing",
        acked.len()
    );

    let before = credentials(&server);
    std::fs::remove_file(server.kubeconfig()).unwrap();
    server.restart();
    assert_eq!(
        credentials(&server),
        before,
        "a restart changed the CA or the token"
    );
    assert!(before.0.is_some() && before.1.is_some());
    let api: Api<ConfigMap> = Api::default_namespaced(client_of(&server).await);
    let recovered: HashMap<String, u64> = api
        .list_all()
        .await
        .iter()
        .map(|cm| (cm.metadata.name.clone().unwrap(), rv_number(cm)))
        .collect();
    for (name, rv) in &acked {
        assert_eq!(
            recovered.get(name),
            Some(rv),
            "acknowledged {name} at rv {rv} not recovered as it was"
        );
    }
    let highest_recovered = recovered.values().copied().max().unwrap();

    // New writes continue upward, and the server serves the usual verbs.
    let fresh: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "after-restart"}})).unwrap();
    let created = api.create(&PostParams::default(), &fresh).await.unwrap();
    assert!(
        rv_number(&created) > highest_recovered,
        "rv {} after restart not above recovered {highest_recovered}",
        rv_number(&created)
    );
    let (some_name, _) = acked.iter().next().unwrap();
    let mut old = api.get(some_name).await.unwrap();
    old.data = Some([("payload".to_owned(), "updated".to_owned())].into());
    let replaced = api
        .replace(some_name, &PostParams::default(), &old)
        .await
        .unwrap();
    assert!(rv_number(&replaced) > rv_number(&created));
    api.delete("after-restart", &DeleteParams::default())
        .await
        .unwrap();
    let err = api.get("after-restart").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}
