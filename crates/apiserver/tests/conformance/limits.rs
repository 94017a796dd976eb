//! The smaller differences of issue 15, item 8: name and annotation limits, paged lists'
//! `remainingItemCount`, a watch from before a CRD existed, verbose health checks.

use apiserver::testing::TestServer;
use serde_json::json;

use crate::kit::{
    CONFIGMAPS, RawWatch, WIDGETS, configmap, create_configmap, get, install_widgets, post,
};

/// Upstream `IsDNS1123Subdomain` (k8s.io/apimachinery/pkg/util/validation/validation.go)
/// limits the whole name to 253 characters and has no limit per dot-separated part;
/// namespaces are `IsDNS1123Label` (63), Services `IsDNS1035Label` (a letter first). Each
/// problem is one cause on `metadata.name`.
#[tokio::test]
async fn r2_20_names_follow_the_kinds_dns_rules_with_upstreams_messages() {
    let server = TestServer::start().await.unwrap();
    let long = "a".repeat(253);
    post(&server, CONFIGMAPS, &configmap(&long, &json!({})))
        .await
        .ok(201);
    let answer = post(
        &server,
        CONFIGMAPS,
        &configmap(&"a".repeat(254), &json!({})),
    )
    .await;
    answer.assert_status(422, "Invalid");
    let causes = answer.body["details"]["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(causes[0]["field"], "metadata.name");
    assert!(
        causes[0]["message"]
            .as_str()
            .unwrap()
            .ends_with(": must be no more than 253 characters"),
        "{causes:?}"
    );
    let answer = post(&server, CONFIGMAPS, &configmap("Upper", &json!({}))).await;
    answer.assert_status(422, "Invalid");
    assert!(
        answer.body["details"]["causes"][0]["message"]
            .as_str()
            .unwrap()
            .contains("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
        "{}",
        answer.body
    );
    let namespace = json!({"metadata": {"name": "n".repeat(64)}});
    let answer = post(&server, "/api/v1/namespaces", &namespace).await;
    answer.assert_status(422, "Invalid");
    answer.assert_message_contains("must be no more than 63 characters");
    let service = json!({"metadata": {"name": "1web"}, "spec": {"ports": [{"port": 80}]}});
    let answer = post(&server, "/api/v1/namespaces/default/services", &service).await;
    answer.assert_status(422, "Invalid");
    answer.assert_message_contains("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character");
}

/// Upstream `ValidateAnnotationsSize` (k8s.io/apimachinery/pkg/api/validation/objectmeta.go):
/// keys and values together at most `TotalAnnotationSizeLimitB` (256 KiB), else
/// `field.TooLong(metadata.annotations)`.
#[tokio::test]
async fn r3_32_annotations_together_are_at_most_256_kib() {
    let server = TestServer::start().await.unwrap();
    let mut fits = configmap("fits", &json!({}));
    fits["metadata"]["annotations"] = json!({"a": "x".repeat(256 * 1024 - 1)});
    post(&server, CONFIGMAPS, &fits).await.ok(201);
    let mut big = configmap("big", &json!({}));
    big["metadata"]["annotations"] = json!({"a": "x".repeat(1024 * 1024)});
    let answer = post(&server, CONFIGMAPS, &big).await;
    answer.assert_status(422, "Invalid");
    assert_eq!(
        answer.body["details"]["causes"][0],
        json!({"reason": "FieldValueTooLong", "field": "metadata.annotations",
            "message": "Too long: may not be more than 262144 bytes"})
    );
}

/// Upstream (k8s.io/apiserver/pkg/storage/etcd3/store.go `GetList`): a page that has more
/// after it says how many in `metadata.remainingItemCount`, unless a selector filters the
/// list (the count would need the filtering).
#[tokio::test]
async fn r1_14_a_paged_list_says_how_many_items_remain() {
    let server = TestServer::start().await.unwrap();
    for name in ["a", "b", "c", "d", "e"] {
        create_configmap(&server, name, &json!({"tier": "x"})).await;
    }
    let first = get(&server, &format!("{CONFIGMAPS}?limit=2")).await;
    assert_eq!(first.ok(200)["metadata"]["remainingItemCount"], 3);
    let token = first.body["metadata"]["continue"].as_str().unwrap();
    let second = get(&server, &format!("{CONFIGMAPS}?limit=2&continue={token}")).await;
    assert_eq!(second.ok(200)["metadata"]["remainingItemCount"], 1);
    let token = second.body["metadata"]["continue"].as_str().unwrap();
    let last = get(&server, &format!("{CONFIGMAPS}?limit=2&continue={token}")).await;
    assert!(last.ok(200)["metadata"].get("remainingItemCount").is_none());
    let selected = get(
        &server,
        &format!("{CONFIGMAPS}?limit=2&labelSelector=tier%3Dx"),
    )
    .await;
    assert!(selected.ok(200)["metadata"]["continue"].is_string());
    assert!(
        selected.body["metadata"]
            .get("remainingItemCount")
            .is_none()
    );
}

/// Upstream: a new CRD's watch cache starts at the resourceVersion it was created at
/// (k8s.io/apiextensions-apiserver crdHandler makes new storage and a new cacher), so a
/// watch from an older resourceVersion is "too old resource version": 410 Expired (as an
/// ERROR event in a 200 stream).
#[tokio::test]
async fn r1_15_a_watch_from_before_a_crd_existed_is_410_expired() {
    let server = TestServer::start().await.unwrap();
    create_configmap(&server, "before", &json!({})).await;
    install_widgets(&server).await;
    let mut old = RawWatch::open(&server, &format!("{WIDGETS}?watch=true&resourceVersion=1")).await;
    assert_eq!(old.code, 200);
    let error = old.next().await.unwrap();
    assert_eq!(error["type"], "ERROR", "{error}");
    assert_eq!(error["object"]["code"], 410);
    assert_eq!(error["object"]["reason"], "Expired");
    assert!(old.next().await.is_none(), "then the watch closes");

    let rv = get(&server, WIDGETS).await.rv();
    let mut fresh = RawWatch::open(
        &server,
        &format!("{WIDGETS}?watch=true&resourceVersion={rv}"),
    )
    .await;
    crate::kit::create_widget(&server, "w", &json!({})).await;
    assert_eq!(fresh.next_change().await.unwrap()["type"], "ADDED");
    // Built-in kinds are served from the start: their old resourceVersions still replay.
    let mut builtin = RawWatch::open(
        &server,
        &format!("{CONFIGMAPS}?watch=true&resourceVersion=1"),
    )
    .await;
    assert_eq!(builtin.next_change().await.unwrap()["type"], "ADDED");
}

/// Upstream k8s.io/apiserver/pkg/server/healthz: `ok`, or with `?verbose` one `[+]<check> ok`
/// line per check and `<endpoint> check passed`; each check at `/<endpoint>/<check>`.
#[tokio::test]
async fn r4_17_health_endpoints_list_their_checks_when_verbose() {
    let server = TestServer::start().await.unwrap();
    let text = |path: &'static str| {
        let server = &server;
        async move {
            let request = http::Request::get(path).body(Vec::new()).unwrap();
            let response = server
                .client()
                .send(request.map(kube::client::Body::from))
                .await
                .unwrap();
            let code = response.status().as_u16();
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await
                .unwrap()
                .to_bytes();
            (code, String::from_utf8(body.to_vec()).unwrap())
        }
    };
    assert_eq!(text("/readyz").await, (200, "ok".to_string()));
    let (code, verbose) = text("/readyz?verbose").await;
    assert_eq!(code, 200);
    assert!(verbose.starts_with("[+]ping ok\n"), "{verbose}");
    assert!(verbose.contains("[+]shutdown ok\n"), "{verbose}");
    assert!(verbose.ends_with("readyz check passed\n"), "{verbose}");
    let (_, live) = text("/livez?verbose").await;
    assert!(
        live.ends_with("livez check passed\n") && !live.contains("shutdown"),
        "{live}"
    );
    assert_eq!(text("/readyz/ping").await, (200, "ok".to_string()));
    assert_eq!(text("/readyz/nothing").await.0, 404);
}

/// Upstream decodes boolean query parameters with Go's `strconv.ParseBool` (1, t, T, TRUE,
/// true, True and their false forms): the official Python client sends
/// `allowWatchBookmarks=True`.
#[tokio::test]
async fn r1_16_boolean_query_parameters_parse_as_go_does() {
    let server = TestServer::start().await.unwrap();
    let rv = get(&server, CONFIGMAPS).await.rv();
    for spelling in ["True", "t", "1", "TRUE"] {
        let watch = RawWatch::open(
            &server,
            &format!(
                "{CONFIGMAPS}?watch={spelling}&allowWatchBookmarks={spelling}&resourceVersion={rv}&timeoutSeconds=1"
            ),
        )
        .await;
        assert_eq!(watch.code, 200, "{spelling}");
    }
    let answer = get(&server, &format!("{CONFIGMAPS}?watch=yes")).await;
    answer.assert_status(400, "BadRequest");
}
