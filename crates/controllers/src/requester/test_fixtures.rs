//! Builders and a driver shared by the decide tests.
// Shared with tests/requester_decide (included there by path), where every
// builder is used; the crate's own unit tests use a few. Contracts are built
// whole (`WholeContract`), the form decide reads.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::time::Duration;

use api::{
    ComputeContract, ComputeContractPhase as Phase, ComputeContractSpec, ComputeContractStatus,
    Location, Receipt, Resources, Role, StringMap, names,
};
use chrono::{DateTime, TimeZone, Utc};
use market::Bid;

use market::{GuestInfo, GuestStatus};

use crate::requester::WholeContract;

use super::decide::{
    Command, FailureKind, Inputs, MarketFailure, MarketView, Observation, Operation, Step, Timing,
    decide,
};

pub fn t0() -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000, 0).unwrap()
}

pub fn secs(n: i64) -> chrono::Duration {
    chrono::Duration::seconds(n)
}

pub fn spec() -> ComputeContractSpec {
    ComputeContractSpec {
        resources: Resources {
            cpus: 2,
            memory: 4096,
            disk: 20,
            network: 100,
        },
        location: Location {
            country: "DE".to_owned(),
            region: Some("BY".to_owned()),
        },
        role: Role::Worker,
        secrets_ref: None,
        owner_did: Some("did:web:tenant".to_owned()),
        adopt: None,
        node_join: None,
        release: false,
        ttl_seconds_after_finished: 60,
    }
}

pub fn contract() -> WholeContract {
    let mut c = ComputeContract::new("nodes-a-node-b", spec());
    c.metadata.namespace = Some("socialweb-system".to_owned());
    c.metadata.generation = Some(1);
    // As the Infra controller writes every contract.
    c.metadata.finalizers = Some(vec![names::CONTRACT_RELEASE_FINALIZER.to_owned()]);
    c.into()
}

pub fn with_status(mut c: WholeContract, status: ComputeContractStatus) -> WholeContract {
    c.status = Some(status);
    c
}

pub fn with_annotation(mut c: WholeContract, receipt: &Receipt) -> WholeContract {
    c.annotations = StringMap::from([(
        names::RECEIPT_ANNOTATION.to_owned(),
        serde_json::to_string(receipt).unwrap(),
    )]);
    c
}

pub fn ready() -> MarketView {
    MarketView::Ready {
        requester: "root".to_owned(),
        bid_window: Duration::from_secs(5),
        slot_free: true,
        root_deleting: false,
    }
}

pub fn timing() -> Timing {
    Timing::default()
}

pub fn receipt() -> Receipt {
    Receipt {
        uri: "local://guests/g-1".to_owned(),
        cid: "sha256:abc".to_owned(),
    }
}

pub fn market_receipt() -> market::Receipt {
    market::Receipt {
        uri: receipt().uri,
        cid: receipt().cid,
    }
}

pub fn bid(bidder: &str, cost: u64) -> Bid {
    Bid::new(bidder, market::Price::hourly(cost, "EUR"))
}

/// One decide at `now` with the default timing.
pub fn step(c: &WholeContract, view: &MarketView, now: DateTime<Utc>, obs: Observation) -> Step {
    decide(
        Inputs {
            contract: c,
            market: view,
            timing: &timing(),
            now,
        },
        obs,
    )
}

/// What act does with a step: the annotation, then the status.
pub fn apply(c: &WholeContract, step: &Step) -> WholeContract {
    let mut next = c.clone();
    if let Some(r) = &step.record_receipt {
        next = with_annotation(next, r);
    }
    next.status = Some(step.status.clone());
    next
}

pub fn phase(c: &WholeContract) -> Option<Phase> {
    c.status.as_ref().and_then(|s| s.phase)
}

pub fn condition<'a>(c: &'a WholeContract, type_: &str) -> &'a api::Condition {
    api::find_condition(&c.status.as_ref().unwrap().conditions, type_).unwrap()
}

pub fn failure(kind: FailureKind) -> MarketFailure {
    MarketFailure {
        kind,
        message: "market unavailable during release: injected fault".to_owned(),
    }
}

/// What the market answered when `operation` failed with `kind`.
pub fn failed(operation: Operation, kind: FailureKind) -> Observation {
    Observation::Failed {
        operation,
        failure: failure(kind),
    }
}

/// A guest of provider did:web:p on the market, held by `contract` of `owner_did`.
pub fn adoptable_guest(contract: &str, owner_did: &str) -> GuestInfo {
    GuestInfo {
        receipt: market_receipt(),
        rfp: market::RfpId::new("rfp-1"),
        contract: market::ContractKey::new("socialweb-system", contract),
        owner_did: owner_did.to_owned(),
        provider: "did:web:p".to_owned(),
        price: market::Price::hourly(4, "EUR"),
        status: GuestStatus::OnNetwork {
            address: Some("10.1.1.1".to_owned()),
        },
    }
}

/// A Bidding contract that collected one bid (did:web:a, 9) at t0 + 5 s.
pub fn with_one_bid() -> WholeContract {
    let c = bidding();
    let s = step(
        &c,
        &ready(),
        t0() + secs(5),
        Observation::Bids(vec![bid("did:web:a", 9)]),
    );
    apply(&c, &s)
}

/// A contract driven to Bidding at t0 (window of 5 s).
pub fn bidding() -> WholeContract {
    let c = contract();
    let s = step(&c, &ready(), t0(), Observation::Nothing);
    assert_eq!(s.command, Some(Command::Publish));
    let c = apply(&c, &s);
    let s = step(&c, &ready(), t0(), Observation::Published);
    apply(&c, &s)
}

/// A contract driven to Accepted with a recorded receipt.
pub fn accepted() -> WholeContract {
    let c = bidding();
    let later = t0() + secs(5);
    let s = step(
        &c,
        &ready(),
        later,
        Observation::Bids(vec![bid("did:web:a", 9)]),
    );
    let c = apply(&c, &s);
    let s = step(
        &c,
        &ready(),
        later,
        Observation::Accepted {
            bid: bid("did:web:a", 9),
            receipt: receipt(),
        },
    );
    apply(&c, &s)
}

pub fn deployed() -> WholeContract {
    let c = accepted();
    let s = step(
        &c,
        &ready(),
        t0() + secs(6),
        Observation::Guest(GuestStatus::OnNetwork {
            address: Some("10.0.0.7".to_owned()),
        }),
    );
    apply(&c, &s)
}

pub fn release(mut c: WholeContract) -> WholeContract {
    c.spec.release = true;
    c
}

/// The contract as the Infra controller creates it: with the release finalizer.
/// The contract without any finalizer (made by hand, or from before the release finalizer).
pub fn bare(mut c: WholeContract) -> WholeContract {
    c.metadata.finalizers = None;
    c
}

pub fn held(mut c: WholeContract) -> WholeContract {
    c.metadata.finalizers = Some(vec![names::CONTRACT_RELEASE_FINALIZER.to_owned()]);
    c
}

/// The contract after a DELETE that its finalizer holds: a deletionTimestamp
/// and (as the API server does) a new generation.
pub fn deleted(mut c: WholeContract) -> WholeContract {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    c.metadata.deletion_timestamp = Some(Time(
        k8s_openapi::jiff::Timestamp::from_second(1_700_000_100).unwrap(),
    ));
    c.metadata.generation = Some(c.metadata.generation.unwrap_or(0) + 1);
    c
}

/// A Requester of the contract namespace on a local market with `bidders`.
pub fn requester_with(name: &str, bidders: Vec<api::LocalBidder>) -> api::Requester {
    let mut requester = api::Requester::new(
        name,
        api::RequesterSpec {
            market: api::Market {
                local: Some(api::requester::LocalMarket {
                    seed: 7,
                    bidders,
                    state_dir: None,
                }),
                atproto: None,
            },
            bid_window_seconds: 1,
            max_in_flight: 10,
        },
    );
    requester.metadata.namespace = Some("socialweb-system".to_owned());
    requester.metadata.generation = Some(1);
    requester
}

/// A local bidder with room for a few machines.
pub fn bidder(did: &str) -> api::LocalBidder {
    api::LocalBidder {
        did: did.to_owned(),
        cost: 5,
        currency: "EUR".to_owned(),
        capacity: 4,
        boot_delay_millis: 0,
        failure_rate: 0,
    }
}
