//! `dev` and `demo`: the whole product on this machine.
//!
//! Starts the embedded API server, installs the CRDs, creates the contract
//! namespace with a Requester on the local market (or, with `--market
//! atproto-fake`, on a fake atproto market: [`crate::dev_atproto`]), plays the
//! tenant clusters' side ([`crate::tenant_side`]) and runs the controllers
//! through the same wiring as `run`.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use anyhow::Context as _;
use api::{Requester, names};
use apiserver::ApiServer;
use controllers::{Clock, StopSignal, SystemClock, metrics::Metrics, requester::Markets};
use k8s_openapi::{
    api::core::v1::Namespace,
    apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
};
use kube::{
    Api, Client, ResourceExt,
    api::{Patch, PatchParams, PostParams},
    runtime::wait::{await_condition, conditions},
};
use market::{LocalMarket, LocalMarketConfig};

use crate::api_client::api_client;
use crate::dev_atproto::{self, DevAtproto};
use crate::shutdown::ShutdownArgs;
use crate::tenant_side::{self, AbortOnDrop};
use crate::wiring::{ControllerOptions, Controllers, Running};

/// The field manager of what `dev` installs.
const DEV_MANAGER: &str = "socialweb/dev";

/// Options of `dev` and `demo`.
#[derive(Debug, Clone, clap::Args)]
pub struct DevArgs {
    /// Port of the embedded API server on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Keep the API server's objects and the local market's guests here across restarts
    /// (without it, everything is in memory and gone at exit).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Where to write the kubeconfig (default: `<data-dir>/kubeconfig`, or a temporary directory).
    #[arg(long)]
    pub kubeconfig_out: Option<PathBuf>,
    /// Serve the API server's debug endpoints under /debug/ (fault injection, forced
    /// compaction), to try the controllers under failures; they need the token.
    #[arg(long)]
    pub debug_endpoints: bool,
    /// The controllers' namespaces and concurrency.
    #[command(flatten)]
    pub controllers: ControllerOptions,
    /// How long reconciles in flight may finish after SIGTERM/SIGINT.
    #[command(flatten)]
    pub shutdown: ShutdownArgs,
    /// The market of the dev Requester: `local` (the embedded simulated
    /// market, Requester `local`) or `atproto-fake` (an atproto compute
    /// market of fake PLC, PDS, relay and bidders in this process, over real
    /// HTTP; Requester `atproto`).
    #[arg(long, value_enum, default_value_t = DevMarket::Local)]
    pub market: DevMarket,
}

/// The market `dev` runs its Requester on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DevMarket {
    /// The embedded simulated market.
    Local,
    /// The atproto market, faked in this process.
    AtprotoFake,
}

/// A running development environment; everything stops when it is dropped.
///
/// Fields drop in the order they are declared, and that order is the
/// shutdown: whatever uses the server stops before the server does. A task
/// still watching when the server went would reconnect to a closed port and
/// kube-client would log that failed request as an ERROR on a clean stop.
pub struct DevEnvironment {
    /// Plays the tenant clusters; first to stop, its watch is the one left open.
    _tenant_side: AbortOnDrop,
    /// The fake atproto market, with `--market atproto-fake`.
    pub atproto: Option<DevAtproto>,
    /// The controllers.
    pub controllers: Running,
    /// The local market every Requester of this process uses.
    pub market: Arc<LocalMarket>,
    /// A client for the server.
    pub client: Client,
    /// The embedded API server; stops after everything that uses it.
    pub server: ApiServer,
    /// The kubeconfig `kubectl` can use.
    pub kubeconfig: PathBuf,
    _scratch: Option<tempfile::TempDir>,
}

/// Starts the server, installs what the product needs and starts the
/// controllers, which stop taking work once `stop` resolves.
///
/// # Errors
///
/// When the server cannot bind, the data directory cannot be used, or the CRDs
/// do not become Established.
pub async fn start(args: &DevArgs, stop: StopSignal) -> anyhow::Result<DevEnvironment> {
    let mut builder = ApiServer::builder()
        .port(args.port)
        .debug_endpoints(args.debug_endpoints);
    if let Some(dir) = &args.data_dir {
        // 0700: it holds the kubeconfig (the token), the CA key and every Secret.
        apiserver::private_fs::create_dir(dir)
            .with_context(|| format!("create data directory {}", dir.display()))?;
        builder = builder.data_dir(dir.join("apiserver"));
    }
    let server = builder
        .serve()
        .await
        .context("start the embedded API server")?;

    let (kubeconfig, scratch) = match (&args.kubeconfig_out, &args.data_dir) {
        (Some(path), _) => (path.clone(), None),
        (None, Some(dir)) => (dir.join("kubeconfig"), None),
        (None, None) => {
            let dir = tempfile::Builder::new()
                .prefix("socialweb-dev-")
                .tempdir()
                .context("create a temporary directory for the kubeconfig")?;
            (dir.path().join("kubeconfig"), Some(dir))
        }
    };
    server
        .write_kubeconfig(&kubeconfig)
        .with_context(|| format!("write kubeconfig {}", kubeconfig.display()))?;
    let client =
        api_client(server.client_config()).context("build a client for the embedded API server")?;

    install_crds(&client).await?;
    let namespace = &args.controllers.contract_namespace;
    ensure_namespace(&client, namespace, DEV_MANAGER).await?;
    if args.market == DevMarket::Local {
        ensure_requester(&client, namespace).await?;
    } else {
        refuse_a_local_requester(&client, namespace).await?;
    }

    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let market = Arc::new(
        LocalMarket::new(
            LocalMarketConfig {
                seed: 7,
                bidders: Vec::new(), // the Requester's spec sets them
                state_dir: args.data_dir.as_ref().map(|dir| dir.join("market")),
                node_register_delay: Duration::from_millis(500),
            },
            Arc::clone(&clock),
        )
        .context("open the local market")?,
    );
    let markets = Arc::new(Markets::with_injected(
        clock.clone(),
        controllers::market_adapter::Injected::Local(Arc::clone(&market)),
    ));
    let atproto = match args.market {
        DevMarket::Local => None,
        DevMarket::AtprotoFake => {
            Some(dev_atproto::start(&client, namespace, markets.inbox()).await?)
        }
    };
    let controllers = Controllers {
        client: client.clone(),
        clock: Arc::clone(&clock),
        markets,
        metrics: Metrics::default(),
        options: args.controllers.clone(),
        stop,
    }
    .start();

    let tenant_side = AbortOnDrop(tokio::spawn(tenant_side::run(client.clone())));

    Ok(DevEnvironment {
        _tenant_side: tenant_side,
        atproto,
        controllers,
        market,
        client,
        server,
        kubeconfig,
        _scratch: scratch,
    })
}

/// Applies every CRD of the `api` crate and waits until each is Established.
///
/// # Errors
///
/// When the server refuses a CRD or one is not Established within 30 s.
pub async fn install_crds(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(DEV_MANAGER).force();
    for crd in api::crds() {
        let name = crd.name_any();
        crds.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .with_context(|| format!("install CRD {name}"))?;
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(crds.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .with_context(|| format!("CRD {name} not Established within 30s"))?
        .with_context(|| format!("wait for CRD {name}"))?;
    }
    Ok(())
}

/// Applies the Namespace `name` under the field manager `manager`: the dev
/// environment's contract namespace, the demo's tenant namespace.
pub(crate) async fn ensure_namespace(
    client: &Client,
    name: &str,
    manager: &str,
) -> anyhow::Result<()> {
    let namespace: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
    }))?;
    Api::<Namespace>::all(client.clone())
        .patch(
            name,
            &PatchParams::apply(manager),
            &Patch::Apply(&namespace),
        )
        .await
        .with_context(|| format!("create namespace {name}"))?;
    Ok(())
}

/// Whether the namespace has the Requester `local` (the dev environment's
/// on the local market).
async fn has_local_requester(client: &Client, namespace: &str) -> anyhow::Result<bool> {
    let found = Api::<Requester>::namespaced(client.clone(), namespace)
        .get_opt("local")
        .await
        .context("read Requester local")?;
    Ok(found.is_some())
}

/// The Requester of the dev environment; created once, so a user's edits
/// survive a restart with `--data-dir`.
async fn ensure_requester(client: &Client, namespace: &str) -> anyhow::Result<()> {
    if has_local_requester(client, namespace).await? {
        return Ok(());
    }
    let requester: Requester = serde_json::from_value(serde_json::json!({
        "apiVersion": "socialweb.computer/v1alpha1",
        "kind": "Requester",
        "metadata": {"name": "local", "namespace": namespace},
        "spec": {
            "bidWindowSeconds": 2,
            "maxInFlight": 10,
            "market": {"local": {
                "seed": 7,
                "bidders": [
                    {"did": "did:web:south.bidders.example", "cost": 95, "currency": "EUR",
                     "capacity": 3, "bootDelayMillis": 2500},
                    {"did": "did:web:north.bidders.example", "cost": 120, "currency": "EUR",
                     "capacity": 4, "bootDelayMillis": 2000},
                    {"did": "did:plc:eastbidder7x2k", "cost": 150, "currency": "EUR",
                     "capacity": 6, "bootDelayMillis": 1500},
                ],
            }},
        },
    }))
    .context("build the dev Requester")?;
    Api::<Requester>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &requester)
        .await
        .context("create Requester local")?;
    Ok(())
}

/// With `--market atproto-fake` the Requester `atproto` must run the
/// namespace; a `local` one kept in the data directory is older and would.
async fn refuse_a_local_requester(client: &Client, namespace: &str) -> anyhow::Result<()> {
    if has_local_requester(client, namespace).await? {
        anyhow::bail!(
            "Requester {namespace}/local (of an earlier `dev --market local` in this data \
             directory) would run the namespace instead of the atproto one: delete it, or use \
             another --data-dir"
        );
    }
    Ok(())
}

/// The line a user pastes to look around.
#[must_use]
pub fn kubectl_hint(kubeconfig: &Path) -> String {
    format!(
        "kubectl --kubeconfig {} get infra -A -l {}=<cluster>",
        kubeconfig.display(),
        names::CLUSTER_LABEL
    )
}
