//! The pure half of [`super::decide`] that takes the market's answer to the
//! last command and turns it into the new status and the next command.

use api::{ComputeContractPhase as Phase, ConditionStatus as S, Guest};
use market::{Bid, GuestInfo, GuestStatus, ReleaseOutcome, cheapest};

use super::decide::{
    Command, Draft, FailureKind, MarketFailure, MarketView, Next, Observation, Operation,
};
use crate::market_adapter::mapping::{winner_of, winner_of_info};
use crate::requester::conditions as cond;
use crate::time::{ceil_seconds, chrono_duration, to_micro_time, to_time, until};

impl Draft<'_> {
    /// Applies a fresh market answer.
    pub(super) fn absorb(&mut self, observation: Observation) -> Next {
        match observation {
            Observation::Nothing => Next::Wait(None),
            Observation::Published => self.published(),
            Observation::Bids(bids) => self.bids(&bids),
            Observation::Accepted { bid, receipt } => {
                self.receipt = Some(receipt);
                self.status.winner = Some(winner_of(&bid));
                let message = format!(
                    "the bid of {} at {} was accepted; its receipt is recorded",
                    bid.bidder, bid.price
                );
                self.accepted(cond::BID_ACCEPTED, &message)
            }
            Observation::Adopted(info) if !self.may_adopt(&info) => self.adoption_refused(&info),
            Observation::Adopted(info) => {
                self.receipt = Some(api::Receipt {
                    uri: info.receipt.uri.clone(),
                    cid: info.receipt.cid.clone(),
                });
                self.status.winner = Some(winner_of_info(&info));
                let message = format!(
                    "took over the guest {} of {}",
                    info.receipt.uri, info.provider
                );
                match self.accepted(cond::ADOPTED, &message) {
                    Next::Call(Command::GuestStatus(_)) => self.guest_report(&info.status),
                    other => other,
                }
            }
            Observation::Guest(status) => self.guest_report(&status),
            Observation::ReleaseSent(outcome) => self.release_sent(&outcome),
            Observation::Lookup(None) => self.gone(),
            Observation::Lookup(Some(info)) => self.looked_up(&info),
            Observation::Failed { operation, failure } => self.failed(operation, &failure),
        }
    }

    /// Only the guest's owner may take it over: another tenant naming its
    /// receipt in `spec.adopt` would otherwise hold (and release) its machine.
    fn may_adopt(&self, info: &GuestInfo) -> bool {
        self.inputs.contract.spec.owner_did.as_deref() == Some(info.owner_did.as_str())
    }

    /// Refuses an adoption: no receipt is recorded, so the guest is neither
    /// held nor ever released through this contract.
    fn adoption_refused(&mut self, info: &GuestInfo) -> Next {
        let message = format!(
            "cannot take over the guest {} in spec.adopt: it belongs to another account than this contract's ownerDid; \
             nothing was taken over or released. Remove spec.adopt to rent a new machine",
            info.receipt.uri
        );
        self.set(cond::ACCEPTED, S::False, cond::ADOPT_REFUSED, &message);
        self.fail(cond::ADOPT_REFUSED, &message);
        Next::Wait(None)
    }

    /// The RFP is published: the bid window opened before the call (see
    /// [`Draft::open_bidding`]) stays as it was written, so a publish that
    /// goes well writes nothing more.
    fn published(&mut self) -> Next {
        self.open_bidding();
        if self.window_end().is_none() {
            return Next::Wait(None);
        }
        match self.window_wait() {
            Some(wait) => Next::Wait(Some(wait)),
            None => Next::Call(Command::CollectBids),
        }
    }

    /// Phase Bidding with its window opened now, unless it is open already:
    /// decided before the publish and written before it (the write that
    /// keeps a stale copy from publishing again), so Pending and Bidding are
    /// one status write, not two.
    pub(super) fn open_bidding(&mut self) {
        self.status.next_attempt_at = None;
        let already_bidding = self.phase() == Phase::Bidding && self.window_end().is_some();
        if !already_bidding {
            self.status.phase = Some(Phase::Bidding);
            self.status.completion_time = None;
            // The precise opening: `now` and the condition keep whole seconds.
            self.status.bid_window_opened_at = Some(to_micro_time(self.inputs.now));
            self.set(
                cond::BIDDING,
                S::True,
                cond::RFP_PUBLISHED,
                "the request for proposal is published",
            );
        }
        let Some(end) = self.window_end() else {
            return;
        };
        let message = format!(
            "the request for proposal is published; collecting bids until {}",
            end.to_rfc3339()
        );
        self.set(cond::BIDDING, S::True, cond::RFP_PUBLISHED, &message);
        self.message(message);
    }

    fn bids(&mut self, bids: &[Bid]) -> Next {
        self.status.next_attempt_at = None;
        if let Some(best) = cheapest(bids) {
            let message = format!(
                "accepting the bid of {} at {} (the lowest of {} bids)",
                best.bidder,
                best.price,
                bids.len()
            );
            self.status.winner = Some(winner_of(best));
            self.set(cond::ACCEPTED, S::Unknown, cond::ACCEPTING, &message);
            self.message(message);
            return Next::Call(Command::Accept(best.clone()));
        }
        let attempts = self.status.attempts.unwrap_or(0).saturating_add(1);
        let delay = self.inputs.timing.backoff(attempts);
        let retry_at = ceil_seconds(self.now + chrono_duration(delay));
        let window = match self.inputs.market {
            MarketView::Ready { bid_window, .. } => bid_window.as_secs(),
            MarketView::Missing { .. } => 0,
        };
        let requester = match self.inputs.market {
            MarketView::Ready { requester, .. } => requester.as_str(),
            MarketView::Missing { .. } => "",
        };
        let spec = &self.inputs.contract.spec;
        let location = spec.location.region.as_ref().map_or_else(
            || spec.location.country.clone(),
            |region| format!("{}/{region}", spec.location.country),
        );
        let message = format!(
            "no bids: no bidder had capacity for {} cpus, {} MiB memory, {} GiB disk, {} Mbit/s in {location} \
             during the {window}s bid window (attempt {attempts}); retrying at {}. Add a bidder or capacity \
             to Requester {requester}, or change the contract's resources or location",
            spec.resources.cpus,
            spec.resources.memory,
            spec.resources.disk,
            spec.resources.network,
            retry_at.to_rfc3339(),
        );
        self.status.attempts = Some(attempts);
        self.status.next_attempt_at = Some(to_time(retry_at));
        self.set(cond::BIDDING, S::False, cond::NO_BIDS, &message);
        self.fail(cond::NO_BIDS, &message);
        Next::Wait(Some(until(retry_at, self.now)))
    }

    /// The receipt is known: record it (the caller writes it before the next call).
    fn accepted(&mut self, reason: &str, message: &str) -> Next {
        self.status.phase = Some(Phase::Accepted);
        self.status.attempts = None;
        self.status.next_attempt_at = None;
        self.status.completion_time = None;
        self.set(cond::ACCEPTED, S::True, reason, message);
        self.set(cond::BIDDING, S::False, reason, message);
        // What the first guest poll says of a booting guest, so that poll
        // finds nothing to write (one status write fewer per contract).
        let booting = format!("the guest is booting at {}", self.provider());
        self.set(cond::DEPLOYED, S::False, cond::BOOTING, &booting);
        self.message(booting);
        let receipt = self.receipt.clone();
        match receipt {
            Some(receipt) if self.release_requested() => Next::Call(Command::Release(receipt)),
            Some(receipt) => Next::Call(Command::GuestStatus(receipt)),
            None => Next::Wait(None),
        }
    }

    fn provider(&self) -> String {
        self.status
            .winner
            .as_ref()
            .map(|w| w.bidder.clone())
            .unwrap_or_default()
    }

    fn guest_report(&mut self, status: &GuestStatus) -> Next {
        let provider = self.provider();
        let timing = self.inputs.timing;
        match status {
            GuestStatus::Booting | GuestStatus::Started => {
                self.status.phase = Some(Phase::Accepted);
                let message = format!("the guest is booting at {provider}");
                self.set(cond::DEPLOYED, S::False, cond::BOOTING, &message);
                self.message(message);
                Next::Wait(Some(timing.boot_poll))
            }
            GuestStatus::OnNetwork { .. } | GuestStatus::NodeRegistered { .. } => {
                let address = status.address().map(str::to_owned);
                let node_id = match status {
                    GuestStatus::NodeRegistered { node_id, .. } => Some(node_id.clone()),
                    _ => None,
                };
                let reason = if node_id.is_some() {
                    cond::NODE_REGISTERED
                } else {
                    cond::ON_NETWORK
                };
                // A registered node waits for a change: the guest watch
                // (`guest_watch`) asks about it with every other one in one
                // call and wakes this contract only when its guest changes.
                let poll = node_id.is_none().then_some(timing.register_poll);
                let message = address.as_ref().map_or_else(
                    || format!("the guest of {provider} is on the network"),
                    |address| format!("the guest of {provider} is on the network at {address}"),
                );
                self.status.phase = Some(Phase::Deployed);
                self.status.guest = Some(Guest {
                    provider,
                    address,
                    node_id,
                });
                self.set(cond::DEPLOYED, S::True, reason, &message);
                self.message(message);
                Next::Wait(poll)
            }
            GuestStatus::Failed { reason } => {
                let message = format!(
                    "boot failed: bidder {provider} failed to boot the guest ({reason}); the failed guest is \
                     being released. Set spec.release (the Infra controller does when its entry is replaced) \
                     to finish this contract and rent a new machine"
                );
                self.set(cond::DEPLOYED, S::False, cond::BOOT_FAILED, &message);
                self.set(
                    cond::RELEASED,
                    S::False,
                    cond::RELEASING,
                    "releasing the failed guest",
                );
                self.fail(cond::BOOT_FAILED, &message);
                match self.receipt.clone() {
                    Some(receipt) => Next::Call(Command::Release(receipt)),
                    None => Next::Wait(None),
                }
            }
            GuestStatus::Terminated => self.gone(),
        }
    }

    fn looked_up(&mut self, info: &GuestInfo) -> Next {
        if self.release_requested() || self.phase() == Phase::Failed {
            // The release is sent but the market still lists the guest: look again.
            return Next::Wait(Some(self.inputs.timing.release_poll));
        }
        if self.status.winner.is_none() {
            self.status.winner = Some(winner_of_info(info));
        }
        self.guest_report(&info.status)
    }

    fn receipt_uri(&self) -> String {
        self.receipt
            .as_ref()
            .map(|r| r.uri.clone())
            .unwrap_or_default()
    }

    /// The release went out: a market that confirms is asked whether the
    /// guest is gone; an acknowledged release is looked up once more (a
    /// guest that still reports says it was lost); a lost one is done, and
    /// says so (sending it again reaches nobody who knows the guest).
    fn release_sent(&mut self, outcome: &ReleaseOutcome) -> Next {
        let uri = self.receipt_uri();
        self.status.attempts = None;
        self.status.next_attempt_at = None;
        let (reason, message) = match outcome {
            ReleaseOutcome::Confirmed => (
                cond::RELEASING,
                format!(
                    "the release of the guest {uri} is sent; waiting for the market to confirm it is gone"
                ),
            ),
            ReleaseOutcome::Acknowledged => (
                cond::RELEASE_ACKNOWLEDGED,
                format!(
                    "the release of the guest {uri} is acknowledged by {}; checking that nothing says it still runs",
                    self.provider()
                ),
            ),
            ReleaseOutcome::Unconfirmed { reason } => {
                let message = format!(
                    "release unconfirmed: {reason}. See docs/atproto-market.md, Restarts and leader changes"
                );
                self.release_done(cond::RELEASE_UNCONFIRMED, &message);
                return Next::Wait(None);
            }
        };
        self.set(cond::RELEASED, S::False, reason, &message);
        if self.release_requested() {
            self.status.phase = Some(Phase::Releasing);
            self.status.completion_time = None;
            self.message(message);
        }
        match self.receipt.clone() {
            Some(receipt) => Next::Call(Command::Lookup(receipt)),
            None => Next::Wait(None),
        }
    }

    /// The release is done: phase Released when the guest had to go, else
    /// (a failed guest released) the phase stays and only the condition says it.
    fn release_done(&mut self, reason: &str, message: &str) {
        if self.release_requested() {
            self.released(reason, message);
        } else {
            self.set(cond::RELEASED, S::True, reason, message);
            self.status.attempts = None;
            self.status.next_attempt_at = None;
        }
    }

    /// The market says the guest is gone: confirmed, or (after an
    /// acknowledged release) nothing says it runs.
    fn gone(&mut self) -> Next {
        let uri = self.receipt_uri();
        let acknowledged = self.condition_is(cond::RELEASED, cond::RELEASE_ACKNOWLEDGED);
        if acknowledged && (self.release_requested() || self.phase() == Phase::Failed) {
            let message = format!(
                "released: {} acknowledged the release of the guest {uri}; the market has no confirmation that \
                 the machine stopped (docs/atproto-market.md)",
                self.provider()
            );
            self.release_done(cond::RELEASE_ACKNOWLEDGED, &message);
        } else if self.release_requested() {
            self.released(
                cond::GUEST_GONE,
                &format!("released: the guest {uri} is gone"),
            );
        } else if self.phase() == Phase::Failed {
            self.release_done(cond::GUEST_GONE, &format!("the guest {uri} is gone"));
        } else {
            let provider = self.provider();
            let message = format!(
                "guest lost: the guest {uri} of {provider} is gone at the market without a release; \
                 set spec.release to finish this contract and rent a new machine"
            );
            self.set(
                cond::RELEASED,
                S::True,
                cond::GUEST_GONE,
                &format!("the guest {uri} is gone"),
            );
            self.set(cond::DEPLOYED, S::False, cond::GUEST_LOST, &message);
            self.fail(cond::GUEST_LOST, &message);
        }
        Next::Wait(None)
    }

    fn failed(&mut self, operation: Operation, failure: &MarketFailure) -> Next {
        use FailureKind as K;
        match (operation, failure.kind) {
            (Operation::Release | Operation::Lookup | Operation::GuestStatus, K::NotFound) => {
                self.gone()
            }
            (Operation::Release | Operation::Lookup, _) => self.release_failed(failure),
            (Operation::Publish, K::InvalidRequest) => {
                let message = format!(
                    "the market rejects this contract's request: {}; change the contract's spec",
                    failure.message
                );
                self.set(cond::BIDDING, S::False, cond::INVALID_REQUEST, &message);
                self.fail(cond::INVALID_REQUEST, &message);
                Next::Wait(None)
            }
            (Operation::CollectBids | Operation::Accept, K::UnknownRfp) => {
                Next::Call(Command::Publish)
            }
            (Operation::Accept, K::BidGone) => {
                self.status.winner = None;
                self.status.conditions.retain(|c| c.type_ != cond::ACCEPTED);
                Next::Call(Command::CollectBids)
            }
            (Operation::Accept | Operation::GuestStatus, K::InvalidReceipt) => {
                let message = format!(
                    "the market does not accept the receipt: {}; check that the Requester's market is the one \
                     the contract was rented on",
                    failure.message
                );
                self.fail(cond::INVALID_RECEIPT, &message);
                Next::Wait(None)
            }
            (Operation::Adopt, K::NotFound | K::InvalidReceipt) => {
                let message = format!(
                    "cannot take over the guest in spec.adopt: {}; the guest does not exist or was released. \
                     Remove spec.adopt to rent a new machine",
                    failure.message
                );
                self.set(cond::ACCEPTED, S::False, cond::ADOPT_FAILED, &message);
                self.fail(cond::ADOPT_FAILED, &message);
                Next::Wait(None)
            }
            (Operation::GuestStatus, _) => {
                // Polling again is the retry; the status keeps what was last known.
                Next::Wait(Some(self.inputs.timing.backoff(1)))
            }
            _ => self.retry_later(operation, failure),
        }
    }

    fn retry_later(&mut self, operation: Operation, failure: &MarketFailure) -> Next {
        let attempts = self.status.attempts.unwrap_or(0).saturating_add(1);
        let delay = self.inputs.timing.backoff(attempts);
        let retry_at = ceil_seconds(self.now + chrono_duration(delay));
        let message = format!(
            "{} failed (attempt {attempts}): {}; retrying at {}",
            operation_name(operation),
            failure.message,
            retry_at.to_rfc3339()
        );
        self.status.attempts = Some(attempts);
        self.status.next_attempt_at = Some(to_time(retry_at));
        if self.receipt.is_none() && self.status.winner.is_none() {
            self.set(cond::BIDDING, S::False, cond::MARKET_UNAVAILABLE, &message);
            if matches!(operation, Operation::Publish) && self.phase() == Phase::Bidding {
                // The bid window was opened before the publish that failed.
                self.status.phase = Some(Phase::Pending);
            }
        }
        self.message(message);
        Next::Wait(Some(until(retry_at, self.now)))
    }

    fn release_failed(&mut self, failure: &MarketFailure) -> Next {
        let uri = self
            .receipt
            .as_ref()
            .map(|r| r.uri.clone())
            .unwrap_or_default();
        let attempts = self.status.attempts.unwrap_or(0).saturating_add(1);
        let delay = self.inputs.timing.backoff(attempts);
        let retry_at = ceil_seconds(self.now + chrono_duration(delay));
        let message = format!(
            "release failed: the release of the guest {uri} failed (attempt {attempts}): {}; retrying at {} \
             and never giving up. See docs/contract-lifecycle.md when a contract is stuck Releasing",
            failure.message,
            retry_at.to_rfc3339()
        );
        self.status.attempts = Some(attempts);
        self.status.next_attempt_at = Some(to_time(retry_at));
        self.set(cond::RELEASED, S::False, cond::RELEASE_FAILED, &message);
        if self.release_requested() {
            if attempts >= self.inputs.timing.release_failed_after {
                self.fail(cond::RELEASE_FAILED, &message);
            } else {
                self.status.phase = Some(Phase::Releasing);
                self.message(message);
            }
        } else {
            self.message(message);
        }
        Next::Wait(Some(until(retry_at, self.now)))
    }
}

const fn operation_name(operation: Operation) -> &'static str {
    match operation {
        Operation::Publish => "publishing the request for proposal",
        Operation::CollectBids => "collecting bids",
        Operation::Accept => "accepting the winning bid",
        Operation::GuestStatus => "reading the guest's status",
        Operation::Release => "releasing the guest",
        Operation::Lookup => "looking the guest up",
        Operation::Adopt => "taking over the guest in spec.adopt",
    }
}
