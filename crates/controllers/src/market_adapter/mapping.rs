//! A ComputeContract in the market port's terms and the port's answers in the
//! API's: the same for every adapter, so a new adapter maps nothing here.

use api::{Receipt, Winner};
use kube::ResourceExt;
use market::{Bid, ContractKey, GuestInfo, RequestForProposal};

use crate::cache::CachedReceipt;
use crate::requester::WholeContract;

/// The contract's key at the market: its namespace and name.
#[must_use]
pub fn contract_key(contract: &WholeContract) -> ContractKey {
    ContractKey::new(
        contract.namespace().unwrap_or_default(),
        contract.name_any(),
    )
}

/// The request for proposal of a contract.
#[must_use]
pub fn request_for(contract: &WholeContract) -> RequestForProposal {
    let spec = &contract.spec;
    RequestForProposal {
        contract: contract_key(contract),
        resources: market::Resources {
            cpus: spec.resources.cpus,
            memory_mib: spec.resources.memory,
            disk_gib: spec.resources.disk,
            network_mbps: spec.resources.network,
        },
        location: market::Location {
            country: spec.location.country.clone(),
            region: spec.location.region.clone(),
        },
        owner_did: spec.owner_did.clone().unwrap_or_default(),
    }
}

/// A receipt of the contract's status as the market takes it.
#[must_use]
pub fn to_market(receipt: &Receipt) -> market::Receipt {
    market::Receipt {
        uri: receipt.uri.clone(),
        cid: receipt.cid.clone(),
    }
}

/// A receipt as the shared cache keeps it, in the market's types.
#[must_use]
pub fn cached_to_market(receipt: &CachedReceipt) -> market::Receipt {
    market::Receipt {
        uri: receipt.uri().to_owned(),
        cid: receipt.cid().to_owned(),
    }
}

/// A receipt from the market as the contract's status keeps it.
#[must_use]
pub fn from_market(receipt: market::Receipt) -> Receipt {
    Receipt {
        uri: receipt.uri,
        cid: receipt.cid,
    }
}

/// The winner a contract's status records for an accepted bid (its cost per
/// hour, truncated to whole units until the API has a price model).
#[must_use]
pub fn winner_of(bid: &Bid) -> Winner {
    Winner {
        bidder: bid.bidder.clone(),
        cost: bid.price.cost.truncated(),
        currency: bid.price.currency.clone(),
    }
}

/// The winner a contract's status records for a guest it took over or looked up.
#[must_use]
pub fn winner_of_info(info: &GuestInfo) -> Winner {
    Winner {
        bidder: info.provider.clone(),
        cost: info.price.cost.truncated(),
        currency: info.price.currency.clone(),
    }
}
