//! Requesters outside the contract namespace. This manager runs only the
//! contract namespace's Requester; any other one would otherwise get no
//! status at all and look like a Requester nobody has read yet. Each gets
//! Ready=False `OutsideContractNamespace`, saying where a Requester must be.
//!
//! # Guarantees
//! Writes status only (on change, with the resourceVersion read); never a
//! finalizer, a contract or a market call.

use std::sync::Arc;

use api::{ConditionStatus, Requester, RequesterStatus};
use chrono::{DateTime, Utc};
use kube::ResourceExt;
use kube::runtime::controller::Action;

use super::write_status_if_changed;
use crate::Result;
use crate::requester::Runtime;
use crate::requester::conditions as cond;

/// The `controller` metric label of this reconciler.
pub const METRICS_LABEL: &str = "requester_ignored";

/// The status of a Requester in `namespace`, which is not `contract_namespace`.
#[must_use]
pub fn ignored_status(
    requester: &Requester,
    contract_namespace: &str,
    now: DateTime<Utc>,
) -> RequesterStatus {
    let namespace = requester.namespace().unwrap_or_default();
    let mut status = requester.status.clone().unwrap_or_default();
    status.observed_generation = requester.metadata.generation;
    status.market = requester.spec.market.kind();
    status.contracts = 0;
    cond::set(
        &mut status.conditions,
        cond::READY,
        ConditionStatus::False,
        cond::OUTSIDE_CONTRACT_NAMESPACE,
        &format!(
            "this manager runs the Requester of namespace {contract_namespace} only, so this one \
             in {namespace} runs no contract: create it in {contract_namespace}, or run a \
             manager with --contract-namespace {namespace}"
        ),
        requester.metadata.generation,
        now,
    );
    status
}

/// Writes the ignored status of a Requester outside the contract namespace.
///
/// # Errors
/// A failed status write (a conflict is a quick requeue).
#[tracing::instrument(skip_all, fields(namespace = %requester.namespace().unwrap_or_default(), requester = %requester.name_any()))]
pub(in crate::requester) async fn reconcile(
    requester: Arc<Requester>,
    rt: Arc<Runtime>,
) -> Result<Action> {
    let ctx = &rt.ctx;
    let namespace = requester.namespace().unwrap_or_default();
    if requester.metadata.deletion_timestamp.is_some() || namespace == ctx.contract_namespace {
        return Ok(Action::await_change());
    }
    let _timer = ctx.metrics.reconcile_started(METRICS_LABEL);
    let status = ignored_status(&requester, &ctx.contract_namespace, ctx.now());
    write_status_if_changed(&ctx.client, &requester, status).await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::requester::test_fixtures::{requester_with, t0};

    #[test]
    fn an_ignored_requester_says_where_a_requester_must_be() {
        let mut elsewhere = requester_with("root", vec![]);
        elsewhere.metadata.namespace = Some("tenant-a".to_owned());
        let status = ignored_status(&elsewhere, "socialweb-system", t0());
        let ready = api::find_condition(&status.conditions, cond::READY).unwrap();
        assert_eq!(ready.status, ConditionStatus::False);
        assert_eq!(ready.reason, cond::OUTSIDE_CONTRACT_NAMESPACE);
        assert!(
            ready.message.contains("create it in socialweb-system"),
            "{}",
            ready.message
        );
        assert!(ready.message.contains("tenant-a"), "{}", ready.message);
        assert_eq!(status.observed_generation, Some(1));
        // Written once: the same input gives the same status.
        elsewhere.status = Some(status.clone());
        assert_eq!(
            ignored_status(
                &elsewhere,
                "socialweb-system",
                t0() + chrono::Duration::seconds(9)
            ),
            status
        );
    }
}
