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
            "info,controllers=debug,manager=debug,market=debug,kube_runtime=debug",
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

/// On a failure, writes every log line of this test binary to
/// `target/e2e-logs/<pid>.log` and says where: the end-to-end tests run one
/// per process under nextest, so the file is that test's story.
pub fn dump_on_panic() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let dir =
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-logs");
            let file = dir.join(format!("{}.log", std::process::id()));
            let written = std::fs::create_dir_all(&dir)
                .and_then(|()| std::fs::write(&file, format!("{info}\n{}", text())));
            if written.is_ok() {
                eprintln!("the manager's logs are in {}", file.display());
            }
            previous(info);
        }));
    });
}
