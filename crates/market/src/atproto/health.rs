//! What the atproto market can say about itself without renting anything:
//! whether our account logs in, and which bidders are found. The Requester's
//! conditions are made from it, so an operator reads what is wrong (a
//! refused app password, an unreachable PDS, no bidder) before any contract
//! waits on it.
//!
//! It uses the market's own session and discovery (no second login: PDSs
//! rate-limit `createSession`), so asking often costs nothing once logged in
//! and while the bidders found are fresh.

use super::{AtprotoMarket, request};

/// The market works: our account is logged in and these bidders serve `compute.vm`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// Our DID.
    pub did: String,
    /// DIDs of the bidders found (configured and listed by the relay) that
    /// offer `compute.vm`.
    pub bidders: Vec<String>,
    /// What could not be read while finding them (a bidder or the relay that
    /// did not answer), one line each.
    pub problems: Vec<String>,
}

/// Why the market cannot work now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unhealthy {
    /// Our PDS refused the account or its app password.
    #[error("the pds refused the account's credentials: {0}")]
    Credentials(String),
    /// Our PDS (or the directory resolving the account) did not answer.
    #[error("the pds cannot be reached: {0}")]
    Unreachable(String),
    /// Logged in, but no bidder serving `compute.vm` was found.
    #[error("no bidder found: {0}")]
    NoBidders(String),
}

impl AtprotoMarket {
    /// Logs in if needed and finds the bidders (cached as for requests).
    ///
    /// # Errors
    /// [`Unhealthy`] says what keeps the market from renting.
    pub async fn health(&self) -> Result<Health, Unhealthy> {
        let did = self.shared.net.did().await.map_err(|error| {
            // A PDS answers a wrong identifier or password with 400 or 401;
            // anything else (a timeout, a 5xx, no DNS) is the network's.
            let refused =
                error.is_auth() || matches!(&error, atproto::Error::Xrpc { status: 400, .. });
            if refused {
                Unhealthy::Credentials(error.to_string())
            } else {
                Unhealthy::Unreachable(error.to_string())
            }
        })?;
        let discovery = request::discover(&self.shared).await;
        if discovery.endpoints.is_empty() {
            let why = if discovery.errors.is_empty() {
                "no configured or listed bidder offers compute.vm".to_owned()
            } else {
                discovery.errors.join("; ")
            };
            return Err(Unhealthy::NoBidders(why));
        }
        Ok(Health {
            did,
            bidders: discovery.endpoints.into_iter().map(|e| e.did).collect(),
            problems: discovery.errors,
        })
    }
}
