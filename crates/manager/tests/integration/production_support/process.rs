//! The `manager` binary as a child process: `manager run` against the embedded
//! API server's kubeconfig, JSON logs captured line by line, SIGTERM through `kill`.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{LEASE_DURATION, LEASE_RENEW};

/// The deadline `manager run` gets for finishing in-flight reconciles after SIGTERM.
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(5);

/// A running `manager run`; killed (SIGKILL) on drop if still running, its
/// output written to `target/e2e-logs/` when the test is failing.
pub struct ManagerProcess {
    pub identity: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl ManagerProcess {
    /// Spawns `manager --log-format json run` with a clean environment.
    pub fn spawn(kubeconfig: &Path, identity: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_manager"))
            .args(["--log-format", "json", "run", "--http-addr", "127.0.0.1:0"])
            .arg(format!("--lease-duration={}s", LEASE_DURATION.as_secs()))
            .arg(format!("--lease-renew={}s", LEASE_RENEW.as_secs()))
            .arg(format!(
                "--shutdown-deadline={}s",
                SHUTDOWN_DEADLINE.as_secs()
            ))
            .arg(format!("--leader-identity={identity}"))
            .env_clear()
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info,controllers=debug,manager=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the manager binary");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let readers = vec![
            testkit::read_lines(stdout, &lines),
            testkit::read_lines(stderr, &lines),
        ];
        Self {
            identity: identity.to_owned(),
            child,
            lines,
            readers,
        }
    }

    /// Sends SIGTERM, as the kubelet does when a pod stops.
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed: {status}");
    }

    /// SIGTERM, then the exit within the shutdown deadline (and a little
    /// more), with status 0; `what` says which process failed to.
    pub async fn stop_gracefully(&mut self, what: &str) {
        self.sigterm();
        let status = self
            .wait_exit(SHUTDOWN_DEADLINE + Duration::from_secs(3))
            .await
            .expect(what);
        assert!(status.success(), "exit status {status}");
    }

    /// SIGKILL, as the OOM killer or a node failure: no shutdown, no Lease release.
    /// Returns once the process is reaped and its output drained.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for reader in self.readers.drain(..) {
            reader.join().unwrap();
        }
    }

    /// The exit status, or `None` if it is still running after `within`.
    pub async fn wait_exit(&mut self, within: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Drain the pipes, so the logs are complete.
                for reader in self.readers.drain(..) {
                    reader.join().unwrap();
                }
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Every line the process wrote so far.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The JSON log lines (stdout and stderr may interleave other text on a crash).
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.lines()
            .iter()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }
}

impl Drop for ManagerProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if std::thread::panicking() {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-logs");
            let file = dir.join(format!("{}-{}.log", std::process::id(), self.identity));
            let text = self.lines().join("\n");
            if std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(&file, text))
                .is_ok()
            {
                eprintln!("{}'s output is in {}", self.identity, file.display());
            }
        }
    }
}
