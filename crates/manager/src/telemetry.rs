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

/// kube-client logs, at WARN, the whole body of a response it cannot decode (a SecretList
/// with every Secret's data) and, at DEBUG and TRACE, error and Status bodies. Its
/// `client` module is therefore held at ERROR whatever `RUST_LOG` says: no object body
/// reaches our logs through it.
const KUBE_CLIENT_BODIES: &str = "kube_client::client=error";

/// The filter: `RUST_LOG` (default `default_filter`), with kube-client's body logging off.
///
/// # Errors
///
/// When `RUST_LOG` does not parse.
pub fn filter(default_filter: &str) -> anyhow::Result<EnvFilter> {
    let filter =
        EnvFilter::try_from_default_env().or_else(|_| EnvFilter::try_new(default_filter))?;
    Ok(filter.add_directive(KUBE_CLIENT_BODIES.parse()?))
}

/// Installs the global subscriber; `RUST_LOG` filters (default `default_filter`).
///
/// # Errors
///
/// When `RUST_LOG` does not parse or a subscriber is already installed.
pub fn init(format: LogFormat, default_filter: &str) -> anyhow::Result<()> {
    let filter = filter(default_filter)?;
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
