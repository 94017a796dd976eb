//! The guest watch: one market call per round for the guests of every
//! Deployed contract whose node registered, waking only the contracts whose
//! guest says something else than their status.
//!
//! A Deployed contract with a registered node has nothing to do until its
//! guest changes, so [`super::decide`] schedules no poll of its own for it
//! (one requeue per contract per minute was the whole idle cost of a quiet
//! fleet: 2,779 reconciles in 20 s with 10,000 contracts). Instead, every
//! [`Timing::guest_poll`](super::lifecycle::Timing) this watch reads the
//! contracts from the cache, asks the Requester's market about all their
//! guests at once ([`market::Market::guest_statuses`]) and sends the
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

use api::{ComputeContractPhase as Phase, Receipt};
use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::ObjectRef;
use market::{GuestStatus, MarketError};
use tracing::{debug, warn};

use crate::cache::CachedContract;
use crate::market_adapter::mapping::to_market;
use crate::requester::Runtime;
use crate::requester::markets::select_requester;

/// The receipt of a contract the watch polls for: Deployed, its node
/// registered, no release asked for. These are the contracts whose decide
/// waits for a change instead of polling.
#[must_use]
pub fn watched_receipt(contract: &CachedContract) -> Option<Receipt> {
    let status = contract.status.as_ref()?;
    let registered = status
        .guest
        .as_ref()
        .is_some_and(|guest| guest.node_id.is_some());
    let settled = status.phase == Some(Phase::Deployed)
        && registered
        && status.won
        && !contract.spec.release
        && contract.metadata.deletion_timestamp.is_none();
    settled.then(|| contract.receipt.clone()).flatten()
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
            guest.node_id.as_deref() != Some(node_id.as_str())
                || guest.address.as_deref() != address.as_deref()
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
    let watched: Vec<(Arc<CachedContract>, Receipt)> = deployed
        .into_iter()
        .filter_map(|contract| watched_receipt(&contract).map(|receipt| (contract, receipt)))
        .collect();
    if watched.is_empty() {
        return Vec::new();
    }
    let receipts: Vec<market::Receipt> = watched.iter().map(|(_, r)| to_market(r)).collect();
    let started = std::time::Instant::now();
    let answers = handle.market.guest_statuses(&receipts).await;
    rt.ctx
        .metrics
        .observe_market("guest_statuses", started.elapsed());
    let retryable = answers
        .iter()
        .filter(|a| a.as_ref().is_err_and(MarketError::is_retryable))
        .count();
    if retryable > 0 {
        warn!(
            retryable,
            of = answers.len(),
            "guest watch: the market could not answer for some guests; asking again next round"
        );
    }
    let keys: Vec<_> = watched
        .iter()
        .zip(&answers)
        .filter(|((contract, _), answer)| needs_look(contract, answer))
        .map(|((contract, _), _)| ObjectRef::from_obj(contract.as_ref()))
        .collect();
    debug!(
        polled = watched.len(),
        changed = keys.len(),
        "guest watch round"
    );
    keys
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
}
