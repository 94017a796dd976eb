//! The command line: `run`, `dev` and `demo`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::telemetry::{self, LogFormat};

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
    Run,
    /// Start the embedded API server and local market, and run the controllers on them.
    Dev,
    /// `dev` plus a scripted run: a Cluster scaled 3 -> 5 -> 2 nodes, then deleted.
    Demo,
}

/// Parses the command line, runs the chosen mode and turns its outcome into an exit code.
#[must_use]
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(error) = telemetry::init(cli.log_format) {
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
            Command::Run | Command::Dev | Command::Demo => {
                anyhow::bail!("{:?} arrives with the controllers", cli.command)
            }
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
