//! The manager's client to the API server (`manager::api_client`): HTTP/2
//! where the server offers it, and a watch nobody reads never holds up the
//! connection everything else rides on.

use std::time::Duration;

use apiserver::testing::TestServer;
use futures::future::join_all;
use http::{Request, Version};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use kube::client::Body;
use manager::api_client::api_client;
use serde_json::json;

/// The HTTP version `client` answers `GET /version` with.
async fn version_of(client: &kube::Client) -> Version {
    let request = Request::get("/version").body(Body::empty()).unwrap();
    let response = client.send(request).await.unwrap();
    assert_eq!(response.status(), 200);
    response.version()
}

#[tokio::test]
async fn speaks_http2_where_the_server_offers_it_and_http1_over_plain_http() {
    let tls = TestServer::start().await.unwrap();
    assert_eq!(
        version_of(&api_client(tls.config()).unwrap()).await,
        Version::HTTP_2
    );
    // What kube's own builder speaks to the same server: the reason for ours.
    assert_eq!(version_of(&tls.client()).await, Version::HTTP_11);

    let plain = TestServer::builder().plain_http().start().await.unwrap();
    assert_eq!(
        version_of(&api_client(plain.config()).unwrap()).await,
        Version::HTTP_11
    );
}

/// Three watches stop being read, as a watch does whose subscribers lag,
/// and their events pile up: more than hyper's default connection window (5
/// MiB) in all, less than a stream window each. Requests on the same
/// connection must still be answered.
#[tokio::test]
async fn watches_nobody_reads_do_not_stall_the_connection() {
    const WATCHES: usize = 3;
    const CONFIG_MAPS: usize = 300;
    // 300 ConfigMaps of 8 KiB: about 2.4 MiB of events a watch, 7.2 in all.
    let payload = "x".repeat(8 * 1024);

    let server = TestServer::start().await.unwrap();
    let client = api_client(server.config()).unwrap();
    assert_eq!(version_of(&client).await, Version::HTTP_2);
    let mut unread = Vec::new();
    for _ in 0..WATCHES {
        let watch = Request::get("/api/v1/namespaces/default/configmaps?watch=true")
            .body(Body::empty())
            .unwrap();
        let response = client.send(watch).await.unwrap();
        assert_eq!(response.status(), 200);
        unread.push(response);
    }

    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let creates = (0..CONFIG_MAPS).map(|i| {
        let config_maps = config_maps.clone();
        let config_map: ConfigMap = serde_json::from_value(json!({
            "metadata": { "name": format!("filler-{i}") },
            "data": { "filler": payload },
        }))
        .unwrap();
        async move {
            config_maps
                .create(&PostParams::default(), &config_map)
                .await
                .unwrap();
        }
    });
    // A stalled connection never answers: the bound only turns a hang into a failure.
    tokio::time::timeout(Duration::from_secs(120), join_all(creates))
        .await
        .expect("creates on the connection of the unread watches are answered");
    let listed = tokio::time::timeout(
        Duration::from_secs(60),
        config_maps.list(&Default::default()),
    )
    .await
    .expect("a list on the same connection is answered")
    .unwrap();
    assert_eq!(listed.items.len(), CONFIG_MAPS);
    drop(unread);
}

/// A kubeconfig whose credentials come from an exec plugin keeps kube's own
/// client (which dates the client by an exec certificate's expiry), over
/// HTTP/1.1, and still reaches the server.
#[tokio::test]
async fn an_exec_plugin_keeps_kubes_own_client_and_connects() {
    let server = TestServer::start().await.unwrap();
    let credential = json!({
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": { "token": server.token() },
    });
    let mut config = server.config();
    config.auth_info.token = None;
    config.auth_info.exec = Some(
        serde_json::from_value(json!({
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "sh",
            "args": ["-c", format!("printf '%s' '{credential}'")],
        }))
        .unwrap(),
    );
    let client = api_client(config).unwrap();
    assert_eq!(version_of(&client).await, Version::HTTP_11);
    let config_maps: Api<ConfigMap> = Api::namespaced(client, "default");
    config_maps.list(&Default::default()).await.unwrap();
}
