//! The records the adapter writes (lexicon plus the reference's practice)
//! and what it reads out of the bidders' records (leniently).

use std::time::SystemTime;

use atproto::StrongRef;
use atproto::market::{self as m, datetime};
use serde_json::{Value, json};

use crate::{Amount, Frequency, Price, RequestForProposal};

/// The `compute.vm` payload of a request. Public: nothing secret goes in,
/// and no Kubernetes name either (the role is a hash of the record key).
pub fn vm(rfp: &RequestForProposal, rkey: &str, now: SystemTime) -> Value {
    let resources = &rfp.resources;
    let mut record = json!({
        "$type": m::VM,
        "cpus": resources.cpus,
        "mem": format!("{}M", resources.memory_mib),
        "disk": format!("{}G", resources.disk_gib),
        "network": format!("{}M", resources.network_mbps),
        "role": format!("compute-{}", &hex::encode(sha2_of(rkey))[..8]),
        // The join material travels through the join Secret, never here.
        "user_data": "#cloud-config\n",
        "createdAt": datetime(now),
    });
    if !rfp.location.country.is_empty() {
        let mut location = json!({ "country": rfp.location.country });
        if let Some(region) = &rfp.location.region {
            location["region"] = Value::from(region.as_str());
        }
        record["location"] = location;
    }
    record
}

fn sha2_of(text: &str) -> [u8; 32] {
    use sha2::Digest as _;
    sha2::Sha256::digest(text.as_bytes()).into()
}

/// The request (to be signed before it is written).
pub fn rfp(vm: &StrongRef, submit_bid: &str, now: SystemTime) -> Value {
    json!({
        "$type": m::RFP,
        "domain": m::COMPUTE_DOMAIN,
        "payload": vm.to_record_value(),
        "submitBid": submit_bid,
        "createdAt": datetime(now),
    })
}

/// The accept of `bid` (to be signed before it is written).
pub fn accept(rfp: &StrongRef, bid: &StrongRef, submit_event: &str, now: SystemTime) -> Value {
    json!({
        "$type": m::ACCEPT,
        "rfp": rfp.to_record_value(),
        "bid": bid.to_record_value(),
        "submitEvent": submit_event,
        "createdAt": datetime(now),
    })
}

/// The `vm.delete` payload of a release (to be signed).
pub fn vm_delete(now: SystemTime) -> Value {
    json!({
        "$type": m::VM_DELETE,
        "reason": "released by the requester",
        "createdAt": datetime(now),
    })
}

/// The event carrying a payload about a receipt (to be signed).
pub fn event(receipt: &StrongRef, payload: &StrongRef, now: SystemTime) -> Value {
    json!({
        "$type": m::EVENT,
        "receipt": receipt.to_record_value(),
        "payload": payload.to_record_value(),
        "createdAt": datetime(now),
    })
}

/// The price of a bid's payload: `bids.free` is free whatever it says,
/// `bids.x402` is its cost (a number, or decimal text), currency and frequency.
pub fn price(payload: &Value) -> Result<Price, String> {
    match m::text(payload, "$type") {
        Some(m::BIDS_FREE) => Ok(Price::free()),
        Some(m::BIDS_X402) => {
            let cost = match payload.get("cost") {
                Some(Value::Number(n)) => n
                    .as_u64()
                    .map(Amount::from_units)
                    .map_or_else(|| Amount::from_f64(n.as_f64().unwrap_or(-1.0)), Ok),
                Some(Value::String(s)) => s.parse(),
                _ => return Err("x402 bid has no cost".to_owned()),
            }
            .map_err(|e| e.to_string())?;
            let frequency = match m::text(payload, "frequency") {
                None | Some("hourly") => Frequency::Hourly,
                Some("monthly") => Frequency::Monthly,
                Some("one-time") => Frequency::OneTime,
                Some(other) => return Err(format!("unknown frequency {other:?}")),
            };
            Ok(Price {
                cost,
                currency: m::text(payload, "currency").unwrap_or_default().to_owned(),
                frequency,
            })
        }
        other => Err(format!("bid payload of unknown type {other:?}")),
    }
}

/// What a provider's event says about the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// `vm.onNetwork`.
    OnNetwork {
        /// The address, when the provider sent one.
        address: Option<String>,
    },
    /// `vm.registerIdentity` with the node id.
    Registered {
        /// The guest's node id.
        node_id: String,
    },
    /// Anything else (`vm.started`, `vm.delete`, unknown types): no status.
    Other,
}

/// Reads an event payload.
pub fn event_kind(payload: &Value) -> EventKind {
    match m::text(payload, "$type") {
        Some(m::VM_ON_NETWORK) => EventKind::OnNetwork {
            address: m::text(payload, "address").map(str::to_owned),
        },
        Some(m::VM_REGISTER_IDENTITY) => payload
            .get("computeIdentity")
            .and_then(|identity| m::text(identity, "nodeId"))
            .map_or(EventKind::Other, |node_id| EventKind::Registered {
                node_id: node_id.to_owned(),
            }),
        _ => EventKind::Other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn prices_of_both_payload_types() {
        assert_eq!(
            price(&json!({"$type": m::BIDS_FREE, "cost": 0})).unwrap(),
            Price::free()
        );
        let x402 = price(&json!({"$type": m::BIDS_X402, "cost": 0.05, "currency": "USD", "frequency": "monthly"}))
            .unwrap();
        assert_eq!(x402.cost.to_string(), "0.05");
        assert_eq!(x402.frequency, Frequency::Monthly);
        assert_eq!(
            price(&json!({"$type": m::BIDS_X402, "cost": 3, "currency": "EUR"})).unwrap(),
            Price::hourly(3, "EUR")
        );
        assert!(price(&json!({"$type": m::BIDS_X402, "cost": -1})).is_err());
        assert!(price(&json!({"$type": m::BIDS_X402, "cost": 1, "frequency": "weekly"})).is_err());
        assert!(price(&json!({"$type": "x"})).is_err());
    }

    #[test]
    fn events_are_read_leniently() {
        assert_eq!(
            event_kind(&json!({"$type": m::VM_ON_NETWORK, "createdAt": "x"})),
            EventKind::OnNetwork { address: None }
        );
        assert_eq!(
            event_kind(
                &json!({"$type": m::VM_REGISTER_IDENTITY, "computeIdentity": {"nodeId": "n1"}})
            ),
            EventKind::Registered {
                node_id: "n1".to_owned()
            }
        );
        assert_eq!(
            event_kind(&json!({"$type": m::VM_REGISTER_IDENTITY})),
            EventKind::Other
        );
    }
}
