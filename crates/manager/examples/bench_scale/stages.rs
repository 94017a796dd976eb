//! Where a claim's time goes on its way to Deployed, read from the server's
//! objects as the driver's watch sees them (never from the controllers'
//! internals): the first time each claim's entry shows in an Infra, its
//! contract exists, bids, has a winner, has a receipt, and is Deployed.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use api::{ComputeContract, ComputeContractPhase as Phase, Infra, names};

use crate::probe::percentile;

/// The steps of a claim after its create, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Its entry is in its Cluster's Infra spec (the NodeClaim controller's apply).
    InfraEntry,
    /// Its ComputeContract exists (the Infra controller's apply).
    ContractCreated,
    /// The contract is Bidding: its bid window is open and its RFP published.
    Bidding,
    /// The cheapest bid is written as the winner, before the acceptance.
    Winner,
    /// The receipt of the accepted bid is recorded (annotation or status).
    Receipt,
    /// The guest is on the network.
    Deployed,
}

impl Stage {
    pub const ALL: [Self; 6] = [
        Self::InfraEntry,
        Self::ContractCreated,
        Self::Bidding,
        Self::Winner,
        Self::Receipt,
        Self::Deployed,
    ];

    const fn label(self) -> &'static str {
        match self {
            Self::InfraEntry => "entry in its Infra",
            Self::ContractCreated => "contract created",
            Self::Bidding => "Bidding (window open)",
            Self::Winner => "winner written",
            Self::Receipt => "receipt recorded",
            Self::Deployed => "Deployed",
        }
    }
}

/// The first time each entry reached each stage.
#[derive(Default)]
pub struct Stages {
    seen: HashMap<String, [Option<Instant>; Stage::ALL.len()]>,
}

impl Stages {
    fn mark(&mut self, entry: &str, stage: Stage, now: Instant) {
        let times = self.seen.entry(entry.to_owned()).or_default();
        // A later stage seen implies the earlier ones (a watch may skip a version).
        for earlier in Stage::ALL.iter().take_while(|s| **s != stage) {
            times[*earlier as usize].get_or_insert(now);
        }
        times[stage as usize].get_or_insert(now);
    }

    /// When `entry` first reached `stage`.
    pub fn reached(&self, entry: &str, stage: Stage) -> Option<Instant> {
        self.seen.get(entry)?[stage as usize]
    }

    /// Records the entries an Infra names.
    pub fn infra(&mut self, infra: &Infra, now: Instant) {
        for entry in &infra.spec.contracts {
            self.mark(&entry.name, Stage::InfraEntry, now);
        }
    }

    /// Records how far a contract (named `<infra>-<entry>`) got.
    pub fn contract(&mut self, entry: &str, contract: &ComputeContract, now: Instant) {
        let status = contract.status.as_ref();
        let phase = status.and_then(|s| s.phase);
        let receipt = status.is_some_and(|s| s.receipt.is_some())
            || contract
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(names::RECEIPT_ANNOTATION));
        let stage = match phase {
            Some(Phase::Deployed) => Stage::Deployed,
            _ if receipt => Stage::Receipt,
            _ if status.is_some_and(|s| s.winner.is_some()) => Stage::Winner,
            Some(Phase::Bidding) => Stage::Bidding,
            _ => Stage::ContractCreated,
        };
        self.mark(entry, stage, now);
    }

    /// One line per stage: claim created -> stage, p50 and p99 over the
    /// claims, and when the last claim reached it (since the first create).
    pub fn print(&self, created: &[(String, Instant)], started: Instant) {
        println!(
            "  stages of the {} claims, first seen by the driver's watch \
             (claim created -> stage p50 / p99; the last claim to reach it, since the first create):",
            created.len()
        );
        let rows = Stage::ALL.map(|stage| {
            (stage.label(), move |entry: &str| {
                self.seen.get(entry).and_then(|t| t[stage as usize])
            })
        });
        print!("{}", rows_text("claim created", created, started, &rows));
    }
}

/// When the last of `started_at` started (since `started`), then one line
/// per row: `started_at` -> when the row's `reached` says, p50 and p99 over
/// the entries, and when the last one got there (since `started`).
pub fn rows_text<F: Fn(&str) -> Option<Instant>>(
    start_label: &str,
    started_at: &[(String, Instant)],
    started: Instant,
    rows: &[(&str, F)],
) -> String {
    let last_started = started_at
        .iter()
        .map(|(_, at)| at.saturating_duration_since(started))
        .max()
        .unwrap_or_default();
    let mut text = format!(
        "    {:<24} {:>9} {:>9} {:>9.2?}\n",
        start_label, "", "", last_started
    );
    for (label, reached) in rows {
        let mut latencies = Vec::with_capacity(started_at.len());
        let mut last = Duration::ZERO;
        let mut missing = 0;
        for (entry, at) in started_at {
            match reached(entry) {
                Some(seen) => {
                    latencies.push(seen.saturating_duration_since(*at));
                    last = last.max(seen.saturating_duration_since(started));
                }
                None => missing += 1,
            }
        }
        let p50 = percentile(&mut latencies, 0.5);
        let p99 = percentile(&mut latencies, 0.99);
        let missing = if missing > 0 {
            format!("  ({missing} never seen)")
        } else {
            String::new()
        };
        text.push_str(&format!(
            "    {label:<24} {p50:>9.2?} {p99:>9.2?} {last:>9.2?}{missing}\n"
        ));
    }
    text
}
