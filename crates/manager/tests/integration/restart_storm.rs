//! Invariant 5 at any instant: the manager is killed and started again every
//! few hundred milliseconds, at instants no test chose, while a Cluster scales
//! up to four nodes and back down to one. Once it runs undisturbed it
//! converges to the objects an uninterrupted run makes: one contract per live
//! claim, no second request for proposal, no second machine, no lost release.
//!
//! The RESTART acceptance scenario kills it at two chosen points (mid-bidding,
//! mid-release); this one samples the whole timeline.

use crate::support;

use std::time::Duration;

use api::NodeClaimPhase;
use kube::ResourceExt;
use kube::api::DeleteParams;
use market::ContractKey;
use support::invariants::{assert_all, receipts_of};
use support::{CONTRACT_NS, Env, NS};

/// How long each manager lives before it is killed: varied, so the kills land
/// in every phase (listing, bidding, accepting, releasing, deleting).
const LIFETIMES_MS: [u64; 7] = [150, 420, 90, 700, 260, 50, 530];

/// Kills and restarts the manager `restarts` times, with the lifetimes above.
async fn storm(env: &mut Env, restarts: usize) {
    for lifetime in LIFETIMES_MS.iter().cycle().take(restarts) {
        tokio::time::sleep(Duration::from_millis(*lifetime)).await;
        env.kill_manager().await;
        env.start_manager();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_any_instant_it_converges_to_the_same_objects() {
    let mut env = Env::start().await;
    let cluster = env.create_cluster(NS, "c1", true).await;
    let names = ["w0", "w1", "w2", "w3"];
    let mut claims = Vec::new();
    for (i, name) in names.iter().enumerate() {
        claims.push(
            env.create_claim(
                NS,
                name,
                "c1",
                2 + u32::try_from(i).unwrap(),
                Some(&cluster),
            )
            .await,
        );
    }
    storm(&mut env, 10).await;
    env.wait_joined(NS, &names).await;

    // Scale down to one while the storm goes on.
    for name in &names[1..] {
        env.claims(NS)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    storm(&mut env, 10).await;
    for name in &names[1..] {
        env.wait_gone(&env.claims(NS), name).await;
    }
    assert_eq!(
        env.claim_phase(NS, "w0").await,
        Some(NodeClaimPhase::Joined)
    );

    let history = env.server.history();
    let receipts = receipts_of(&history, None);
    for claim in &claims {
        let entry = api::names::entry_name(&claim.uid().unwrap());
        let contract = api::names::compute_contract_name(&api::names::infra_name(NS, "c1"), &entry);
        let key = ContractKey::new(CONTRACT_NS, &contract);
        assert_eq!(
            env.market.rfps_published(&key),
            1,
            "{contract}: one request for proposal"
        );
        assert_eq!(env.market.guests_rented(&key), 1, "{contract}: one machine");
        let receipt = &receipts[&contract];
        let released = env.market.release_calls(receipt) >= 1;
        assert_eq!(
            released,
            claim.name_any() != "w0",
            "{contract}: released exactly when its claim went"
        );
    }
    assert_eq!(env.market.running_guests(), 1, "only w0's machine runs");
    assert_all(&env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_at_any_instant_while_deleting_nothing_is_left_and_every_machine_is_released() {
    let mut env = Env::start().await;
    let (_, a, b) = env.two_joined().await;
    env.clusters(NS)
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    storm(&mut env, 8).await;
    support::invariants::assert_cluster_gone(&env, NS, "c1").await;

    env.requesters()
        .delete("root", &DeleteParams::default())
        .await
        .unwrap();
    storm(&mut env, 4).await;
    env.wait_gone(&env.requesters(), "root").await;

    let history = env.server.history();
    let receipts = receipts_of(&history, None);
    for claim in [&a, &b] {
        let entry = api::names::entry_name(&claim.uid().unwrap());
        let contract = api::names::compute_contract_name(&api::names::infra_name(NS, "c1"), &entry);
        assert!(
            env.market.release_calls(&receipts[&contract]) >= 1,
            "{contract}: released"
        );
        assert_eq!(
            env.market
                .rfps_published(&ContractKey::new(CONTRACT_NS, &contract)),
            1
        );
    }
    assert_eq!(env.market.running_guests(), 0);
    support::invariants::deleted_only_when_released(&history);
    support::invariants::writers_are_exclusive(&history);
    support::invariants::assert_quiet(&env).await;
}
