//! SIGTERM ends the `manager` binary promptly and with exit status 0: `dev`
//! (it used to exit 1 logging `ERROR the controllers stopped`), and `run`
//! while a reconcile waits for caches that never list (it used to sit out
//! its whole shutdown deadline, a second SIGTERM changing nothing).
//!
//! Each test passes a shutdown deadline far above what it allows for the
//! exit, so an exit that only came from the deadline fails.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api::{ContractEntry, Infra, InfraSpec, Location, Resources, Role};
use apiserver::testing::TestServer;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};

/// What each test passes as `--shutdown-deadline`.
const DEADLINE: &str = "300s";
/// How long the exit may take after SIGTERM: well under [`DEADLINE`].
const PROMPT: Duration = Duration::from_secs(30);
/// How long the process may take to get where the test signals it.
const STARTUP: Duration = Duration::from_secs(60);
const CONTRACT_NS: &str = api::DEFAULT_CONTRACT_NAMESPACE;

/// A `manager` child process with its output collected line by line.
struct Manager {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Manager {
    fn spawn(args: &[&str], kubeconfig: Option<&Path>) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_manager"));
        command
            .args(args)
            .env_clear()
            .env("RUST_LOG", "info,controllers=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(path) = kubeconfig {
            command.env("KUBECONFIG", path);
        }
        let mut child = command.spawn().expect("spawn the manager binary");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let readers = vec![
            testkit::read_lines(child.stdout.take().unwrap(), &lines),
            testkit::read_lines(child.stderr.take().unwrap(), &lines),
        ];
        Self {
            child,
            lines,
            readers,
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    async fn wait_for_line(&mut self, text: &str) {
        let deadline = Instant::now() + STARTUP;
        while !self.lines().iter().any(|line| line.contains(text)) {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("exited ({status}) before `{text}`:\n{}", self.output());
            }
            assert!(
                Instant::now() < deadline,
                "no `{text}` within {STARTUP:?}:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed: {status}");
    }

    /// The exit status once the process ended, or a panic after `within`.
    async fn exit_within(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                for reader in self.readers.drain(..) {
                    reader.join().unwrap();
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running {within:?} after SIGTERM:\n{}",
                self.output()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn output(&self) -> String {
        self.lines().join("\n")
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[tokio::test]
async fn dev_exits_zero_on_sigterm() {
    let scratch = tempfile::tempdir().unwrap();
    let kubeconfig = scratch.path().join("kubeconfig");
    let mut dev = Manager::spawn(
        &[
            "dev",
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
            "--shutdown-deadline",
            DEADLINE,
        ],
        None,
    );
    dev.wait_for_line("Ctrl+C stops.").await;
    // The caches list and the Requester `local` is reconciled: the controllers run.
    dev.wait_for_line("caches synced").await;

    dev.sigterm();
    let status = dev.exit_within(PROMPT).await;
    let output = dev.output();
    assert!(status.success(), "dev exited with {status}:\n{output}");
    assert!(
        !output.contains("ERROR"),
        "an error was logged on a normal stop:\n{output}"
    );
}

#[tokio::test]
async fn run_exits_zero_on_sigterm_while_a_reconcile_waits_for_caches_that_never_list() {
    let server = TestServer::start().await.unwrap();
    let client = server.client();
    testkit::create_namespaces(&client, &["tenant-a", CONTRACT_NS]).await;
    // Every CRD but the NodeClaim's: the NodeClaims' cache can never list,
    // while the Infras' lists at once and hands the controller an Infra.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in api::crds() {
        let name = crd.metadata.name.clone().unwrap();
        if !name.starts_with("nodeclaims.") {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
    }
    let infras: Api<Infra> = Api::namespaced(client.clone(), CONTRACT_NS);
    let spec = InfraSpec {
        description: "waits for the caches".to_owned(),
        contracts: vec![ContractEntry {
            name: "one".to_owned(),
            resources: Resources {
                cpus: 1,
                memory: 1024,
                disk: 10,
                network: 100,
            },
            location: Location {
                country: "DE".to_owned(),
                region: None,
            },
            role: Role::Worker,
        }],
        secrets: vec![],
        record: None,
        cluster_ref: None,
        nodes: vec![],
    };
    testkit::eventually("the Infra CRD to serve", || {
        let infras = infras.clone();
        let infra = Infra::new("waiting", spec.clone());
        async move { infras.create(&PostParams::default(), &infra).await.ok() }
    })
    .await;

    let mut run = Manager::spawn(
        &[
            "run",
            "--http-addr",
            "127.0.0.1:0",
            "--leader-elect=false",
            "--shutdown-deadline",
            DEADLINE,
        ],
        Some(server.kubeconfig_path()),
    );
    run.wait_for_line("waiting for every cache's initial list")
        .await;

    run.sigterm();
    let status = run.exit_within(PROMPT).await;
    let output = run.output();
    assert!(status.success(), "run exited with {status}:\n{output}");
    assert!(
        output.contains("shutting down"),
        "the signal was not taken:\n{output}"
    );
    assert!(
        !output.contains("deadline passed"),
        "the exit waited for the deadline:\n{output}"
    );
}
