//! Publishing a request, discovering bidders, and asking them to bid.

use std::sync::Arc;
use std::time::SystemTime;

use atproto::market as m;
use atproto::{StrongRef, attest};
use serde_json::{Value, json};

use super::{ByBidder, Shared, records, rkeys, unavailable};
use crate::{MarketError, Operation, RequestForProposal, RfpId};

/// A request gets at most this many rounds (one per machine rented and
/// released under the same contract name).
const MAX_ROUNDS: u32 = 10_000;

/// What asking one bidder gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// The call is under way.
    Pending,
    /// It answered; with the bid it made, if any.
    Answered(Option<String>),
    /// It failed, and why.
    Failed(String),
}

/// Asking the bidders about one request, in this process.
#[derive(Debug, Clone, Default)]
pub struct Asking {
    pub bidders: ByBidder<Asked>,
    /// Why no bidder at all could be found, when none was.
    pub discovery: Option<String>,
}

/// A bidder that serves `compute.vm`, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub did: String,
    pub url: String,
}

/// The bidders found at one time, and what could not be read.
#[derive(Debug, Clone)]
pub struct Discovery {
    pub at: SystemTime,
    pub endpoints: Vec<Endpoint>,
    pub errors: Vec<String>,
}

pub async fn publish(
    shared: &Arc<Shared>,
    request: RequestForProposal,
) -> Result<RfpId, MarketError> {
    let op = Operation::Publish;
    let resources = &request.resources;
    if resources.cpus == 0 || resources.memory_mib == 0 {
        return Err(MarketError::InvalidRequest {
            contract: request.contract,
            reason: "a machine needs at least one cpu and some memory".to_owned(),
        });
    }
    shared.did(op).await?;
    for round in 0..MAX_ROUNDS {
        let keys = rkeys::round(&shared.scope, &request.contract, round);
        let existing = shared
            .net
            .get_own(m::RFP, &keys.rfp)
            .await
            .map_err(|e| unavailable(op, "reading our rfp", &e))?;
        match existing {
            Some(rfp) if is_closed(shared, &keys.rfp).await? => {
                tracing::debug!(uri = %rfp.uri, "round closed; trying the next");
            }
            Some(rfp) => return Ok(RfpId::new(rfp.uri)),
            None => {
                let rfp = write_request(shared, &request, &keys).await?;
                tracing::info!(contract = %request.contract, uri = %rfp.uri, "rfp published");
                ask_all(shared, rfp.clone());
                return Ok(RfpId::new(rfp.uri));
            }
        }
    }
    Err(MarketError::InvalidRequest {
        contract: request.contract,
        reason: format!("more than {MAX_ROUNDS} rounds under one name"),
    })
}

/// A round is closed once its release is written.
async fn is_closed(shared: &Shared, rfp_rkey: &str) -> Result<bool, MarketError> {
    let (_, event) = rkeys::release(&rkeys::accept(rfp_rkey));
    let release = shared
        .net
        .get_own(m::EVENT, &event)
        .await
        .map_err(|e| unavailable(Operation::Publish, "reading our release", &e))?;
    Ok(release.is_some())
}

async fn write_request(
    shared: &Shared,
    request: &RequestForProposal,
    keys: &rkeys::RoundKeys,
) -> Result<StrongRef, MarketError> {
    let op = Operation::Publish;
    let now = shared.now();
    let vm = shared
        .net
        .put_own(m::VM, &keys.vm, &records::vm(request, &keys.vm, now))
        .await
        .map_err(|e| unavailable(op, "writing the compute.vm", &e))?;
    let mut rfp = records::rfp(&vm, &shared.public_url, now);
    signed(shared, &mut rfp, op).await?;
    shared
        .net
        .put_own(m::RFP, &keys.rfp, &rfp)
        .await
        .map_err(|e| unavailable(op, "writing the rfp", &e))
}

/// Signs one of our records with the attestation key.
pub async fn signed(shared: &Shared, record: &mut Value, op: Operation) -> Result<(), MarketError> {
    let did = shared.did(op).await?;
    attest::sign_record(record, &shared.key, &did, Some(&did))
        .map(|_| ())
        .map_err(|e| MarketError::InvalidConfig {
            reason: format!("cannot sign a record: {e}"),
        })
}

/// Asks every bidder found, in the background.
pub fn ask_all(shared: &Arc<Shared>, rfp: StrongRef) {
    shared.memory().asked.entry(rfp.uri.clone()).or_default();
    let task_shared = Arc::clone(shared);
    shared.tasks.spawn(async move {
        let discovery = discover(&task_shared).await;
        ask(&task_shared, &rfp, &discovery.endpoints).await;
        if discovery.endpoints.is_empty() {
            let why = if discovery.errors.is_empty() {
                "no bidder offers compute.vm".to_owned()
            } else {
                discovery.errors.join("; ")
            };
            if let Some(asking) = task_shared.memory().asked.get_mut(&rfp.uri) {
                asking.discovery = Some(why);
            }
        }
    });
}

/// Asks `endpoints` for bids on `rfp`, each at most once per process.
pub async fn ask(shared: &Shared, rfp: &StrongRef, endpoints: &[Endpoint]) {
    let fresh: Vec<&Endpoint> = {
        let mut memory = shared.memory();
        let asking = memory.asked.entry(rfp.uri.clone()).or_default();
        let fresh: Vec<&Endpoint> = endpoints
            .iter()
            .filter(|e| !asking.bidders.contains_key(&e.did))
            .collect();
        for endpoint in &fresh {
            asking.bidders.insert(endpoint.did.clone(), Asked::Pending);
        }
        fresh
    };
    let calls = fresh.iter().map(|endpoint| async move {
        let input = json!({ "rfpUri": rfp.uri, "rfpCid": rfp.cid });
        let answer: Result<Value, _> = shared
            .net
            .call_bidder(&endpoint.did, &endpoint.url, m::SUBMIT_RFP, &input)
            .await;
        let asked = match answer {
            Ok(answer) if answer.get("ok").and_then(Value::as_bool) == Some(false) => {
                Asked::Failed(format!(
                    "{} declined: {}",
                    endpoint.did,
                    m::text(&answer, "error").unwrap_or("no reason")
                ))
            }
            Ok(answer) => Asked::Answered(m::text(&answer, "bidUri").map(str::to_owned)),
            Err(error) => Asked::Failed(format!("{}: {error}", endpoint.did)),
        };
        tracing::debug!(bidder = %endpoint.did, ?asked, "submitRfp");
        (endpoint.did.clone(), asked)
    });
    let results = futures::future::join_all(calls).await;
    let mut memory = shared.memory();
    if let Some(asking) = memory.asked.get_mut(&rfp.uri) {
        asking.bidders.extend(results);
    }
}

/// The bidders serving `compute.vm`: configured DIDs plus the relay's index
/// of offerings, each read from its own repository. Kept for
/// `discovery_refresh`, unless none was found.
pub async fn discover(shared: &Shared) -> Discovery {
    let now = shared.now();
    if let Some(known) = &shared.memory().discovered
        && !known.endpoints.is_empty()
        && now
            .duration_since(known.at)
            .is_ok_and(|age| age < shared.timeouts.discovery_refresh)
    {
        return known.clone();
    }
    let mut errors = Vec::new();
    let mut dids = shared.bidders.clone();
    if let Some(relay) = &shared.relay_url {
        match shared.net.repos_with(relay, m::OFFERING).await {
            Ok(found) => dids.extend(found),
            Err(error) => errors.push(format!("relay {relay}: {error}")),
        }
    }
    let ours = shared.net.did().await.ok();
    dids.sort();
    dids.dedup();
    dids.retain(|did| Some(did) != ours.as_ref());
    let reads = dids.iter().map(|did| offering_of(shared, did));
    let mut endpoints = Vec::new();
    for (did, result) in dids.iter().zip(futures::future::join_all(reads).await) {
        match result {
            Ok(Some(url)) => endpoints.push(Endpoint {
                did: did.clone(),
                url,
            }),
            Ok(None) => errors.push(format!("{did}: no offering of {}", m::VM)),
            Err(error) => errors.push(format!("{did}: {error}")),
        }
    }
    let discovery = Discovery {
        at: now,
        endpoints,
        errors,
    };
    shared.memory().discovered = Some(discovery.clone());
    discovery
}

/// The endpoint of `did`'s newest offering that applies to `compute.vm`.
async fn offering_of(shared: &Shared, did: &str) -> Result<Option<String>, atproto::Error> {
    let offerings = shared.net.list(did, m::OFFERING).await?;
    let endpoint = offerings.iter().find_map(|offering| {
        let applies = offering
            .value
            .get("appliesTo")
            .and_then(Value::as_array)
            .is_some_and(|nsids| nsids.iter().any(|n| n.as_str() == Some(m::VM)));
        applies
            .then(|| m::text(&offering.value, "endpointUrl"))
            .flatten()
            .map(str::to_owned)
    });
    match endpoint {
        Some(reference) => Ok(Some(
            atproto::did::resolve_service(shared.net.resolver(), &reference).await?,
        )),
        None => Ok(None),
    }
}
