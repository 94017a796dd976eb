//! Accepting a bid without ever starting a second machine.
//!
//! A bidder starts a machine for every `submitAccept` it processes and
//! offers no way to ask whether it did. So the accept is written before it
//! is sent, the bidder's repository is searched for a receipt of it before
//! every send, and a send is repeated only when no receipt appeared within
//! `accept_resend_after` of the last one (for an accept found after a
//! restart, of its `createdAt`).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use atproto::market as m;
use atproto::{AtUri, Record, StrongRef};
use serde_json::{Value, json};

use super::bids::{self, own_rfp, rkey_of};
use super::{Shared, guest, records, request, rkeys, unavailable};
use crate::{Bid, MarketError, Operation, Receipt, RfpId, cheapest};

/// Whether this process sent an accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Written here and not sent yet (or refused unread, a 401): send at once.
    Unsent,
    /// Sent (the bidder may have processed it) at this time.
    At(SystemTime),
}

pub async fn accept(shared: &Arc<Shared>, id: &RfpId, bid: &Bid) -> Result<Receipt, MarketError> {
    let op = Operation::Accept;
    let rfp = own_rfp(shared, id, op).await?;
    let rkey = rkeys::accept(&rkey_of(&rfp));
    let existing = shared
        .net
        .get_own(m::ACCEPT, &rkey)
        .await
        .map_err(|e| unavailable(op, "reading our accept", &e))?;
    let accept = match existing {
        Some(existing) => {
            let winner = bidder_of(&existing)?;
            if winner != bid.bidder {
                return Err(MarketError::RfpClosed {
                    rfp: id.clone(),
                    winner,
                });
            }
            existing
        }
        None => write(shared, &rfp, &rkey, bid).await?,
    };
    let bidder = bidder_of(&accept)?;
    if let Some(contract) = guest::find_receipt(shared, &accept, &bidder, op).await? {
        return Ok(contract.receipt());
    }
    let now = shared.now();
    let sent = shared.memory().sends.get(&accept.uri).copied();
    let last_sent = match sent {
        Some(Sent::Unsent) => None,
        Some(Sent::At(at)) => Some(at),
        // Found after a restart: it may have been sent when it was written.
        None => Some(m::created_at(&accept.value).unwrap_or(UNIX_EPOCH)),
    };
    if let Some(at) = last_sent {
        let resend_at = at + shared.timeouts.accept_resend_after;
        if now < resend_at {
            return Err(MarketError::Unavailable {
                operation: op,
                reason: format!(
                    "waiting for the receipt of {bidder} for our accept {} (sent at {}); it is sent again from {} if none appears",
                    accept.uri,
                    m::datetime(at),
                    m::datetime(resend_at)
                ),
            });
        }
    }
    send(shared, id, &accept, &bidder).await
}

/// The bidder whose bid an accept names.
fn bidder_of(accept: &Record) -> Result<String, MarketError> {
    m::strong_ref(&accept.value, "bid")
        .and_then(|bid| bid.at_uri().ok())
        .map(|uri| uri.did)
        .ok_or_else(|| MarketError::Unavailable {
            operation: Operation::Accept,
            reason: format!("our accept {} names no bid", accept.uri),
        })
}

/// Writes our accept of the bid (its current version), signed.
async fn write(
    shared: &Shared,
    rfp: &Record,
    rkey: &str,
    bid: &Bid,
) -> Result<Record, MarketError> {
    let op = Operation::Accept;
    let chosen = choose(shared, rfp, bid).await?;
    let record = chosen.record.ok_or_else(|| withdrawn(rfp, &bid.bidder))?;
    let bid_ref = StrongRef {
        uri: record.uri,
        cid: record.cid,
    };
    let mut value = records::accept(
        &rfp.strong_ref(),
        &bid_ref,
        &shared.public_url,
        shared.now(),
    );
    request::signed(shared, &mut value, op).await?;
    let written = shared
        .net
        .put_own(m::ACCEPT, rkey, &value)
        .await
        .map_err(|e| unavailable(op, "writing our accept", &e))?;
    tracing::info!(uri = %written.uri, bid = %bid_ref.uri, "accept written");
    shared
        .memory()
        .sends
        .insert(written.uri.clone(), Sent::Unsent);
    Ok(Record {
        uri: written.uri,
        cid: written.cid,
        value,
    })
}

fn withdrawn(rfp: &Record, bidder: &str) -> MarketError {
    MarketError::BidWithdrawn {
        rfp: RfpId::new(rfp.uri.clone()),
        bidder: bidder.to_owned(),
    }
}

/// The bid to accept: the record named, still offered at no higher price;
/// or, for a bid rebuilt without its record, the bidder's cheapest bid on
/// the request.
async fn choose(shared: &Shared, rfp: &Record, bid: &Bid) -> Result<Bid, MarketError> {
    let op = Operation::Accept;
    let refused = shared.memory().refused.clone();
    let Some(named) = &bid.record else {
        let offered = bids::bids_of(shared, &bid.bidder, &rfp.uri)
            .await
            .map_err(|e| unavailable(op, format!("reading the bids of {}", bid.bidder), &e))?;
        let offered: Vec<Bid> = offered
            .into_iter()
            .filter(|b| b.record.as_ref().is_none_or(|r| !refused.contains(&r.uri)))
            .collect();
        return cheapest(&offered)
            .cloned()
            .ok_or_else(|| withdrawn(rfp, &bid.bidder));
    };
    let author = named.uri.parse::<AtUri>().map(|u| u.did).ok();
    if author.as_deref() != Some(bid.bidder.as_str()) || refused.contains(&named.uri) {
        return Err(withdrawn(rfp, &bid.bidder));
    }
    let record = bids::read(shared, &named.uri, op)
        .await?
        .ok_or_else(|| withdrawn(rfp, &bid.bidder))?;
    let current = bids::check(shared, &record, &rfp.uri)
        .await
        .map_err(|_| withdrawn(rfp, &bid.bidder))?;
    let dearer = current.price.currency != bid.price.currency
        || current.price.cmp_per_hour(&bid.price) == std::cmp::Ordering::Greater;
    if dearer {
        return Err(withdrawn(rfp, &bid.bidder));
    }
    Ok(current)
}

/// Sends our accept and verifies the receipt it answers with.
async fn send(
    shared: &Shared,
    id: &RfpId,
    accept: &Record,
    bidder: &str,
) -> Result<Receipt, MarketError> {
    let op = Operation::Accept;
    let bid = m::strong_ref(&accept.value, "bid").ok_or_else(|| MarketError::Unavailable {
        operation: op,
        reason: format!("our accept {} names no bid", accept.uri),
    })?;
    let endpoint = match bids::read(shared, &bid.uri, op).await? {
        Some(record) => m::text(&record.value, "submitAccept").map(str::to_owned),
        None => None,
    };
    let endpoint = match endpoint {
        Some(endpoint) => endpoint,
        None => request::discover(shared)
            .await
            .endpoints
            .into_iter()
            .find(|e| e.did == bidder)
            .map(|e| e.url)
            .ok_or_else(|| MarketError::Unavailable {
                operation: op,
                reason: format!("{bidder} names no submitAccept endpoint"),
            })?,
    };
    shared
        .memory()
        .sends
        .insert(accept.uri.clone(), Sent::At(shared.now()));
    let input = json!({ "acceptUri": accept.uri, "acceptCid": accept.cid });
    tracing::info!(%bidder, accept = %accept.uri, "sending submitAccept");
    let answer: Result<Value, _> = shared
        .net
        .call_bidder(bidder, &endpoint, m::SUBMIT_ACCEPT, &input)
        .await;
    match answer {
        Ok(answer) => {
            let uri = m::text(&answer, "uri").unwrap_or_default();
            let Some(receipt) = bids::read(shared, uri, op).await.ok().flatten() else {
                return Err(MarketError::Unavailable {
                    operation: op,
                    reason: format!(
                        "{bidder} answered our accept with {uri:?}, which cannot be read yet"
                    ),
                });
            };
            let did = shared.did(op).await?;
            let contract = guest::verify(&receipt, accept, &did).map_err(|reason| {
                MarketError::InvalidReceipt {
                    uri: receipt.uri.clone(),
                    reason,
                }
            })?;
            Ok(guest::remember(shared, contract).receipt())
        }
        Err(atproto::Error::Xrpc {
            status,
            error,
            message,
            ..
        }) if status == 400 || status == 403 => {
            // Refused before anything started: withdraw our accept so
            // another bid can win, and do not offer this bid again.
            tracing::warn!(%bidder, status, error, message, "bidder refused our accept; withdrawing it");
            shared
                .net
                .delete_own(m::ACCEPT, &rkey_of(accept))
                .await
                .map_err(|e| unavailable(op, "withdrawing our refused accept", &e))?;
            let mut memory = shared.memory();
            memory.sends.remove(&accept.uri);
            memory.refused.insert(bid.uri);
            Err(MarketError::BidWithdrawn {
                rfp: id.clone(),
                bidder: bidder.to_owned(),
            })
        }
        Err(error) => {
            if matches!(error, atproto::Error::Xrpc { status: 401, .. }) {
                // The bidder refused our token before reading the accept.
                shared
                    .memory()
                    .sends
                    .insert(accept.uri.clone(), Sent::Unsent);
            }
            Err(unavailable(
                op,
                format!("sending our accept to {bidder}"),
                &error,
            ))
        }
    }
}
