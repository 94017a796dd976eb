//! The bidder's three procedures, answering as the reference does.

use std::sync::Arc;

use atproto::did::{ATPROTO_KEY, MARKET_SERVICE};
use atproto::jwt::{self, Audience, Claims};
use atproto::market as m;
use atproto::{AtUri, Record, attest};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::{Inner, Machine, Offer, out};
use crate::http::{XrpcError, bearer};

type Answer = Result<Json<Value>, XrpcError>;

/// The routes of bidder process `process`; 502 once another process runs.
pub fn router(inner: Arc<Inner>, process: u64) -> Router {
    let gate = Arc::clone(&inner);
    Router::new()
        .route(&format!("/xrpc/{}", m::SUBMIT_RFP), post(submit_rfp))
        .route(&format!("/xrpc/{}", m::SUBMIT_ACCEPT), post(submit_accept))
        .route(&format!("/xrpc/{}", m::SUBMIT_EVENT), post(submit_event))
        .with_state(inner)
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                let runs = gate.runs(process);
                async move {
                    if runs {
                        next.run(request).await
                    } else {
                        XrpcError::new(
                            StatusCode::BAD_GATEWAY,
                            "BadGateway",
                            "no bidder process behind this endpoint any more",
                        )
                        .into_response()
                    }
                }
            },
        ))
}

fn unauthorized(error: impl std::fmt::Display) -> XrpcError {
    XrpcError::new(StatusCode::UNAUTHORIZED, "Unauthorized", error.to_string())
}

/// The reference's 500 (`{ok: false, error: "internal error"}`), e.g. when
/// a record cannot be fetched.
fn internal(error: impl std::fmt::Display) -> XrpcError {
    tracing::info!(%error, "fake bidder: internal error");
    XrpcError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error", "")
}

/// The JWT checks of MARKET.md section 4, then the 403 check on `uri`.
async fn authorize(
    inner: &Inner,
    headers: &HeaderMap,
    lxm: &str,
    uri: &str,
) -> Result<String, XrpcError> {
    let token = bearer(headers).ok_or_else(|| unauthorized("missing bearer token"))?;
    let unverified = jwt::decode(token).map_err(unauthorized)?;
    let key = inner
        .resolver
        .resolve(&unverified.claims.iss)
        .await
        .and_then(|doc| doc.key(ATPROTO_KEY))
        .map_err(unauthorized)?;
    let url = inner.url();
    let host = url
        .split_once("://")
        .map_or(url.as_str(), |(_, host)| host)
        .to_owned();
    let audience = Audience {
        host,
        did: Some(inner.did.clone()),
        service_id: Some(MARKET_SERVICE.to_owned()),
    };
    let claims: Claims = jwt::verify(&unverified, &key, lxm, &audience, jwt::unix_seconds_now())
        .map_err(unauthorized)?;
    jwt::check_issuer_is_author(&claims, uri)
        .map_err(|e| XrpcError::new(StatusCode::FORBIDDEN, "Forbidden", e.to_string()))?;
    Ok(claims.iss)
}

fn input(body: &[u8]) -> Result<Value, XrpcError> {
    serde_json::from_slice(body).map_err(|e| XrpcError::invalid(format!("body is not json: {e}")))
}

fn field<'a>(input: &'a Value, name: &str) -> Result<&'a str, XrpcError> {
    m::text(input, name).ok_or_else(|| XrpcError::invalid(format!("missing {name}")))
}

/// A record named to us, latest version, its signatures verified.
async fn fetch_signed(inner: &Inner, uri: &str) -> Result<Record, XrpcError> {
    let record = out::fetch(inner, uri)
        .await
        .map_err(internal)?
        .ok_or_else(|| XrpcError::invalid(format!("{uri} not found")))?;
    let author: AtUri = uri
        .parse()
        .map_err(|e| XrpcError::invalid(format!("{e}")))?;
    attest::verify_record(&record.value, &author.did)
        .map_err(|e| XrpcError::invalid(e.to_string()))?;
    Ok(record)
}

async fn submit_rfp(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Answer {
    let input = input(&body)?;
    let rfp_uri = field(&input, "rfpUri")?;
    field(&input, "rfpCid")?;
    let requester = authorize(&inner, &headers, m::SUBMIT_RFP, rfp_uri).await?;
    let rfp = fetch_signed(&inner, rfp_uri).await?;
    let payload = m::strong_ref(&rfp.value, "payload")
        .ok_or_else(|| XrpcError::invalid("rfp has no payload"))?;
    if payload.at_uri().map(|u| u.collection).ok().as_deref() != Some(m::VM) {
        // The reference answers ok without a bid for a payload it does not serve.
        return Ok(Json(json!({ "ok": true })));
    }
    let bid = write_bid(&inner, &rfp.strong_ref())
        .await
        .map_err(internal)?;
    inner.state.lock().counters.bids += 1;
    let knobs = inner.knobs();
    if !knobs.lose_callbacks
        && let Some(endpoint) = m::text(&rfp.value, "submitBid").map(str::to_owned)
    {
        let mut pushes = vec![bid.clone()];
        if knobs.duplicate_bids {
            pushes.push(bid.clone());
        }
        if knobs.foreign_bids {
            let foreign = atproto::StrongRef {
                uri: format!(
                    "at://did:plc:foreignrequesteraaaaaaaa/{}/3aaaaaaaaaaaa",
                    m::RFP
                ),
                cid: rfp.cid.clone(),
            };
            pushes.push(write_bid(&inner, &foreign).await.map_err(internal)?);
        }
        let send = {
            let inner = Arc::clone(&inner);
            async move {
                for bid in pushes {
                    if let Err(error) = out::push(
                        &inner,
                        &requester,
                        &endpoint,
                        m::SUBMIT_BID,
                        MARKET_SERVICE,
                        &bid,
                    )
                    .await
                    {
                        tracing::info!(%error, "fake bidder: submitBid failed");
                    }
                }
            }
        };
        match knobs.late_bid {
            // The bid is pushed before the answer, as the reference does.
            None => send.await,
            Some(delay) => inner.background(async move {
                tokio::time::sleep(delay).await;
                send.await;
            }),
        }
    }
    Ok(Json(
        json!({ "ok": true, "bidUri": bid.uri, "bidCid": bid.cid }),
    ))
}

/// Writes a bid payload and a signed bid on `rfp`.
async fn write_bid(inner: &Inner, rfp: &atproto::StrongRef) -> Result<Record, atproto::Error> {
    let now = m::datetime(inner.now());
    let payload = match &inner.offer {
        Offer::Free => out::write(
            inner,
            m::BIDS_FREE,
            json!({ "$type": m::BIDS_FREE, "cost": 0, "createdAt": now }),
            false,
        ),
        Offer::X402 {
            cost,
            currency,
            frequency,
        } => out::write(
            inner,
            m::BIDS_X402,
            json!({
                "$type": m::BIDS_X402, "cost": cost, "currency": currency, "frequency": frequency,
                "prepay": false, "url": inner.url(), "createdAt": now,
            }),
            true,
        ),
    }
    .await?;
    let bid = json!({
        "$type": m::BID,
        "rfp": rfp.to_record_value(),
        "payload": payload.strong_ref().to_record_value(),
        "submitAccept": inner.url(),
        "createdAt": now,
    });
    out::write(inner, m::BID, bid, true).await
}

async fn submit_accept(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Answer {
    let input = input(&body)?;
    let accept_uri = field(&input, "acceptUri")?;
    field(&input, "acceptCid")?;
    let requester = authorize(&inner, &headers, m::SUBMIT_ACCEPT, accept_uri).await?;
    let accept = fetch_signed(&inner, accept_uri).await?;
    let bid = m::strong_ref(&accept.value, "bid")
        .filter(|bid| bid.at_uri().is_ok_and(|u| u.did == inner.did))
        .ok_or_else(|| XrpcError::invalid("the accept is not for one of our bids"))?;
    let rfp = m::strong_ref(&accept.value, "rfp")
        .ok_or_else(|| XrpcError::invalid("the accept has no rfp"))?;
    let our_bid = out::fetch(&inner, &bid.uri)
        .await
        .map_err(internal)?
        .ok_or_else(|| XrpcError::invalid("no such bid"))?;
    if m::strong_ref(&our_bid.value, "rfp").is_none_or(|r| r.uri != rfp.uri) {
        return Err(XrpcError::invalid("the bid is not for the accept's rfp"));
    }
    let mut receipt = json!({
        "$type": m::RECEIPT,
        "rfp": rfp.to_record_value(),
        "bid": bid.to_record_value(),
        "accept": accept.strong_ref().to_record_value(),
        "payload": null,
        "submitEvent": inner.url(),
        "createdAt": m::datetime(inner.now()),
    });
    let binding = attest::receipt_binding_cid(&accept.value, &receipt, &requester)
        .map_err(|e| XrpcError::invalid(e.to_string()))?;
    receipt["cid"] = Value::from(binding.to_string());
    let receipt = out::write(&inner, m::RECEIPT, receipt, true)
        .await
        .map_err(internal)?;
    let machine = Machine {
        receipt: receipt.strong_ref(),
        requester,
        submit_event: m::text(&accept.value, "submitEvent").map(str::to_owned),
        node_id: format!("node-{}", hex::encode(rand::random::<[u8; 8]>())),
        running: true,
    };
    {
        let mut state = inner.state.lock();
        state.machines.push(machine.clone());
        let index = state.machines.len() - 1;
        state
            .contracts
            .insert(format!("{}#{}", receipt.uri, receipt.cid), index);
        state.counters.machines_started += 1;
    }
    out::provision(&inner, machine);
    let rkey = receipt
        .uri
        .parse::<AtUri>()
        .map(|u| u.rkey)
        .unwrap_or_default();
    Ok(Json(json!({
        "id": rkey, "uri": receipt.uri, "cid": receipt.cid, "submitEvent": inner.url(),
    })))
}

async fn submit_event(State(inner): State<Arc<Inner>>, headers: HeaderMap, body: Bytes) -> Answer {
    let input = input(&body)?;
    let uri = field(&input, "uri")?;
    field(&input, "cid")?;
    let record = input
        .get("record")
        .cloned()
        .ok_or_else(|| XrpcError::invalid("missing record"))?;
    authorize(&inner, &headers, m::SUBMIT_EVENT, uri).await?;
    let author: AtUri = uri
        .parse()
        .map_err(|e| XrpcError::invalid(format!("{e}")))?;
    attest::verify_record(&record, &author.did).map_err(|e| XrpcError::invalid(e.to_string()))?;
    // Answered before acting, as the reference does: a 200 says nothing
    // about the machine.
    let task_inner = Arc::clone(&inner);
    inner.background(async move { act_on_event(&task_inner, &record).await });
    Ok(Json(json!({ "ok": true })))
}

async fn act_on_event(inner: &Inner, event: &Value) {
    let (Some(receipt), Some(payload)) = (
        m::strong_ref(event, "receipt"),
        m::strong_ref(event, "payload"),
    ) else {
        return;
    };
    let payload = match out::fetch(inner, &payload.uri).await {
        Ok(Some(payload)) => payload,
        other => {
            tracing::info!(?other, "fake bidder: event payload unreadable");
            return;
        }
    };
    if m::text(&payload.value, "$type") != Some(m::VM_DELETE) {
        return;
    }
    let mut state = inner.state.lock();
    let key = format!("{}#{}", receipt.uri, receipt.cid);
    if let Some(index) = state.contracts.remove(&key) {
        if let Some(machine) = state.machines.get_mut(index) {
            machine.running = false;
        }
        state.counters.machines_stopped += 1;
    } else if state
        .machines
        .iter()
        .any(|machine| machine.running && machine.receipt == receipt)
    {
        // Forgotten by a restart: answered 200, and the machine keeps running.
        state.counters.deletes_ignored += 1;
    }
}
