//! A quick real-kubectl smoke run (skipped when kubectl is missing, unless CI=true).

use std::path::Path;
use std::process::Command;

use apiserver::testing::TestServer;

const CRD: &str = r"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the widget should be.
            properties:
              size: {type: integer, description: How big the widget is., default: 1}
              colour: {type: string}
";

const WIDGET: &str = r"
apiVersion: example.com/v1
kind: Widget
metadata: {name: w1, namespace: default}
spec: {colour: red}
";

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_get_and_yaml() {
    if !kubectl_available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "kubectl is required in CI"
        );
        eprintln!("kubectl not found: skipping");
        return;
    }
    let server = TestServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let kubeconfig = server.kubeconfig_path().to_path_buf();
    std::fs::write(dir.path().join("crd.yaml"), CRD).unwrap();
    std::fs::write(dir.path().join("widget.yaml"), WIDGET).unwrap();
    let run = |args: Vec<String>| {
        let kubeconfig = kubeconfig.clone();
        let cache = cache.clone();
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl(&kubeconfig, &cache, &refs)
        })
    };
    let path = |f: &str| dir.path().join(f).display().to_string();

    let (ok, out, err) = run(vec!["apply".into(), "-f".into(), path("crd.yaml")])
        .await
        .unwrap();
    assert!(ok, "apply crd: {out} {err}");
    let (ok, out, err) = run(vec!["apply".into(), "-f".into(), path("widget.yaml")])
        .await
        .unwrap();
    assert!(ok, "apply widget: {out} {err}");
    assert!(out.contains("widget.example.com/w1 created"), "{out}");
    // Applying again changes nothing.
    let (ok, out, err) = run(vec!["apply".into(), "-f".into(), path("widget.yaml")])
        .await
        .unwrap();
    assert!(ok, "re-apply: {out} {err}");
    assert!(out.contains("unchanged"), "{out}");

    let (ok, out, err) = run(vec!["get".into(), "widgets".into()]).await.unwrap();
    assert!(ok, "get: {err}");
    assert!(
        out.contains("NAME") && out.contains("SIZE") && out.contains("w1"),
        "{out}"
    );
    let (ok, out, err) = run(vec![
        "get".into(),
        "wd".into(),
        "w1".into(),
        "-o".into(),
        "yaml".into(),
    ])
    .await
    .unwrap();
    assert!(ok, "get -o yaml: {err}");
    assert!(out.contains("colour: red"), "{out}");
    assert!(out.contains("size: 1"), "defaults apply: {out}");

    // Strict field validation: kubectl sends fieldValidation=Strict, unknown fields fail.
    std::fs::write(
        dir.path().join("bad.yaml"),
        WIDGET.replace("colour: red", "colour: red, bogus: 1"),
    )
    .unwrap();
    let (ok, out, err) = run(vec!["apply".into(), "-f".into(), path("bad.yaml")])
        .await
        .unwrap();
    assert!(!ok, "unknown field accepted: {out}");
    assert!(err.contains("bogus"), "{err}");

    let (ok, out, err) = run(vec!["explain".into(), "widgets.spec.size".into()])
        .await
        .unwrap();
    assert!(ok, "explain: {out} {err}");
    assert!(out.contains("How big the widget is"), "{out}");

    let (ok, out, err) = run(vec!["delete".into(), "-f".into(), path("widget.yaml")])
        .await
        .unwrap();
    assert!(ok, "delete: {out} {err}");
    let (ok, out, _) = run(vec!["get".into(), "widgets".into()]).await.unwrap();
    assert!(ok);
    assert!(!out.contains("w1"), "{out}");
}
