//! The inbound seam: bidders push bids (`submitBid`) and events
//! (`submitEvent`) to us. [`router`] answers both as the reference
//! requester does; [`Inbox`] keeps what was pushed.
//!
//! # Checks, in order (MARKET.md sections 1 and 4)
//! 1. A service-auth JWT, verified against its issuer's `#atproto` key, for
//!    this procedure (`lxm`), not expired, for us (`aud`: our DID or
//!    `did:web:<our public host>`, with or without our service id): else 401.
//! 2. The issuer is the author of the pushed record: else 403.
//! 3. The record's inline signatures verify, for its author's repository,
//!    and it is what the procedure takes (a bid on one of our requests, an
//!    event about a receipt): else 400.
//!
//! # Pushes are wake-ups
//! The inbox keeps only record URIs, never the records: the adapter reads
//! each record again from its author's repository (and lists the
//! repository when nothing was pushed), so a push lost to a restart, a
//! leader change or the network costs a delay, never a contract, and a
//! forged push can only cause a read.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::UNIX_EPOCH;

use atproto::did::{ATPROTO_KEY, COMPUTE_EVENT_SERVICE, DidResolver, MARKET_SERVICE};
use atproto::jwt::{self, Audience};
use atproto::market as m;
use atproto::{AtUri, attest};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use crate::Clock;

/// At most this many records are kept per request or receipt, and this many
/// requests or receipts: past it the oldest wake-ups are dropped (the
/// repositories still have the records).
const MAX_PER_KEY: usize = 256;
const MAX_KEYS: usize = 10_000;

/// Who receives pushes: one per market attached to the inbox.
#[derive(Clone)]
struct Receiver {
    did: String,
    host: String,
    resolver: DidResolver,
    clock: Arc<dyn Clock>,
}

#[derive(Default)]
struct Pushed {
    receivers: Vec<Receiver>,
    /// rfp uri -> pushed bid uris.
    bids: HashMap<String, BTreeSet<String>>,
    /// receipt uri -> pushed event uris.
    events: HashMap<String, BTreeSet<String>>,
}

/// What bidders pushed to us (cheap to clone; clones share it). Create one,
/// give a clone to every [`super::AtprotoMarket`] and one to [`router`].
#[derive(Clone, Default)]
pub struct Inbox {
    state: Arc<Mutex<Pushed>>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.lock();
        f.debug_struct("Inbox")
            .field("receivers", &state.receivers.len())
            .field("bids", &state.bids.len())
            .field("events", &state.events.len())
            .finish()
    }
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pushed> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Accepts pushes for `did`, reached at `host` (`host[:port]`).
    pub(crate) fn attach(
        &self,
        did: &str,
        host: &str,
        resolver: DidResolver,
        clock: Arc<dyn Clock>,
    ) {
        let mut state = self.lock();
        state.receivers.retain(|r| r.did != did || r.host != host);
        state.receivers.push(Receiver {
            did: did.to_owned(),
            host: host.to_owned(),
            resolver,
            clock,
        });
    }

    /// The bids pushed for the request `rfp_uri`.
    #[must_use]
    pub fn bids_for(&self, rfp_uri: &str) -> Vec<String> {
        self.lock()
            .bids
            .get(rfp_uri)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The events pushed about the receipt `receipt_uri`.
    #[must_use]
    pub fn events_for(&self, receipt_uri: &str) -> Vec<String> {
        self.lock()
            .events
            .get(receipt_uri)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }

    fn remember(map: &mut HashMap<String, BTreeSet<String>>, key: &str, uri: &str) {
        if map.len() >= MAX_KEYS && !map.contains_key(key) {
            // Wake-ups only: the repositories still hold every record.
            map.clear();
        }
        let set = map.entry(key.to_owned()).or_default();
        if set.len() < MAX_PER_KEY {
            set.insert(uri.to_owned());
        }
    }
}

/// The two procedures, at `/xrpc/<nsid>`; serve them where
/// `AtprotoMarketConfig::public_url` points.
pub fn router(inbox: Inbox) -> Router {
    Router::new()
        .route(&format!("/xrpc/{}", m::SUBMIT_BID), post(submit_bid))
        .route(&format!("/xrpc/{}", m::SUBMIT_EVENT), post(submit_event))
        .with_state(inbox)
}

async fn submit_bid(State(inbox): State<Inbox>, headers: HeaderMap, body: Bytes) -> Response {
    answer(receive(&inbox, Procedure::Bid, &headers, &body).await)
}

async fn submit_event(State(inbox): State<Inbox>, headers: HeaderMap, body: Bytes) -> Response {
    answer(receive(&inbox, Procedure::Event, &headers, &body).await)
}

#[derive(Clone, Copy)]
enum Procedure {
    Bid,
    Event,
}

impl Procedure {
    const fn lxm(self) -> &'static str {
        match self {
            Self::Bid => m::SUBMIT_BID,
            Self::Event => m::SUBMIT_EVENT,
        }
    }

    const fn service(self) -> &'static str {
        match self {
            Self::Bid => MARKET_SERVICE,
            Self::Event => COMPUTE_EVENT_SERVICE,
        }
    }
}

/// A refusal: status, XRPC error name, message.
struct Refusal(StatusCode, &'static str, String);

fn answer(result: Result<(), Refusal>) -> Response {
    match result {
        Ok(()) => (StatusCode::OK, axum::Json(json!({ "ok": true }))).into_response(),
        Err(Refusal(status, error, message)) => {
            tracing::info!(%status, error, message, "refused a pushed market record");
            (
                status,
                axum::Json(json!({ "error": error, "message": message })),
            )
                .into_response()
        }
    }
}

fn unauthorized(message: impl Into<String>) -> Refusal {
    Refusal(StatusCode::UNAUTHORIZED, "Unauthorized", message.into())
}

fn invalid(message: impl Into<String>) -> Refusal {
    Refusal(StatusCode::BAD_REQUEST, "InvalidRequest", message.into())
}

async fn receive(
    inbox: &Inbox,
    procedure: Procedure,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), Refusal> {
    let receivers = inbox.lock().receivers.clone();
    let Some(first) = receivers.first() else {
        return Err(Refusal(
            StatusCode::SERVICE_UNAVAILABLE,
            "NotReady",
            "the market is not started yet".to_owned(),
        ));
    };
    // 1. The JWT.
    let token = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| unauthorized("a service-auth bearer token is required"))?;
    let unverified = jwt::decode(token).map_err(|e| unauthorized(e.to_string()))?;
    let issuer = unverified.claims.iss.clone();
    let key = first
        .resolver
        .resolve(&issuer)
        .await
        .and_then(|doc| doc.key(ATPROTO_KEY))
        .map_err(|e| unauthorized(format!("cannot verify the issuer: {e}")))?;
    let mut claims = Err(unauthorized("no receiver"));
    for receiver in &receivers {
        let audience = Audience {
            host: receiver.host.clone(),
            did: Some(receiver.did.clone()),
            service_id: Some(procedure.service().to_owned()),
        };
        let now = receiver
            .clock
            .now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        claims = jwt::verify(&unverified, &key, procedure.lxm(), &audience, now)
            .map_err(|e| unauthorized(e.to_string()));
        if claims.is_ok() {
            break;
        }
    }
    let claims = claims?;
    // 2. The issuer is the author.
    let input: Value =
        serde_json::from_slice(body).map_err(|e| invalid(format!("body is not json: {e}")))?;
    let uri = m::text(&input, "uri").ok_or_else(|| invalid("input must have uri"))?;
    m::text(&input, "cid").ok_or_else(|| invalid("input must have cid"))?;
    let record = input
        .get("record")
        .filter(|r| r.is_object())
        .ok_or_else(|| invalid("input must have record"))?;
    let author: AtUri = uri.parse().map_err(|e| invalid(format!("uri: {e}")))?;
    jwt::check_issuer_is_author(&claims, uri)
        .map_err(|e| Refusal(StatusCode::FORBIDDEN, "Forbidden", e.to_string()))?;
    // 3. The record.
    attest::verify_record(record, &author.did).map_err(|e| invalid(e.to_string()))?;
    let mut state = inbox.lock();
    match procedure {
        Procedure::Bid => {
            if m::text(record, "$type") != Some(m::BID) {
                return Err(invalid("record is not a market bid"));
            }
            let rfp = m::strong_ref(record, "rfp").ok_or_else(|| invalid("bid has no rfp"))?;
            let ours = rfp
                .at_uri()
                .is_ok_and(|rfp| receivers.iter().any(|r| r.did == rfp.did));
            if !ours {
                return Err(invalid(format!("the bid's rfp {} is not ours", rfp.uri)));
            }
            Inbox::remember(&mut state.bids, &rfp.uri, uri);
        }
        Procedure::Event => {
            if m::text(record, "$type") != Some(m::EVENT) {
                return Err(invalid("record is not a market event"));
            }
            let receipt =
                m::strong_ref(record, "receipt").ok_or_else(|| invalid("event has no receipt"))?;
            Inbox::remember(&mut state.events, &receipt.uri, uri);
        }
    }
    Ok(())
}
