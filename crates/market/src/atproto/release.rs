//! A guest's release: the signed `vm.delete`, its sending, and what the
//! bidder's repository says about whether the release can have reached the
//! process that started the machine.
//!
//! The reference bidder keeps its contracts in memory only (MARKET.md
//! section 5): after a restart it answers a `vm.delete` 200 and ignores it,
//! and the machine runs on. Nothing confirms a release, but two things in
//! public records say it was lost:
//! - the bidder's offering no longer names the endpoint that minted our
//!   receipt (the reference's `hono-bidder` opens a new ingress, so a new
//!   endpoint, in every process, and rewrites its offering at startup), or
//!   the offering was created after the receipt (the bidder started afresh);
//! - the guest reported after our `vm.delete` (by more than the clock skew).
//!
//! Then the release is [`ReleaseOutcome::Unconfirmed`], with what was seen,
//! instead of [`ReleaseOutcome::Acknowledged`]. A bidder restarted at the
//! same endpoint rewrites nothing at startup (its offering matches), so
//! where no guest reports, the protocol cannot tell.

use std::time::SystemTime;

use atproto::Record;
use atproto::market as m;
use serde_json::{Value, json};

use super::bids::{self, rkey_of};
use super::guest::{self, Contract};
use super::{Shared, records, request, rkeys, unavailable};
use crate::{MarketError, Operation, Receipt, ReleaseOutcome};

/// A bidder's offering of `compute.vm`, as its repository shows it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offering {
    /// `endpointUrl`: a URL, or `did#service`.
    pub endpoint: String,
    /// `createdAt`.
    pub created_at: Option<SystemTime>,
    /// `refreshedAt`.
    pub refreshed_at: Option<SystemTime>,
}

/// What says the bidder process that minted a receipt is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restarted {
    /// The offering names another endpoint than the receipt's.
    NewEndpoint {
        /// The receipt's endpoint.
        old: String,
        /// The offering's.
        new: String,
        /// When the offering was last written.
        at: Option<SystemTime>,
    },
    /// Every offering was created after the receipt.
    NewOffering {
        /// The oldest offering's `createdAt`.
        created_at: SystemTime,
    },
    /// The guest reported after our `vm.delete`.
    GuestReports,
}

fn same_endpoint(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

fn is_url(endpoint: &str) -> bool {
    endpoint.starts_with("https://") || endpoint.starts_with("http://")
}

/// Whether the bidder's offerings say the process that minted a receipt
/// (at `minted_at`, naming `receipt_endpoint`) is gone. Pure: the caller
/// reads the records. No offering says nothing (a bidder may withdraw it).
#[must_use]
pub fn restart_evidence(
    receipt_endpoint: Option<&str>,
    minted_at: Option<SystemTime>,
    offerings: &[Offering],
) -> Option<Restarted> {
    let oldest = offerings.iter().map(|o| o.created_at).min()?;
    if let (Some(minted), Some(created)) = (minted_at, oldest)
        && created > minted
    {
        return Some(Restarted::NewOffering {
            created_at: created,
        });
    }
    let old = receipt_endpoint.filter(|e| is_url(e))?;
    if offerings.iter().any(|o| same_endpoint(&o.endpoint, old)) {
        return None;
    }
    let newest = offerings
        .iter()
        .filter(|o| is_url(&o.endpoint))
        .max_by_key(|o| o.refreshed_at.or(o.created_at))?;
    Some(Restarted::NewEndpoint {
        old: old.to_owned(),
        new: newest.endpoint.clone(),
        at: newest.refreshed_at.or(newest.created_at),
    })
}

fn when(at: Option<SystemTime>) -> String {
    at.map_or_else(|| "an unknown time".to_owned(), m::datetime)
}

/// The message of an unconfirmed release: who, which receipt, what was
/// seen, and what to check with the provider.
#[must_use]
pub fn unconfirmed_reason(contract: &Contract, evidence: &Restarted) -> String {
    let seen = match evidence {
        Restarted::NewEndpoint { old, new, at } => format!(
            "its offering names the endpoint {new} since {}, not {old} that minted the receipt, so the bidder process that started the machine is gone",
            when(*at)
        ),
        Restarted::NewOffering { created_at } => format!(
            "its offering was created at {}, after the receipt, so the bidder started afresh since",
            m::datetime(*created_at)
        ),
        Restarted::GuestReports => {
            "the guest still reports after our vm.delete, so the bidder ignored it".to_owned()
        }
    };
    format!(
        "bidder {} acknowledged the release of {} but {seen}; the bidder keeps its contracts in memory only, so it has \
         probably forgotten this one and the machine may still run (and be billed): ask the provider to stop the \
         machine of that receipt",
        contract.bidder, contract.receipt.uri
    )
}

/// The bidder's offerings of `compute.vm` now.
async fn offerings(shared: &Shared, bidder: &str) -> Result<Vec<Offering>, atproto::Error> {
    let records = shared.net.list(bidder, m::OFFERING).await?;
    Ok(records
        .iter()
        .filter(|r| {
            r.value
                .get("appliesTo")
                .and_then(Value::as_array)
                .is_some_and(|nsids| nsids.iter().any(|n| n.as_str() == Some(m::VM)))
        })
        .filter_map(|r| {
            Some(Offering {
                endpoint: m::text(&r.value, "endpointUrl")?.to_owned(),
                created_at: m::created_at(&r.value),
                refreshed_at: m::text(&r.value, "refreshedAt").and_then(m::parse_datetime),
            })
        })
        .collect())
}

/// What says the release of `contract` was lost, if anything. A failed
/// read says nothing (the release itself is what must not fail).
async fn evidence(shared: &Shared, contract: &Contract, op: Operation) -> Option<Restarted> {
    match guest::reports_after_release(shared, contract, op).await {
        Ok(true) => return Some(Restarted::GuestReports),
        Ok(false) => {}
        Err(error) => tracing::info!(%error, "cannot read the guest's events"),
    }
    match offerings(shared, &contract.bidder).await {
        Ok(offerings) => restart_evidence(
            contract.submit_event.as_deref(),
            contract.minted_at,
            &offerings,
        ),
        Err(error) => {
            tracing::info!(bidder = %contract.bidder, %error, "cannot read the bidder's offering");
            None
        }
    }
}

pub async fn release(shared: &Shared, receipt: &Receipt) -> Result<ReleaseOutcome, MarketError> {
    let op = Operation::Release;
    let contract = guest::load(shared, receipt, op).await?;
    let event = match guest::released(shared, &contract, op).await? {
        Some((event, _)) => event,
        None => write(shared, &contract).await?,
    };
    let evidence = evidence(shared, &contract, op).await;
    if let Err(error) = send(shared, &contract, &event, op).await {
        // The endpoint of a process that is gone may not answer at all: the
        // bidder's current one is the only one left to tell.
        let Some(Restarted::NewEndpoint { new, .. }) = &evidence else {
            return Err(error);
        };
        tracing::info!(%error, endpoint = %new, "the receipt's endpoint is gone; sending the release to the bidder's current one");
        send_to(shared, &contract, new, &event, op).await?;
    }
    Ok(match evidence {
        None => ReleaseOutcome::Acknowledged,
        Some(evidence) => {
            let reason = unconfirmed_reason(&contract, &evidence);
            tracing::warn!(receipt = %contract.receipt.uri, provider = %contract.bidder, %reason, "release unconfirmed");
            ReleaseOutcome::Unconfirmed { reason }
        }
    })
}

/// Writes the signed `vm.delete` and its event, before anything is sent.
async fn write(shared: &Shared, contract: &Contract) -> Result<Record, MarketError> {
    let op = Operation::Release;
    let (payload_rkey, event_rkey) = rkeys::release(&rkey_of(&contract.accept));
    let now = shared.now();
    let mut payload = records::vm_delete(now);
    request::signed(shared, &mut payload, op).await?;
    let payload = shared
        .net
        .put_own(m::VM_DELETE, &payload_rkey, &payload)
        .await
        .map_err(|e| unavailable(op, "writing our vm.delete", &e))?;
    let mut event = records::event(&contract.receipt, &payload, now);
    request::signed(shared, &mut event, op).await?;
    let written = shared
        .net
        .put_own(m::EVENT, &event_rkey, &event)
        .await
        .map_err(|e| unavailable(op, "writing our release event", &e))?;
    tracing::info!(receipt = %contract.receipt.uri, event = %written.uri, "release written");
    Ok(Record {
        uri: written.uri,
        cid: written.cid,
        value: event,
    })
}

/// Sends our release to the endpoint the receipt names (or the bid's).
pub async fn send(
    shared: &Shared,
    contract: &Contract,
    event: &Record,
    op: Operation,
) -> Result<(), MarketError> {
    let endpoint = match &contract.submit_event {
        Some(endpoint) => endpoint.clone(),
        None => bids::read(shared, &contract.bid, op)
            .await?
            .and_then(|bid| m::text(&bid.value, "submitAccept").map(str::to_owned))
            .ok_or_else(|| MarketError::Unavailable {
                operation: op,
                reason: format!("{} names no endpoint for events", contract.bidder),
            })?,
    };
    send_to(shared, contract, &endpoint, event, op).await
}

async fn send_to(
    shared: &Shared,
    contract: &Contract,
    endpoint: &str,
    event: &Record,
    op: Operation,
) -> Result<(), MarketError> {
    let input = json!({ "uri": event.uri, "cid": event.cid, "record": event.value });
    let _: Value = shared
        .net
        .call_bidder(&contract.bidder, endpoint, m::SUBMIT_EVENT, &input)
        .await
        .map_err(|e| {
            unavailable(
                op,
                format!("sending the release to {}", contract.bidder),
                &e,
            )
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn at(seconds: u64) -> Option<SystemTime> {
        Some(UNIX_EPOCH + Duration::from_secs(seconds))
    }

    fn offering(endpoint: &str, created: u64, refreshed: u64) -> Offering {
        Offering {
            endpoint: endpoint.to_owned(),
            created_at: at(created),
            refreshed_at: at(refreshed),
        }
    }

    const OLD: &str = "https://did-key-old.example.org";
    const NEW: &str = "https://did-key-new.example.org";

    #[test]
    fn the_same_endpoint_says_nothing_even_when_refreshed_since() {
        // The reference refreshes a matching offering every 5 minutes,
        // restart or not: refreshedAt alone proves nothing.
        let offerings = [offering(&format!("{OLD}/"), 100, 900)];
        assert_eq!(restart_evidence(Some(OLD), at(200), &offerings), None);
    }

    #[test]
    fn another_endpoint_says_the_process_that_minted_the_receipt_is_gone() {
        let offerings = [offering(NEW, 100, 900)];
        assert_eq!(
            restart_evidence(Some(OLD), at(200), &offerings),
            Some(Restarted::NewEndpoint {
                old: OLD.to_owned(),
                new: NEW.to_owned(),
                at: at(900),
            })
        );
    }

    #[test]
    fn an_offering_created_after_the_receipt_says_the_bidder_started_afresh() {
        let offerings = [offering(OLD, 300, 300)];
        assert_eq!(
            restart_evidence(Some(OLD), at(200), &offerings),
            Some(Restarted::NewOffering {
                created_at: UNIX_EPOCH + Duration::from_secs(300)
            })
        );
    }

    #[test]
    fn nothing_to_compare_says_nothing() {
        // No offering (withdrawn), or endpoints that are service references
        // (`did#id`, resolved through the DID document), or no receipt endpoint.
        assert_eq!(restart_evidence(Some(OLD), at(200), &[]), None);
        let by_reference = [offering("did:plc:abc#pdr_temp_market", 100, 900)];
        assert_eq!(
            restart_evidence(Some("did:plc:abc#pdr_temp_market"), at(200), &by_reference),
            None
        );
        assert_eq!(
            restart_evidence(None, at(200), &[offering(NEW, 100, 900)]),
            None
        );
        assert_eq!(
            restart_evidence(Some(OLD), None, &[offering(OLD, 300, 300)]),
            None,
            "no receipt time: the offering's age says nothing"
        );
    }
}
