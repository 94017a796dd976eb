//! Logging: text or JSON lines, filtered by `RUST_LOG`.

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// Installs the global subscriber; `RUST_LOG` filters (default `default_filter`).
///
/// # Errors
///
/// When `RUST_LOG` does not parse or a subscriber is already installed.
pub fn init(format: LogFormat, default_filter: &str) -> anyhow::Result<()> {
    let filter =
        EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(default_filter))?;
    let registry = tracing_subscriber::registry().with(filter);
    match format {
        LogFormat::Text => registry.with(fmt::layer().with_target(false)).try_init()?,
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(true),
            )
            .try_init()?,
    }
    Ok(())
}
