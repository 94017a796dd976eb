//! The AtprotoRecord's Ready condition and the reasons it gives.
//!
//! A message names Secrets by name and key and PDS errors by their XRPC
//! name and message, never a password, token or record content.

use api::{Condition, ConditionStatus, set_condition};
use chrono::{DateTime, Utc};

use crate::message::cap;
use crate::time::to_time;

/// The one condition type: whether the record holds the current declaration.
pub const READY: &str = "Ready";

/// The reasons of the Ready condition.
pub mod reason {
    /// The record holds the current declaration.
    pub const PUBLISHED: &str = "Published";
    /// The declaration is being written.
    pub const PUBLISHING: &str = "Publishing";
    /// The object's Infra is not found.
    pub const INFRA_MISSING: &str = "InfraMissing";
    /// No Requester runs the namespace: no account to publish with.
    pub const NO_REQUESTER: &str = "NoRequester";
    /// The Requester's market is not atproto: it has no repository.
    pub const NO_ATPROTO_ACCOUNT: &str = "NoAtprotoAccount";
    /// The Secret or key holding the account's app password is missing or empty.
    pub const SECRET_MISSING: &str = "SecretMissing";
    /// The PDS refused the account's credentials.
    pub const INVALID_CREDENTIALS: &str = "InvalidCredentials";
    /// The PDS did not answer, or answered 5xx/429.
    pub const PDS_UNREACHABLE: &str = "PdsUnreachable";
    /// The PDS refused the write (a 4xx other than an auth error).
    pub const RECORD_REFUSED: &str = "RecordRefused";
    /// The record is in another repository than the Requester's account now.
    pub const REPOSITORY_CHANGED: &str = "RepositoryChanged";
    /// Deleting: the Infra's contracts are still being released.
    pub const WAITING_FOR_RELEASES: &str = "WaitingForReleases";
}

/// Sets the Ready condition in `conditions` (its transition time kept while
/// its status stays the same). Returns whether anything changed.
pub fn set_ready(
    conditions: &mut Vec<Condition>,
    status: ConditionStatus,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: DateTime<Utc>,
) -> bool {
    set_condition(
        conditions,
        Condition::new(
            READY,
            status,
            reason,
            cap(message),
            generation,
            to_time(now),
        ),
    )
}
