//! Helpers shared by the kubectl and Helm suites: running real client tools
//! against a `TestServer`, and deciding what a missing tool means (a failure
//! under CI, a skipped test with a reason on a developer's machine).

pub mod helm_venv;
pub mod npm_dir;
pub mod objects;
pub mod pip_venv;
pub mod scenes;

pub use testkit::kubectl;
pub use testkit::tool_missing;
