//! Collecting the bids on one of our requests, each read again from its
//! bidder's repository and checked.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use atproto::market as m;
use atproto::{AtUri, Record, attest};

use super::request::{self, Asked};
use super::{Shared, records, rkeys, unavailable};
use crate::{Bid, MarketError, Operation, RecordRef, RfpId};

/// Our request behind an RFP id, `UnknownRfp` when it is not one of ours.
pub async fn own_rfp(shared: &Shared, id: &RfpId, op: Operation) -> Result<Record, MarketError> {
    let unknown = || MarketError::UnknownRfp { rfp: id.clone() };
    let uri: AtUri = id.as_str().parse().map_err(|_| unknown())?;
    if uri.collection != m::RFP || uri.did != shared.did(op).await? {
        return Err(unknown());
    }
    shared
        .net
        .get_own(m::RFP, &uri.rkey)
        .await
        .map_err(|e| unavailable(op, "reading our rfp", &e))?
        .ok_or_else(unknown)
}

/// The rkey of a record we read by its URI.
pub fn rkey_of(record: &Record) -> String {
    record
        .uri
        .parse::<AtUri>()
        .map(|u| u.rkey)
        .unwrap_or_default()
}

pub async fn collect(shared: &Arc<Shared>, id: &RfpId) -> Result<Vec<Bid>, MarketError> {
    let op = Operation::CollectBids;
    let rfp = own_rfp(shared, id, op).await?;
    if let Some(accept) = shared
        .net
        .get_own(m::ACCEPT, &rkeys::accept(&rkey_of(&rfp)))
        .await
        .map_err(|e| unavailable(op, "reading our accept", &e))?
    {
        let bid = m::strong_ref(&accept.value, "bid").ok_or_else(|| MarketError::Unavailable {
            operation: op,
            reason: format!("our accept {} names no bid", accept.uri),
        })?;
        let record = read(shared, &bid.uri, op)
            .await?
            .ok_or_else(|| MarketError::Unavailable {
                operation: op,
                reason: format!("the accepted bid {} cannot be found", bid.uri),
            })?;
        return check(shared, &record, &rfp.uri)
            .await
            .map(|bid| vec![bid])
            .map_err(|reason| MarketError::Unavailable {
                operation: op,
                reason,
            });
    }
    let asked_here = shared.memory().asked.get(&rfp.uri).cloned();
    let discovery = request::discover(shared).await;
    let mut found: BTreeMap<String, Bid> = BTreeMap::new();
    let mut errors = discovery.errors.clone();
    let mut bidders: BTreeSet<String> = shared.bidders.iter().cloned().collect();
    bidders.extend(discovery.endpoints.iter().map(|e| e.did.clone()));
    for bidder in &bidders {
        match bids_of(shared, bidder, &rfp.uri).await {
            Ok(bids) => found.extend(bids.into_iter().filter_map(|bid| {
                let uri = bid.record.as_ref()?.uri.clone();
                Some((uri, bid))
            })),
            Err(error) => errors.push(format!("{bidder}: {error}")),
        }
    }
    // Pushed bids and answers name bids the listing may not show yet.
    let mut named: BTreeSet<String> = shared.inbox.bids_for(&rfp.uri).into_iter().collect();
    if let Some(asking) = &asked_here {
        named.extend(asking.bidders.values().filter_map(|asked| match asked {
            Asked::Answered(Some(uri)) => Some(uri.clone()),
            _ => None,
        }));
    }
    named.retain(|uri| !found.contains_key(uri));
    for uri in named {
        match read(shared, &uri, op).await {
            Ok(Some(record)) => match check(shared, &record, &rfp.uri).await {
                Ok(bid) => {
                    found.insert(uri, bid);
                }
                Err(why) => tracing::info!(%uri, why, "ignoring a bid"),
            },
            Ok(None) => tracing::info!(%uri, "a bid named to us is gone"),
            Err(error) => errors.push(error.to_string()),
        }
    }
    // Bidders not asked by this process (found since, or after a restart)
    // and without a bid on it yet are asked now.
    let with_bids: BTreeSet<&str> = found.values().map(|b| b.bidder.as_str()).collect();
    let newly: Vec<request::Endpoint> = discovery
        .endpoints
        .iter()
        .filter(|e| !with_bids.contains(e.did.as_str()))
        .filter(|e| {
            asked_here
                .as_ref()
                .is_none_or(|a| !a.bidders.contains_key(&e.did))
        })
        .cloned()
        .collect();
    if !newly.is_empty() {
        let names: Vec<String> = newly.iter().map(|e| e.did.clone()).collect();
        let rfp_ref = rfp.strong_ref();
        let task_shared = Arc::clone(shared);
        shared.tasks.spawn(async move {
            request::ask(&task_shared, &rfp_ref, &newly).await;
        });
        if found.is_empty() {
            return Err(MarketError::Unavailable {
                operation: op,
                reason: format!(
                    "asked {} for bids on {}; none yet",
                    names.join(", "),
                    rfp.uri
                ),
            });
        }
    }
    if found.is_empty() && discovery.endpoints.is_empty() {
        return Err(MarketError::Unavailable {
            operation: op,
            reason: format!(
                "no bidder could be found for {}: {}",
                rfp.uri,
                errors.join("; ")
            ),
        });
    }
    let refused = shared.memory().refused.clone();
    found.retain(|uri, _| !refused.contains(uri));
    let mut bids: Vec<Bid> = found.into_values().collect();
    if bids.is_empty() {
        no_bids(asked_here.as_ref(), &errors, &rfp.uri)?;
        return Ok(bids);
    }
    bids.sort_by(|a, b| {
        a.price
            .cmp_per_hour(&b.price)
            .then_with(|| a.bidder.cmp(&b.bidder))
            .then_with(|| a.record.cmp(&b.record))
    });
    Ok(bids)
}

/// Why there is no bid, as an error when that is not the bidders' choice:
/// some are still being asked, or none could be asked at all. `Ok` when
/// bidders answered and none bid.
fn no_bids(
    asking: Option<&request::Asking>,
    errors: &[String],
    rfp: &str,
) -> Result<(), MarketError> {
    let op = Operation::CollectBids;
    let Some(asking) = asking else {
        return Ok(());
    };
    let pending: Vec<&str> = asking
        .bidders
        .iter()
        .filter(|(_, asked)| **asked == Asked::Pending)
        .map(|(did, _)| did.as_str())
        .collect();
    if !pending.is_empty() {
        return Err(MarketError::Unavailable {
            operation: op,
            reason: format!("no bid on {rfp} yet; still asking {}", pending.join(", ")),
        });
    }
    let answered = asking
        .bidders
        .values()
        .any(|asked| matches!(asked, Asked::Answered(_)));
    if answered {
        return Ok(());
    }
    let mut reasons: Vec<String> = asking
        .bidders
        .values()
        .filter_map(|asked| match asked {
            Asked::Failed(why) => Some(why.clone()),
            _ => None,
        })
        .collect();
    reasons.extend(asking.discovery.clone());
    reasons.extend(errors.iter().cloned());
    if reasons.is_empty() {
        reasons.push("the bidders are still being discovered".to_owned());
    }
    Err(MarketError::Unavailable {
        operation: op,
        reason: format!("no bidder could be asked for {rfp}: {}", reasons.join("; ")),
    })
}

/// Reads any record by its URI.
pub async fn read(
    shared: &Shared,
    uri: &str,
    op: Operation,
) -> Result<Option<Record>, MarketError> {
    let parsed: AtUri = uri.parse().map_err(|e| MarketError::Unavailable {
        operation: op,
        reason: format!("{uri}: {e}"),
    })?;
    shared
        .net
        .get(&parsed)
        .await
        .map_err(|e| unavailable(op, format!("reading {uri}"), &e))
}

/// The valid bids of `bidder` on `rfp_uri` in its repository.
pub async fn bids_of(
    shared: &Shared,
    bidder: &str,
    rfp_uri: &str,
) -> Result<Vec<Bid>, atproto::Error> {
    let mut bids = Vec::new();
    for record in shared.net.list(bidder, m::BID).await? {
        if m::strong_ref(&record.value, "rfp").is_none_or(|r| r.uri != rfp_uri) {
            continue;
        }
        match check(shared, &record, rfp_uri).await {
            Ok(bid) => bids.push(bid),
            Err(why) => tracing::info!(uri = %record.uri, why, "ignoring a bid"),
        }
    }
    Ok(bids)
}

/// A bid, if `record` is a signed bid on `rfp_uri` whose payload names a price.
pub async fn check(shared: &Shared, record: &Record, rfp_uri: &str) -> Result<Bid, String> {
    let author: AtUri = record.uri.parse().map_err(|e| format!("{e}"))?;
    if author.collection != m::BID || m::text(&record.value, "$type") != Some(m::BID) {
        return Err("not a market bid".to_owned());
    }
    if m::strong_ref(&record.value, "rfp").is_none_or(|r| r.uri != rfp_uri) {
        return Err(format!("not a bid on {rfp_uri}"));
    }
    attest::verify_record(&record.value, &author.did).map_err(|e| e.to_string())?;
    let payload =
        m::strong_ref(&record.value, "payload").ok_or_else(|| "bid has no payload".to_owned())?;
    let payload_uri: AtUri = payload.uri.parse().map_err(|e| format!("payload: {e}"))?;
    let payload = shared
        .net
        .get(&payload_uri)
        .await
        .map_err(|e| format!("payload: {e}"))?
        .ok_or_else(|| format!("payload {} is gone", payload.uri))?;
    if payload.value.get("signatures").is_some() {
        attest::verify_record(&payload.value, &payload_uri.did)
            .map_err(|e| format!("payload: {e}"))?;
    }
    let price = records::price(&payload.value)?;
    Ok(Bid {
        bidder: author.did,
        price,
        record: Some(Box::new(RecordRef {
            uri: record.uri.clone(),
            cid: record.cid.clone(),
        })),
    })
}
