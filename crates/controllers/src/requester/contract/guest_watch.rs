//! The guest watch: one market call per round for the guests of every
//! Deployed contract whose node registered, waking only the contracts whose
//! guest says something else than their status.
//!
//! A Deployed contract with a registered node has nothing to do until its
//! guest changes, so [`super::decide`] schedules no poll of its own for it
//! (one requeue per contract per minute was the whole idle cost of a quiet
//! fleet: 2,779 reconciles in 20 s with 10,000 contracts). Instead, every
//! [`Timing::guest_poll`](super::lifecycle::Timing) this watch reads the
//! contracts from the cache, asks the Requester's market about their guests
//! a thousand at a time ([`market::Market::guest_statuses`]) and sends the
//! contracts whose answer differs to the contract controller
//! (`Controller::reconcile_on`), whose reconcile asks about that one guest
//! again and decides as before: a guest lost, gone (Terminated, not found)
//! or that lost its node is seen within one round, as with the poll per
//! contract. A contract that is woken but finds nothing new writes nothing,
//! and the next round asks again while the difference stays, so a missed
//! wake costs one round, never the loss.
//!
//! No safety requeue is kept: the watch itself is the periodic look, and
//! every other change (spec, deletion, the Requester's) wakes the contract
//! through its watch events as before.

use std::sync::Arc;

use api::ComputeContractPhase as Phase;
use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::ObjectRef;
use market::{GuestStatus, MarketError};
use tracing::{debug, warn};

use crate::cache::{CachedContract, CachedReceipt};
use crate::market_adapter::mapping::cached_to_market;
use crate::requester::Runtime;
use crate::requester::markets::select_requester;

/// The receipt of a contract the watch polls for: Deployed, its node
/// registered, no release asked for. These are the contracts whose decide
/// waits for a change instead of polling.
#[must_use]
pub fn watched_receipt(contract: &CachedContract) -> Option<&CachedReceipt> {
    let status = contract.status.as_ref()?;
    let registered = status
        .guest
        .as_ref()
        .is_some_and(|guest| guest.node_id().is_some());
    let settled = status.phase == Some(Phase::Deployed)
        && registered
        && status.won
        && !contract.spec.release
        && !contract.is_deleting();
    settled.then_some(contract.receipt.as_ref()).flatten()
}

/// Whether the market's answer about a watched contract's guest differs from
/// what its status says, so its own reconcile must look: any status but the
/// same registered node, or an error that is an answer (the guest is not
/// found, the receipt is refused). A retryable error is no answer: the
/// contract's own poll only backed off on one and kept its status, and the
/// next round asks again.
#[must_use]
pub fn needs_look(contract: &CachedContract, answer: &Result<GuestStatus, MarketError>) -> bool {
    let guest = contract.status.as_ref().and_then(|s| s.guest.as_ref());
    match answer {
        Ok(GuestStatus::NodeRegistered { address, node_id }) => guest.is_none_or(|guest| {
            guest.node_id() != Some(node_id.as_str()) || guest.address() != address.as_deref()
        }),
        Ok(_) => true,
        Err(error) => !error.is_retryable(),
    }
}

/// Polls every [`Timing::guest_poll`](super::lifecycle::Timing) until the
/// context's stop, sending the contracts to look at to `wake`.
pub(in crate::requester) async fn run(
    rt: Arc<Runtime>,
    wake: UnboundedSender<ObjectRef<CachedContract>>,
) {
    let every = rt.ctx.timing.guest_poll;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stop = rt.ctx.stop.signaled();
    tokio::pin!(stop);
    loop {
        let round = async {
            tick.tick().await;
            rt.wait_until_ready().await;
            poll_once(&rt).await
        };
        let keys = tokio::select! {
            () = &mut stop => return,
            keys = round => keys,
        };
        for key in keys {
            if wake.unbounded_send(key).is_err() {
                // The contract controller is gone: nothing is left to wake.
                return;
            }
        }
    }
}

/// One round: the contracts whose guest's answer differs from their status.
async fn poll_once(rt: &Runtime) -> Vec<ObjectRef<CachedContract>> {
    let namespace = rt.ctx.contract_namespace.as_str();
    let requester = {
        let requesters = rt.requesters.state();
        select_requester(requesters.iter().map(AsRef::as_ref), namespace).cloned()
    };
    let Some(requester) = requester else {
        // No market: each contract says so through its own reconcile.
        return Vec::new();
    };
    if requester.metadata.deletion_timestamp.is_some() {
        // Every guest is being released, each contract on its own poll.
        return Vec::new();
    }
    if let Err(error) = rt
        .ctx
        .markets
        .read_credentials(&rt.ctx.client, &requester, false)
        .await
    {
        debug!(%error, "guest watch: the Requester's market is not usable this round");
        return Vec::new();
    }
    let handle = match rt.ctx.markets.for_requester(&requester) {
        Ok(handle) => handle,
        Err(error) => {
            debug!(%error, "guest watch: the Requester's market is not usable this round");
            return Vec::new();
        }
    };
    let deployed = rt.indexes.contracts_by_phase.objects(
        &(namespace.to_owned(), Some(Phase::Deployed)),
        &rt.contracts,
    );
    let market = &handle.market;
    let metrics = &rt.ctx.metrics;
    let round = ask_by_chunks(&deployed, GUESTS_PER_CALL, |receipts| async move {
        let started = std::time::Instant::now();
        let answers = market.guest_statuses(&receipts).await;
        metrics.observe_market("guest_statuses", started.elapsed());
        answers
    })
    .await;
    if round.retryable > 0 {
        warn!(
            retryable = round.retryable,
            of = round.polled,
            "guest watch: the market could not answer for some guests; asking again next round"
        );
    }
    debug!(
        polled = round.polled,
        changed = round.keys.len(),
        "guest watch round"
    );
    round.keys
}

/// Asks `ask` (the market) about the guests of the watched contracts among
/// `deployed`, `per_call` at a time. A round over 10,000 guests built every
/// receipt and answer at once: about 4 MiB the allocator kept resident
/// after it.
async fn ask_by_chunks<F, Answers>(
    deployed: &[Arc<CachedContract>],
    per_call: usize,
    mut ask: F,
) -> Round
where
    F: FnMut(Vec<market::Receipt>) -> Answers,
    Answers: Future<Output = Vec<Result<GuestStatus, MarketError>>>,
{
    let mut round = Round::default();
    for chunk in deployed.chunks(per_call.max(1)) {
        let (contracts, receipts): (Vec<&Arc<CachedContract>>, Vec<market::Receipt>) = chunk
            .iter()
            .filter_map(|contract| {
                watched_receipt(contract).map(|r| (contract, cached_to_market(r)))
            })
            .unzip();
        if receipts.is_empty() {
            continue;
        }
        let answers = ask(receipts).await;
        round.take(&contracts, &answers);
    }
    round
}

/// Guests asked about in one market call.
const GUESTS_PER_CALL: usize = 1_000;

/// What a round found so far.
#[derive(Default)]
struct Round {
    /// The contracts to look at.
    keys: Vec<ObjectRef<CachedContract>>,
    polled: usize,
    /// Answers that were no answer (asked again next round).
    retryable: usize,
}

impl Round {
    /// Takes in the market's `answers` about `contracts`' guests, in order.
    fn take(
        &mut self,
        contracts: &[&Arc<CachedContract>],
        answers: &[Result<GuestStatus, MarketError>],
    ) {
        self.polled += contracts.len();
        self.retryable += answers
            .iter()
            .filter(|a| a.as_ref().is_err_and(MarketError::is_retryable))
            .count();
        self.keys.extend(
            contracts
                .iter()
                .zip(answers)
                .filter(|(contract, answer)| needs_look(contract, answer))
                .map(|(contract, _)| ObjectRef::from_obj(contract.as_ref())),
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::requester::WholeContract;
    use crate::requester::contract::decide::Observation;
    use crate::requester::test_fixtures::{
        apply, deleted, deployed, ready, release, secs, step, t0,
    };

    fn node(node_id: &str, address: &str) -> GuestStatus {
        GuestStatus::NodeRegistered {
            address: Some(address.to_owned()),
            node_id: node_id.to_owned(),
        }
    }

    /// A Deployed contract whose guest registered node n1 at 10.0.0.7.
    fn registered() -> WholeContract {
        let c = deployed();
        let s = step(
            &c,
            &ready(),
            t0() + secs(9),
            Observation::Guest(node("n1", "10.0.0.7")),
        );
        apply(&c, &s)
    }

    #[test]
    fn a_registered_contract_waits_for_the_watch_instead_of_polling() {
        let c = registered();
        assert!(watched_receipt(&CachedContract::from(&c)).is_some());
        let again = step(
            &c,
            &ready(),
            t0() + secs(70),
            Observation::Guest(node("n1", "10.0.0.7")),
        );
        assert_eq!(
            again.requeue, None,
            "no requeue of its own: the watch polls"
        );
        assert_eq!(again.command, None);
    }

    #[test]
    fn only_deployed_contracts_with_a_registered_node_and_no_release_are_watched() {
        let mut booting = registered();
        booting.status.as_mut().unwrap().phase = Some(Phase::Accepted);
        for (what, contract) in [
            (
                "on the network, no node yet (its own register poll)",
                deployed(),
            ),
            ("release asked for", release(registered())),
            ("being deleted", deleted(registered())),
            ("still booting", booting),
        ] {
            assert_eq!(
                watched_receipt(&CachedContract::from(&contract)),
                None,
                "{what}"
            );
        }
    }

    /// The watch wakes a contract exactly when the answer would change its
    /// status: what decide makes of the same answer is the judge.
    #[test]
    fn the_watch_wakes_a_contract_exactly_when_decide_would_change_its_status() {
        let c = registered();
        let gone = || MarketError::GuestNotFound {
            uri: "local://guests/g-1".to_owned(),
        };
        let answers = [
            ("the same node", Ok(node("n1", "10.0.0.7"))),
            ("another node", Ok(node("n2", "10.0.0.7"))),
            ("another address", Ok(node("n1", "10.0.0.8"))),
            (
                "the node is lost",
                Ok(GuestStatus::OnNetwork {
                    address: Some("10.0.0.7".to_owned()),
                }),
            ),
            ("terminated", Ok(GuestStatus::Terminated)),
            (
                "failed",
                Ok(GuestStatus::Failed {
                    reason: "disk".to_owned(),
                }),
            ),
            ("not found", Err(gone())),
        ];
        for (what, answer) in answers {
            let observation = match &answer {
                Ok(status) => Observation::Guest(status.clone()),
                Err(error) => Observation::Failed {
                    operation: market::Operation::GuestStatus,
                    failure: super::super::decide::MarketFailure::from_error(error),
                },
            };
            let decided = step(&c, &ready(), t0() + secs(70), observation);
            let changes = Some(&decided.status) != c.status.as_ref();
            assert_eq!(
                needs_look(&CachedContract::from(&c), &answer),
                changes,
                "{what}"
            );
        }
    }

    #[test]
    fn a_market_that_cannot_answer_now_wakes_nothing_and_a_refused_receipt_wakes() {
        let c = CachedContract::from(&registered());
        let unavailable = Err(MarketError::Unavailable {
            operation: market::Operation::GuestStatus,
            reason: "down".to_owned(),
        });
        assert!(!needs_look(&c, &unavailable));
        let refused = Err(MarketError::InvalidReceipt {
            uri: "local://guests/g-1".to_owned(),
            reason: "cid does not match".to_owned(),
        });
        assert!(needs_look(&c, &refused));
    }

    /// A round asks about every watched guest, `per_call` at a time, and
    /// wakes the contracts of every chunk whose answer differs.
    #[tokio::test]
    async fn a_round_asks_a_chunk_at_a_time_and_wakes_from_every_chunk() {
        let named = |name: &str, mut contract: WholeContract| {
            contract.metadata.name = Some(name.to_owned());
            Arc::new(CachedContract::from(&contract))
        };
        let mut booting = registered();
        booting.status.as_mut().unwrap().phase = Some(Phase::Accepted);
        let mut deployed: Vec<_> = (0..5)
            .map(|i| named(&format!("c{i}"), registered()))
            .collect();
        deployed.insert(3, named("booting", booting));
        let ask = |answer: fn(usize) -> Result<GuestStatus, MarketError>| {
            let calls = std::sync::Mutex::new(Vec::new());
            let deployed = deployed.clone();
            async move {
                let round = ask_by_chunks(&deployed, 2, |receipts| {
                    let n = calls.lock().unwrap().len();
                    calls.lock().unwrap().push(receipts.len());
                    std::future::ready((0..receipts.len()).map(|i| answer(n * 2 + i)).collect())
                })
                .await;
                let calls = calls.into_inner().unwrap();
                (round, calls)
            }
        };

        // c0 c1 | c2 booting | c3 c4: the booting contract is not asked about.
        let (moved, calls) = ask(|_| Ok(node("n2", "10.0.0.7"))).await;
        assert_eq!(calls, [2, 1, 2]);
        let woken: Vec<&str> = moved.keys.iter().map(|key| key.name.as_str()).collect();
        assert_eq!(woken, ["c0", "c1", "c2", "c3", "c4"]);
        assert_eq!((moved.polled, moved.retryable), (5, 0));

        let (same, _) = ask(|_| Ok(node("n1", "10.0.0.7"))).await;
        assert!(same.keys.is_empty(), "{:?}", same.keys);
        assert_eq!(same.polled, 5);

        // The last chunk's market is down: nothing of it is woken, and it counts.
        let (down, _) = ask(|i| {
            if i >= 4 {
                Err(MarketError::Unavailable {
                    operation: market::Operation::GuestStatus,
                    reason: "down".to_owned(),
                })
            } else {
                Ok(node("n2", "10.0.0.7"))
            }
        })
        .await;
        let woken: Vec<&str> = down.keys.iter().map(|key| key.name.as_str()).collect();
        assert_eq!(woken, ["c0", "c1", "c2"]);
        assert_eq!(down.retryable, 2);
    }
}
