//! The fault knobs every fake service shares.
//!
//! A test holds the [`Faults`] of a [`crate::FakeNetwork`] and arms rules;
//! each service's middleware consults them on every request. A rule matches a
//! service and, optionally, one XRPC method (or PLC path), fires a number of
//! times (or forever), and either answers with an error status and body,
//! stalls before answering, or closes the connection without an answer.
//!
//! The compute market half (the fake bidders) reads its behaviour knobs from
//! [`BidderKnobs`] in the same place, so one handle configures the whole fake
//! market.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

/// Which fake service a rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// The PLC directory.
    Plc,
    /// The PDS.
    Pds,
    /// The relay index.
    Relay,
    /// A fake bidder (the compute market half).
    Bidder,
}

/// What an armed rule does to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status and `{error, message}` body without running
    /// the handler.
    Status {
        /// The HTTP status.
        status: u16,
        /// The `error` field.
        error: String,
        /// The `message` field.
        message: String,
    },
    /// Wait this long, then run the handler (a client with a shorter timeout
    /// sees a timeout; the effect still happens, as with a slow server).
    Stall(Duration),
    /// Run the handler, then drop the answer: the effect happened but the
    /// caller sees a failure (a lost answer).
    LoseAnswer,
}

impl Fault {
    /// 401 `Unauthorized` (as the reference's JWT check answers).
    #[must_use]
    pub fn unauthorized() -> Self {
        Self::status(401, "Unauthorized", "injected: jwt rejected")
    }

    /// 403 `Forbidden` (issuer is not the record's author).
    #[must_use]
    pub fn forbidden() -> Self {
        Self::status(403, "Forbidden", "injected: issuer is not the author")
    }

    /// 400 `InvalidRequest`.
    #[must_use]
    pub fn invalid_request() -> Self {
        Self::status(400, "InvalidRequest", "injected: invalid request")
    }

    /// 500 with the reference's body `{ok:false, error:"internal error"}`
    /// shape (here `error` is "internal error", as the reference's).
    #[must_use]
    pub fn internal() -> Self {
        Self::status(500, "internal error", "")
    }

    /// Any status and error name.
    #[must_use]
    pub fn status(status: u16, error: &str, message: &str) -> Self {
        Self::Status {
            status,
            error: error.to_owned(),
            message: message.to_owned(),
        }
    }
}

/// One armed rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The service it applies to.
    pub service: Service,
    /// The XRPC method (NSID), or for the PLC the DID; `None` for every request.
    pub method: Option<String>,
    /// What it does.
    pub fault: Fault,
    /// How many more requests it fires for; `None` for every one.
    pub times: Option<u32>,
}

/// Behaviour knobs of the fake bidders (the compute market half reads them;
/// declared here so one [`Faults`] configures the whole fake market).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BidderKnobs {
    /// Send each bid twice to `submitBid`.
    pub duplicate_bids: bool,
    /// Send the bid to `submitBid` this long after answering `submitRfp`.
    pub late_bid: Option<Duration>,
    /// Also send a bid for an RFP of another requester.
    pub foreign_bids: bool,
    /// Never call `submitBid` / `submitEvent` back (the answer still comes).
    pub lose_callbacks: bool,
    /// Mint the receipt but never send `vm.onNetwork` (provisioning failed
    /// and, as in the reference, nobody is told).
    pub silent_provisioning_failure: bool,
    /// Delay before `vm.onNetwork` / `registerIdentity`.
    pub provisioning_delay: Duration,
    /// Put the port in the `aud` of the JWTs the bidder sends.
    pub aud_with_port: bool,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    relay_lag: Duration,
    bidder: BidderKnobs,
}

/// The shared fault configuration (cheap to clone; clones share state).
#[derive(Debug, Clone)]
pub struct Faults {
    state: Arc<Mutex<State>>,
    /// Requests held by a [`Fault::Stall`] that have not finished yet.
    stalled: Arc<tokio::sync::watch::Sender<usize>>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            state: Arc::default(),
            stalled: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }
}

/// Marks a stalled request finished however it ends.
pub(crate) struct StallGuard(Arc<tokio::sync::watch::Sender<usize>>);

impl Drop for StallGuard {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Faults {
    /// Arms `fault` for `method` (or every request) of `service`, `times`
    /// times (`None`: until cleared).
    pub fn inject(&self, service: Service, method: Option<&str>, fault: Fault, times: Option<u32>) {
        self.state.lock().rules.push(Rule {
            service,
            method: method.map(str::to_owned),
            fault,
            times,
        });
    }

    /// Arms `fault` once for one method of one service.
    pub fn once(&self, service: Service, method: &str, fault: Fault) {
        self.inject(service, Some(method), fault, Some(1));
    }

    /// Removes every rule (knobs stay).
    pub fn clear(&self) {
        self.state.lock().rules.clear();
    }

    /// The first rule matching a request, consuming one of its firings.
    #[must_use]
    pub fn take(&self, service: Service, method: &str) -> Option<Fault> {
        let mut state = self.state.lock();
        let index = state.rules.iter().position(|rule| {
            rule.service == service && rule.method.as_deref().is_none_or(|m| m == method)
        })?;
        let rule = &mut state.rules[index];
        let fault = rule.fault.clone();
        match &mut rule.times {
            Some(1) => {
                state.rules.remove(index);
            }
            Some(n) => *n -= 1,
            None => {}
        }
        Some(fault)
    }

    /// Counts a stalled request until the guard is dropped.
    pub(crate) fn stall_started(&self) -> StallGuard {
        self.stalled.send_modify(|n| *n += 1);
        StallGuard(Arc::clone(&self.stalled))
    }

    /// Waits until every request held by a [`Fault::Stall`] has finished
    /// (its handler ran, or failed), so a test can count its effects.
    pub async fn stalls_finished(&self) {
        let mut stalled = self.stalled.subscribe();
        let _ = stalled.wait_for(|n| *n == 0).await;
    }

    /// How long a repository's first record in a collection stays invisible
    /// to the relay index.
    #[must_use]
    pub fn relay_lag(&self) -> Duration {
        self.state.lock().relay_lag
    }

    /// Sets the relay lag.
    pub fn set_relay_lag(&self, lag: Duration) {
        self.state.lock().relay_lag = lag;
    }

    /// The bidders' knobs.
    #[must_use]
    pub fn bidder(&self) -> BidderKnobs {
        self.state.lock().bidder.clone()
    }

    /// Changes the bidders' knobs.
    pub fn set_bidder(&self, knobs: BidderKnobs) {
        self.state.lock().bidder = knobs;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_fire_the_given_number_of_times_for_their_method_only() {
        let faults = Faults::default();
        faults.inject(Service::Pds, Some("a.b.c"), Fault::internal(), Some(2));
        assert_eq!(faults.take(Service::Pds, "x.y.z"), None);
        assert_eq!(faults.take(Service::Plc, "a.b.c"), None);
        assert_eq!(faults.take(Service::Pds, "a.b.c"), Some(Fault::internal()));
        assert_eq!(faults.take(Service::Pds, "a.b.c"), Some(Fault::internal()));
        assert_eq!(faults.take(Service::Pds, "a.b.c"), None);
        faults.inject(Service::Relay, None, Fault::unauthorized(), None);
        for _ in 0..3 {
            assert_eq!(
                faults.take(Service::Relay, "any"),
                Some(Fault::unauthorized())
            );
        }
        faults.clear();
        assert_eq!(faults.take(Service::Relay, "any"), None);
    }
}
