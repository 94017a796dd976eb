//! The demo is part of the test suite: `manager demo` (the built binary, as a
//! user runs it) scales a Cluster up and down, deletes it, and ends with
//! `== done` and exit status 0 once everything is released and gone, with no
//! reconcile failing on the way.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

#[tokio::test]
async fn the_demo_runs_to_done() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_manager"))
        .arg("demo")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn manager demo");
    // stderr is drained meanwhile, so a full pipe never stalls the demo.
    let mut stderr_pipe = child.stderr.take().unwrap();
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        stderr_pipe.read_to_string(&mut text).await.unwrap();
        text
    });
    // The kubeconfig the demo prints is there to use while it runs.
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stdout = String::new();
    let mut kubeconfig_checked = false;
    let read_stdout = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some((_, path)) = line.split_once("kubeconfig: ") {
                let path = std::path::Path::new(path.trim());
                assert!(path.is_file(), "the printed kubeconfig {path:?} is gone");
                kubeconfig_checked = true;
            }
            stdout.push_str(&line);
            stdout.push('\n');
        }
    };
    tokio::time::timeout(Duration::from_secs(120), read_stdout)
        .await
        .expect("the demo finishes within 2 minutes");
    let status = child.wait().await.expect("wait for manager demo");
    let stderr = stderr.await.unwrap();
    assert!(kubeconfig_checked, "no kubeconfig printed:\n{stdout}");
    assert!(
        status.success(),
        "manager demo failed ({status}):\n{stdout}\n{stderr}"
    );
    let last = stdout
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or_default();
    assert!(last.starts_with("== done"), "last line: {last}\n{stdout}");
    assert!(last.contains("nothing left"), "{last}");
    for step in ["== scale up to 3 nodes", "== delete the Cluster"] {
        assert!(stdout.contains(step), "no `{step}` step:\n{stdout}");
    }
    // On its own API server with no faults, a failed reconcile is a bug (a
    // conflict is retried quietly); a user would read this warning as one.
    let failures: Vec<&str> = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|line| line.contains("reconcile failed"))
        .collect();
    assert!(
        failures.is_empty(),
        "reconciles failed:\n{}",
        failures.join("\n")
    );
}
