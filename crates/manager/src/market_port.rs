//! The market port: where the atproto market's bidders call this manager's
//! `submitBid` and `submitEvent` procedures (`spec.market.atproto.publicUrl`
//! must reach it).
//!
//! It is its own port (`--market-addr`), apart from `/metrics` and the probes,
//! so that exposing it publicly (the chart's Ingress) exposes these two
//! procedures and nothing else.
//!
//! # Who acts on what arrives
//!
//! Every replica serves the port for the life of the process, but only the
//! leader answers: while it runs the controllers it opens an [`InboundSlot`]
//! with the markets' inbound router, and the slot closes the moment the
//! controllers stop (the guard is dropped with them, also when fencing aborts
//! them). Any other replica, and the leader before its markets exist, answers
//! `503 {"error":"NotLeader"}`. Nothing is lost by that answer: a push is only
//! a wake-up, and the leader reads every bid, receipt and event again from the
//! bidder's repository (plan 0011, M4-INBOUND). A retrying proxy in front
//! (see the chart's `market.inbound.ingress`) merely gets there sooner.

use std::net::SocketAddr;
use std::sync::{Arc, PoisonError, RwLock};

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tower::ServiceExt as _;

use crate::http::{HttpError, HttpServer};

/// Flags of the market port; flatten into a subcommand's args.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MarketPortArgs {
    /// Address of the port serving the atproto market's submitBid and
    /// submitEvent (for example 0.0.0.0:8081); unset, no market port is served.
    #[arg(long, env = "MARKET_ADDR")]
    pub market_addr: Option<SocketAddr>,
}

/// What answers the market's procedures while this replica leads; clones
/// share one slot.
#[derive(Clone, Default)]
pub struct InboundSlot(Arc<RwLock<Option<Router>>>);

impl std::fmt::Debug for InboundSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboundSlot")
            .field("open", &self.is_open())
            .finish()
    }
}

impl InboundSlot {
    /// An empty slot: every procedure is answered 503 until it is opened.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Routes the procedures to `router` until the returned guard is dropped.
    #[must_use = "the slot closes again when the guard is dropped"]
    pub fn open(&self, router: Router) -> InboundGuard {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Some(router);
        InboundGuard(self.clone())
    }

    /// Whether a router answers now.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    fn router(&self) -> Option<Router> {
        self.0
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn close(&self) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

/// Keeps an [`InboundSlot`] open; dropping it closes the slot.
#[derive(Debug)]
pub struct InboundGuard(InboundSlot);

impl Drop for InboundGuard {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A bound, not yet serving, market port.
#[derive(Debug)]
pub struct MarketPort(HttpServer);

impl MarketPort {
    /// Binds `addr`.
    ///
    /// # Errors
    ///
    /// [`HttpError::Bind`] when the address cannot be bound.
    pub async fn bind(addr: SocketAddr) -> Result<Self, HttpError> {
        HttpServer::bind(addr).await.map(Self)
    }

    /// The bound address (with the real port when `:0` was asked for).
    #[must_use]
    pub const fn local_addr(&self) -> SocketAddr {
        self.0.local_addr()
    }

    /// Serves until `shutdown` resolves, then finishes the requests in flight.
    ///
    /// # Errors
    ///
    /// [`HttpError::Serve`] when accepting connections fails for good.
    pub async fn serve(
        self,
        slot: InboundSlot,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), HttpError> {
        self.0
            .serve_router(
                router(slot),
                "the market's submitBid and submitEvent",
                shutdown,
            )
            .await
    }
}

/// The market port's router: everything goes to the slot's router, or is
/// answered 503 while the slot is closed.
pub fn router(slot: InboundSlot) -> Router {
    Router::new().fallback(dispatch).with_state(slot)
}

async fn dispatch(State(slot): State<InboundSlot>, request: Request<Body>) -> Response {
    match slot.router() {
        Some(router) => match router.oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        },
        None => not_leader(),
    }
}

/// The XRPC error body a bidder's client reads: `{error, message}`.
fn not_leader() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        axum::Json(serde_json::json!({
            "error": "NotLeader",
            "message": "this replica does not run the market now; the leader reads your records from your repository",
        })),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use axum::routing::post;
    use http_body_util::BodyExt as _;

    async fn call(slot: &InboundSlot) -> (StatusCode, serde_json::Value) {
        let request = Request::post("/xrpc/com.publicdomainrelay.temp.market.submitBid")
            .body(Body::from("{}"))
            .unwrap();
        let response = router(slot.clone()).oneshot(request).await.unwrap();
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&body).unwrap())
    }

    #[tokio::test]
    async fn only_an_open_slot_answers_and_dropping_the_guard_closes_it() {
        let slot = InboundSlot::new();
        let (status, body) = call(&slot).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["error"], "NotLeader");

        let leader = Router::new().route(
            "/xrpc/com.publicdomainrelay.temp.market.submitBid",
            post(|| async { axum::Json(serde_json::json!({"ok": true})) }),
        );
        let guard = slot.open(leader);
        assert_eq!(
            call(&slot).await,
            (StatusCode::OK, serde_json::json!({"ok": true}))
        );
        drop(guard);
        assert!(!slot.is_open());
        assert_eq!(call(&slot).await.0, StatusCode::SERVICE_UNAVAILABLE);
    }
}
