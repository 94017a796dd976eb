//! A rented guest: its verified receipt, what its provider reported, and
//! its release.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use atproto::market as m;
use atproto::{AtUri, Record, StrongRef, attest};

use super::bids::{self, rkey_of};
use super::records::{self, EventKind};
use super::{Shared, release, rkeys, unavailable};
use crate::{ContractKey, GuestInfo, GuestStatus, MarketError, Operation, Receipt, RfpId};

/// A receipt that verified against our accept.
#[derive(Debug, Clone)]
pub struct Contract {
    pub receipt: StrongRef,
    pub bidder: String,
    pub accept: Record,
    pub rfp: String,
    pub bid: String,
    /// Where the bidder takes events (the receipt's `submitEvent`).
    pub submit_event: Option<String>,
    /// Our accept's `createdAt`: the provisioning timeout runs from it.
    pub accepted_at: SystemTime,
    /// The receipt's `createdAt`, on the bidder's clock.
    pub minted_at: Option<SystemTime>,
}

impl Contract {
    pub fn receipt(&self) -> Receipt {
        Receipt {
            uri: self.receipt.uri.clone(),
            cid: self.receipt.cid.clone(),
        }
    }
}

/// One provider event seen.
#[derive(Debug, Clone)]
pub struct Seen {
    kind: EventKind,
    at: Option<SystemTime>,
}

/// The events of one guest seen so far, and when its provider's
/// repository was last listed.
#[derive(Debug, Clone, Default)]
pub struct Events {
    read_at: Option<SystemTime>,
    seen: BTreeMap<String, Seen>,
}

/// Checks a receipt against our accept: a signed receipt from the bidder
/// of the accepted bid, for our accept's current version, with its `cid`
/// binding recomputing over our accept.
pub fn verify(receipt: &Record, accept: &Record, requester: &str) -> Result<Contract, String> {
    let author: AtUri = receipt.uri.parse().map_err(|e| format!("{e}"))?;
    let value = &receipt.value;
    if author.collection != m::RECEIPT || m::text(value, "$type") != Some(m::RECEIPT) {
        return Err("not a market receipt".to_owned());
    }
    let named = m::strong_ref(value, "accept").ok_or("the receipt names no accept")?;
    if named.uri != accept.uri || named.cid != accept.cid {
        return Err(format!(
            "the receipt is for {}#{}, not our accept {}#{}",
            named.uri, named.cid, accept.uri, accept.cid
        ));
    }
    let bid = m::strong_ref(&accept.value, "bid").ok_or("our accept names no bid")?;
    let rfp = m::strong_ref(&accept.value, "rfp").ok_or("our accept names no rfp")?;
    if bid.at_uri().map(|u| u.did).ok().as_deref() != Some(author.did.as_str()) {
        return Err("the receipt is not from the bidder we accepted".to_owned());
    }
    attest::verify_record(value, &author.did).map_err(|e| e.to_string())?;
    attest::verify_receipt_binding(&accept.value, value, requester).map_err(|e| e.to_string())?;
    Ok(Contract {
        receipt: receipt.strong_ref(),
        bidder: author.did,
        accept: accept.clone(),
        rfp: rfp.uri,
        bid: bid.uri,
        submit_event: m::text(value, "submitEvent").map(str::to_owned),
        accepted_at: m::created_at(&accept.value).unwrap_or(UNIX_EPOCH),
        minted_at: m::created_at(value),
    })
}

pub fn remember(shared: &Shared, contract: Contract) -> Arc<Contract> {
    let contract = Arc::new(contract);
    shared
        .memory()
        .contracts
        .insert(contract.receipt(), Arc::clone(&contract));
    contract
}

/// A receipt of our accept in the bidder's repository, if one is there.
pub async fn find_receipt(
    shared: &Shared,
    accept: &Record,
    bidder: &str,
    op: Operation,
) -> Result<Option<Arc<Contract>>, MarketError> {
    let receipts = shared
        .net
        .list(bidder, m::RECEIPT)
        .await
        .map_err(|e| unavailable(op, format!("reading the receipts of {bidder}"), &e))?;
    let did = shared.did(op).await?;
    for receipt in receipts {
        if m::strong_ref(&receipt.value, "accept").is_none_or(|a| a.uri != accept.uri) {
            continue;
        }
        match verify(&receipt, accept, &did) {
            Ok(contract) => return Ok(Some(remember(shared, contract))),
            Err(why) => tracing::info!(uri = %receipt.uri, why, "ignoring a receipt"),
        }
    }
    Ok(None)
}

/// The verified contract of a receipt the caller kept.
pub(super) async fn load(
    shared: &Shared,
    receipt: &Receipt,
    op: Operation,
) -> Result<Arc<Contract>, MarketError> {
    if let Some(known) = shared.memory().contracts.get(receipt) {
        return Ok(Arc::clone(known));
    }
    let invalid = |reason: String| MarketError::InvalidReceipt {
        uri: receipt.uri.clone(),
        reason,
    };
    let uri: AtUri = receipt.uri.parse().map_err(|e| invalid(format!("{e}")))?;
    if uri.collection != m::RECEIPT {
        return Err(invalid("not a market receipt".to_owned()));
    }
    let record = shared
        .net
        .get(&uri)
        .await
        .map_err(|e| unavailable(op, format!("reading the receipt {}", receipt.uri), &e))?
        .ok_or_else(|| MarketError::GuestNotFound {
            uri: receipt.uri.clone(),
        })?;
    if record.cid != receipt.cid {
        return Err(invalid(format!(
            "the receipt is now {}, not the {} accepted",
            record.cid, receipt.cid
        )));
    }
    let did = shared.did(op).await?;
    let accept_uri = m::strong_ref(&record.value, "accept")
        .and_then(|a| a.at_uri().ok())
        .filter(|a| a.did == did && a.collection == m::ACCEPT)
        .ok_or_else(|| invalid("the receipt is not for one of our accepts".to_owned()))?;
    let accept = shared
        .net
        .get_own(m::ACCEPT, &accept_uri.rkey)
        .await
        .map_err(|e| unavailable(op, "reading our accept", &e))?
        .ok_or_else(|| invalid(format!("our accept {accept_uri} is gone")))?;
    let contract = verify(&record, &accept, &did).map_err(invalid)?;
    Ok(remember(shared, contract))
}

/// Our release of a contract, when written: its event and `createdAt`.
pub(super) async fn released(
    shared: &Shared,
    contract: &Contract,
    op: Operation,
) -> Result<Option<(Record, SystemTime)>, MarketError> {
    let (_, event) = rkeys::release(&rkey_of(&contract.accept));
    let record = shared
        .net
        .get_own(m::EVENT, &event)
        .await
        .map_err(|e| unavailable(op, "reading our release", &e))?;
    Ok(record.map(|r| {
        let at = m::created_at(&r.value).unwrap_or(UNIX_EPOCH);
        (r, at)
    }))
}

/// The provider's events about a guest: pushed ones, and its repository's,
/// listed at most every `repo_read_interval`.
pub(super) async fn events(
    shared: &Shared,
    contract: &Contract,
    op: Operation,
) -> Result<Vec<Seen>, MarketError> {
    let now = shared.now();
    let receipt_uri = &contract.receipt.uri;
    let (due, known) = {
        let memory = shared.memory();
        let events = memory.events.get(receipt_uri);
        let due = events
            .and_then(|e| e.read_at)
            .is_none_or(|at| now >= at + shared.timeouts.repo_read_interval);
        let known: Vec<String> = events
            .map(|e| e.seen.keys().cloned().collect())
            .unwrap_or_default();
        (due, known)
    };
    let mut new: BTreeMap<String, Seen> = BTreeMap::new();
    if due {
        let listed = shared
            .net
            .list(&contract.bidder, m::EVENT)
            .await
            .map_err(|e| {
                unavailable(op, format!("reading the events of {}", contract.bidder), &e)
            })?;
        for record in listed {
            let about_it =
                m::strong_ref(&record.value, "receipt").is_some_and(|r| &r.uri == receipt_uri);
            if about_it && !known.contains(&record.uri) {
                match check_event(shared, &record, contract).await {
                    Ok(seen) => {
                        new.insert(record.uri.clone(), seen);
                    }
                    Err(why) => tracing::info!(uri = %record.uri, why, "ignoring an event"),
                }
            }
        }
    }
    for uri in shared.inbox.events_for(receipt_uri) {
        if known.contains(&uri) || new.contains_key(&uri) {
            continue;
        }
        if let Ok(Some(record)) = bids::read(shared, &uri, op).await {
            match check_event(shared, &record, contract).await {
                Ok(seen) => {
                    new.insert(uri, seen);
                }
                Err(why) => tracing::info!(%uri, why, "ignoring a pushed event"),
            }
        }
    }
    let mut memory = shared.memory();
    let events = memory.events.entry(receipt_uri.clone()).or_default();
    if due {
        events.read_at = Some(now);
    }
    events.seen.extend(new);
    Ok(events.seen.values().cloned().collect())
}

/// An event, if `record` is a signed event of the guest's provider about
/// its receipt.
async fn check_event(
    shared: &Shared,
    record: &Record,
    contract: &Contract,
) -> Result<Seen, String> {
    let author: AtUri = record.uri.parse().map_err(|e| format!("{e}"))?;
    if author.did != contract.bidder || m::text(&record.value, "$type") != Some(m::EVENT) {
        return Err("not an event of the guest's provider".to_owned());
    }
    if m::strong_ref(&record.value, "receipt").as_ref() != Some(&contract.receipt) {
        return Err("not about this receipt".to_owned());
    }
    attest::verify_record(&record.value, &author.did).map_err(|e| e.to_string())?;
    let payload = m::strong_ref(&record.value, "payload").ok_or("the event has no payload")?;
    let payload = bids::read(shared, &payload.uri, Operation::GuestStatus)
        .await
        .map_err(|e| e.to_string())?
        .ok_or("the event's payload is gone")?;
    Ok(Seen {
        kind: records::event_kind(&payload.value),
        at: m::created_at(&payload.value).or_else(|| m::created_at(&record.value)),
    })
}

/// What the events say, or Booting/Failed by the provisioning timeout.
fn status_of(shared: &Shared, contract: &Contract, seen: &[Seen]) -> GuestStatus {
    let mut ordered: Vec<&Seen> = seen.iter().collect();
    ordered.sort_by_key(|s| s.at);
    let address = ordered.iter().rev().find_map(|s| match &s.kind {
        EventKind::OnNetwork { address } => Some(address.clone()),
        _ => None,
    });
    let node_id = ordered.iter().rev().find_map(|s| match &s.kind {
        EventKind::Registered { node_id } => Some(node_id.clone()),
        _ => None,
    });
    match (node_id, address) {
        (Some(node_id), address) => GuestStatus::NodeRegistered {
            address: address.flatten(),
            node_id,
        },
        (None, Some(address)) => GuestStatus::OnNetwork { address },
        (None, None) => {
            let deadline = contract.accepted_at + shared.timeouts.provisioning;
            if shared.now() >= deadline {
                GuestStatus::Failed {
                    reason: format!(
                        "{} sent no vm.onNetwork for {} within {}s of our accept: it may have failed to provision (the market tells nobody)",
                        contract.bidder,
                        contract.receipt.uri,
                        shared.timeouts.provisioning.as_secs()
                    ),
                }
            } else {
                GuestStatus::Booting
            }
        }
    }
}

/// The events newer than our release by more than the clock skew: the
/// guest still reports, so the provider ignored the release.
pub(super) fn after_release(
    shared: &Shared,
    seen: Vec<Seen>,
    released_at: SystemTime,
) -> Vec<Seen> {
    let threshold = released_at + shared.timeouts.clock_skew;
    seen.into_iter()
        .filter(|s| s.kind != EventKind::Other && s.at.is_some_and(|at| at > threshold))
        .collect()
}

pub async fn status(shared: &Shared, receipt: &Receipt) -> Result<GuestStatus, MarketError> {
    let op = Operation::GuestStatus;
    let contract = load(shared, receipt, op).await?;
    let seen = events(shared, &contract, op).await?;
    match released(shared, &contract, op).await? {
        Some((_, at)) => {
            let running = after_release(shared, seen, at);
            if running.is_empty() {
                Ok(GuestStatus::Terminated)
            } else {
                warn_still_running(&contract);
                Ok(status_of(shared, &contract, &running))
            }
        }
        None => Ok(status_of(shared, &contract, &seen)),
    }
}

pub(super) fn warn_still_running(contract: &Contract) {
    tracing::warn!(
        receipt = %contract.receipt.uri,
        provider = %contract.bidder,
        "the guest still reports after its release was acknowledged: the provider may have restarted and ignored it; sending the release again"
    );
}

/// Whether our release is written and the guest reported after it (by more
/// than the clock skew): the provider ignored it.
pub(super) async fn reports_after_release(
    shared: &Shared,
    contract: &Contract,
    op: Operation,
) -> Result<bool, MarketError> {
    let Some((_, at)) = released(shared, contract, op).await? else {
        return Ok(false);
    };
    let seen = events(shared, contract, op).await?;
    Ok(!after_release(shared, seen, at).is_empty())
}

pub async fn lookup(shared: &Shared, receipt: &Receipt) -> Result<Option<GuestInfo>, MarketError> {
    let op = Operation::Lookup;
    let contract = match load(shared, receipt, op).await {
        Err(MarketError::GuestNotFound { .. }) => return Ok(None),
        other => other?,
    };
    let Some((event, at)) = released(shared, &contract, op).await? else {
        let seen = events(shared, &contract, op).await?;
        let status = status_of(shared, &contract, &seen);
        return info(shared, &contract, status, op).await.map(Some);
    };
    // Harmless to repeat, and the only cure for a provider that forgot.
    release::send(shared, &contract, &event, op).await?;
    let running = after_release(shared, events(shared, &contract, op).await?, at);
    if running.is_empty() {
        return Ok(None);
    }
    warn_still_running(&contract);
    let status = status_of(shared, &contract, &running);
    info(shared, &contract, status, op).await.map(Some)
}

pub async fn adopt(shared: &Shared, receipt: &Receipt) -> Result<GuestInfo, MarketError> {
    let op = Operation::Adopt;
    let contract = load(shared, receipt, op).await?;
    if released(shared, &contract, op).await?.is_some() {
        return Err(MarketError::GuestNotFound {
            uri: receipt.uri.clone(),
        });
    }
    let seen = events(shared, &contract, op).await?;
    let status = status_of(shared, &contract, &seen);
    info(shared, &contract, status, op).await
}

async fn info(
    shared: &Shared,
    contract: &Contract,
    status: GuestStatus,
    op: Operation,
) -> Result<GuestInfo, MarketError> {
    let bid = bids::read(shared, &contract.bid, op)
        .await?
        .ok_or_else(|| MarketError::Unavailable {
            operation: op,
            reason: format!("the accepted bid {} is gone", contract.bid),
        })?;
    let bid = bids::check(shared, &bid, &contract.rfp)
        .await
        .map_err(|reason| MarketError::Unavailable {
            operation: op,
            reason,
        })?;
    Ok(GuestInfo {
        receipt: contract.receipt(),
        rfp: RfpId::new(contract.rfp.clone()),
        // The published records name neither (module docs).
        contract: ContractKey::new("", ""),
        owner_did: String::new(),
        provider: contract.bidder.clone(),
        price: bid.price,
        status,
    })
}
