//! The demo is part of the test suite: `manager demo` (the built binary, as a
//! user runs it) scales a Cluster up and down, deletes it, and ends with
//! `== done` and exit status 0 once everything is released and gone, with no
//! reconcile failing on the way.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;
use std::time::Duration;

#[tokio::test]
async fn the_demo_runs_to_done() {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_manager"))
        .arg("demo")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn manager demo");
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the demo finishes within 2 minutes")
        .expect("wait for manager demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "manager demo failed ({}):\n{stdout}\n{stderr}",
        output.status
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
