//! The standalone `apiserver` binary as a child process, for tests where the server
//! must die as a process does (SIGKILL) and come back on the same data directory and
//! port, and a client of its debug endpoints (faults, compaction, history).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::SystemTime;

use apiserver::faults::{FaultConfig, Injected};
use apiserver::store::history_log::HistoryRecord;
use apiserver::testing::HistoryEntry;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// The `apiserver` binary, for tests of other crates (a crate's own tests have
/// `CARGO_BIN_EXE_apiserver`): the one a workspace build (`cargo nextest run
/// --workspace`, `cargo build --workspace --tests`) leaves next to the test binaries.
///
/// It is not built from here: a `cargo build` inside a test runs with the test
/// runner's environment and another selection of targets, and cargo then resolves
/// features and fingerprints differently and rebuilds half the dependency tree.
/// A missing binary, or one older than the server's sources, fails the test with the
/// command that builds it.
pub fn apiserver_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test>-<hash> -> target/<profile>/apiserver
    let binary = exe
        .parent()
        .and_then(Path::parent)
        .expect("a test binary in target/<profile>/deps")
        .join("apiserver");
    let built = std::fs::metadata(&binary)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| {
            panic!(
                "no apiserver binary at {}: build it with `cargo build --workspace --tests`",
                binary.display()
            )
        });
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let sources = ["apiserver", "apimachinery", "apiextensions"]
        .iter()
        .map(|name| root.join("crates").join(name).join("src"));
    if let Some(newer) = sources
        .filter_map(|dir| newest_file(&dir))
        .find(|(at, _)| *at > built)
    {
        panic!(
            "{} is older than {}: build it with `cargo build --workspace --tests`",
            binary.display(),
            newer.1.display()
        );
    }
    binary
}

/// The most recently modified file under `dir`, with its time.
fn newest_file(dir: &Path) -> Option<(SystemTime, PathBuf)> {
    let mut newest: Option<(SystemTime, PathBuf)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let candidate = if path.is_dir() {
            newest_file(&path)
        } else {
            let modified = entry.metadata().and_then(|m| m.modified()).ok()?;
            Some((modified, path))
        };
        if let Some(candidate) = candidate
            && newest.as_ref().is_none_or(|(at, _)| candidate.0 > *at)
        {
            newest = Some(candidate);
        }
    }
    newest
}

/// A running (or killed) `apiserver --data-dir`; killed on drop. Its log (stderr, at
/// `warn`) accumulates over restarts in [`ApiServerProcess::log_path`].
pub struct ApiServerProcess {
    binary: PathBuf,
    data_dir: PathBuf,
    kubeconfig: PathBuf,
    args: Vec<String>,
    port: u16,
    url: String,
    child: Option<Child>,
}

impl ApiServerProcess {
    /// Starts `binary` on a free port with `--data-dir data_dir`, writing its kubeconfig
    /// to `kubeconfig`, with `args` added; returns once it serves.
    pub fn start(binary: &Path, data_dir: &Path, kubeconfig: &Path, args: &[&str]) -> Self {
        let mut server = Self {
            binary: binary.to_owned(),
            data_dir: data_dir.to_owned(),
            kubeconfig: kubeconfig.to_owned(),
            args: args.iter().map(|&a| a.to_owned()).collect(),
            port: 0,
            url: String::new(),
            child: None,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "the server is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open the apiserver log");
        let mut child = Command::new(&self.binary)
            .args(["--port", &self.port.to_string(), "--data-dir"])
            .arg(&self.data_dir)
            .arg("--kubeconfig-out")
            .arg(&self.kubeconfig)
            .args(&self.args)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn apiserver");
        // It prints its URL once it listens and the kubeconfig is written.
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout"))
            .read_line(&mut line)
            .expect("read the url");
        let url = line.trim().to_owned();
        assert!(
            url.starts_with("https://"),
            "apiserver did not start: {line:?} (log: {})",
            self.log_path().display()
        );
        self.port = url
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .expect("a port in the url");
        self.url = url;
        self.child = Some(child);
    }

    /// `https://127.0.0.1:<port>`; the same after a restart.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The kubeconfig the server wrote (its CA and token survive restarts).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Where the server's log goes.
    pub fn log_path(&self) -> PathBuf {
        self.kubeconfig.with_extension("apiserver.log")
    }

    /// A kube client configuration from the kubeconfig, as a user's would be.
    pub async fn config(&self) -> kube::Config {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("read the kubeconfig");
        kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("a client configuration from the kubeconfig")
    }

    /// SIGKILL: nothing not already written survives; the port is free once this returns.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill apiserver");
            child.wait().expect("reap apiserver");
        }
    }

    /// Starts the server again on the same data directory, port and arguments.
    pub fn restart(&mut self) {
        self.spawn();
    }
}

impl Drop for ApiServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What `GET /debug/faults` answers.
#[derive(Debug, Clone, Deserialize)]
pub struct FaultState {
    /// The settings.
    pub config: FaultConfig,
    /// What they injected since the server started.
    pub injected: Injected,
}

#[derive(Deserialize)]
struct HistoryList {
    items: Vec<HistoryRecord>,
}

/// A client of a server's debug endpoints (`apiserver --debug-endpoints`). Every call
/// is one request that fails as any other would while the server is down.
#[derive(Clone)]
pub struct DebugClient {
    client: kube::Client,
}

impl DebugClient {
    /// Talks through `client` (it carries the server's CA and token).
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: http::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T, kube::Error> {
        let mut request = http::Request::builder().method(method).uri(path);
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(body.unwrap_or_default())
            .expect("a request to a fixed path");
        self.client.request(request).await
    }

    /// The fault settings and what they injected.
    pub async fn faults(&self) -> Result<FaultState, kube::Error> {
        self.call(http::Method::GET, "/debug/faults", None).await
    }

    /// Replaces the fault settings.
    pub async fn set_faults(&self, config: &FaultConfig) -> Result<FaultState, kube::Error> {
        let body = serde_json::to_vec(config).expect("fault settings serialize");
        self.call(http::Method::PUT, "/debug/faults", Some(body))
            .await
    }

    /// Forces a compaction: resumed watches and continued lists get 410.
    pub async fn compact(&self) -> Result<(), kube::Error> {
        self.call::<serde_json::Value>(http::Method::POST, "/debug/compact", None)
            .await
            .map(drop)
    }

    /// The kept writes of `resource` (`<group>/<plural>`), oldest first.
    pub async fn history(&self, resource: &str) -> Result<Vec<HistoryEntry>, kube::Error> {
        let list: HistoryList = self
            .call(
                http::Method::GET,
                &format!("/debug/history?resource={resource}"),
                None,
            )
            .await?;
        Ok(list
            .items
            .iter()
            .map(|record| HistoryEntry::from_record(record).expect("a record of a write"))
            .collect())
    }
}
