//! `--restart`: the manager's memory with a Joined fleet, before and after
//! its process is killed and started again on the same fleet.
//!
//! After a scale-up the manager's resident memory holds the fleet and what
//! the allocator kept of the scale-up's churn (pages that a few live objects
//! still pin); a manager started on a fleet that already exists (a restart,
//! a new leader) lists it once. The two figures side by side tell how much
//! of the first is the fleet itself.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::fleet::{self, Tracker};
use crate::probe;
use crate::report::{MANAGER_RSS_TARGET_MIB, mib, resident_split};
use crate::world::{World, WorldOptions};
use crate::{settle, writes_taken};

/// How long the manager idles before its memory is read, each time.
const IDLE: Duration = Duration::from_secs(10);
/// The contracts waiting for the Requester's window (crate controllers' admission).
const WAITING: &str = r#"socialweb_reconcile_waiting{controller="requester"}"#;
/// How long the restarted manager may take to work through its contracts.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(300);

/// Scales `clusters` x `nodes` up to Joined, reads the manager's VmRSS,
/// restarts it and reads it again once it settled; the fleet is left as it
/// is (the server and the manager end with the benchmark).
pub async fn memory_after_restart(
    clusters: usize,
    nodes: usize,
    external: bool,
) -> anyhow::Result<()> {
    if !external {
        bail!("--restart reads the manager's own memory: run it with --external");
    }
    let total = clusters * nodes;
    let journal = std::env::temp_dir().join(format!("bench-scale-market-{}", std::process::id()));
    std::fs::create_dir_all(&journal).context("create the market's journal directory")?;
    let outcome = async {
        let mut world = World::start(&WorldOptions {
            capacity: total,
            external,
            market_state: Some(journal.clone()),
        })
        .await?;
        let mut tracker = Tracker::start(&world.client, &world.contract_namespace, false).await?;
        let claims = fleet::node_pools(&world.client, "c", clusters, nodes).await?;
        fleet::create_claims(&world.client, &claims).await?;
        tracker
            .wait("every NodeClaim Joined", |t| t.joined == total)
            .await?;
        settle(&world).await;
        tokio::time::sleep(IDLE).await;
        let after_scale_up = world.manager_resident().context("the manager's VmRSS")?;

        world.restart_manager().await?;
        let writes_before = writes_taken(&world);
        let catch_up = caught_up(&mut world, total).await?;
        settle(&world).await;
        tokio::time::sleep(IDLE).await;
        let after_restart = world.manager_resident().context("the manager's VmRSS")?;
        let writes = writes_taken(&world) - writes_before;
        let tally = tracker.tally();
        tracker.stop();
        world.stop().await;
        println!(
            "bench-scale --restart: {total} nodes ({clusters} Clusters x {nodes}), the manager in a process of its own"
        );
        println!(
            "memory:      the manager's VmRSS {:.1} MiB after the scale-up, {:.1} MiB after a restart on the same fleet ({:.2}x; target for both: at most {MANAGER_RSS_TARGET_MIB} MiB)",
            mib(after_scale_up.total),
            mib(after_restart.total),
            after_restart.total as f64 / after_scale_up.total as f64
        );
        println!(
            "  resident, after the scale-up -> after the restart: {}",
            resident_split(after_scale_up, after_restart)
        );
        println!(
            "  peak (VmHWM) of each manager process: {:.1} MiB through the scale-up, {:.1} MiB through the restart",
            mib(after_scale_up.peak),
            mib(after_restart.peak)
        );
        println!(
            "  catch-up: {} contracts at most waiting for the Requester's window, none {:.1} s after the manager was ready",
            catch_up.most_waiting,
            catch_up.took.as_secs_f64()
        );
        println!(
            "restart:     {writes} API writes from the restart to the reading; {} of {total} claims Joined, {} contracts Deployed",
            tally.joined, tally.deployed
        );
        anyhow::Ok(())
    }
    .await;
    let _ = std::fs::remove_dir_all(&journal);
    outcome
}

/// How the restarted manager worked through the contracts its start triggered.
struct CatchUp {
    /// The most contracts seen waiting for the window at once.
    most_waiting: u64,
    /// From the manager ready to none waiting.
    took: Duration,
}

/// Reads the manager's metrics until it reconciled each of the `contracts`
/// once (a start triggers every one) and none waits for the window: the
/// gauge alone reads 0 before the first triggers reach the window.
async fn caught_up(world: &mut World, contracts: usize) -> anyhow::Result<CatchUp> {
    let started = Instant::now();
    let mut most_waiting = 0_u64;
    loop {
        let text = world.metrics_text().await?;
        let waiting = probe::sample(&text, WAITING)
            .with_context(|| format!("the manager exposes no {WAITING}"))?;
        // A gauge of a count: whole and never negative.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let waiting = waiting as u64;
        most_waiting = most_waiting.max(waiting);
        let reconciled = probe::reconciles(&text)
            .get("requester")
            .copied()
            .unwrap_or(0);
        if waiting == 0 && reconciled >= contracts as u64 {
            return Ok(CatchUp {
                most_waiting,
                took: started.elapsed(),
            });
        }
        if started.elapsed() > CATCH_UP_LIMIT {
            bail!(
                "after {CATCH_UP_LIMIT:?} {waiting} contracts still wait for the window, {reconciled} of {contracts} reconciled"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
