//! The publicdomainrelay compute market's names and the small conventions
//! both of its sides share (MARKET.md sections 1-2): NSIDs, service ids,
//! strong references inside records, `createdAt` times.
//!
//! NSIDs are pre-stable (`temp`); they live here once so the adapter and the
//! fake bidders cannot drift apart.

use std::time::SystemTime;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::Value;

use crate::StrongRef;

/// `com.publicdomainrelay.temp.market.rfp`: a requester's request for proposal.
pub const RFP: &str = "com.publicdomainrelay.temp.market.rfp";
/// A bidder's bid on an rfp.
pub const BID: &str = "com.publicdomainrelay.temp.market.bid";
/// A requester's acceptance of a bid.
pub const ACCEPT: &str = "com.publicdomainrelay.temp.market.accept";
/// A bidder's receipt for an accept.
pub const RECEIPT: &str = "com.publicdomainrelay.temp.market.receipt";
/// An event about a contract, from either side.
pub const EVENT: &str = "com.publicdomainrelay.temp.market.event";
/// A bidder's offering: its endpoint and the payload NSIDs it serves.
pub const OFFERING: &str = "com.publicdomainrelay.temp.market.offering";
/// A free bid's payload.
pub const BIDS_FREE: &str = "com.publicdomainrelay.temp.market.bids.free";
/// A priced bid's payload (cost, currency, frequency).
pub const BIDS_X402: &str = "com.publicdomainrelay.temp.market.bids.x402";
/// The bidder's procedure for a new rfp.
pub const SUBMIT_RFP: &str = "com.publicdomainrelay.temp.market.submitRfp";
/// The requester's procedure for a bid.
pub const SUBMIT_BID: &str = "com.publicdomainrelay.temp.market.submitBid";
/// The bidder's procedure for an accept.
pub const SUBMIT_ACCEPT: &str = "com.publicdomainrelay.temp.market.submitAccept";
/// Both sides' procedure for an event.
pub const SUBMIT_EVENT: &str = "com.publicdomainrelay.temp.market.submitEvent";
/// The compute payload of an rfp: what machine is asked for.
pub const VM: &str = "com.publicdomainrelay.temp.compute.vm";
/// Event payload: the machine is on the network.
pub const VM_ON_NETWORK: &str = "com.publicdomainrelay.temp.compute.events.vm.onNetwork";
/// Event payload: the machine reported its node identity.
pub const VM_REGISTER_IDENTITY: &str =
    "com.publicdomainrelay.temp.compute.events.vm.registerIdentity";
/// Event payload: the requester releases the machine.
pub const VM_DELETE: &str = "com.publicdomainrelay.temp.compute.events.vm.delete";
/// The value of an rfp's `domain` (reference practice).
pub const COMPUTE_DOMAIN: &str = "compute";

/// The collection a record belongs in: its `$type` (empty when it has none).
#[must_use]
pub fn collection_of(record: &Value) -> &str {
    text(record, "$type").unwrap_or_default()
}

/// The strong reference in `record[field]`, when it is one.
#[must_use]
pub fn strong_ref(record: &Value, field: &str) -> Option<StrongRef> {
    let value = record.get(field)?;
    Some(StrongRef {
        uri: value.get("uri")?.as_str()?.to_owned(),
        cid: value.get("cid")?.as_str()?.to_owned(),
    })
}

/// `record[field]` as a string, when it is one.
#[must_use]
pub fn text<'a>(record: &'a Value, field: &str) -> Option<&'a str> {
    record.get(field).and_then(Value::as_str)
}

/// A `createdAt` as the reference writes it: RFC 3339, milliseconds, `Z`.
#[must_use]
pub fn datetime(time: SystemTime) -> String {
    DateTime::<Utc>::from(time).to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Reads a `createdAt` (any RFC 3339 offset); `None` when it is not one.
#[must_use]
pub fn parse_datetime(text: &str) -> Option<SystemTime> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| SystemTime::from(t.with_timezone(&Utc)))
}

/// The `createdAt` of a record, when it has a readable one.
#[must_use]
pub fn created_at(record: &Value) -> Option<SystemTime> {
    text(record, "createdAt").and_then(parse_datetime)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    #[test]
    fn created_at_round_trips_at_millisecond_precision() {
        let time = SystemTime::UNIX_EPOCH + Duration::from_millis(1_783_489_824_475);
        let text = datetime(time);
        assert_eq!(text, "2026-07-08T05:50:24.475Z");
        assert_eq!(parse_datetime(&text), Some(time));
        assert_eq!(parse_datetime("yesterday"), None);
    }

    #[test]
    fn strong_refs_are_read_from_record_fields() {
        let record =
            serde_json::json!({"rfp": {"uri": "at://did:plc:a/x/y", "cid": "bafy"}, "n": 1});
        assert_eq!(strong_ref(&record, "rfp").unwrap().cid, "bafy");
        assert!(strong_ref(&record, "n").is_none());
        assert!(strong_ref(&record, "bid").is_none());
    }
}
