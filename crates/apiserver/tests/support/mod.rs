//! Helpers shared by the kubectl and Helm suites: running real client tools
//! against a `TestServer`, and deciding what a missing tool means (a failure
//! under CI, a skipped test with a reason on a developer's machine).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod helm_venv;
pub mod kubectl;
pub mod npm_dir;
pub mod objects;
pub mod pip_venv;
pub mod scenes;

/// Whether the tests run under CI, where a missing tool is a failure, not a skip.
#[must_use]
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A required tool is missing: under CI the test fails; elsewhere it prints
/// why and the caller returns early.
pub fn tool_missing(what: &str) {
    assert!(!under_ci(), "CI=true and {what}");
    eprintln!("SKIPPED: {what} (set CI=true to make this a failure)");
}
