//! `dev --market atproto-fake`: the dev environment's Requester rents on an
//! atproto compute market running in this process ([`crate::fake_market`]):
//! PLC, PDS, relay and three bidders on loopback ports, the manager's market
//! port on another, all over real HTTP.
//!
//! # Expected flow
//! 1. [`start`] starts the fake market and the market port, and serves the
//!    markets' inbox there for as long as the returned [`DevAtproto`] lives.
//! 2. It applies the Secret `atproto-market` (the fake account's app password
//!    and a fresh signing key) and the Requester `atproto` pointing at it.
//!
//! # Assumptions
//! The fake market lives in memory: every start is a new market with new
//! ports, so the Requester's spec is applied again each time (a `--data-dir`
//! keeps the cluster's objects, whose old receipts then name a market that
//! is gone).

use anyhow::Context as _;
use api::Requester;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use crate::fake_market::{FakeMarket, FakeOffer};
use crate::market_port::{InboundGuard, InboundSlot, MarketPort};
use crate::tenant_side::AbortOnDrop;

/// The Requester `dev --market atproto-fake` creates.
pub const REQUESTER: &str = "atproto";
/// The Secret with the fake account's credentials.
pub const SECRET: &str = "atproto-market";
/// The field manager of what it applies.
const MANAGER: &str = "socialweb/dev";

/// The bidders of the fake market: cheapest first.
#[must_use]
pub fn offers() -> Vec<FakeOffer> {
    vec![
        FakeOffer::usd_hourly("south.bidders.test", 0.95),
        FakeOffer::usd_hourly("north.bidders.test", 1.20),
        FakeOffer::usd_hourly("east.bidders.test", 1.50),
    ]
}

/// The running fake market and the market port serving the inbox.
pub struct DevAtproto {
    /// The fake PLC, PDS, relay and bidders.
    pub market: FakeMarket,
    /// Where bidders reach the market port.
    pub public_url: String,
    _inbound: InboundGuard,
    _port: AbortOnDrop,
}

/// Starts the fake market and the market port (serving `inbox`), and applies
/// the Secret and the Requester `atproto` in `namespace`.
///
/// # Errors
/// When a port cannot be bound, the fake refuses an account, or the API
/// server refuses the Secret or the Requester.
pub async fn start(
    client: &Client,
    namespace: &str,
    inbox: market::atproto::Inbox,
) -> anyhow::Result<DevAtproto> {
    let market = FakeMarket::start(&offers())
        .await
        .context("start the fake atproto market")?;
    let port = MarketPort::bind(([127, 0, 0, 1], 0).into())
        .await
        .context("the market port")?;
    let public_url = format!("http://{}", port.local_addr());
    let slot = InboundSlot::new();
    let inbound = slot.open(market::atproto::router(inbox));
    let port = AbortOnDrop(tokio::spawn(async move {
        if let Err(error) = port.serve(slot, std::future::pending()).await {
            tracing::error!(%error, "the market port stopped");
        }
    }));
    let params = PatchParams::apply(MANAGER).force();
    Api::<Secret>::namespaced(client.clone(), namespace)
        .patch(
            SECRET,
            &params,
            &Patch::Apply(market.credentials_secret(namespace, SECRET)),
        )
        .await
        .with_context(|| format!("apply Secret {namespace}/{SECRET}"))?;
    let requester = Requester::new(
        REQUESTER,
        api::RequesterSpec {
            market: api::Market {
                local: None,
                atproto: Some(market.requester_market(SECRET, &public_url, false)),
            },
            bid_window_seconds: 2,
            max_in_flight: 10,
        },
    );
    let mut requester = serde_json::to_value(requester).context("encode the Requester")?;
    requester["metadata"]["namespace"] = namespace.into();
    Api::<Requester>::namespaced(client.clone(), namespace)
        .patch(REQUESTER, &params, &Patch::Apply(requester))
        .await
        .with_context(|| format!("apply Requester {namespace}/{REQUESTER}"))?;
    Ok(DevAtproto {
        market,
        public_url,
        _inbound: inbound,
        _port: port,
    })
}
