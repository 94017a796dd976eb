//! What one object of each cached kind weighs as the shared cache stores it:
//! decoded from its watch event as the cache decodes it (`cache::decode`:
//! managedFields and kubectl's annotation left out; a contract kept as a
//! `CachedContract`, its labels and annotations beside its metadata), then
//! cloned into an `Arc` as kube-runtime's store Writer keeps it; a claim
//! and a join Secret as the cache's own keepers hold them, the keepers'
//! maps included (`Claims`: the claim whole, by name and by Cluster, ten
//! claims a Cluster; `JoinSecrets`: a `CachedJoinSecret`, its labels,
//! token and digest without its metadata, ten Secrets an Infra). Counted by
//! dhat's allocator, the bytes asked for (not an allocator's rounding, nor
//! its pages): the figure a cut of the cached form moves, before the RSS of
//! `bench-scale --external` shows it through its noise (plans 0016 C2,
//! 0017, and 0018, whose budget per kind it prints beside each).
//!
//! Then what the local market holds per rented guest (its records, maps
//! and call counters), 10,000 guests rented in a row: in the benchmark's
//! manager it is the market, so its memory is the manager's.
//!
//! The objects are a Deployed contract, its Joined claim, its join Secret
//! and an Infra of three nodes, from `manager dev` with `examples/` applied
//! (`cache_weight/*.json`; the Secret's token replaced), and that Infra with
//! ten nodes, as the benchmark's Clusters have (its first node repeated under
//! other names). An Infra is kept as a `CachedInfra`.
//!
//! `cargo run --release -p controllers --example cache_weight`

#![allow(clippy::expect_used)] // a fixture that does not parse is a broken example: fail loudly

use std::sync::Arc;

use api::Infra;
use controllers::cache::decode::Decoded;
use controllers::cache::keep::Keep;
use controllers::cache::{
    CachedClaim, CachedContract, CachedInfra, Claims, JoinSecrets, WatchedJoinSecret,
};
use controllers::nodeclaim::compose::node_name;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

// dhat's allocator counts the bytes asked for and held (no unsafe of ours:
// the workspace forbids it).
#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

fn held() -> usize {
    dhat::HeapStats::get().curr_bytes
}

/// Copies weighed at once, so that one copy's figure is a mean.
const COPIES: usize = 1000;

/// The bytes one stored copy of `json` holds, the `Arc` with the object inline included.
fn stored_weight<K: DeserializeOwned + Clone + 'static>(json: &str) -> usize {
    let mut stored: Vec<Arc<K>> = Vec::with_capacity(COPIES);
    let before = held();
    for _ in 0..COPIES {
        let decoded: Decoded<K> = serde_json::from_str(json).expect("the fixture parses");
        let Decoded::Object(object) = decoded else {
            panic!("the fixture decodes as {}", std::any::type_name::<K>());
        };
        // As kube-runtime's Writer stores it: a clone, the decoded copy dropped.
        stored.push(Arc::new(object.clone()));
    }
    let weight = held() - before;
    drop(stored);
    weight / COPIES
}

/// The bytes one object like `json` takes in the keeper `S`, its maps
/// included: `COPIES` of them, each made apart by `vary` (its name, its
/// group: ten a group, as in a fleet).
fn kept_weight<K, S>(json: &str, vary: impl Fn(&mut serde_json::Value, usize)) -> usize
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned + 'static,
    S: Keep<K>,
{
    let fixture: serde_json::Value = serde_json::from_str(json).expect("the fixture parses");
    let mut keep = S::default();
    let before = held();
    for copy in 0..COPIES {
        let mut object = fixture.clone();
        vary(&mut object, copy);
        let decoded: Decoded<K> = serde_json::from_value(object).expect("the fixture parses");
        let Decoded::Object(object) = decoded else {
            panic!("the fixture decodes as {}", std::any::type_name::<K>());
        };
        keep.apply(&watcher::Event::Apply(object));
    }
    let weight = held() - before;
    drop(keep);
    weight / COPIES
}

/// Nodes of one Infra in the benchmark's fleet (ten claims a Cluster).
const FLEET_INFRA_NODES: usize = 10;

/// The fixture's Infra with `nodes` nodes: its first node's entries, status
/// row included, repeated under other entry names.
fn infra_of(json: &str, nodes: usize) -> String {
    let mut infra: serde_json::Value = serde_json::from_str(json).expect("the fixture parses");
    let name = infra["metadata"]["name"]
        .as_str()
        .expect("the fixture has a name")
        .to_owned();
    let entry = |list: &serde_json::Value, copy: usize, key: &str| {
        let mut item = list[0].clone();
        let entry = format!("node-{copy:020x}");
        match key {
            "contracts" => item["name"] = entry.clone().into(),
            "secrets" => {
                item["contract"] = entry.clone().into();
                item["secretRef"]["name"] = api::names::join_secret_name(&entry).into();
            }
            "nodes" => {
                item["contract"] = entry.clone().into();
                item["nodeClaimRef"]["name"] = format!("worker-{copy}").into();
                item["nodeClaimRef"]["uid"] =
                    format!("{copy:08x}-0000-4000-8000-000000000000").into();
                // The node name the NodeClaim controller gives it.
                item["nodeJoin"]["nodeName"] = node_name(&format!("worker-{copy}"), &entry).into();
                item["nodeJoin"]["labels"][api::names::CONTRACT_LABEL] = entry.clone().into();
            }
            _ => {
                item["name"] = entry.clone().into();
                item["computeContract"] = api::names::compute_contract_name(&name, &entry).into();
            }
        }
        item
    };
    for (at, key) in [
        ("spec", "contracts"),
        ("spec", "secrets"),
        ("spec", "nodes"),
        ("status", "contracts"),
    ] {
        let list = &infra[at][key];
        let items: Vec<serde_json::Value> = (0..nodes).map(|copy| entry(list, copy, key)).collect();
        infra[at][key] = items.into();
    }
    infra.to_string()
}

fn main() {
    // Testing mode: counts, writes no profile.
    let _profiler = dhat::Profiler::builder().testing().build();
    let contract = stored_weight::<CachedContract>(include_str!("cache_weight/contract.json"));
    let claim = kept_weight::<CachedClaim, Claims>(
        include_str!("cache_weight/claim.json"),
        |claim, copy| {
            claim["metadata"]["name"] = format!("worker-{copy}").into();
            claim["spec"]["clusterName"] = format!("cluster-{}", copy / 10).into();
        },
    );
    let secret = kept_weight::<WatchedJoinSecret, JoinSecrets>(
        include_str!("cache_weight/secret.json"),
        |secret, copy| {
            // Named and labelled as the NodeClaim controller names them.
            let entry = format!("node-{copy:020x}");
            secret["metadata"]["name"] = api::names::join_secret_name(&entry).into();
            secret["metadata"]["labels"][api::names::CONTRACT_LABEL] = entry.into();
            secret["metadata"]["labels"][api::names::INFRA_NAME_LABEL] =
                format!("nodes-{}", copy / 10).into();
        },
    );
    let infra_json = include_str!("cache_weight/infra.json");
    let infra = stored_weight::<CachedInfra>(infra_json);
    let infra_nodes = serde_json::from_str::<Infra>(infra_json)
        .expect("the fixture parses")
        .spec
        .nodes
        .len();
    // As the benchmark's fleet has them: ten nodes an Infra, so its
    // metadata and conditions weigh a tenth on each.
    let fleet_infra = stored_weight::<CachedInfra>(&infra_of(infra_json, FLEET_INFRA_NODES));
    let per_node = contract + claim + secret + fleet_infra / FLEET_INFRA_NODES;
    println!(
        "cache-weight: one object of each kind as the shared cache stores it (bytes asked for)"
    );
    // Plan 0018 R1's budget: a read model per kind, 2.8 KiB a node with the
    // local market, indexes and records, under the 3.4 KiB that 64 MiB leaves.
    println!("  Deployed ComputeContract  {contract:>6} B (read model; plan 0018's budget: 650 B)");
    println!(
        "  Joined NodeClaim          {claim:>6} B (with the keeper's maps; plan 0018's budget: 600 B)"
    );
    println!(
        "  join Secret               {secret:>6} B (with the keeper's maps; plan 0018's budget: 150 B)"
    );
    println!(
        "  Infra of {infra_nodes} nodes           {infra:>6} B ({} B a node; plan 0018's budget: 150 B a node)",
        infra / infra_nodes
    );
    println!(
        "  Infra of {FLEET_INFRA_NODES} nodes          {fleet_infra:>6} B ({} B a node)",
        fleet_infra / FLEET_INFRA_NODES
    );
    println!(
        "  a node's objects          {per_node:>6} B = {:.1} KiB (plan 0018's budget for them: 1.5 KiB)",
        per_node as f64 / 1024.0
    );
    let market = local_market_weight(MARKET_GUESTS);
    println!(
        "  the local market          {market:>6} B a rented guest, {MARKET_GUESTS} rented (budget: 0.4 KiB)"
    );
}

/// Guests rented for the local market's figure: the benchmark's 10,000 nodes,
/// where its maps' tables are as full as there.
const MARKET_GUESTS: usize = 10_000;

/// What the local market (in the manager's process with a `local` market)
/// holds per rented guest: its records, maps and call counters, `guests`
/// rented in a row as `bench-scale` rents them.
fn local_market_weight(guests: usize) -> usize {
    use market::{
        ContractKey, LocalBidder, LocalMarket, LocalMarketConfig, Location, Market,
        RequestForProposal, Resources, SystemClock,
    };
    let bidder = |did: &str, cost| LocalBidder {
        capacity: u32::try_from(guests).expect("a few guests"),
        ..LocalBidder::new(did, cost, "EUR")
    };
    let config = LocalMarketConfig {
        seed: 7,
        bidders: vec![
            bidder("did:web:south.bidders.example", 95),
            bidder("did:web:north.bidders.example", 99),
        ],
        state_dir: None,
        node_register_delay: std::time::Duration::ZERO,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let market = LocalMarket::new(config, Arc::new(SystemClock)).expect("the market starts");
        let mut receipts = Vec::with_capacity(guests);
        let before = held();
        for i in 0..guests {
            let rfp = RequestForProposal {
                contract: ContractKey::new(
                    "socialweb-system",
                    format!("nodes-b27d3c1c71666568b47a-node-{i:020x}"),
                ),
                resources: Resources {
                    cpus: 2,
                    memory_mib: 4096,
                    disk_gib: 40,
                    network_mbps: 1000,
                },
                location: Location {
                    country: "DE".to_owned(),
                    region: None,
                },
                owner_did: "did:plc:z72i7hdynmk6r22z27h6tvur".to_owned(),
            };
            let id = market.publish_rfp(rfp).await.expect("published");
            let bids = market.collect_bids(&id).await.expect("bids");
            let cheapest = market::cheapest(&bids).expect("a bid");
            receipts.push(market.accept(&id, cheapest).await.expect("accepted"));
        }
        // The receipts are the caller's (the contracts' status), not the market's.
        let receipts_heap: usize = receipts.iter().map(|r| r.uri.len() + r.cid.len()).sum();
        (held() - before - receipts_heap) / guests
    })
}
