//! The atproto market of an [`super::Env::start_atproto`] environment: the
//! fake network and bidders (`manager::fake_market`), the manager's market
//! port on loopback, and what the fakes saw, for the invariants.

use std::collections::BTreeMap;

use atproto::market as m;
use atproto_fake::bidder::{FakeBidder, Machine};
use kube::Client;
use kube::api::{Api, PostParams};
use manager::fake_market::{FakeMarket, FakeOffer};
use manager::market_port::{InboundSlot, MarketPort};
use market::Receipt;
use serde_json::json;

use super::CONTRACT_NS;

/// The Secret holding the Requester's app password and signing key.
pub const SECRET: &str = "atproto-market";

/// Three bidders, the cheapest first.
pub fn three_bidders() -> Vec<FakeOffer> {
    vec![
        FakeOffer::usd_hourly("cheap.bidders.test", 0.4),
        FakeOffer::usd_hourly("fast.bidders.test", 0.6),
        FakeOffer::usd_hourly("dear.bidders.test", 0.9),
    ]
}

/// The fake market and the manager's market port.
pub struct AtprotoEnv {
    pub market: FakeMarket,
    /// What the market port answers with while a manager runs.
    pub inbound: InboundSlot,
    /// Where bidders reach the market port.
    pub public_url: String,
    port: tokio::task::JoinHandle<()>,
}

impl Drop for AtprotoEnv {
    fn drop(&mut self) {
        self.port.abort();
    }
}

impl AtprotoEnv {
    /// Starts the fake market and the market port; creates the Secret.
    pub async fn start(client: &Client, offers: &[FakeOffer]) -> Self {
        let market = FakeMarket::start(offers).await.unwrap();
        let inbound = InboundSlot::new();
        let port = MarketPort::bind("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let public_url = format!("http://{}", port.local_addr());
        let serving = inbound.clone();
        let port = tokio::spawn(async move {
            port.serve(serving, std::future::pending()).await.unwrap();
        });
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), CONTRACT_NS)
            .create(
                &PostParams::default(),
                &market.credentials_secret(CONTRACT_NS, SECRET),
            )
            .await
            .unwrap();
        Self {
            market,
            inbound,
            public_url,
            port,
        }
    }

    /// `spec.market.atproto` of the Requester `root` (bidders named and
    /// listed by the relay; an accept is sent again 10 s after no answer).
    pub fn spec(&self) -> api::AtprotoMarket {
        let mut spec = self.market.requester_market(SECRET, &self.public_url, true);
        spec.scope = "acceptance".to_owned();
        spec.timeouts.request_seconds = 5;
        spec.timeouts.accept_resend_seconds = 10;
        spec
    }

    /// Creates the Requester `root` on this market.
    pub async fn create_requester(&self, client: &Client) {
        super::create_root_requester(client, 20, json!({"atproto": self.spec()})).await;
    }

    pub fn bidders(&self) -> &[FakeBidder] {
        &self.market.bidders
    }

    /// The bidder of this DID.
    pub fn bidder(&self, did: &str) -> &FakeBidder {
        self.bidders()
            .iter()
            .find(|b| b.did() == did)
            .unwrap_or_else(|| panic!("no bidder {did}"))
    }

    /// The sum over every bidder of one of its counters.
    pub fn total(&self, counter: impl Fn(&atproto_fake::bidder::Counters) -> u64) -> u64 {
        self.bidders().iter().map(|b| counter(&b.counters())).sum()
    }

    /// Every machine any bidder started, with its bidder's DID.
    pub fn machines(&self) -> Vec<(String, Machine)> {
        self.bidders()
            .iter()
            .flat_map(|b| b.machines().into_iter().map(|m| (b.did().to_owned(), m)))
            .collect()
    }

    /// The machines started for `receipt` (one, unless an accept was processed twice).
    pub fn machines_of(&self, receipt: &Receipt) -> Vec<Machine> {
        self.machines()
            .into_iter()
            .map(|(_, machine)| machine)
            .filter(|machine| machine.receipt.uri == receipt.uri)
            .collect()
    }

    /// Machines started in all, by bidder DID.
    pub fn started(&self) -> BTreeMap<String, u64> {
        self.bidders()
            .iter()
            .map(|b| (b.did().to_owned(), b.counters().machines_started))
            .collect()
    }

    /// How many records of `collection` the Requester's repository holds.
    pub fn own_records(&self, collection: &str) -> usize {
        self.market
            .net
            .pds
            .records(&self.market.requester_did, collection)
            .len()
    }

    /// Requests for proposal the Requester published.
    pub fn rfps(&self) -> usize {
        self.own_records(m::RFP)
    }

    /// Accepts the Requester wrote.
    pub fn accepts(&self) -> usize {
        self.own_records(m::ACCEPT)
    }

    /// Waits until every bidder's background work is done.
    pub async fn quiet(&self) {
        self.market.net.faults.stalls_finished().await;
        for bidder in self.bidders() {
            bidder.quiet().await;
        }
    }
}
