//! The traps of APISERVER.md: behaviours that would let a controller pass here and fail
//! on a real cluster. Where a rule test already covers the raw answer, the trap test
//! takes the client's view (kube's `Api` and `watcher`) or another kind or verb.

use std::time::Duration;

use apiserver::testing::TestServer;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use serde_json::{Value, json};

use crate::kit::{
    APPLY, CONFIGMAPS, JSON_PATCH, MERGE, PATIENCE, RawWatch, STRATEGIC, WIDGETS, changes_until,
    configmap, create_configmap, create_widget, current_rv, delete, eventually, get, merge_patch,
    patch, post, put, type_and_name, widget, widget_server,
};
use crate::ssa::apply;

fn widgets_api(server: &TestServer) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("conformance.example.com", "v1", "Widget");
    Api::namespaced_with(
        server.client(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "widgets"),
    )
}

#[tokio::test]
async fn t01_status_labels_annotations_and_finalizers_leave_generation_alone() {
    let server = widget_server().await;
    let path = format!("{WIDGETS}/w");
    create_widget(&server, "w", &json!({"size": 1})).await;
    let writes = [
        (format!("{path}/status"), json!({"status": {"ready": true}})),
        (path.clone(), json!({"metadata": {"labels": {"a": "b"}}})),
        (
            path.clone(),
            json!({"metadata": {"annotations": {"c": "d"}}}),
        ),
        (
            path.clone(),
            json!({"metadata": {"finalizers": ["example.com/hold"]}}),
        ),
    ];
    let mut last_rv = 0;
    for (target, body) in writes {
        let answer = patch(&server, &target, MERGE, &body).await;
        assert_eq!(answer.ok(200)["metadata"]["generation"], 1, "{body}");
        assert!(answer.rv() > last_rv, "{body} is a write");
        last_rv = answer.rv();
    }
}

#[tokio::test]
async fn t02_no_op_writes_of_every_verb_bump_nothing_and_emit_nothing() {
    let server = TestServer::start().await.unwrap();
    create_configmap(&server, "a", &json!({"x": "1"})).await;
    let path = format!("{CONFIGMAPS}/a");
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}});
    let apply_path = format!("{path}?fieldManager=m");
    // The first apply is a change: it records m's ownership.
    patch(&server, &apply_path, APPLY, &applied).await.ok(200);
    let current = get(&server, &path).await;
    let rv = current.rv();
    let mut watch = RawWatch::open(
        &server,
        &format!("{CONFIGMAPS}?watch=true&resourceVersion={rv}"),
    )
    .await;
    let answers = [
        merge_patch(&server, &path, &json!({"metadata": {"labels": {"x": "1"}}})).await,
        patch(&server, &path, STRATEGIC, &json!({"data": {"k": "v"}})).await,
        patch(
            &server,
            &path,
            JSON_PATCH,
            &json!([{"op": "replace", "path": "/data/k", "value": "v"}]),
        )
        .await,
        put(&server, &path, &current.body).await,
        patch(&server, &apply_path, APPLY, &applied).await,
    ];
    for answer in &answers {
        assert_eq!(answer.rv(), rv, "{}", answer.body);
    }
    create_configmap(&server, "marker", &json!({})).await;
    assert_eq!(changes_until(&mut watch, "marker").await, []);
}

#[tokio::test]
async fn t03_status_ignores_spec_labels_annotations_and_finalizers() {
    let server = widget_server().await;
    let created = create_widget(&server, "w", &json!({"size": 1})).await;
    let mut body = created.clone();
    body["spec"]["size"] = json!(5);
    body["metadata"]["labels"] = json!({"l": "1"});
    body["metadata"]["annotations"] = json!({"a": "1"});
    body["metadata"]["finalizers"] = json!(["example.com/hold"]);
    body["status"] = json!({"ready": true});
    let answer = put(&server, &format!("{WIDGETS}/w/status"), &body).await;
    let stored = answer.ok(200);
    assert_eq!(stored["status"]["ready"], true);
    assert_eq!(stored["spec"], created["spec"]);
    for key in ["labels", "annotations", "finalizers"] {
        assert!(stored["metadata"].get(key).is_none(), "{key}: {stored}");
    }
}

#[tokio::test]
async fn t04_put_without_resource_version_custom_resource_422_configmap_unconditional() {
    let server = widget_server().await;
    let mut object = create_widget(&server, "w", &json!({"size": 1})).await;
    object["metadata"]["resourceVersion"] = json!("");
    put(&server, &format!("{WIDGETS}/w"), &object)
        .await
        .assert_status(422, "Invalid");
    // ConfigMaps allow an unconditional update, as on the real server.
    let mut cm = create_configmap(&server, "a", &json!({})).await;
    cm["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    cm["data"]["k"] = json!("changed");
    assert_eq!(
        put(&server, &format!("{CONFIGMAPS}/a"), &cm).await.ok(200)["data"]["k"],
        "changed"
    );
}

#[tokio::test]
async fn t05_every_error_status_has_a_reason() {
    let server = widget_server().await;
    create_configmap(&server, "a", &json!({})).await;
    let cases = [
        (
            get(&server, &format!("{CONFIGMAPS}/nope")).await,
            404,
            "NotFound",
        ),
        (
            post(&server, CONFIGMAPS, &configmap("a", &json!({}))).await,
            409,
            "AlreadyExists",
        ),
        (
            post(&server, CONFIGMAPS, &configmap("A!", &json!({}))).await,
            422,
            "Invalid",
        ),
        (
            get(&server, &format!("{CONFIGMAPS}?labelSelector=%3D%3D")).await,
            400,
            "BadRequest",
        ),
        (
            patch(&server, &format!("{WIDGETS}/w"), STRATEGIC, &json!({})).await,
            415,
            "UnsupportedMediaType",
        ),
        (
            put(&server, CONFIGMAPS, &configmap("b", &json!({}))).await,
            405,
            "MethodNotAllowed",
        ),
    ];
    for (answer, code, reason) in &cases {
        answer.assert_status(*code, reason);
    }
}

#[tokio::test]
async fn t06_an_expired_watch_is_an_error_event_to_kube_not_an_http_410() {
    let server = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let old = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    create_configmap(&server, "x", &json!({})).await;
    server.compact();
    let mut stream = api
        .watch(&WatchParams::default(), &old)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(stream.try_next().await.unwrap().is_none(), "then the end");
}

#[tokio::test]
async fn t07_bookmarks_parse_in_kube_for_custom_kinds() {
    let server = TestServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await
        .unwrap();
    crate::kit::install_widgets(&server).await;
    let api = widgets_api(&server);
    let rv = current_rv(&server, WIDGETS).await.to_string();
    let mut stream = api
        .watch(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(PATIENCE, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        WatchEvent::Bookmark(b) => {
            assert_eq!(
                (b.types.api_version.as_str(), b.types.kind.as_str()),
                ("conformance.example.com/v1", "Widget")
            );
            assert_eq!(b.metadata.resource_version, rv);
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn t08_kube_watcher_sees_a_delete_when_an_object_leaves_its_selector() {
    let server = TestServer::start().await.unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let config = watcher::Config::default().labels("app=x");
    let mut stream = watcher::watcher(api, config).boxed();
    while !matches!(
        stream.try_next().await.unwrap(),
        Some(watcher::Event::InitDone)
    ) {}
    create_configmap(&server, "s", &json!({"app": "x"})).await;
    merge_patch(
        &server,
        &format!("{CONFIGMAPS}/s"),
        &json!({"metadata": {"labels": {"app": "y"}}}),
    )
    .await
    .ok(200);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match tokio::time::timeout(PATIENCE, stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::Apply(o) => {
                seen.push(("apply", o.metadata.labels.unwrap()["app"].clone()))
            }
            watcher::Event::Delete(o) => {
                seen.push(("delete", o.metadata.labels.unwrap()["app"].clone()))
            }
            _ => {}
        }
    }
    assert_eq!(
        seen,
        [("apply", "x".to_string()), ("delete", "y".to_string())]
    );
}

#[tokio::test]
async fn t09_kube_watcher_pages_the_initial_list_and_resumes_from_its_version() {
    let server = TestServer::start().await.unwrap();
    for i in 0..5 {
        create_configmap(&server, &format!("c{i}"), &json!({})).await;
    }
    let api: Api<ConfigMap> = Api::default_namespaced(server.client());
    let mut stream = watcher::watcher(api, watcher::Config::default().page_size(2)).boxed();
    let mut initial = Vec::new();
    loop {
        match stream.try_next().await.unwrap().unwrap() {
            watcher::Event::InitApply(o) => initial.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(initial, ["c0", "c1", "c2", "c3", "c4"]);
    create_configmap(&server, "late", &json!({})).await;
    match tokio::time::timeout(PATIENCE, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        watcher::Event::Apply(o) => {
            assert_eq!(o.metadata.name.as_deref(), Some("late"), "no replay")
        }
        other => panic!("{other:?}"),
    }
    let lists = server
        .requests()
        .iter()
        .filter(|r| r.verb == "list")
        .count();
    assert_eq!(lists, 3, "three pages, no relist");
}

#[tokio::test]
async fn t10_garbage_collection_happens_after_the_owners_delete_answers() {
    let server = TestServer::start().await.unwrap();
    let owner = create_configmap(&server, "owner", &json!({})).await;
    let mut dependent = configmap("dependent", &json!({}));
    dependent["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
        "name": "owner", "uid": owner["metadata"]["uid"]}]);
    let dependent = post(&server, CONFIGMAPS, &dependent).await.ok(201).clone();
    let mut watch = RawWatch::open(
        &server,
        &format!(
            "{CONFIGMAPS}?watch=true&resourceVersion={}",
            crate::kit::rv(&dependent)
        ),
    )
    .await;
    delete(&server, &format!("{CONFIGMAPS}/owner"), &Value::Null)
        .await
        .ok(200);
    let first = watch.next_change().await.unwrap();
    let second = watch.next_change().await.unwrap();
    let names =
        [&first, &second].map(|e| (e["type"].clone(), e["object"]["metadata"]["name"].clone()));
    assert_eq!(
        names,
        [
            (json!("DELETED"), json!("owner")),
            (json!("DELETED"), json!("dependent"))
        ]
    );
    assert!(
        crate::kit::rv(&second["object"]) > crate::kit::rv(&first["object"]),
        "two writes"
    );
    eventually("the dependent is gone", || async {
        get(&server, &format!("{CONFIGMAPS}/dependent")).await.code == 404
    })
    .await;

    // Foreground makes it visible in the answer: the owner is still there, marked, when
    // its DELETE answers; a synchronous collector would already have deleted it.
    let owner = create_configmap(&server, "owner2", &json!({})).await;
    let mut dependent = configmap("dependent2", &json!({}));
    dependent["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
        "name": "owner2", "uid": owner["metadata"]["uid"]}]);
    post(&server, CONFIGMAPS, &dependent).await.ok(201);
    let foreground = json!({"propagationPolicy": "Foreground"});
    let answer = delete(&server, &format!("{CONFIGMAPS}/owner2"), &foreground).await;
    assert_eq!(answer.ok(200)["kind"], "ConfigMap", "{}", answer.body);
    assert_eq!(
        answer.body["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    eventually("both are collected", || async {
        get(&server, &format!("{CONFIGMAPS}/owner2")).await.code == 404
            && get(&server, &format!("{CONFIGMAPS}/dependent2")).await.code == 404
    })
    .await;
}

#[tokio::test]
async fn t11_a_new_finalizer_on_a_deleting_object_is_422() {
    let server = widget_server().await;
    let mut body = widget("w", &json!({}));
    body["metadata"]["finalizers"] = json!(["example.com/a"]);
    post(&server, WIDGETS, &body).await.ok(201);
    let path = format!("{WIDGETS}/w");
    delete(&server, &path, &Value::Null).await.ok(200);
    let answer = merge_patch(
        &server,
        &path,
        &json!({"metadata": {"finalizers": ["example.com/a", "example.com/b"]}}),
    )
    .await;
    answer.assert_status(422, "Invalid");
    assert_eq!(
        answer.body["details"]["causes"][0]["field"],
        "metadata.finalizers"
    );
    let kube = widgets_api(&server).get("w").await.unwrap();
    assert_eq!(
        kube.metadata.finalizers,
        Some(vec!["example.com/a".to_string()])
    );
}

#[tokio::test]
async fn t12_defaults_never_create_absent_parents() {
    let server = widget_server().await;
    let created = create_widget(&server, "w", &json!({"size": 1})).await;
    assert!(created["spec"].get("limits").is_none(), "{created}");
    let bare = json!({"apiVersion": "conformance.example.com/v1", "kind": "Widget", "metadata": {"name": "bare"}});
    let bare = post(&server, WIDGETS, &bare).await;
    assert!(bare.ok(201).get("spec").is_none(), "{}", bare.body);
}

#[tokio::test]
async fn t13_unknown_fields_of_built_in_kinds_are_dropped() {
    let server = TestServer::start().await.unwrap();
    let mut body = configmap("a", &json!({}));
    body["junk"] = json!(1);
    let created = post(&server, CONFIGMAPS, &body).await;
    assert!(created.ok(201).get("junk").is_none(), "{}", created.body);
    let mut strict = configmap("b", &json!({}));
    strict["junk"] = json!(1);
    post(
        &server,
        &format!("{CONFIGMAPS}?fieldValidation=Strict"),
        &strict,
    )
    .await
    .assert_status(400, "BadRequest");
}

#[tokio::test]
async fn t14_a_json_patch_test_of_an_absent_member_against_null_succeeds() {
    let server = TestServer::start().await.unwrap();
    create_configmap(&server, "a", &json!({})).await;
    let ops = json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                     {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/x"]}]);
    let answer = patch(&server, &format!("{CONFIGMAPS}/a"), JSON_PATCH, &ops).await;
    assert_eq!(
        answer.ok(200)["metadata"]["finalizers"],
        json!(["example.com/x"])
    );
    let present = json!([{"op": "test", "path": "/data/k", "value": null}]);
    patch(&server, &format!("{CONFIGMAPS}/a"), JSON_PATCH, &present)
        .await
        .assert_status(422, "Invalid");
}

#[tokio::test]
async fn t15_no_kind_and_no_verb_creates_in_a_missing_namespace() {
    let server = widget_server().await;
    let widgets = "/apis/conformance.example.com/v1/namespaces/nope/widgets";
    post(&server, widgets, &widget("w", &json!({})))
        .await
        .assert_status(404, "NotFound");
    let applied = patch(
        &server,
        &format!("{widgets}/w?fieldManager=m"),
        APPLY,
        &widget("w", &json!({})),
    )
    .await;
    applied.assert_status(404, "NotFound");
    let configmaps = "/api/v1/namespaces/nope/configmaps";
    put(
        &server,
        &format!("{configmaps}/a"),
        &configmap("a", &json!({})),
    )
    .await
    .assert_status(404, "NotFound");
    assert_eq!(
        get(&server, "/api/v1/namespaces/nope").await.code,
        404,
        "no namespace appeared"
    );
}

#[tokio::test]
async fn t16_lists_without_a_list_type_are_atomic() {
    let server = widget_server().await;
    apply(&server, "alice", &json!({"args": ["x"]}), false)
        .await
        .ok(201);
    apply(&server, "bob", &json!({"args": ["y"]}), false)
        .await
        .assert_status(409, "Conflict");
    let forced = apply(&server, "bob", &json!({"args": ["y"]}), true).await;
    assert_eq!(
        forced.ok(200)["spec"]["args"],
        json!(["y"]),
        "replaced, not merged"
    );
}

#[tokio::test]
async fn t17_not_equal_and_notin_match_objects_without_the_key() {
    let server = widget_server().await;
    let rv = current_rv(&server, WIDGETS).await;
    let mut watch = RawWatch::open(
        &server,
        &format!("{WIDGETS}?watch=true&resourceVersion={rv}&labelSelector=tier%20notin%20(odd)"),
    )
    .await;
    create_widget(&server, "unlabelled", &json!({})).await;
    let added = watch.next_change().await.unwrap();
    assert_eq!(type_and_name(&added), (Some("ADDED"), Some("unlabelled")));
    let listed = get(&server, &format!("{WIDGETS}?labelSelector=tier!%3Dodd")).await;
    assert_eq!(listed.body["items"][0]["metadata"]["name"], "unlabelled");
}
