//! What the local market remembers (RFPs and guests) and how it keeps it in a
//! directory across restarts.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::Agreement;
use crate::{GuestInfo, GuestStatus, MarketError, Receipt, RequestForProposal, RfpId};

/// The state file's format version; bump it on an incompatible change.
const STATE_VERSION: u32 = 1;
/// The state file inside the state directory.
const STATE_FILE: &str = "local-market.json";

/// Everything the local market must find again after a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct MarketState {
    pub version: u32,
    /// Published RFPs by id (one per contract key).
    pub rfps: BTreeMap<RfpId, RfpRecord>,
    /// Rented guests by guest id, released ones included (as tombstones, so a
    /// late status poll still says Terminated).
    pub guests: BTreeMap<String, GuestRecord>,
}

/// A published RFP and, once accepted, its guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RfpRecord {
    pub request: RequestForProposal,
    pub guest: Option<String>,
}

/// A rented guest. Its timeline is fixed at acceptance, so its status is a
/// pure function of the clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GuestRecord {
    pub agreement: Agreement,
    pub receipt: Receipt,
    pub accepted_at_ms: u64,
    pub boot_delay_ms: u64,
    pub register_delay_ms: u64,
    /// Why the boot fails, when it does (decided at acceptance).
    pub failure: Option<String>,
    pub address: String,
    pub node_id: String,
    pub released_at_ms: Option<u64>,
    /// The node left the cluster ([`super::LocalMarket::lose_node`]): the
    /// guest still runs on the network but reports no node identity.
    #[serde(default)]
    pub node_lost: bool,
}

impl GuestRecord {
    /// The guest's status at `now_ms`: Booting for the first half of the boot
    /// delay, Started for the second, then Failed or OnNetwork, then
    /// NodeRegistered after the register delay; Terminated once released.
    pub fn status_at(&self, now_ms: u64) -> GuestStatus {
        if self.released_at_ms.is_some() {
            return GuestStatus::Terminated;
        }
        let elapsed = now_ms.saturating_sub(self.accepted_at_ms);
        if elapsed < self.boot_delay_ms {
            return if elapsed.saturating_mul(2) < self.boot_delay_ms {
                GuestStatus::Booting
            } else {
                GuestStatus::Started
            };
        }
        if let Some(reason) = &self.failure {
            return GuestStatus::Failed {
                reason: reason.clone(),
            };
        }
        if self.node_lost || elapsed < self.boot_delay_ms.saturating_add(self.register_delay_ms) {
            GuestStatus::OnNetwork {
                address: Some(self.address.clone()),
            }
        } else {
            GuestStatus::NodeRegistered {
                address: Some(self.address.clone()),
                node_id: self.node_id.clone(),
            }
        }
    }

    /// True while the guest takes one of its provider's capacity slots: until
    /// it is released, or until its boot has failed (the provider gave up).
    pub fn holds_capacity(&self, now_ms: u64) -> bool {
        self.released_at_ms.is_none()
            && !(self.failure.is_some()
                && now_ms.saturating_sub(self.accepted_at_ms) >= self.boot_delay_ms)
    }

    pub fn is_released(&self) -> bool {
        self.released_at_ms.is_some()
    }

    pub fn info(&self, now_ms: u64) -> GuestInfo {
        GuestInfo {
            receipt: self.receipt.clone(),
            rfp: self.agreement.rfp.clone(),
            contract: self.agreement.contract.clone(),
            owner_did: self.agreement.owner_did.clone(),
            provider: self.agreement.bid.bidder.clone(),
            price: self.agreement.bid.price.clone(),
            status: self.status_at(now_ms),
        }
    }
}

/// Milliseconds since the Unix epoch (0 before it).
pub(crate) fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, duration_ms)
}

/// A duration in whole milliseconds, saturating.
pub(crate) fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Reads and atomically writes the state file; does nothing without a directory.
#[derive(Debug, Clone)]
pub(crate) struct StateStore {
    dir: Option<PathBuf>,
}

impl StateStore {
    pub fn new(dir: Option<PathBuf>) -> Self {
        Self { dir }
    }

    /// The saved state, or an empty one when there is no directory or file.
    pub fn load(&self) -> Result<MarketState, MarketError> {
        let empty = MarketState {
            version: STATE_VERSION,
            ..MarketState::default()
        };
        let Some(dir) = &self.dir else {
            return Ok(empty);
        };
        let path = dir.join(STATE_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(empty),
            Err(source) => {
                return Err(MarketError::State {
                    action: "read",
                    path,
                    source,
                });
            }
        };
        let state: MarketState =
            serde_json::from_slice(&bytes).map_err(|source| MarketError::CorruptState {
                path: path.clone(),
                source,
            })?;
        if state.version != STATE_VERSION {
            return Err(MarketError::CorruptState {
                path,
                source: <serde_json::Error as serde::de::Error>::custom(format!(
                    "unsupported state version {} (expected {STATE_VERSION})",
                    state.version
                )),
            });
        }
        Ok(state)
    }

    /// Writes `state` so that a crash leaves either the old or the new file:
    /// a temporary file, fsync, rename over the old one, fsync the directory.
    pub fn save(&self, state: &MarketState) -> Result<(), MarketError> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        let path = dir.join(STATE_FILE);
        let bytes =
            serde_json::to_vec_pretty(state).map_err(|source| MarketError::CorruptState {
                path: path.clone(),
                source,
            })?;
        write_atomically(dir, &path, &bytes).map_err(|source| MarketError::State {
            action: "write",
            path,
            source,
        })
    }
}

fn write_atomically(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let temporary = dir.join(format!("{STATE_FILE}.tmp"));
    {
        let mut file = fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
    }
    fs::rename(&temporary, path)?;
    // Make the rename itself durable; not every platform can open a directory.
    if let Ok(directory) = fs::File::open(dir) {
        directory.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::{Bid, ContractKey, Location, Price, Resources};

    fn record(boot_delay_ms: u64, failure: Option<&str>) -> GuestRecord {
        let agreement = Agreement {
            rfp: RfpId::new("rfp-1"),
            contract: ContractKey::new("ns", "c"),
            owner_did: "did:owner".to_owned(),
            resources: Resources::default(),
            location: Location::default(),
            bid: Bid::new("did:p", Price::hourly(1, "EUR")),
        };
        GuestRecord {
            receipt: Receipt {
                uri: "local://guests/g-1".to_owned(),
                cid: agreement.content_id(),
            },
            agreement,
            accepted_at_ms: 1_000,
            boot_delay_ms,
            register_delay_ms: 100,
            failure: failure.map(str::to_owned),
            address: "10.1.2.3".to_owned(),
            node_id: "guest-1".to_owned(),
            released_at_ms: None,
            node_lost: false,
        }
    }

    #[test]
    fn status_follows_the_timeline() {
        let guest = record(1_000, None);
        assert_eq!(guest.status_at(500), GuestStatus::Booting);
        assert_eq!(guest.status_at(1_499), GuestStatus::Booting);
        assert_eq!(guest.status_at(1_500), GuestStatus::Started);
        assert_eq!(guest.status_at(2_000).address(), Some("10.1.2.3"));
        assert!(matches!(
            guest.status_at(2_050),
            GuestStatus::OnNetwork { .. }
        ));
        assert!(matches!(
            guest.status_at(2_100),
            GuestStatus::NodeRegistered { .. }
        ));
        assert!(guest.holds_capacity(5_000));
        let mut released = guest;
        released.released_at_ms = Some(3_000);
        assert_eq!(released.status_at(2_000), GuestStatus::Terminated);
        assert!(!released.holds_capacity(2_000));
    }

    #[test]
    fn a_failed_boot_frees_capacity_when_it_fails() {
        let guest = record(1_000, Some("boom"));
        assert!(guest.holds_capacity(1_999));
        assert_eq!(guest.status_at(1_999), GuestStatus::Started);
        assert!(!guest.holds_capacity(2_000));
        assert!(matches!(guest.status_at(2_000), GuestStatus::Failed { .. }));
    }

    #[test]
    fn saved_state_loads_back_and_no_dir_means_memory_only() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(Some(dir.path().join("nested")));
        let mut state = store.load().unwrap();
        assert!(state.guests.is_empty());
        state.guests.insert("g-1".to_owned(), record(0, None));
        store.save(&state).unwrap();
        store.save(&state).unwrap();
        assert_eq!(store.load().unwrap(), state);
        assert!(
            !dir.path()
                .join("nested")
                .join("local-market.json.tmp")
                .exists()
        );
        StateStore::new(None).save(&state).unwrap();
        assert!(StateStore::new(None).load().unwrap().guests.is_empty());
    }

    #[test]
    fn corrupt_or_future_state_is_an_error_not_an_empty_market() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(Some(dir.path().to_owned()));
        fs::write(dir.path().join(STATE_FILE), b"{not json").unwrap();
        let err = store.load().unwrap_err();
        assert_eq!(err.category(), "corrupt_state");
        assert!(!err.is_retryable());
        fs::write(
            dir.path().join(STATE_FILE),
            br#"{"version":99,"rfps":{},"guests":{}}"#,
        )
        .unwrap();
        assert_eq!(store.load().unwrap_err().category(), "corrupt_state");
    }
}
