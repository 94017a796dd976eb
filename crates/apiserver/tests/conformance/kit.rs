//! What the conformance tests share: raw HTTP calls that keep the status code and the
//! Status body (kube's typed API hides both), a raw watch that yields every event as JSON,
//! and one custom resource kind (`Widget`) whose schema exercises every CRD rule.

use std::future::Future;
use std::time::{Duration, Instant};

use apiserver::testing::TestServer;
use bytes::BytesMut;
use http_body_util::BodyExt;
use serde_json::{Value, json};

/// How long any single wait in this suite may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// The collection path of Widgets in `default`.
pub const WIDGETS: &str = "/apis/conformance.example.com/v1/namespaces/default/widgets";
/// The collection path of ConfigMaps in `default`.
pub const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";

/// Content types of the write verbs.
pub const JSON: &str = "application/json";
/// Merge patch.
pub const MERGE: &str = "application/merge-patch+json";
/// JSON patch (RFC 6902).
pub const JSON_PATCH: &str = "application/json-patch+json";
/// Server-side apply.
pub const APPLY: &str = "application/apply-patch+yaml";
/// Strategic merge patch.
pub const STRATEGIC: &str = "application/strategic-merge-patch+json";

/// A server answer: the HTTP status code and the body as JSON (Null when not JSON).
#[derive(Debug, Clone)]
pub struct Answer {
    /// HTTP status code.
    pub code: u16,
    /// The body.
    pub body: Value,
    /// Response headers.
    pub headers: http::HeaderMap,
}

impl Answer {
    /// The Status `reason` (empty when absent).
    pub fn reason(&self) -> &str {
        self.body["reason"].as_str().unwrap_or_default()
    }

    /// Asserts the answer is a well-formed failure Status with this code and reason.
    pub fn assert_status(&self, code: u16, reason: &str) -> &Self {
        assert_eq!(
            (self.code, self.reason()),
            (code, reason),
            "answer: {}",
            self.body
        );
        assert_eq!(self.body["kind"], "Status", "{}", self.body);
        assert_eq!(self.body["apiVersion"], "v1", "{}", self.body);
        assert_eq!(self.body["status"], "Failure", "{}", self.body);
        assert_eq!(self.body["code"], code, "{}", self.body);
        assert!(
            self.body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "a Status has a message: {}",
            self.body
        );
        self
    }

    /// The Status `message` (empty when absent).
    pub fn message(&self) -> &str {
        self.body["message"].as_str().unwrap_or_default()
    }

    /// Asserts the Status message contains `part`.
    pub fn assert_message_contains(&self, part: &str) -> &Self {
        assert!(self.message().contains(part), "{}", self.body);
        self
    }

    /// Asserts the Status message starts with `start`.
    pub fn assert_message_starts_with(&self, start: &str) -> &Self {
        assert!(self.message().starts_with(start), "{}", self.body);
        self
    }

    /// Asserts a success code and returns the body.
    pub fn ok(&self, code: u16) -> &Value {
        assert_eq!(self.code, code, "answer: {}", self.body);
        &self.body
    }

    /// `metadata.resourceVersion` of the body, as a number.
    pub fn rv(&self) -> u64 {
        rv(&self.body)
    }
}

/// `metadata.resourceVersion` of an object or list, as a number.
pub fn rv(object: &Value) -> u64 {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("no resourceVersion in {object}"))
        .parse()
        .unwrap()
}

/// Sends one request with a JSON (or YAML) body and an optional Accept header.
pub async fn call_with(
    server: &TestServer,
    method: &str,
    path: &str,
    content_type: &str,
    accept: Option<&str>,
    body: Vec<u8>,
) -> Answer {
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("Content-Type", content_type);
    if let Some(accept) = accept {
        request = request.header("Accept", accept);
    }
    let request = request.body(body).unwrap();
    let response = server
        .client()
        .send(request.map(kube::client::Body::from))
        .await
        .unwrap();
    let code = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        code,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        headers,
    }
}

/// Sends one request with a JSON body (Null: no body).
pub async fn call(
    server: &TestServer,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Answer {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(body).unwrap()
    };
    call_with(server, method, path, content_type, None, bytes).await
}

/// GET.
pub async fn get(server: &TestServer, path: &str) -> Answer {
    call(server, "GET", path, JSON, &Value::Null).await
}

/// POST a JSON object.
pub async fn post(server: &TestServer, path: &str, body: &Value) -> Answer {
    call(server, "POST", path, JSON, body).await
}

/// PUT a JSON object.
pub async fn put(server: &TestServer, path: &str, body: &Value) -> Answer {
    call(server, "PUT", path, JSON, body).await
}

/// PATCH with a content type.
pub async fn patch(server: &TestServer, path: &str, content_type: &str, body: &Value) -> Answer {
    call(server, "PATCH", path, content_type, body).await
}

/// PATCH with a JSON merge patch.
pub async fn merge_patch(server: &TestServer, path: &str, body: &Value) -> Answer {
    patch(server, path, MERGE, body).await
}

/// Drops every finalizer of the object at `path` (a merge patch), so its deletion ends.
pub async fn drop_finalizers(server: &TestServer, path: &str) {
    merge_patch(server, path, &json!({"metadata": {"finalizers": null}}))
        .await
        .ok(200);
}

/// DELETE with an optional DeleteOptions body (Null: none).
pub async fn delete(server: &TestServer, path: &str, options: &Value) -> Answer {
    call(server, "DELETE", path, JSON, options).await
}

/// A ConfigMap body.
pub fn configmap(name: &str, labels: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

/// Creates a ConfigMap in `default` and returns it.
pub async fn create_configmap(server: &TestServer, name: &str, labels: &Value) -> Value {
    post(server, CONFIGMAPS, &configmap(name, labels))
        .await
        .ok(201)
        .clone()
}

/// The Widget CRD: namespaced, status subresource, printer column, selectable field,
/// schema with a default, a defaulted child of an optional parent, a list-map, a set,
/// an atomic list and a subtree that keeps unknown fields.
pub fn widget_crd() -> Value {
    json!({
      "apiVersion": "apiextensions.k8s.io/v1",
      "kind": "CustomResourceDefinition",
      "metadata": {"name": "widgets.conformance.example.com"},
      "spec": {
        "group": "conformance.example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                  "listKind": "WidgetList", "shortNames": ["wd"], "categories": ["gadgets"]},
        "versions": [{
          "name": "v1", "served": true, "storage": true,
          "subresources": {"status": {}},
          "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
          "selectableFields": [{"jsonPath": ".spec.colour"}],
          "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
              "size": {"type": "integer", "minimum": 0, "description": "How big."},
              "colour": {"type": "string"},
              "mode": {"type": "string", "default": "Auto"},
              "limits": {"type": "object", "properties": {"cpu": {"type": "string", "default": "1"}}},
              "ports": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                          "name": {"type": "string"}, "port": {"type": "integer"}}}},
              "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
              "args": {"type": "array", "items": {"type": "string"}},
              "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
            }},
            "status": {"type": "object", "properties": {
              "ready": {"type": "boolean"}, "seen": {"type": "integer"}}}
          }}}
        }]
      }
    })
}

/// A Widget body.
pub fn widget(name: &str, spec: &Value) -> Value {
    json!({"apiVersion": "conformance.example.com/v1", "kind": "Widget",
        "metadata": {"name": name}, "spec": spec})
}

/// Registers the Widget CRD and waits until Widgets can be listed.
pub async fn install_widgets(server: &TestServer) {
    post(
        server,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &widget_crd(),
    )
    .await
    .ok(201);
    eventually("widgets are served", || async {
        get(server, WIDGETS).await.code == 200
    })
    .await;
}

/// A server with the Widget kind installed.
pub async fn widget_server() -> TestServer {
    let server = TestServer::start().await.unwrap();
    install_widgets(&server).await;
    server
}

/// Creates a Widget in `default` and returns it.
pub async fn create_widget(server: &TestServer, name: &str, spec: &Value) -> Value {
    post(server, WIDGETS, &widget(name, spec))
        .await
        .ok(201)
        .clone()
}

/// Polls `check` every 20 ms until it holds; fails the test after [`PATIENCE`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + PATIENCE;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A watch read raw: the answer's code and headers, then one JSON value per line.
pub struct RawWatch {
    /// HTTP status code of the watch answer.
    pub code: u16,
    /// Response headers.
    pub headers: http::HeaderMap,
    body: kube::client::Body,
    buffer: BytesMut,
    ended: bool,
}

impl RawWatch {
    /// Opens `GET <path_and_query>` (the caller adds `watch=true` and the rest).
    pub async fn open(server: &TestServer, path_and_query: &str) -> Self {
        Self::open_accepting(server, path_and_query, JSON).await
    }

    /// Opens a watch with an Accept header.
    pub async fn open_accepting(server: &TestServer, path_and_query: &str, accept: &str) -> Self {
        let request = http::Request::get(path_and_query)
            .header("Accept", accept)
            .body(Vec::new())
            .unwrap();
        let response = tokio::time::timeout(
            PATIENCE,
            server.client().send(request.map(kube::client::Body::from)),
        )
        .await
        .expect("a watch answers at once, before any event")
        .unwrap();
        Self {
            code: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.into_body(),
            buffer: BytesMut::new(),
            ended: false,
        }
    }

    /// The next event, or None when the server closed the stream. Fails after [`PATIENCE`].
    pub async fn next(&mut self) -> Option<Value> {
        tokio::time::timeout(PATIENCE, self.next_unbounded())
            .await
            .expect("no watch event within the patience")
    }

    /// The next event that is not a BOOKMARK.
    pub async fn next_change(&mut self) -> Option<Value> {
        loop {
            let event = self.next().await?;
            if event["type"] != "BOOKMARK" {
                return Some(event);
            }
        }
    }

    async fn next_unbounded(&mut self) -> Option<Value> {
        loop {
            if let Some(at) = self.buffer.iter().position(|b| *b == b'\n') {
                let line = self.buffer.split_to(at + 1);
                let line = &line[..at];
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                return Some(serde_json::from_slice(line).unwrap_or_else(|e| {
                    panic!(
                        "a watch line is JSON ({e}): {}",
                        String::from_utf8_lossy(line)
                    )
                }));
            }
            if self.ended {
                assert!(
                    self.buffer.iter().all(u8::is_ascii_whitespace),
                    "a watch ends on a whole line: {:?}",
                    String::from_utf8_lossy(&self.buffer)
                );
                return None;
            }
            match self.body.frame().await {
                Some(frame) => {
                    if let Ok(data) = frame.unwrap().into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                None => self.ended = true,
            }
        }
    }
}

/// The type of a watch event and the name of its object.
pub fn type_and_name(event: &Value) -> (Option<&str>, Option<&str>) {
    (
        event["type"].as_str(),
        event["object"]["metadata"]["name"].as_str(),
    )
}

/// The current resourceVersion of the server, read from an empty list of ConfigMaps.
pub async fn current_rv(server: &TestServer, collection: &str) -> u64 {
    get(server, collection).await.rv()
}

/// The event types and names a watch yields until one named `marker` arrives
/// (excluded), so a test can assert that nothing happened before a later write.
pub async fn changes_until(watch: &mut RawWatch, marker: &str) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    loop {
        let event = watch.next_change().await.expect("the watch ended early");
        let name = event["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if name == marker {
            return seen;
        }
        seen.push((event["type"].as_str().unwrap().to_string(), name));
    }
}

/// One request over a fresh connection, bypassing kube's client (which retries 429
/// and 503 by itself, so it never shows them). HTTP/1.1 with `Connection: close`.
pub async fn call_bare(server: &TestServer, method: &str, path: &str, body: &Value) -> Answer {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = server.connect_raw().await;
    let body = serde_json::to_vec(body).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nAuthorization: {}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.authority(),
        server.authorization(),
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut raw))
        .await
        .expect("the server answers and closes")
        .unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut content = raw[split + 4..].to_vec();
    let mut lines = head.lines();
    let code = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let mut headers = http::HeaderMap::new();
    for line in lines {
        let (name, value) = line.split_once(':').unwrap();
        headers.insert(
            http::HeaderName::from_bytes(name.trim().to_ascii_lowercase().as_bytes()).unwrap(),
            http::HeaderValue::from_str(value.trim()).unwrap(),
        );
    }
    if headers
        .get("transfer-encoding")
        .is_some_and(|v| v == "chunked")
    {
        content = dechunk(&content);
    }
    Answer {
        code,
        body: serde_json::from_slice(&content).unwrap_or(Value::Null),
        headers,
    }
}

fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = raw.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(String::from_utf8_lossy(&raw[..end]).trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[end + 2 + size + 2..];
    }
}
