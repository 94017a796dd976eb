//! Section 2, the `/status` subresource and the main endpoint's treatment of `.status`.

use serde_json::json;

use crate::kit::{WIDGETS, create_widget, get, merge_patch, post, put, widget, widget_server};

#[tokio::test]
async fn r2_13_status_get_put_and_patch_write_only_status() {
    let server = widget_server().await;
    let created = create_widget(&server, "w", &json!({"size": 1})).await;
    let status_path = format!("{WIDGETS}/w/status");
    let read = get(&server, &status_path).await;
    assert_eq!(
        read.ok(200)["metadata"]["name"],
        "w",
        "GET /status is the whole object"
    );

    let patched = merge_patch(
        &server,
        &status_path,
        &json!({"status": {"ready": true}, "spec": {"size": 9},
                "metadata": {"labels": {"sneaky": "yes"}}}),
    )
    .await;
    let body = patched.ok(200);
    assert_eq!(body["status"]["ready"], true);
    assert_eq!(
        body["spec"]["size"], 1,
        "spec is copied from the old object"
    );
    assert!(body["metadata"]["labels"].get("sneaky").is_none(), "{body}");
    assert!(patched.rv() > crate::kit::rv(&created));

    let mut replacement = body.clone();
    replacement["status"] = json!({"ready": false, "seen": 1});
    replacement["spec"]["size"] = json!(7);
    let replaced = put(&server, &status_path, &replacement).await;
    let body = replaced.ok(200);
    assert_eq!(body["status"], json!({"ready": false, "seen": 1}));
    assert_eq!(body["spec"]["size"], 1);
    assert_eq!(body["metadata"]["generation"], 1);
}

#[tokio::test]
async fn r2_14_the_main_endpoint_ignores_status() {
    let server = widget_server().await;
    create_widget(&server, "w", &json!({"size": 1})).await;
    let path = format!("{WIDGETS}/w");
    merge_patch(
        &server,
        &format!("{path}/status"),
        &json!({"status": {"ready": true}}),
    )
    .await
    .ok(200);
    let patched = merge_patch(
        &server,
        &path,
        &json!({"spec": {"size": 2}, "status": {"ready": false}}),
    )
    .await;
    let body = patched.ok(200);
    assert_eq!(body["spec"]["size"], 2);
    assert_eq!(body["status"]["ready"], true, "status kept: {body}");
    let mut replacement = body.clone();
    replacement["status"] = json!({"seen": 5});
    let replaced = put(&server, &path, &replacement).await;
    assert_eq!(replaced.ok(200)["status"], json!({"ready": true}));
}

#[tokio::test]
async fn r2_15_create_drops_status() {
    let server = widget_server().await;
    let mut body = widget("w", &json!({"size": 1}));
    body["status"] = json!({"ready": true});
    let created = post(&server, WIDGETS, &body).await;
    assert!(created.ok(201).get("status").is_none(), "{}", created.body);
}

#[tokio::test]
async fn r3_31_without_a_status_subresource_status_is_spec_like() {
    let server = widget_server().await;
    let mut crd = crate::kit::widget_crd();
    crd["metadata"]["name"] = json!("gizmos.conformance.example.com");
    crd["spec"]["names"] = json!({"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"});
    crd["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("subresources");
    post(
        &server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    )
    .await
    .ok(201);
    let gizmos = "/apis/conformance.example.com/v1/namespaces/default/gizmos";
    crate::kit::eventually("gizmos are served", || async {
        get(&server, gizmos).await.code == 200
    })
    .await;
    let body = json!({"apiVersion": "conformance.example.com/v1", "kind": "Gizmo",
        "metadata": {"name": "g"}, "spec": {"size": 1}, "status": {"ready": true}});
    let created = post(&server, gizmos, &body).await;
    assert_eq!(
        created.ok(201)["status"]["ready"],
        true,
        "create keeps .status"
    );
    let patched = merge_patch(
        &server,
        &format!("{gizmos}/g"),
        &json!({"status": {"ready": false}}),
    )
    .await;
    let object = patched.ok(200);
    assert_eq!(object["status"]["ready"], false);
    assert_eq!(
        object["metadata"]["generation"], 2,
        "a status change is a generation"
    );
    assert_eq!(get(&server, &format!("{gizmos}/g/status")).await.code, 404);
}
