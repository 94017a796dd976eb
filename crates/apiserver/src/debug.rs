//! Debug endpoints for chaos tests, served only when the server is started with them
//! ([`crate::ApiServerBuilder::debug_endpoints`], `apiserver --debug-endpoints`,
//! `manager dev --debug-endpoints`); without, `/debug/...` is 404 as any unknown path.
//!
//! They sit behind the same guard as the API (a loopback `Host` and the bearer token)
//! and also answer only connections from a loopback address, even on a server bound
//! elsewhere: they can make the server fail on purpose.
//!
//! - `GET /debug/faults`: `{"config": <FaultConfig>, "injected": <Injected>}`, the
//!   fault settings ([`crate::faults::FaultConfig`], camelCase, durations in
//!   milliseconds) and what they injected since the server started.
//! - `PUT /debug/faults` with a `FaultConfig`: replaces the settings (422 when a rate
//!   is outside 0..=1 or the error rates add up past 1); answers as GET.
//! - `POST /debug/compact`: forgets the watch window and list snapshots, so resumed
//!   watches and continued lists get 410 Gone, as after etcd's compaction.
//! - `GET /debug/history[?resource=<group>/<plural>]`: `{"items": [HistoryRecord]}`,
//!   the writes the history keeps ([`crate::Options::history_resources`]; across
//!   restarts with a data directory), oldest first; Secrets without their data.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{ConnectInfo, Query, Request, State};
use axum::middleware::{Next, from_fn};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::StatusCode;
use serde::Deserialize;
use serde_json::json;

use crate::App;
use crate::faults::FaultConfig;
use crate::handlers::json_response;
use crate::status::ApiError;
use crate::store::history_log::HistoryRecord;

/// The routes, to nest under `/debug`.
pub fn router() -> Router<Arc<App>> {
    Router::new()
        .route("/faults", get(faults).put(set_faults))
        .route("/compact", post(compact))
        .route("/history", get(history))
        .layer(from_fn(loopback_peer_only))
}

async fn loopback_peer_only(
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    if peer.ip().is_loopback() {
        next.run(request).await
    } else {
        ApiError::forbidden("the debug endpoints answer only connections from loopback")
            .into_response()
    }
}

fn faults_answer(app: &App) -> Response {
    json_response(
        StatusCode::OK,
        &json!({"config": app.faults.get(), "injected": app.faults.injected()}),
    )
}

async fn faults(State(app): State<Arc<App>>) -> Response {
    faults_answer(&app)
}

async fn set_faults(State(app): State<Arc<App>>, body: axum::body::Bytes) -> Response {
    let config: FaultConfig = match serde_json::from_slice(&body) {
        Ok(config) => config,
        Err(e) => {
            return ApiError::bad_request(format!("the body is not fault settings: {e}"))
                .into_response();
        }
    };
    if let Some(problem) = config.problem() {
        return ApiError::new(422, "Invalid", problem).into_response();
    }
    tracing::warn!(?config, "fault injection settings changed");
    app.faults.set(config);
    faults_answer(&app)
}

async fn compact(State(app): State<Arc<App>>) -> Response {
    app.store.compact();
    json_response(
        StatusCode::OK,
        &json!({"resourceVersion": app.store.current_rv().to_string()}),
    )
}

#[derive(Debug, Deserialize)]
struct HistoryQuery {
    resource: Option<String>,
}

async fn history(State(app): State<Arc<App>>, Query(query): Query<HistoryQuery>) -> Response {
    let items: Vec<HistoryRecord> = app
        .store
        .history()
        .iter()
        .filter(|change| {
            query
                .resource
                .as_deref()
                .is_none_or(|r| *change.storage == *r)
        })
        .map(|change| HistoryRecord::of(change))
        .collect();
    json_response(StatusCode::OK, &json!({ "items": items }))
}
