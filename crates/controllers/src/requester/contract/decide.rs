//! The pure core of the contract lifecycle: from a ComputeContract, what the
//! market said last (if anything) and the time, the next status to write, the
//! next market call to make and when to look again.
//!
//! # Expected flow
//!
//! `act` calls [`decide`] with [`Observation::Nothing`], writes the receipt
//! annotation if it changed and the status if it changed and the returned
//! [`Command`] rents ([`Command::rents`]), performs the command, and calls
//! [`decide`] again with the market's answer, until no command is left; then
//! it writes the status once. Nothing here does I/O or reads a clock.
//!
//! A contract goes from no status straight to Bidding: the bid window is
//! opened before the publish (that is the status written before it), and a
//! publish that goes well changes nothing more; one that fails puts it back
//! to Pending.
//!
//! # Guarantees
//!
//! - A contract with a receipt (in status or only in the annotation) never gets
//!   [`Command::Publish`], [`Command::CollectBids`] or [`Command::Accept`].
//! - The winning bid is written to status before it is accepted, and a receipt
//!   is returned in [`Step::record_receipt`] and `status.receipt` in the very
//!   step that observed it, before any further command.
//! - A contract with a receipt and a release request gets [`Command::Release`]
//!   until the market confirms the guest is gone; failures back off and stay
//!   visible in the `Released` condition and the message.
//! - Phase Released is only reached when nothing was rented, or the market
//!   confirmed the guest is gone, or acknowledged its release (the
//!   `Released` reason says which: `GuestGone`, `ReleaseAcknowledged`, or
//!   `ReleaseUnconfirmed` when the provider's records show the release was
//!   lost, which a Warning Event reports).
//! - A contract being deleted (it has a deletionTimestamp) is a release
//!   request like `spec.release`; [`Step::remove_finalizer`] is set only in a
//!   step whose status says Released, so the object goes only once its guest
//!   is gone or nothing was rented.
//! - Nothing is rented for a contract without the release finalizer
//!   ([`names::CONTRACT_RELEASE_FINALIZER`]): no publish, bid collection or
//!   adoption until it has it, since deleting it would leave its guest with
//!   nobody to release it. It stays Pending and its Ready condition says why.

use std::time::Duration;

use api::{ComputeContractPhase as Phase, ComputeContractStatus, Receipt, names};
use chrono::{DateTime, Utc};
use market::Bid;

pub use super::events::{ContractEvent, release_finished, transition_event};
pub use super::lifecycle::{
    Command, FailureKind, MarketFailure, MarketView, Observation, Operation, Timing,
};
use crate::requester::WholeContract;
use crate::requester::conditions as cond;
use crate::time::{self, from_time, until};

/// The outcome of one [`decide`].
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The status to write (compare with the current one before writing).
    pub status: ComputeContractStatus,
    /// A receipt to write to the receipt annotation first (it differs from the annotation).
    pub record_receipt: Option<Receipt>,
    /// The market call to make after the writes.
    pub command: Option<Command>,
    /// When to look again if no command is made; `None` waits for a change.
    pub requeue: Option<Duration>,
    /// Remove [`names::CONTRACT_RELEASE_FINALIZER`] after writing the status:
    /// the contract is being deleted, carries the finalizer, and `status` says
    /// Released.
    pub remove_finalizer: bool,
}

/// What [`decide`] reads besides the observation.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The contract as last written (status included).
    pub contract: &'a WholeContract,
    /// The namespace's market.
    pub market: &'a MarketView,
    /// Poll and retry intervals.
    pub timing: &'a Timing,
    /// The injected clock's time.
    pub now: DateTime<Utc>,
}

/// The contract's receipt: from status, or from the annotation when status lost it.
#[must_use]
pub fn known_receipt(contract: &WholeContract) -> Option<Receipt> {
    contract
        .status
        .as_ref()
        .and_then(|s| s.receipt.clone())
        .or_else(|| contract.annotated_receipt())
}

/// Decides the next step of a contract. See the [module docs](self).
#[must_use]
pub fn decide(inputs: Inputs<'_>, observation: Observation) -> Step {
    let mut draft = Draft::new(inputs);
    let next = match observation {
        Observation::Nothing => draft.plan(),
        other => draft.absorb(other),
    };
    draft.finish(next)
}

/// What to do after a decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Next {
    /// Make this market call.
    Call(Command),
    /// Make no call; look again after the duration (or on the next change).
    Wait(Option<Duration>),
}

/// The status being computed, with what the decision needs at hand.
pub(super) struct Draft<'a> {
    pub inputs: Inputs<'a>,
    pub status: ComputeContractStatus,
    pub receipt: Option<Receipt>,
    pub now: DateTime<Utc>,
    /// The Ready reason when it is not the phase (a wait for a Requester or a slot).
    pub ready_reason: Option<&'static str>,
}

impl<'a> Draft<'a> {
    fn new(inputs: Inputs<'a>) -> Self {
        let status = inputs.contract.status.clone().unwrap_or_default();
        Self {
            receipt: known_receipt(inputs.contract),
            status,
            now: time::whole_seconds(inputs.now),
            inputs,
            ready_reason: None,
        }
    }

    pub fn phase(&self) -> Phase {
        self.status.phase.unwrap_or(Phase::Pending)
    }

    pub fn generation(&self) -> Option<i64> {
        self.inputs.contract.metadata.generation
    }

    /// Whether the guest must go: `spec.release`, the contract is being
    /// deleted, or the Requester is being deleted.
    pub fn release_requested(&self) -> bool {
        self.inputs.contract.spec.release
            || self.deleting()
            || matches!(
                self.inputs.market,
                MarketView::Ready {
                    root_deleting: true,
                    ..
                }
            )
    }

    /// Whether the contract has a deletionTimestamp (its finalizer holds it).
    pub fn deleting(&self) -> bool {
        self.inputs.contract.metadata.deletion_timestamp.is_some()
    }

    pub fn condition_is(&self, type_: &str, reason: &str) -> bool {
        api::find_condition(&self.status.conditions, type_).is_some_and(|c| c.reason == reason)
    }

    pub fn guest_confirmed_gone(&self) -> bool {
        api::find_condition(&self.status.conditions, cond::RELEASED).is_some_and(|c| c.is_true())
    }

    pub fn set(&mut self, type_: &str, status: api::ConditionStatus, reason: &str, message: &str) {
        let generation = self.generation();
        cond::set(
            &mut self.status.conditions,
            type_,
            status,
            reason,
            message,
            generation,
            self.now,
        );
    }

    pub fn message(&mut self, message: impl Into<String>) {
        self.status.message = Some(crate::message::cap(&message.into()).into());
    }

    /// A pending retry's deadline, if it is still ahead.
    fn retry_pending(&self) -> Option<Duration> {
        let at = from_time(self.status.next_attempt_at.as_ref()?);
        (at > self.now).then(|| until(at, self.now))
    }

    /// The time the current bid window closes: a full `bid_window` after it
    /// opened (`status.bidWindowOpenedAt`, to the microsecond). A contract
    /// whose window an older manager opened has only the Bidding condition's
    /// lastTransitionTime, which keeps whole seconds (the window opened up to
    /// a second after it): its window ends a second later than that time plus
    /// its length, so it still lasts at least `bid_window` across a restart.
    pub fn window_end(&self) -> Option<DateTime<Utc>> {
        let MarketView::Ready { bid_window, .. } = self.inputs.market else {
            return None;
        };
        let bidding = api::find_condition(&self.status.conditions, cond::BIDDING)?;
        if !bidding.is_true() {
            return None;
        }
        let opened = match &self.status.bid_window_opened_at {
            Some(opened) => time::from_micro_time(opened),
            None => from_time(&bidding.last_transition_time) + chrono::Duration::seconds(1),
        };
        Some(opened + time::chrono_duration(*bid_window))
    }

    /// Until the open bid window's end, from the clock's precise reading
    /// (`now` is cut to whole seconds, which would look again up to a second
    /// late); `None` once it is over.
    pub fn window_wait(&self) -> Option<Duration> {
        let end = self.window_end()?;
        (end > self.inputs.now).then(|| until(end, self.inputs.now))
    }

    fn slot_free(&self) -> bool {
        matches!(
            self.inputs.market,
            MarketView::Ready {
                slot_free: true,
                ..
            }
        )
    }

    /// The next step from the state alone (no fresh market answer).
    fn plan(&mut self) -> Next {
        let phase = self.phase();
        if phase == Phase::Released {
            return Next::Wait(None);
        }
        let release = self.release_requested();
        let Some(receipt) = self.receipt.clone() else {
            if release && self.status.winner.is_none() {
                self.released(
                    cond::NOTHING_RENTED,
                    "released: nothing was rented for this contract",
                );
                return Next::Wait(None);
            }
            if self.status.winner.is_none() && !self.has_release_finalizer() {
                return self.unguarded();
            }
            if let MarketView::Missing { reason } = self.inputs.market {
                return self.no_requester(&reason.clone());
            }
            if let Some(wait) = self.retry_pending() {
                return Next::Wait(Some(wait));
            }
            if let Some(winner) = &self.status.winner {
                // Accepted before (or about to be): accepting again is idempotent
                // and returns the receipt, also when the guest must go at once.
                return Next::Call(Command::Accept(Bid::new(
                    winner.bidder.clone(),
                    market::Price::hourly(winner.cost, winner.currency.clone()),
                )));
            }
            if let Some(adopt) = &self.inputs.contract.spec.adopt {
                return if phase == Phase::Failed && !self.spec_changed() {
                    Next::Wait(None)
                } else {
                    Next::Call(Command::Adopt(adopt.as_ref().clone()))
                };
            }
            return match phase {
                Phase::Bidding => match self.window_wait() {
                    Some(wait) => Next::Wait(Some(wait)),
                    None => Next::Call(Command::CollectBids),
                },
                Phase::Failed
                    if !self.condition_is(cond::BIDDING, cond::NO_BIDS) && !self.spec_changed() =>
                {
                    Next::Wait(None)
                }
                _ => self.start_bidding(),
            };
        };
        // A guest the market already confirmed gone needs no market to finish
        // its release, so a contract deleted while no Requester runs is not held.
        if self.guest_confirmed_gone() {
            if release {
                // The release is done (a failed guest's, before it had to go):
                // its reason says how far the market could tell, and stays.
                let done = api::find_condition(&self.status.conditions, cond::RELEASED)
                    .map(|c| (c.reason.to_string(), c.message.to_string()))
                    .filter(|(reason, _)| reason != cond::GUEST_GONE);
                let (reason, message) = done.unwrap_or_else(|| {
                    (
                        cond::GUEST_GONE.to_owned(),
                        format!("released: the guest {} is gone", receipt.uri),
                    )
                });
                self.released(&reason, &message);
            }
            return Next::Wait(None);
        }
        if let MarketView::Missing { reason } = self.inputs.market {
            let reason = format!("{reason}; the guest {} is kept until then", receipt.uri);
            return self.no_requester(&reason);
        }
        if release || phase == Phase::Failed {
            if let Some(wait) = self.retry_pending() {
                return Next::Wait(Some(wait));
            }
            return Next::Call(Command::Release(receipt));
        }
        if self.status.winner.is_none() {
            // Status was lost: the lookup tells the provider and the price again.
            return Next::Call(Command::Lookup(receipt));
        }
        Next::Call(Command::GuestStatus(receipt))
    }

    /// Whether the spec changed since the status was computed (a terminal
    /// failure of the old spec may succeed with the new one).
    fn spec_changed(&self) -> bool {
        self.status.observed_generation.is_some()
            && self.status.observed_generation != self.generation()
    }

    fn start_bidding(&mut self) -> Next {
        if self.slot_free() {
            self.open_bidding();
            return Next::Call(Command::Publish);
        }
        self.ready_reason = Some(cond::MAX_IN_FLIGHT);
        let message = "waiting: the Requester's maxInFlight contracts are already bidding or booting; \
                       this one starts when one of them is Deployed, Failed or Released";
        self.set(
            cond::BIDDING,
            api::ConditionStatus::False,
            cond::MAX_IN_FLIGHT,
            message,
        );
        if self.status.phase.is_none() {
            self.status.phase = Some(Phase::Pending);
        }
        if self.phase() == Phase::Pending {
            self.message(message);
        }
        Next::Wait(Some(self.inputs.timing.slot_wait))
    }

    /// Whether the contract carries the release finalizer, which keeps it
    /// until its guest is released however it is deleted.
    fn has_release_finalizer(&self) -> bool {
        self.inputs
            .contract
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == names::CONTRACT_RELEASE_FINALIZER)
    }

    /// Waits, renting nothing, for the release finalizer.
    fn unguarded(&mut self) -> Next {
        self.ready_reason = Some(cond::NO_RELEASE_FINALIZER);
        let message = format!(
            "not rented: the contract lacks the finalizer {}, so deleting it would leave its \
             machine with nobody to release it; add the finalizer, or let an Infra make the \
             contract (the Infra controller puts it on every contract it writes)",
            names::CONTRACT_RELEASE_FINALIZER
        );
        self.set(
            cond::BIDDING,
            api::ConditionStatus::False,
            cond::NO_RELEASE_FINALIZER,
            &message,
        );
        self.status.phase = Some(Phase::Pending);
        self.message(message);
        Next::Wait(None)
    }

    fn no_requester(&mut self, reason: &str) -> Next {
        self.ready_reason = Some(cond::NO_REQUESTER);
        if self.receipt.is_none() && self.status.winner.is_none() {
            self.set(
                cond::BIDDING,
                api::ConditionStatus::False,
                cond::NO_REQUESTER,
                reason,
            );
        }
        self.message(reason);
        Next::Wait(None)
    }

    /// Phase Failed with a PascalCase reason (shown in Ready and the Event) and a message.
    pub fn fail(&mut self, reason: &'static str, message: &str) {
        if self.phase() != Phase::Failed {
            self.status.completion_time = Some(time::to_time(self.now));
        }
        self.status.phase = Some(Phase::Failed);
        self.ready_reason = Some(reason);
        self.message(message);
    }

    /// Phase Released, with the Released condition saying why.
    pub fn released(&mut self, reason: &str, message: &str) {
        self.status.phase = Some(Phase::Released);
        self.set(cond::RELEASED, api::ConditionStatus::True, reason, message);
        self.status.completion_time = Some(time::to_time(self.now));
        self.status.attempts = None;
        self.status.next_attempt_at = None;
        self.message(message);
    }

    /// Sets observedGeneration, the receipt, Ready and the requeue.
    fn finish(mut self, next: Next) -> Step {
        if self.status.phase.is_none() {
            self.status.phase = Some(Phase::Pending);
        }
        // The opening belongs to the Bidding condition that is True: once the
        // window is over (a winner, no bids, a failed publish) it goes, so
        // the next window never reads an old one.
        if !api::find_condition(&self.status.conditions, cond::BIDDING).is_some_and(|c| c.is_true())
        {
            self.status.bid_window_opened_at = None;
        }
        self.status.observed_generation = self.generation();
        self.status.receipt.clone_from(&self.receipt);
        let phase = self.phase();
        let message = self.status.message.clone().unwrap_or_default();
        if phase == Phase::Deployed {
            self.set(
                cond::READY,
                api::ConditionStatus::True,
                cond::reason::DEPLOYED,
                &message,
            );
        } else {
            // A failure keeps the reason it was given until another step changes it.
            let kept = (phase == Phase::Failed)
                .then(|| api::find_condition(&self.status.conditions, cond::READY))
                .flatten()
                .map(|c| c.reason.to_string());
            let reason = self
                .ready_reason
                .map(str::to_owned)
                .or(kept)
                .unwrap_or_else(|| phase_reason(phase).to_owned());
            self.set(cond::READY, api::ConditionStatus::False, &reason, &message);
        }
        let record_receipt = self
            .receipt
            .clone()
            .filter(|r| self.inputs.contract.annotated_receipt().as_ref() != Some(r));
        let (command, requeue) = match next {
            Next::Call(command) => (Some(command), None),
            Next::Wait(requeue) => (None, requeue),
        };
        let remove_finalizer = self.deleting()
            && phase == Phase::Released
            && self
                .inputs
                .contract
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == names::CONTRACT_RELEASE_FINALIZER);
        let stored = self.inputs.contract.status.as_ref();
        if remove_finalizer
            && let Some(stored) = stored.filter(|s| s.phase == Some(Phase::Released))
        {
            // Released is written already; what is left is the generation the
            // delete bumped. A write of it is one write per contract for an
            // object about to go.
            self.status = stored.clone();
        }
        Step {
            status: self.status,
            record_receipt,
            command,
            requeue,
            remove_finalizer,
        }
    }
}

/// The Ready reason of a phase that is not Deployed.
const fn phase_reason(phase: Phase) -> &'static str {
    match phase {
        Phase::Pending => "Pending",
        Phase::Bidding => "Bidding",
        Phase::Accepted => "Accepted",
        Phase::Deployed => cond::reason::DEPLOYED,
        Phase::Releasing => "Releasing",
        Phase::Released => "Released",
        Phase::Failed => "Failed",
    }
}
