//! The command line: `run`, `dev` and `demo`.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use controllers::StopSignal;

use crate::{
    dev::{self, DevArgs},
    run::RunArgs,
    shutdown::run_until_shutdown,
    telemetry::{self, LogFormat},
};

/// The socialweb.computer node controller manager.
#[derive(Debug, Parser)]
#[command(name = "manager", version, about)]
pub struct Cli {
    /// Log line format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true, env = "LOG_FORMAT")]
    pub log_format: LogFormat,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The manager's modes.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the controllers against a cluster (kubeconfig or in-cluster).
    Run(Box<RunArgs>),
    /// Start the embedded API server and local market, and run the controllers on them.
    Dev(DevArgs),
    /// `dev` plus a scripted run: a Cluster scaled 3 -> 5 -> 2 nodes, then deleted.
    Demo(DevArgs),
}

/// Parses the command line, runs the chosen mode and turns its outcome into an exit code.
#[must_use]
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The demo's output is its tree; reconcile logs would bury it.
    let default_filter = if matches!(cli.command, Command::Demo(_)) {
        "warn"
    } else {
        "info"
    };
    if let Err(error) = telemetry::init(cli.log_format, default_filter) {
        eprintln!("error: cannot set up logging: {error:#}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => crate::run::run(*args).await,
            Command::Dev(args) => run_dev(&args).await,
            Command::Demo(args) => run_demo(&args).await,
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `dev` until SIGTERM or SIGINT (exit 0, after the reconciles in flight
/// finished or the deadline passed; a second signal exits at once).
async fn run_dev(args: &DevArgs) -> anyhow::Result<()> {
    let shutdown = args.shutdown.shutdown();
    let _signals = shutdown
        .listen_for_signals()
        .context("listen for SIGTERM/SIGINT")?;
    let env = dev::start(args, StopSignal::on(shutdown.signaled())).await?;
    println!(
        "embedded API server: {} (its CA and token are in the kubeconfig)",
        env.server.url()
    );
    println!("kubeconfig: {}", env.kubeconfig.display());
    if let Some(atproto) = &env.atproto {
        println!(
            "fake atproto market: PDS {}, PLC {}, relay {}; {} bidders; submitBid/submitEvent at {}",
            atproto.market.net.pds_url,
            atproto.market.net.plc_url,
            atproto.market.net.relay_url,
            atproto.market.bidders.len(),
            atproto.public_url
        );
    }
    println!("try: {}", dev::kubectl_hint(&env.kubeconfig));
    println!(
        "     kubectl --kubeconfig {} apply -f examples/",
        env.kubeconfig.display()
    );
    println!("Ctrl+C stops.");
    run_until_shutdown(&shutdown, env.controllers.done).await?;
    Ok(())
}

async fn run_demo(args: &DevArgs) -> anyhow::Result<()> {
    // Bound whole, not destructured: the fields a pattern leaves out would
    // drop at the end of the `let`, taking the scratch kubeconfig printed
    // below and the fake atproto market with them.
    let mut env = dev::start(args, StopSignal::on_process_signal()).await?;
    println!(
        "embedded API server: {}  kubeconfig: {}",
        env.server.url(),
        env.kubeconfig.display()
    );
    let options = crate::demo::DemoOptions {
        contract_namespace: args.controllers.contract_namespace.clone(),
        ..Default::default()
    };
    let mut stdout = std::io::stdout();
    let client = env.client.clone();
    tokio::select! {
        () = &mut env.controllers.done => anyhow::bail!("the controllers stopped before the demo finished"),
        summary = crate::demo::run_script(client, &options, &mut stdout) => summary.map(|_| ()),
    }
}
