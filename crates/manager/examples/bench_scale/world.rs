//! One benchmark environment: the embedded API server on a runtime of its
//! own, the manager on another (or in a process of its own), and the
//! benchmark's driver on the main runtime, so each one's CPU is told apart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use api::Requester;
use apiserver::testing::TestServer;
use controllers::requester::Markets;
use controllers::{Clock, StopSignal, SystemClock, metrics::Metrics};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use manager::api_client::api_client;
use manager::wiring::{ControllerOptions, Controllers};
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::runtime::Runtime;

use crate::probe;
use crate::{BENCH_MANAGER, TENANT};

/// Thread name of the API server's runtime (at most 15 bytes: Linux keeps no more).
const SERVER_THREADS: &str = "bench-apiserver";
/// Thread name of the in-process manager's runtime.
const MANAGER_THREADS: &str = "bench-manager";
/// What the child manager prints once its caches hold their initial lists.
const CHILD_READY: &str = "ready";
/// Asks the child manager for its metrics; the answer ends with `# EOF`.
const CHILD_METRICS: &str = "metrics";
/// A command (and its arguments) the `--external` manager runs under, as a profiler.
const MANAGER_WRAPPER_VAR: &str = "BENCH_MANAGER_WRAPPER";
/// The controllers' concurrency, `INFRA,NODECLAIM,REQUESTER` (unset: the
/// manager's defaults), to compare settings in alternated runs of one build.
const CONCURRENCY_VAR: &str = "BENCH_CONCURRENCY";

/// The manager's default options, with [`CONCURRENCY_VAR`] applied.
fn controller_options() -> anyhow::Result<ControllerOptions> {
    let mut options = ControllerOptions::default();
    let Ok(value) = std::env::var(CONCURRENCY_VAR) else {
        return Ok(options);
    };
    let numbers = value
        .split(',')
        .map(|n| n.trim().parse::<u16>().ok().filter(|n| *n > 0))
        .collect::<Option<Vec<u16>>>();
    let Some(&[infra, nodeclaim, requester]) = numbers.as_deref() else {
        bail!(
            "{CONCURRENCY_VAR}={value}: expected three positive numbers INFRA,NODECLAIM,REQUESTER"
        );
    };
    options.infra_concurrency = infra;
    options.nodeclaim_concurrency = nodeclaim;
    options.requester_concurrency = requester;
    Ok(options)
}

/// How a [`World`] is set up.
pub struct WorldOptions {
    /// Guests the bidders have room for, and contracts allowed in flight.
    pub capacity: usize,
    /// The manager in a process of its own (`--external`).
    pub external: bool,
    /// Where the local market keeps its journal, so that its guests outlive
    /// the manager's process (`--restart`); in memory when `None`.
    pub market_state: Option<PathBuf>,
}

/// The manager under test.
enum Manager {
    InProcess {
        runtime: Runtime,
        registry: Registry,
    },
    Child {
        child: Child,
        stdin: ChildStdin,
        stdout: Lines<BufReader<ChildStdout>>,
        /// The variables it was started with (the chart's).
        env: Vec<(String, String)>,
    },
}

/// A running environment; [`World::stop`] ends it.
pub struct World {
    pub server: TestServer,
    server_runtime: Runtime,
    manager: Manager,
    /// The driver's client: its requests carry the user agent [`BENCH_MANAGER`].
    pub client: Client,
    pub contract_namespace: String,
}

/// A runtime whose threads carry `name`, so their CPU time can be read.
fn runtime(name: &str) -> anyhow::Result<Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        // Blocking threads that exit take their CPU time with them.
        .thread_keep_alive(Duration::from_secs(24 * 3600))
        .enable_all()
        .build()
        .context("build a runtime")
}

/// A client whose requests the server logs under the user agent [`BENCH_MANAGER`], so the
/// benchmark's own deletes (which carry no field manager) are not counted as the manager's.
fn driver_client(server: &TestServer) -> anyhow::Result<Client> {
    let mut config = server.config();
    config.headers = vec![(
        http::header::USER_AGENT,
        http::HeaderValue::from_static(BENCH_MANAGER),
    )];
    Client::try_from(config).context("build the benchmark's client")
}

/// The Requester: bidders that boot at once and have room for `capacity`
/// nodes, a 1 s bid window, every contract allowed in flight at once, and
/// the market's journal in `state` if given.
fn requester(namespace: &str, capacity: usize, state: Option<&Path>) -> anyhow::Result<Requester> {
    let bidder = |did: &str, cost: u64| {
        json!({"did": did, "cost": cost, "currency": "EUR",
               "capacity": capacity + 1, "bootDelayMillis": 0})
    };
    serde_json::from_value(json!({
        "apiVersion": "socialweb.computer/v1alpha1", "kind": "Requester",
        "metadata": {"name": "bench", "namespace": namespace},
        "spec": {
            "bidWindowSeconds": 1,
            "maxInFlight": capacity.max(1),
            "market": {"local": {"seed": 7, "stateDir": state, "bidders": [
                bidder("did:web:cheap.example", 90),
                bidder("did:web:fast.example", 120),
            ]}},
        },
    }))
    .context("build the Requester")
}

/// The controllers on `client`, with the markets a `run` builds from the Requesters.
fn controllers(client: Client, metrics: Metrics, options: ControllerOptions) -> Controllers {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    Controllers {
        client,
        markets: Arc::new(Markets::new(Arc::clone(&clock))),
        clock,
        metrics,
        options,
        stop: StopSignal::never(),
    }
}

impl World {
    /// Starts the server, installs the CRDs, namespaces and the Requester, and
    /// starts the manager; returns once its caches hold their initial lists.
    pub async fn start(options: &WorldOptions) -> anyhow::Result<Self> {
        let server_runtime = runtime(SERVER_THREADS)?;
        // Every write is kept (reads are only counted), and no history: it
        // would keep every version of every object alive.
        let server = server_runtime
            .spawn(
                TestServer::builder()
                    .request_log(usize::MAX, true)
                    .history_cap(0)
                    .start(),
            )
            .await
            .context("the API server's runtime")?
            .context("start the API server")?;
        let client = driver_client(&server)?;
        let controller_options = controller_options()?;
        let contract_namespace = controller_options.contract_namespace.clone();
        manager::dev::install_crds(&client).await?;
        testkit::create_namespaces(&client, &[TENANT, &contract_namespace]).await;
        let post = PostParams {
            field_manager: Some(BENCH_MANAGER.to_owned()),
            ..PostParams::default()
        };
        Api::<Requester>::namespaced(client.clone(), &contract_namespace)
            .create(
                &post,
                &requester(
                    &contract_namespace,
                    options.capacity,
                    options.market_state.as_deref(),
                )?,
            )
            .await
            .context("create the Requester")?;
        let manager = if options.external {
            start_child(server.kubeconfig_path(), &contract_namespace).await?
        } else {
            start_in_process(&server, controller_options).await?
        };
        Ok(Self {
            server,
            server_runtime,
            manager,
            client,
            contract_namespace,
        })
    }

    /// CPU time the API server has used.
    pub fn server_cpu(&self) -> Duration {
        probe::threads_cpu(SERVER_THREADS)
    }

    /// CPU time the manager has used.
    pub fn manager_cpu(&self) -> Duration {
        match &self.manager {
            Manager::InProcess { .. } => probe::threads_cpu(MANAGER_THREADS),
            Manager::Child { child, .. } => child.id().map_or(Duration::ZERO, probe::process_cpu),
        }
    }

    /// CPU time the benchmark's own driver has used: its creates and its
    /// watches (this process's threads that are neither the API server's
    /// nor an in-process manager's). It shares the machine with the two under
    /// test, so it is printed beside them.
    pub fn driver_cpu(&self) -> Duration {
        let own_manager = match &self.manager {
            Manager::InProcess { .. } => probe::threads_cpu(MANAGER_THREADS),
            Manager::Child { .. } => Duration::ZERO,
        };
        probe::process_cpu(std::process::id())
            .saturating_sub(self.server_cpu())
            .saturating_sub(own_manager)
    }

    /// The variables the manager's process was started with, as the chart
    /// gives them (`NAME=value`); none when it shares this process.
    pub fn manager_env(&self) -> Vec<String> {
        match &self.manager {
            Manager::InProcess { .. } => Vec::new(),
            Manager::Child { env, .. } => env
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect(),
        }
    }

    /// The manager's resident memory and what it is made of, when it runs
    /// in a process of its own; `None` when it shares this one.
    pub fn manager_resident(&self) -> Option<probe::Resident> {
        match &self.manager {
            Manager::InProcess { .. } => None,
            Manager::Child { child, .. } => child.id().map(|pid| probe::resident(Some(pid))),
        }
    }

    /// Reconciles started so far, by controller.
    pub async fn reconciles(&mut self) -> anyhow::Result<BTreeMap<String, u64>> {
        Ok(probe::reconciles(&self.metrics_text().await?))
    }

    /// The manager's metrics, as Prometheus would read them.
    pub async fn metrics_text(&mut self) -> anyhow::Result<String> {
        let mut text = String::new();
        match &mut self.manager {
            Manager::InProcess { registry, .. } => {
                prometheus_client::encoding::text::encode(&mut text, registry)
                    .context("encode metrics")?;
            }
            Manager::Child { stdin, stdout, .. } => {
                stdin
                    .write_all(format!("{CHILD_METRICS}\n").as_bytes())
                    .await
                    .context("ask the manager for its metrics")?;
                while let Some(line) = stdout.next_line().await? {
                    if line == "# EOF" {
                        break;
                    }
                    text.push_str(&line);
                    text.push('\n');
                }
            }
        }
        Ok(text)
    }

    /// Kills the manager's process and starts another on the same server;
    /// returns once its caches hold their initial lists (`--external` only).
    pub async fn restart_manager(&mut self) -> anyhow::Result<()> {
        let Manager::Child { child, .. } = &mut self.manager else {
            bail!("only a manager in a process of its own restarts (--external)");
        };
        child.kill().await.context("kill the manager process")?;
        self.manager = start_child(self.server.kubeconfig_path(), &self.contract_namespace).await?;
        Ok(())
    }

    /// Stops the manager and the server.
    pub async fn stop(self) {
        match self.manager {
            Manager::InProcess { runtime, .. } => runtime.shutdown_background(),
            Manager::Child { mut child, .. } => {
                let _ = child.kill().await;
            }
        }
        drop(self.server);
        self.server_runtime.shutdown_background();
    }
}

async fn start_in_process(
    server: &TestServer,
    options: ControllerOptions,
) -> anyhow::Result<Manager> {
    let runtime = runtime(MANAGER_THREADS)?;
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let config = server.config();
    // The client is built on the manager's runtime: its connections are served there.
    runtime
        .spawn(async move {
            let client = api_client(config).context("the manager's client")?;
            let mut running = controllers(client, metrics, options).start();
            tokio::spawn(running.done);
            running
                .ready
                .wait_for(|ready| *ready)
                .await
                .context("the caches never synced")?;
            anyhow::Ok(())
        })
        .await
        .context("the manager's runtime")??;
    Ok(Manager::InProcess { runtime, registry })
}

async fn start_child(kubeconfig: &Path, namespace: &str) -> anyhow::Result<Manager> {
    let this = std::env::current_exe().context("find this benchmark's executable")?;
    // A profiler to run the manager under (`BENCH_MANAGER_WRAPPER="heaptrack -o /tmp/m"`):
    // its memory is the manager's alone, apart from the server's and the driver's.
    let wrapper = std::env::var(MANAGER_WRAPPER_VAR).unwrap_or_default();
    let mut words = wrapper.split_whitespace();
    let mut command = match words.next() {
        Some(program) => {
            let mut command = tokio::process::Command::new(program);
            command.args(words).arg(this);
            command
        }
        None => tokio::process::Command::new(this),
    };
    // As the chart deploys it.
    let env = crate::chart::manager_env()?;
    command.envs(env.iter().cloned());
    let mut child = command
        .arg(crate::CHILD_FLAG)
        .arg(kubeconfig)
        .arg(namespace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("start the manager process")?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        bail!("the manager process has no pipes");
    };
    let mut stdout = BufReader::new(stdout).lines();
    loop {
        match stdout.next_line().await? {
            Some(line) if line == CHILD_READY => break,
            // What a wrapper says of itself before the manager starts.
            Some(line) if !wrapper.is_empty() => eprintln!("{line}"),
            other => bail!("the manager process did not start: {other:?}"),
        }
    }
    Ok(Manager::Child {
        child,
        stdin,
        stdout,
        env,
    })
}

/// The manager process of `--external`: the controllers against the server
/// of `kubeconfig`, answering [`CHILD_METRICS`] on stdin with its metrics,
/// until stdin closes.
pub async fn run_child(kubeconfig: &Path, namespace: &str) -> anyhow::Result<()> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).context("read the kubeconfig")?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .context("the kubeconfig")?;
    let client = api_client(config).context("the manager's client")?;
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let options = ControllerOptions {
        contract_namespace: namespace.to_owned(),
        ..controller_options()?
    };
    let mut running = controllers(client, metrics, options).start();
    tokio::spawn(running.done);
    running
        .ready
        .wait_for(|ready| *ready)
        .await
        .context("the caches never synced")?;
    let mut stdout = tokio::io::stdout();
    stdout
        .write_all(format!("{CHILD_READY}\n").as_bytes())
        .await?;
    stdout.flush().await?;
    let mut commands = BufReader::new(tokio::io::stdin()).lines();
    while let Some(command) = commands.next_line().await? {
        if command == CHILD_METRICS {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry)
                .context("encode metrics")?;
            if !text.ends_with("# EOF\n") {
                text.push_str("# EOF\n");
            }
            stdout.write_all(text.as_bytes()).await?;
            stdout.flush().await?;
        }
    }
    Ok(())
}
