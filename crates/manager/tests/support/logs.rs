//! Every log line of the test process, kept so invariant 6 can look for secrets in them.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

static LINES: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();

fn buffer() -> &'static Mutex<Vec<u8>> {
    LINES.get_or_init(|| Mutex::new(Vec::new()))
}

struct Capture;

impl Write for Capture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        buffer()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the capturing subscriber once per test binary (debug for our crates).
pub fn capture() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "info,controllers=debug,manager=debug,market=debug",
        ))
        .with_ansi(false)
        .with_writer(|| Capture)
        .try_init();
}

/// Everything logged so far by every test of this binary.
pub fn text() -> String {
    String::from_utf8_lossy(
        &buffer()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
    .into_owned()
}
