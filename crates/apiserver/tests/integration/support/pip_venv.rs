//! A Python virtual environment under `<target>/<name>`, installed once from a pinned
//! requirements file and reused by every later run (as `helm_venv` does for helm-sdkpy):
//! the third-party client tier's official `kubernetes` client.
//!
//! Creation holds a file lock, so test binaries that start at once do not build the venv
//! over each other. The venv is rebuilt when the requirements file changes (its copy in
//! the venv differs).

#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One pinned venv.
pub struct PipVenv {
    /// Directory name under the target dir.
    pub name: &'static str,
    /// The pinned requirements (`pip freeze` output), an absolute path.
    pub requirements: &'static str,
    /// A module whose import proves the venv works.
    pub module: &'static str,
}

impl PipVenv {
    fn dir(&self) -> PathBuf {
        // CARGO_TARGET_TMPDIR is `<target>/tmp` for integration tests.
        Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("target dir")
            .join(self.name)
    }

    fn python(&self) -> PathBuf {
        self.dir().join("bin/python")
    }

    fn ready(&self) -> bool {
        let installed = std::fs::read(self.dir().join("requirements.txt")).ok();
        installed == std::fs::read(self.requirements).ok()
            && Command::new(self.python())
                .args(["-c", &format!("import {}", self.module)])
                .output()
                .is_ok_and(|o| o.status.success())
    }

    /// The venv's python, installing the venv when needed. When python3 or pip is missing
    /// or the install fails: under `CI=true` the test fails, otherwise this prints why and
    /// returns None (the test returns).
    #[must_use]
    pub fn python_or_skip(&self) -> Option<PathBuf> {
        if self.ready() {
            return Some(self.python());
        }
        let dir = self.dir();
        std::fs::create_dir_all(dir.parent().expect("target dir")).expect("create target dir");
        let lock = File::create(dir.with_extension("lock")).expect("create venv lock file");
        lock.lock().expect("lock the venv");
        if self.ready() {
            return Some(self.python());
        }
        let dir_arg = dir.to_str().expect("utf-8 path");
        let requirements = self.requirements;
        let python = self.python();
        let steps: [(PathBuf, Vec<&str>); 2] = [
            (
                PathBuf::from("python3"),
                vec!["-m", "venv", "--clear", dir_arg],
            ),
            (
                python.clone(),
                vec![
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "-r",
                    requirements,
                ],
            ),
        ];
        for (interpreter, args) in &steps {
            match Command::new(interpreter).args(args).output() {
                Ok(output) if output.status.success() => {}
                Ok(output) => {
                    super::tool_missing(&format!(
                        "{} {} failed ({}): {}",
                        interpreter.display(),
                        args.join(" "),
                        output.status,
                        String::from_utf8_lossy(&output.stderr)
                    ));
                    return None;
                }
                Err(e) => {
                    super::tool_missing(&format!("{} cannot run: {e}", interpreter.display()));
                    return None;
                }
            }
        }
        std::fs::copy(self.requirements, dir.join("requirements.txt"))
            .expect("record the installed requirements");
        if self.ready() {
            Some(python)
        } else {
            super::tool_missing(&format!(
                "{} does not import after pip install",
                self.module
            ));
            None
        }
    }
}
