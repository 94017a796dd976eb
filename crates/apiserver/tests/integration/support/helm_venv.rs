//! A Python virtual environment with `helm-sdkpy` (the Helm 4 library behind
//! Python bindings), created once under `<target>/helm-venv` and reused by every
//! test that drives Helm (this crate's Helm test and the manager's chart test).
//!
//! helm-sdkpy declares Python >= 3.12 but runs on 3.11, hence
//! `--ignore-requires-python`. Creation holds a file lock, so two test binaries
//! that start at once do not build the venv over each other.
//!
//! Self-contained so other crates' tests can share it:
//! `#[path = "../../../apiserver/tests/integration/support/helm_venv.rs"] mod helm_venv;`

#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The pinned helm-sdkpy version (a new release must not change a test's outcome unnoticed).
pub const HELM_SDKPY: &str = "helm-sdkpy==0.1.32";

use testkit::tool_missing;

/// `<target dir>/helm-venv`, whatever the target dir is.
#[must_use]
pub fn venv_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is `<target>/tmp` for integration tests.
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target dir")
        .join("helm-venv")
}

/// The venv's python interpreter.
#[must_use]
pub fn venv_python() -> PathBuf {
    venv_dir().join("bin/python")
}

fn imports_helm(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import helm_sdkpy"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The python of a venv that can `import helm_sdkpy`, creating it when needed.
/// When python3 or pip is missing or the install fails: under `CI=true` the
/// test fails, otherwise this prints why and returns None (the test returns).
#[must_use]
pub fn helm_python() -> Option<PathBuf> {
    let python = venv_python();
    if imports_helm(&python) {
        return Some(python);
    }
    let dir = venv_dir();
    std::fs::create_dir_all(dir.parent().expect("target dir")).expect("create target dir");
    let lock = File::create(dir.with_extension("lock")).expect("create venv lock file");
    lock.lock().expect("lock the venv");
    // Another test may have built it while this one waited for the lock.
    if imports_helm(&python) {
        return Some(python);
    }
    let steps: [(&str, Vec<&str>); 2] = [
        (
            "python3 -m venv",
            vec!["-m", "venv", "--clear", dir.to_str().expect("utf-8 path")],
        ),
        (
            "pip install helm-sdkpy",
            vec![
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--ignore-requires-python",
                HELM_SDKPY,
            ],
        ),
    ];
    for (index, (what, args)) in steps.iter().enumerate() {
        let interpreter = if index == 0 {
            PathBuf::from("python3")
        } else {
            python.clone()
        };
        match Command::new(&interpreter).args(args).output() {
            Ok(output) if output.status.success() => {}
            Ok(output) => {
                tool_missing(&format!(
                    "{what} failed ({}): {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                ));
                return None;
            }
            Err(e) => {
                tool_missing(&format!(
                    "{what} cannot run ({}): {e}",
                    interpreter.display()
                ));
                return None;
            }
        }
    }
    if imports_helm(&python) {
        Some(python)
    } else {
        tool_missing("helm_sdkpy does not import after pip install");
        None
    }
}
