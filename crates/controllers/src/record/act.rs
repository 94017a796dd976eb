//! The thin write step of the record controller: carries out a
//! [`RecordPlan`] (one PDS call at most), then writes the status it led to.
//!
//! # Guarantees
//! - The status records the repository (the account's DID) BEFORE the first
//!   putRecord into it, so a deleting object whose status names no
//!   repository has written nothing and may let go at once.
//! - The finalizer is removed only after deleteRecord succeeded (or found
//!   nothing), or for policy Orphan, or when nothing was ever written.
//! - Status is replaced under `socialweb/record`, guarded by the
//!   resourceVersion it was decided from (`crate::write`: a stale decision is
//!   a 409 and a retry); the Infra is never written.
//! - A failed PDS call is a status (phase, Ready=False with the reason) and
//!   a requeue, not an error loop.

use std::time::Duration;

use api::names::{RECORD_DELETE_FINALIZER, RECORD_MANAGER};
use api::{
    AtprotoRecord, AtprotoRecordPhase, AtprotoRecordStatus, ConditionStatus as S, Requester,
};
use kube::Resource;
use kube::runtime::controller::Action;

use super::Context;
use super::account::{self, Failure};
use super::conditions::{self, reason};
use super::decide::{Call, RecordPlan};
use super::events::RecordEvent;
use crate::Result;
use crate::write::{self, Seen};

/// How soon to try again after the PDS could not be reached.
pub const UNREACHABLE_RETRY: Duration = Duration::from_secs(10);
/// How soon to try again after a failure a person must fix (a missing
/// Secret, a refused password): a Requester spec change wakes it sooner.
pub const MISCONFIGURED_RETRY: Duration = Duration::from_secs(30);

/// Carries out `plan` for `record`, with `requester` (the one that runs the
/// namespace) as the account.
///
/// # Errors
/// A failed write to the API server ([`Error::Kube`]).
pub async fn act(
    ctx: &Context,
    record: &AtprotoRecord,
    requester: Option<&Requester>,
    plan: &RecordPlan,
) -> Result<Action> {
    let requeue = |plan: &RecordPlan| {
        plan.requeue
            .map_or_else(Action::await_change, Action::requeue)
    };
    if let Some(status) = &plan.status {
        write_status(ctx, record, status).await?;
    }
    match &plan.call {
        Call::None => Ok(requeue(plan)),
        Call::AddFinalizer => {
            set_finalizers(ctx, record, true).await?;
            Ok(Action::await_change())
        }
        Call::LetGo { kept } => {
            set_finalizers(ctx, record, false).await?;
            if *kept {
                publish(
                    ctx,
                    record,
                    &RecordEvent::Kept {
                        uri: uri_of(record),
                    },
                )
                .await;
            }
            Ok(Action::await_change())
        }
        Call::Publish {
            record: value,
            hash,
        } => match publish_record(ctx, record, requester, value, hash).await? {
            Ok(()) => Ok(Action::await_change()),
            Err(failure) => fail(ctx, record, AtprotoRecordPhase::Failed, &failure).await,
        },
        Call::DeleteRecord => match delete_record(ctx, record, requester).await {
            Ok(()) => {
                set_finalizers(ctx, record, false).await?;
                publish(
                    ctx,
                    record,
                    &RecordEvent::Deleted {
                        uri: uri_of(record),
                    },
                )
                .await;
                Ok(Action::await_change())
            }
            Err(failure) => fail(ctx, record, AtprotoRecordPhase::Deleting, &failure).await,
        },
    }
}

fn uri_of(record: &AtprotoRecord) -> String {
    record
        .status
        .as_ref()
        .and_then(|s| s.uri.clone())
        .unwrap_or_default()
}

/// Logs in, records the repository if it is new, writes the record, then
/// the status that says so. The inner result is the PDS's verdict; the outer
/// one a failed write to the API server.
async fn publish_record(
    ctx: &Context,
    record: &AtprotoRecord,
    requester: Option<&Requester>,
    value: &serde_json::Value,
    hash: &str,
) -> Result<Result<(), Failure>> {
    let credentials = match account::credentials(&ctx.shared.client, requester).await {
        Ok(c) => c,
        Err(failure) => return Ok(Err(failure)),
    };
    let session = match ctx.sessions.session(&credentials).await {
        Ok(s) => s,
        Err(failure) => return Ok(Err(failure)),
    };
    let did = match session.did().await {
        Ok(did) => did,
        Err(error) => return Ok(Err(Failure::from_pds(&error, "log in"))),
    };
    let old = record.status.clone().unwrap_or_default();
    let mut status = old.clone();
    let mut written = record.clone();
    if old.repository.as_deref() != Some(did.as_str()) {
        if let Some(previous) = &old.uri {
            // The account changed: the old record stays where it is, and says so.
            publish(
                ctx,
                record,
                &RecordEvent::RepositoryChanged {
                    old_uri: previous.clone(),
                    repository: did.clone(),
                },
            )
            .await;
        }
        status.repository = Some(did.clone());
        status.uri = None;
        status.cid = None;
        status.phase = Some(AtprotoRecordPhase::Pending);
        conditions::set_ready(
            &mut status.conditions,
            S::False,
            reason::PUBLISHING,
            &format!("writing the declaration in the repository {did}"),
            record.metadata.generation,
            crate::time::now(ctx.shared.clock.as_ref()),
        );
        written = write_status(ctx, record, &status).await?;
    }
    let strong = match session
        .put(&record.spec.collection, &record.spec.rkey, value)
        .await
    {
        Ok(strong) => strong,
        Err(error) => return Ok(Err(Failure::from_pds(&error, "putRecord"))),
    };
    let event = if old.uri.is_some() && old.repository.as_deref() == Some(did.as_str()) {
        RecordEvent::Updated {
            uri: strong.uri.clone(),
        }
    } else {
        RecordEvent::Published {
            uri: strong.uri.clone(),
        }
    };
    status.phase = Some(AtprotoRecordPhase::Published);
    status.uri = Some(strong.uri);
    status.cid = Some(strong.cid);
    status.declaration_hash = Some(hash.to_owned());
    status.observed_generation = record.metadata.generation;
    conditions::set_ready(
        &mut status.conditions,
        S::True,
        reason::PUBLISHED,
        "the record holds the Infra's current declaration",
        record.metadata.generation,
        crate::time::now(ctx.shared.clock.as_ref()),
    );
    write_status(ctx, &written, &status).await?;
    publish(ctx, record, &event).await;
    Ok(Ok(()))
}

async fn delete_record(
    ctx: &Context,
    record: &AtprotoRecord,
    requester: Option<&Requester>,
) -> Result<(), Failure> {
    let credentials = account::credentials(&ctx.shared.client, requester).await?;
    let session = ctx.sessions.session(&credentials).await?;
    let did = session
        .did()
        .await
        .map_err(|e| Failure::from_pds(&e, "log in"))?;
    let repository = record.status.as_ref().and_then(|s| s.repository.as_deref());
    if let Some(repository) = repository
        && repository != did
    {
        return Err(Failure {
            reason: reason::REPOSITORY_CHANGED,
            message: format!(
                "the record is in the repository {repository} but the Requester's account is now \
                 {did}: it cannot be deleted from here; set spec.deletionPolicy to Orphan to let \
                 it go"
            ),
            retryable: false,
        });
    }
    session
        .delete(&record.spec.collection, &record.spec.rkey)
        .await
        .map_err(|e| Failure::from_pds(&e, "deleteRecord"))
}

/// Writes the failure into the status and requeues.
async fn fail(
    ctx: &Context,
    record: &AtprotoRecord,
    phase: AtprotoRecordPhase,
    failure: &Failure,
) -> Result<Action> {
    tracing::info!(reason = failure.reason, message = %failure.message, "record not written");
    let old = record.status.clone().unwrap_or_default();
    let mut status = old.clone();
    status.phase = Some(phase);
    status.observed_generation = record.metadata.generation;
    conditions::set_ready(
        &mut status.conditions,
        S::False,
        failure.reason,
        &failure.message,
        record.metadata.generation,
        crate::time::now(ctx.shared.clock.as_ref()),
    );
    if status != old {
        write_status(ctx, record, &status).await?;
    }
    Ok(Action::requeue(if failure.retryable {
        UNREACHABLE_RETRY
    } else {
        MISCONFIGURED_RETRY
    }))
}

/// Replaces the status (the shared status policy: guarded by the
/// resourceVersion of `record`); returns the object as written, or `record`
/// itself when it is gone.
async fn write_status(
    ctx: &Context,
    record: &AtprotoRecord,
    status: &AtprotoRecordStatus,
) -> Result<AtprotoRecord> {
    let written =
        write::replace_status(&ctx.shared.client, RECORD_MANAGER, record, status.clone()).await?;
    Ok(written.unwrap_or_else(|| record.clone()))
}

/// Adds or removes our finalizer (the shared guarded merge patch; gone is done).
async fn set_finalizers(ctx: &Context, record: &AtprotoRecord, present: bool) -> Result<()> {
    let seen = Seen::of(record);
    let client = &ctx.shared.client;
    if present {
        write::add_finalizer::<AtprotoRecord>(
            client,
            RECORD_MANAGER,
            &seen,
            RECORD_DELETE_FINALIZER,
        )
        .await?;
    } else {
        write::remove_finalizer::<AtprotoRecord>(
            client,
            RECORD_MANAGER,
            &seen,
            RECORD_DELETE_FINALIZER,
        )
        .await?;
    }
    Ok(())
}

async fn publish(ctx: &Context, record: &AtprotoRecord, event: &RecordEvent) {
    let reference = record.object_ref(&());
    if let Err(error) = ctx
        .shared
        .recorder
        .publish(&event.to_event(), &reference)
        .await
    {
        // An Event is a courtesy to a person; losing one must not stop the reconcile.
        tracing::warn!(reason = event.reason(), %error, "could not publish Event");
    }
}
