//! What every fake service shares: the XRPC error body, bearer tokens, and
//! the fault middleware.

use std::time::Duration;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::faults::{Fault, Faults, Service};

/// An XRPC error answer: status and `{error, message}`.
#[derive(Debug, Clone)]
pub struct XrpcError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The `error` field.
    pub error: String,
    /// The `message` field.
    pub message: String,
}

impl XrpcError {
    /// Any status.
    #[must_use]
    pub fn new(status: StatusCode, error: &str, message: impl Into<String>) -> Self {
        Self {
            status,
            error: error.to_owned(),
            message: message.into(),
        }
    }

    /// 400 `InvalidRequest`.
    #[must_use]
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "InvalidRequest", message)
    }

    /// 401 `AuthenticationRequired`.
    #[must_use]
    pub fn auth_required(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "AuthenticationRequired", message)
    }
}

impl IntoResponse for XrpcError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({ "error": self.error, "message": self.message })),
        )
            .into_response()
    }
}

/// The bearer token of a request, if any.
#[must_use]
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}

/// The state the fault middleware needs.
#[derive(Clone)]
pub struct FaultGate {
    /// The shared rules.
    pub faults: Faults,
    /// Which service this is.
    pub service: Service,
}

/// Applies the first matching fault rule to a request. The method is the
/// NSID of `/xrpc/<nsid>`, or the path without its leading `/` (PLC).
pub async fn apply_faults(State(gate): State<FaultGate>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let method = path.strip_prefix("/xrpc/").unwrap_or(&path[1..]).to_owned();
    match gate.faults.take(gate.service, &method) {
        None => next.run(request).await,
        Some(Fault::Status {
            status,
            error,
            message,
        }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            if error == "internal error" {
                // The reference's 500 body.
                return (status, Json(json!({ "ok": false, "error": error }))).into_response();
            }
            XrpcError::new(status, &error, message).into_response()
        }
        Some(Fault::Stall(duration)) => {
            // In a task of its own: hyper drops a handler whose client hung
            // up, while a slow server (the reference's) still finishes.
            let stalled = gate.faults.stall_started();
            let finish = tokio::spawn(async move {
                let _stalled = stalled;
                tokio::time::sleep(duration).await;
                next.run(request).await
            });
            finish.await.unwrap_or_else(|_| {
                (StatusCode::INTERNAL_SERVER_ERROR, "stalled request failed").into_response()
            })
        }
        Some(Fault::LoseAnswer) => {
            let _effect = next.run(request).await;
            // A 502 with no XRPC body stands for the lost answer: the client
            // cannot tell whether the call took effect.
            (StatusCode::BAD_GATEWAY, "answer lost (injected)").into_response()
        }
    }
}

/// The default stall of the reference's slow paths (the client times out at 10 s).
pub const REFERENCE_STALL: Duration = Duration::from_secs(10);
