//! The tenant clusters' side, in `dev` and `demo` only.
//!
//! A Cluster's `status` is written by whoever runs that tenant cluster; the
//! NodeClaim controller composes a claim only once its Cluster reports
//! `status.url`, the API server its nodes join. On this machine nobody runs a
//! tenant cluster, so this task plays that part: every Cluster without a URL
//! is reported Ready at a made-up URL with a made-up CA. The local market's
//! guests report their node identity on their own, so the claims of a Cluster
//! applied from `examples/` reach Joined. `run` never starts it: on a real
//! cluster a made-up URL would be a lie.
//!
//! # Guarantees
//!
//! Writes only a Cluster that has no `status.url` and is not being deleted,
//! and only its status; a URL someone else reported is never replaced.

use api::{Cluster, ClusterPhase};
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};

/// The field manager of the statuses this task writes.
pub const TENANT_SIDE_MANAGER: &str = "socialweb/dev-tenant";

/// A PEM certificate's shape, base64-encoded: no guest of the local market checks it.
const MADE_UP_CA: &str =
    "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmRlbW8KLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";

/// The status a tenant cluster's runner would report for Cluster
/// `namespace/name`: Ready, its API server at a made-up URL under `.invalid`.
#[must_use]
pub fn reported_status(namespace: &str, name: &str) -> serde_json::Value {
    serde_json::json!({
        "phase": ClusterPhase::Ready,
        "url": format!("https://{name}.{namespace}.tenants.invalid:6443"),
        "caData": MADE_UP_CA,
    })
}

/// Whether `cluster` still waits for its runner to report where it is.
fn lacks_url(cluster: &Cluster) -> bool {
    cluster.metadata.deletion_timestamp.is_none()
        && cluster
            .status
            .as_ref()
            .and_then(|s| s.url.as_deref())
            .is_none_or(str::is_empty)
}

/// Reports every Cluster of every namespace that lacks a URL, for as long
/// as it runs (the dev environment aborts it when it stops).
pub async fn run(client: Client) {
    let clusters: Api<Cluster> = Api::all(client.clone());
    let mut events = watcher(clusters, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    let params = PatchParams {
        field_manager: Some(TENANT_SIDE_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    while let Some(event) = events.next().await {
        let Ok(cluster) = event else { continue };
        if !lacks_url(&cluster) {
            continue;
        }
        let namespace = cluster.namespace().unwrap_or_default();
        let name = cluster.name_any();
        let api: Api<Cluster> = Api::namespaced(client.clone(), &namespace);
        let patch = serde_json::json!({ "status": reported_status(&namespace, &name) });
        match api
            .patch_status(&name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                tracing::info!(cluster = %format!("{namespace}/{name}"), "reported the tenant cluster Ready (dev plays the tenant side)")
            }
            // Deleted meanwhile, or an API error: the next event of the Cluster tries again.
            Err(error) => {
                tracing::warn!(cluster = %format!("{namespace}/{name}"), %error, "cannot report the tenant cluster");
            }
        }
    }
}

/// Aborts the task it holds when dropped.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
