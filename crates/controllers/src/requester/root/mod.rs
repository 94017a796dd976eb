//! The Requester object: its market, its status, and its finalizer, which
//! keeps the root delete order.
//!
//! # Expected flow
//!
//! A live Requester gets the finalizer `requester.socialweb.computer/root-delete-order`,
//! its market is built (or its bidders reconfigured) and its status says
//! whether the market is configured and how many contracts the namespace has.
//!
//! When it is deleted (and it is the Requester that runs the namespace):
//! 1. every Infra of the namespace is deleted (their own finalizers release
//!    and delete their contracts);
//! 2. every contract is released: the contract controller treats a deleting
//!    Requester as a release request for every guest, and keeps sending
//!    releases and confirming them;
//! 3. once no Infra remains, contracts that are Released (or finished without
//!    a guest) are deleted by this finalizer, so ownerless leftovers do not
//!    block it;
//! 4. when no ComputeContract remains, the finalizer is removed and the
//!    Requester goes last.
//!
//! # Guarantees
//!
//! The finalizer is removed only when no ComputeContract is left in the
//! namespace, so no guest loses the component that releases it. A Requester
//! that does not run the namespace (another, older one does) lets go at once.
//!
//! - [`decide`]: the pure half (where a Requester stands, its live status,
//!   one step of the root delete order), unit-tested without a server;
//! - `act`: gathers the caches and the market's readiness, performs the plan;
//! - a count-only status write at most every two seconds ([`crate::status_pace`]);
//! - `ignored`: a Requester outside the contract namespace.

pub(super) mod act;
pub mod decide;
pub(super) mod ignored;

use api::{Requester, RequesterStatus};

use crate::Result;
use crate::write;

/// The field manager of every write of the Requester controller.
const MANAGER: &str = crate::requester::IDENTITY.manager;

/// Replaces the Requester's status when it differs, guarded by the
/// resourceVersion read (a stale decision is a 409); a Requester gone is fine.
pub(super) async fn write_status_if_changed(
    client: &kube::Client,
    requester: &Requester,
    status: RequesterStatus,
) -> Result<()> {
    if requester.status.as_ref() != Some(&status) {
        write::replace_status(client, MANAGER, requester, status).await?;
    }
    Ok(())
}
