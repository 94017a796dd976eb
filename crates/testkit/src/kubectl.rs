//! Runs the real `kubectl` against a `TestServer`. Every call gets its own
//! `--kubeconfig` (the server's) and its own fresh `--cache-dir`, so no call
//! reads discovery or OpenAPI that another server (or an earlier state of this
//! one) served, and calls can run in parallel.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use apiserver::testing::TestServer;

/// The longest a kubectl call may take before the test kills it and fails.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(40);

/// The kubectl binary: `$KUBECTL`, else `kubectl` on the PATH.
#[must_use]
pub fn kubectl_binary() -> PathBuf {
    std::env::var_os("KUBECTL").map_or_else(|| PathBuf::from("kubectl"), PathBuf::from)
}

/// Whether kubectl can run. Under `CI=true` a missing kubectl fails the test;
/// otherwise this prints why and returns false, and the test returns early.
#[must_use]
pub fn kubectl_required() -> bool {
    let binary = kubectl_binary();
    match Command::new(&binary).args(["version", "--client"]).output() {
        Ok(output) if output.status.success() => true,
        Ok(output) => {
            crate::tool_missing(&format!(
                "{} version --client failed: {}",
                binary.display(),
                String::from_utf8_lossy(&output.stderr)
            ));
            false
        }
        Err(e) => {
            crate::tool_missing(&format!("kubectl cannot run ({}): {e}", binary.display()));
            false
        }
    }
}

/// A kubectl command line for the server at `kubeconfig`, with its own cache
/// directory (kept alive by the returned guard).
fn command(kubeconfig: &Path, args: &[&str]) -> (Command, tempfile::TempDir) {
    let cache = tempfile::tempdir().expect("kubectl cache dir");
    let mut command = Command::new(kubectl_binary());
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache.path())
        .arg("--request-timeout=30s")
        .args(args)
        // A user's settings must not change what kubectl does here.
        .env_remove("KUBECONFIG")
        .env_remove("KUBECTL_EXTERNAL_DIFF")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    (command, cache)
}

/// Runs kubectl with `args` against `server` and returns what it did; kills it
/// (and panics) after [`CALL_TIMEOUT`].
#[must_use]
pub fn kubectl(server: &TestServer, args: &[&str]) -> Output {
    kubectl_at(server.kubeconfig_path(), args, None)
}

/// Like [`kubectl`], feeding `stdin` (for `-f -`).
#[must_use]
pub fn kubectl_stdin(server: &TestServer, args: &[&str], stdin: &str) -> Output {
    kubectl_at(server.kubeconfig_path(), args, Some(stdin))
}

/// Runs kubectl against the server a kubeconfig file points at.
#[must_use]
pub fn kubectl_at(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let (mut command, _cache) = command(kubeconfig, args);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut child = command.spawn().expect("spawn kubectl");
    if let Some(input) = stdin {
        use std::io::Write;
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input.as_bytes())
            .expect("write kubectl stdin");
    }
    // Read both pipes on threads so a chatty kubectl never blocks on a full pipe.
    let mut out_pipe = child.stdout.take().expect("stdout");
    let mut err_pipe = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = out_pipe.read_to_end(&mut buf);
        buf
    });
    let err = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = err_pipe.read_to_end(&mut buf);
        buf
    });
    let status = wait_with_timeout(&mut child, CALL_TIMEOUT).unwrap_or_else(|| {
        panic!(
            "kubectl {} did not finish within {CALL_TIMEOUT:?}",
            args.join(" ")
        )
    });
    Output {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait for kubectl") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs kubectl and returns its stdout; panics with the command line, exit code
/// and stderr when it fails.
pub fn kubectl_ok(server: &TestServer, args: &[&str]) -> String {
    let output = kubectl(server, args);
    stdout_of_success(args, &output)
}

/// The stdout of a successful call; panics with everything known otherwise.
pub fn stdout_of_success(args: &[&str], output: &Output) -> String {
    assert!(
        output.status.success(),
        "kubectl {} exited with {}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).expect("kubectl prints UTF-8")
}

/// Runs kubectl expecting it to fail; returns stdout and stderr together.
pub fn kubectl_fails(server: &TestServer, args: &[&str]) -> String {
    let output = kubectl(server, args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !output.status.success(),
        "kubectl {} should have failed:\n{text}",
        args.join(" ")
    );
    text
}

/// A long-running kubectl (for `get -w`): stdout is piped, killed on drop.
pub struct Background {
    child: Child,
    _cache: tempfile::TempDir,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Background {
    /// Starts `kubectl args` in the background; its stdout lines arrive on a channel.
    #[must_use]
    pub fn spawn(server: &TestServer, args: &[&str]) -> Self {
        let (mut command, cache) = command(server.kubeconfig_path(), args);
        command.stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = command.spawn().expect("spawn kubectl");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            _cache: cache,
            lines,
        }
    }

    /// The next stdout line, or None when none came within `timeout` (or kubectl ended).
    #[must_use]
    pub fn next_line(&self, timeout: Duration) -> Option<String> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// Whether kubectl is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `kubectl get` table as rows of (header, cell) pairs. Cells are cut at the
/// header's column starts (kubectl aligns them), so an empty cell reads as "".
#[must_use]
pub fn table(text: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text.lines().filter(|line| !line.trim().is_empty());
    let Some(header) = lines.next() else {
        return Vec::new();
    };
    let mut columns: Vec<(usize, String)> = Vec::new();
    let mut previous = ' ';
    for (index, c) in header.char_indices() {
        if c != ' ' && previous == ' ' {
            columns.push((index, String::new()));
        }
        if c != ' '
            && let Some((_, name)) = columns.last_mut()
        {
            name.push(c);
        }
        previous = c;
    }
    lines
        .map(|line| {
            columns
                .iter()
                .enumerate()
                .map(|(i, (start, name))| {
                    let end = columns.get(i + 1).map_or(line.len(), |(next, _)| *next);
                    let cell = line.get(*start..end.min(line.len())).unwrap_or("");
                    (name.clone(), cell.trim().to_owned())
                })
                .collect()
        })
        .collect()
}

/// The header names of a `kubectl get` table.
#[must_use]
pub fn headers(text: &str) -> Vec<String> {
    text.lines()
        .find(|line| !line.trim().is_empty())
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Collapses all whitespace to single spaces, so wrapped text compares as one line.
#[must_use]
pub fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
