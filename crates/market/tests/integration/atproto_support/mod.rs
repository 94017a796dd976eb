//! What the atproto market's end-to-end tests share: a fake network with
//! bidders, our account, our inbound server, and market instances that
//! stand for successive processes (a restart is a new instance with a new,
//! empty inbox).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use atproto::{Algorithm, SigningKey};
use atproto_fake::FakeNetwork;
use atproto_fake::bidder::{BidderOptions, FakeBidder, Offer};
use market::atproto::{AtprotoMarket, AtprotoMarketConfig, Inbox, router};
use market::{
    Clock, ContractKey, Location, ManualClock, Market as _, RequestForProposal, Resources,
};
use tower::ServiceExt as _;

pub const PASSWORD: &str = "requester-password";

/// A price per hour in USD.
pub fn usd_hourly(cost: f64) -> Offer {
    Offer::X402 {
        cost,
        currency: "USD".to_owned(),
        frequency: "hourly".to_owned(),
    }
}

pub struct Harness {
    pub net: FakeNetwork,
    pub clock: Arc<ManualClock>,
    pub requester: String,
    pub bidders: Vec<FakeBidder>,
    pub config: AtprotoMarketConfig,
    /// The inbox of the current "process"; the inbound server routes to it.
    inbox: Arc<Mutex<Inbox>>,
}

impl Harness {
    /// A network, our account, and one bidder per offer (`bidder-<i>.test`).
    pub async fn start(offers: Vec<Offer>) -> Self {
        let mut net = FakeNetwork::start().await.unwrap();
        let clock = Arc::new(ManualClock::default());
        let account = net
            .pds
            .create_account("requester.test", &PASSWORD.into())
            .unwrap();
        let mut bidders = Vec::new();
        for (i, offer) in offers.into_iter().enumerate() {
            let mut options = BidderOptions::new(&format!("bidder-{i}.test"), offer);
            let bidder_clock = Arc::clone(&clock);
            options.now = Arc::new(move || bidder_clock.now());
            bidders.push(net.start_bidder(options).await.unwrap());
        }
        let inbox = Arc::new(Mutex::new(Inbox::default()));
        let public_url = serve_inbound(Arc::clone(&inbox)).await;
        let key = SigningKey::generate(Algorithm::K256);
        let mut config = AtprotoMarketConfig::new(
            net.pds_url.clone(),
            "requester.test",
            PASSWORD.into(),
            key.to_hex(),
            public_url,
        );
        config.plc_url = net.plc_url.clone();
        config.bidders = bidders.iter().map(|b| b.did().to_owned()).collect();
        config.scope = "test".to_owned();
        config.timeouts.call = Duration::from_secs(5);
        Self {
            net,
            clock,
            requester: account.did,
            bidders,
            config,
            inbox,
        }
    }

    /// A new market instance: a restarted process, with a new inbox.
    pub fn market(&self) -> AtprotoMarket {
        let inbox = Inbox::default();
        *self.inbox.lock().unwrap() = inbox.clone();
        let clock: Arc<dyn Clock> = self.clock.clone();
        AtprotoMarket::new(self.config.clone(), clock, inbox).unwrap()
    }

    /// The inbox of the current process.
    pub fn inbox(&self) -> Inbox {
        self.inbox.lock().unwrap().clone()
    }

    pub fn bidder(&self, i: usize) -> &FakeBidder {
        &self.bidders[i]
    }

    /// Our records in one collection.
    pub fn own_records(&self, collection: &str) -> usize {
        self.records_of(&self.requester, collection)
    }

    /// How many records `did` holds in `collection` (read in-process).
    pub fn records_of(&self, did: &str, collection: &str) -> usize {
        self.net.pds.records(did, collection).len()
    }

    /// Rents a machine for `contract` through `market` (its first bid
    /// accepted) and waits until the network is quiet.
    pub async fn rent(&self, market: &AtprotoMarket, contract: &str) -> market::Receipt {
        let (rfp, bid) = first_bid(market, contract).await;
        let receipt = market.accept(&rfp, &bid).await.unwrap();
        self.quiet().await;
        receipt
    }

    /// Waits until stalled requests and every bidder's background work
    /// are done, so counters are final.
    pub async fn quiet(&self) {
        self.net.faults.stalls_finished().await;
        for bidder in &self.bidders {
            bidder.quiet().await;
        }
    }
}

/// Serves the inbound router of whichever inbox is current.
async fn serve_inbound(current: Arc<Mutex<Inbox>>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let inbox = current.lock().unwrap().clone();
        async move { router(inbox).oneshot(request).await.unwrap() }
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// A request for a small machine for `name`.
pub fn request(name: &str) -> RequestForProposal {
    RequestForProposal {
        contract: ContractKey::new("socialweb-system", name),
        resources: Resources {
            cpus: 2,
            memory_mib: 2048,
            disk_gib: 20,
            network_mbps: 100,
        },
        location: Location {
            country: "DEU".to_owned(),
            region: None,
        },
        owner_did: "did:web:tenant.example".to_owned(),
    }
}

/// Polls `check` until it returns `Some`, for effects that happen on the
/// fakes' own (real) time, such as an injected stall; fails after 10 s.
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Publishes a request for `contract`, waits for the bids, and returns the
/// request and its first bid.
pub async fn first_bid(market: &AtprotoMarket, contract: &str) -> (market::RfpId, market::Bid) {
    let rfp = market.publish_rfp(request(contract)).await.unwrap();
    market.settled().await;
    let bid = market.collect_bids(&rfp).await.unwrap().remove(0);
    (rfp, bid)
}
