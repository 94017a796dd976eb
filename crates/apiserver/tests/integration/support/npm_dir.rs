//! An npm project under `<target>/<name>`, installed once with `npm ci` from a committed
//! `package.json` and `package-lock.json` (every package pinned) and reused by every later
//! run: the third-party client tier's `@kubernetes/client-node`.
//!
//! Creation holds a file lock, so test binaries that start at once do not install over
//! each other. The project is installed again when the lockfile changes.

#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One pinned npm project.
pub struct NpmDir {
    /// Directory name under the target dir.
    pub name: &'static str,
    /// The directory holding `package.json` and `package-lock.json` (absolute).
    pub source: &'static str,
    /// A package whose `package.json` in `node_modules` proves the install.
    pub package: &'static str,
}

impl NpmDir {
    /// `<target>/<name>`.
    #[must_use]
    pub fn dir(&self) -> PathBuf {
        // CARGO_TARGET_TMPDIR is `<target>/tmp` for integration tests.
        Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("target dir")
            .join(self.name)
    }

    fn ready(&self) -> bool {
        let dir = self.dir();
        let lock = |d: &Path| std::fs::read(d.join("package-lock.json")).ok();
        lock(&dir).is_some()
            && lock(&dir) == lock(Path::new(self.source))
            && dir
                .join("node_modules")
                .join(self.package)
                .join("package.json")
                .exists()
    }

    /// The installed directory, running `npm ci` when needed. When node or npm is missing
    /// or the install fails: under `CI=true` the test fails, otherwise this prints why and
    /// returns None (the test returns).
    #[must_use]
    pub fn installed_or_skip(&self) -> Option<PathBuf> {
        if let Err(e) = Command::new("node").arg("--version").output() {
            super::tool_missing(&format!("node cannot run: {e}"));
            return None;
        }
        if self.ready() {
            return Some(self.dir());
        }
        let dir = self.dir();
        std::fs::create_dir_all(&dir).expect("create the npm directory");
        let lock = File::create(dir.with_extension("lock")).expect("create npm lock file");
        lock.lock().expect("lock the npm directory");
        if self.ready() {
            return Some(dir);
        }
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(Path::new(self.source).join(file), dir.join(file))
                .expect("copy the npm project files");
        }
        match Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .output()
        {
            Ok(output) if output.status.success() => {}
            Ok(output) => {
                // A failed install must not look installed to the next run.
                let _ = std::fs::remove_file(dir.join("package-lock.json"));
                super::tool_missing(&format!(
                    "npm ci in {} failed ({}): {}",
                    dir.display(),
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                ));
                return None;
            }
            Err(e) => {
                super::tool_missing(&format!("npm cannot run: {e}"));
                return None;
            }
        }
        if self.ready() {
            Some(dir)
        } else {
            super::tool_missing(&format!("{} is not installed after npm ci", self.package));
            None
        }
    }
}
