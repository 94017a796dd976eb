//! The one seam between a Requester's `spec.market` and the [`market::Market`]
//! port: which adapter a spec asks for, how it is built and reconfigured, and
//! what the Requester's Ready condition says about it. The contract mapping
//! (API types to the port's and back) is in [`mapping`], the same for every
//! adapter.
//!
//! # Adding a market adapter
//! 1. The adapter: a module of the `market` crate implementing
//!    [`market::Market`] (as `market::local` does).
//! 2. Its configuration: one optional field of [`api::Market`] (with its
//!    [`api::MarketKind`]), then `cargo run -p xtask -- generate`.
//! 3. Here: a module beside [`local`] that builds it from that field, one
//!    variant of [`MarketAdapter`] (and of [`Injected`] if tests share one
//!    instance), and one arm in each `match` of this file (the compiler
//!    lists them).
//!
//! Nothing else in the controllers names a kind of market: the Requester
//! reconcilers hold a [`MarketAdapter`] and talk to its [`market::Market`].

pub mod atproto;
pub mod local;
pub mod mapping;

use std::sync::Arc;
use std::time::Duration;

use market::Market;

use crate::Clock;

pub use mapping::{contract_key, request_for};

/// The market a Requester's spec asks for, built.
#[derive(Clone, Debug)]
pub enum MarketAdapter {
    /// `spec.market.local`: the embedded, seeded market of [`local`].
    Local(Arc<market::LocalMarket>),
    /// `spec.market.atproto`: the public atproto compute market, built by [`atproto`].
    Atproto(Arc<market::atproto::AtprotoMarket>),
}

/// What building a market may need besides its spec.
#[derive(Clone, Copy, Debug)]
pub struct BuildContext<'a> {
    /// The market shared by every Requester of its kind, if any.
    pub injected: Option<&'a Injected>,
    /// The atproto arm's app password and signing key, read from the
    /// Secrets the spec names (by the Requester reconcilers, which have a client).
    pub credentials: Option<&'a atproto::Credentials>,
    /// Where bidders' pushes arrive: the one inbox of the process, whose
    /// router the manager serves on its market port.
    pub inbox: &'a market::atproto::Inbox,
}

/// A market made outside the controllers and shared by every Requester whose
/// spec asks for its kind (its configuration still follows the spec): tests
/// and `manager dev` keep one market across controller restarts this way.
#[derive(Clone, Debug)]
pub enum Injected {
    /// Used for `spec.market.local`.
    Local(Arc<market::LocalMarket>),
}

/// What became of a running adapter when its Requester's spec changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reconfigured {
    /// The running market follows the new spec.
    InPlace,
    /// The spec asks for another kind of market (or none): build it anew.
    Rebuild,
}

/// What a Requester's Ready condition says about its market, once it is built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Contracts can be rented; the message says on what.
    Ready(String),
    /// Nobody bids on this market, so nothing can be rented; the message says what to add.
    NoBidders(String),
    /// No market can be built from the spec; the message says what to fix.
    NoMarket(String),
    /// A Secret (or a key of it) the spec names does not exist.
    SecretMissing(String),
    /// The market refused the credentials, or they do not parse.
    InvalidCredentials(String),
    /// The market's servers (the account's PDS) do not answer.
    PdsUnreachable(String),
}

/// How often a ready market outside the cluster is asked again whether it
/// still logs in and finds bidders.
pub const OUTSIDE_RECHECK: Duration = Duration::from_secs(300);
/// How soon a market outside the cluster that is not ready is asked again.
pub const OUTSIDE_RETRY: Duration = Duration::from_secs(15);

/// When the Requester reconciler asks the market of `spec` again without
/// any change in the cluster: a market outside it (atproto) changes on its
/// own (a rotated Secret, a PDS that came back, a bidder that appeared); the
/// embedded one changes only with its spec. `None` waits for a change.
#[must_use]
pub fn recheck_after(spec: &api::Market, ready: bool) -> Option<Duration> {
    match spec {
        api::Market {
            atproto: Some(_), ..
        } => Some(if ready {
            OUTSIDE_RECHECK
        } else {
            OUTSIDE_RETRY
        }),
        _ => None,
    }
}

/// Why no market can be built from a spec that sets none (or one no arm builds yet).
fn none_set() -> String {
    // One more adapter is one more field named here.
    "spec.market sets no market this manager can build; set spec.market.local or spec.market.atproto".to_owned()
}

impl MarketAdapter {
    /// The market `spec` asks for, on `clock`; the injected one when its kind matches.
    ///
    /// # Errors
    /// Why no market can be built from `spec`, said so that a person can fix
    /// the spec (it becomes the Requester's `NoMarket` condition).
    pub fn build(
        spec: &api::Market,
        clock: &Arc<dyn Clock>,
        context: BuildContext<'_>,
    ) -> Result<Self, String> {
        match spec {
            api::Market {
                local: Some(local), ..
            } => {
                let injected = context.injected.map(|Injected::Local(market)| market);
                local::build(local, clock, injected).map(Self::Local)
            }
            api::Market {
                atproto: Some(atproto),
                ..
            } => {
                let credentials = context.credentials.ok_or_else(|| {
                    "the Secrets of spec.market.atproto were not read yet".to_owned()
                })?;
                atproto::build(atproto, credentials, clock, context.inbox).map(Self::Atproto)
            }
            _ => Err(none_set()),
        }
    }

    /// The port the contract reconciler drives.
    #[must_use]
    pub fn market(&self) -> Arc<dyn Market> {
        match self {
            Self::Local(market) => Arc::clone(market) as Arc<dyn Market>,
            Self::Atproto(market) => Arc::clone(market) as Arc<dyn Market>,
        }
    }

    /// Applies `new` (the spec was `old`) to the running market of `requester`.
    ///
    /// # Errors
    /// Why the running market cannot take the new spec.
    pub fn reconfigure(
        &self,
        old: &api::Market,
        new: &api::Market,
        requester: &str,
    ) -> Result<Reconfigured, String> {
        match (self, new) {
            (
                Self::Local(market),
                api::Market {
                    local: Some(new), ..
                },
            ) => {
                local::reconfigure(market, old.local.as_ref(), new, requester)?;
                Ok(Reconfigured::InPlace)
            }
            // An adapter that can follow its spec in place gets its arm here;
            // any other change builds the market anew.
            _ => Ok(Reconfigured::Rebuild),
        }
    }

    /// What the Requester's Ready condition says about this market, built from `spec`
    /// (the atproto market is asked whether it logs in and finds bidders).
    pub async fn readiness(&self, spec: &api::Market) -> Readiness {
        match (self, spec) {
            (
                Self::Local(_),
                api::Market {
                    local: Some(local), ..
                },
            ) => local::readiness(local),
            (
                Self::Atproto(market),
                api::Market {
                    atproto: Some(atproto),
                    ..
                },
            ) => atproto::readiness(market, atproto).await,
            _ => Readiness::NoMarket(none_set()),
        }
    }
}
