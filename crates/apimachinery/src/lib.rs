//! The pure half of the embedded Kubernetes API server, after k8s.io/apimachinery and
//! sigs.k8s.io/structured-merge-diff: label and field selectors, JSON merge patch and
//! JSON patch, and server-side apply's managed fields.
//!
//! Nothing here does I/O or async work: `serde_json::Value` goes in, `serde_json::Value`
//! comes out. Each behaviour copies the real server's (including its error messages),
//! because a controller that passes against our server must not fail on a real one.

pub mod managed_fields;
pub mod patch;
pub mod selector;
