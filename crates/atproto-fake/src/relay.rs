//! A fake relay index: `com.atproto.sync.listReposByCollection`, fed by the
//! fake PDS's writes, with a configurable lag ([`crate::Faults::set_relay_lag`]):
//! a repository appears under a collection only that long after its first
//! record there, as a real relay learns of it from the firehose.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::routing::get;
use axum::{Json, Router};
use parking_lot::RwLock;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::faults::Faults;
use crate::http::XrpcError;

/// The relay's index: collection -> repository DID -> when first seen.
#[derive(Debug, Clone)]
pub struct Relay {
    index: Arc<RwLock<HashMap<String, BTreeMap<String, Instant>>>>,
    faults: Faults,
}

impl Relay {
    /// An empty index reading its lag from `faults`.
    #[must_use]
    pub fn new(faults: Faults) -> Self {
        Self {
            index: Arc::default(),
            faults,
        }
    }

    /// Records that `did` wrote to `collection` (the PDS calls it).
    pub fn announce(&self, did: &str, collection: &str) {
        self.index
            .write()
            .entry(collection.to_owned())
            .or_default()
            .entry(did.to_owned())
            .or_insert_with(Instant::now);
    }

    /// The routes.
    pub fn router(&self) -> Router {
        Router::new()
            .route(
                "/xrpc/com.atproto.sync.listReposByCollection",
                get(list_repos_by_collection),
            )
            .route(
                "/xrpc/_health",
                get(|| async { Json(json!({ "version": "atproto-fake relay" })) }),
            )
            .with_state(self.clone())
    }
}

async fn list_repos_by_collection(
    State(relay): State<Relay>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<Value>, XrpcError> {
    let collection = params
        .get("collection")
        .ok_or_else(|| XrpcError::invalid("Params must have the property \"collection\""))?;
    let limit: usize = match params.get("limit") {
        None => 500,
        Some(l) => l
            .parse()
            .ok()
            .filter(|l| (1..=2000).contains(l))
            .ok_or_else(|| XrpcError::invalid("limit must be 1..2000"))?,
    };
    let cursor = params.get("cursor");
    let visible_before = Instant::now()
        .checked_sub(relay.faults.relay_lag())
        .unwrap_or_else(Instant::now);
    let index = relay.index.read();
    let repos: Vec<&String> = index
        .get(collection)
        .into_iter()
        .flatten()
        .filter(|(did, seen)| **seen <= visible_before && cursor.is_none_or(|c| *did > c))
        .map(|(did, _)| did)
        .take(limit)
        .collect();
    let mut out =
        json!({ "repos": repos.iter().map(|did| json!({ "did": did })).collect::<Vec<_>>() });
    if repos.len() == limit
        && let Some(last) = repos.last()
    {
        out["cursor"] = Value::from(last.as_str());
    }
    Ok(Json(out))
}
