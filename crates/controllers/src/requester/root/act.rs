//! The thin, effectful half of the root reconciler: reads the caches and the
//! market's readiness, runs [`super::decide`] and performs its plan: the
//! finalizer, the status, the deletes of the root delete order.

use std::sync::Arc;

use api::{ComputeContract, Infra, Requester, names};
use kube::ResourceExt;
use kube::runtime::controller::Action;
use tracing::info;

use super::decide::{self, DeletePlan, DeletingInputs, LiveInputs, Stage};
use super::{MANAGER, write_status_if_changed};
use crate::Result;
use crate::market_adapter::Readiness;
use crate::requester::markets::select_requester;
use crate::requester::{Runtime, in_namespace};
use crate::write::{self, Seen};

/// Reconciles one Requester.
///
/// # Errors
/// A failed write to the API server; a conflict is a quick requeue.
#[tracing::instrument(skip_all, fields(namespace = %requester.namespace().unwrap_or_default(), requester = %requester.name_any()))]
pub(in crate::requester) async fn reconcile_requester(
    requester: Arc<Requester>,
    rt: Arc<Runtime>,
) -> Result<Action> {
    // An unsynced cache would make "no contract remains" true too early.
    rt.wait_until_ready().await;
    let _timer = rt
        .ctx
        .metrics
        .reconcile_started(crate::requester::ROOT_METRICS_LABEL);
    let namespace = requester.namespace().unwrap_or_default();
    match decide::stage(&requester) {
        Stage::Released => Ok(Action::await_change()),
        Stage::AddFinalizer => {
            write::add_finalizer::<Requester>(
                &rt.ctx.client,
                MANAGER,
                &Seen::of(requester.as_ref()),
                names::REQUESTER_FINALIZER,
            )
            .await?;
            // The write triggers a new reconcile with the fresh object.
            Ok(Action::await_change())
        }
        Stage::Live => live(&requester, &rt, &namespace).await,
        Stage::Deleting => cleanup(&requester, &rt, &namespace).await,
    }
}

/// The name of the Requester that runs `namespace`, if any.
fn runner(rt: &Runtime, namespace: &str) -> Option<String> {
    let requesters = rt.requesters.state();
    select_requester(requesters.iter().map(AsRef::as_ref), namespace).map(|r| r.name_any())
}

/// A live Requester: its market's readiness, its status (a count-only change
/// paced), and a recheck of a market outside the cluster.
async fn live(requester: &Requester, rt: &Runtime, namespace: &str) -> Result<Action> {
    let runner = runner(rt, namespace);
    let readiness = if decide::asks_market(requester, runner.as_deref()) {
        Some(market_readiness(requester, rt).await)
    } else {
        None
    };
    let contracts = rt
        .indexes
        .contract_phases(namespace)
        .iter()
        .map(|(_, count)| count)
        .sum();
    let plan = decide::live(LiveInputs {
        requester,
        runner: runner.as_deref(),
        readiness,
        contracts,
        now: rt.ctx.now(),
    });
    if let Some(status) = plan.write {
        let uid = requester.uid().unwrap_or_default();
        if let Some(wait) =
            rt.count_pace
                .wait_before_writing(&uid, plan.count_only, rt.ctx.clock.now())
        {
            return Ok(Action::requeue(wait));
        }
        write_status_if_changed(&rt.ctx.client, requester, status).await?;
    }
    Ok(plan
        .requeue
        .map_or_else(Action::await_change, Action::requeue))
}

/// Reads the market's Secrets again, builds (or rebuilds) the market, and
/// asks it whether it can rent.
async fn market_readiness(requester: &Requester, rt: &Runtime) -> Readiness {
    let markets = &rt.ctx.markets;
    if let Err(error) = markets
        .read_credentials(&rt.ctx.client, requester, true)
        .await
    {
        return error.readiness();
    }
    if let Err(error) = markets.for_requester(requester) {
        return Readiness::NoMarket(format!("{error}; fix spec.market"));
    }
    markets.readiness(requester).await
}

/// One step of the root delete order; requeues until it is done.
async fn cleanup(requester: &Requester, rt: &Runtime, namespace: &str) -> Result<Action> {
    let client = &rt.ctx.client;
    let infras = in_namespace(&rt.infras, namespace);
    let contracts = in_namespace(&rt.contracts, namespace);
    let runner = runner(rt, namespace);
    let plan = decide::deleting(DeletingInputs {
        requester,
        runner: runner.as_deref(),
        infras: &infras,
        contracts: &contracts,
        now: rt.ctx.now(),
    });
    let write = match plan {
        DeletePlan::LetGo => {
            info!("another Requester runs this namespace; letting go at once");
            let_go(requester, rt, namespace).await?;
            return Ok(Action::await_change());
        }
        DeletePlan::Step {
            infras,
            contracts,
            write,
        } => {
            for infra in infras {
                info!(infra = %infra.name_any(), "root delete order: deleting Infra");
                write::delete_if_present::<Infra>(client, &Seen::of(infra).any_version()).await?;
            }
            for contract in contracts {
                info!(contract = %contract.name_any(), "root delete order: deleting a finished contract");
                write::delete_if_present::<ComputeContract>(
                    client,
                    &Seen::of(contract).any_version(),
                )
                .await?;
            }
            if let Some(status) = write {
                write_status_if_changed(client, requester, status).await?;
            }
            return Ok(Action::requeue(decide::CLEANUP_POLL));
        }
        DeletePlan::Done { write } => write,
    };
    if let Some(status) = write {
        write_status_if_changed(client, requester, status).await?;
    }
    info!("root delete order complete: no Infra and no ComputeContract left");
    let_go(requester, rt, namespace).await?;
    rt.count_pace.forget(&requester.uid().unwrap_or_default());
    Ok(Action::await_change())
}

/// Removes the finalizer and forgets the Requester's market.
async fn let_go(requester: &Requester, rt: &Runtime, namespace: &str) -> Result<()> {
    write::remove_finalizer::<Requester>(
        &rt.ctx.client,
        MANAGER,
        &Seen::of(requester),
        names::REQUESTER_FINALIZER,
    )
    .await?;
    rt.ctx.markets.forget(namespace, &requester.name_any());
    Ok(())
}
