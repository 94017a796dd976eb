//! What the benchmark reads off the machine and the server: CPU time by
//! thread group or process, resident memory, and the write log.

use std::collections::BTreeMap;
use std::time::Duration;

use apiserver::audit::RequestRecord;

/// Linux's USER_HZ: the unit of the CPU times in `/proc/*/stat` (100 on
/// every architecture Linux runs on today).
const TICKS_PER_SECOND: u64 = 100;

/// utime + stime of one `/proc/.../stat` line.
fn stat_cpu(stat: &str) -> Duration {
    // The command name may hold spaces: the fields start after its ')'.
    let Some((_, fields)) = stat.rsplit_once(')') else {
        return Duration::ZERO;
    };
    let fields: Vec<&str> = fields.split_whitespace().collect();
    // After ')': state is field 3 of stat(5), utime field 14, stime field 15.
    let ticks = |index: usize| -> u64 {
        fields
            .get(index - 3)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Duration::from_millis((ticks(14) + ticks(15)) * 1000 / TICKS_PER_SECOND)
}

/// CPU time of this process's threads whose name starts with `prefix`
/// (runtimes name their threads; see `world.rs`).
pub fn threads_cpu(prefix: &str) -> Duration {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|name| name.trim_end().starts_with(prefix))
        })
        .map(|task| {
            stat_cpu(&std::fs::read_to_string(task.path().join("stat")).unwrap_or_default())
        })
        .sum()
}

/// CPU time of process `pid`, every thread of it.
pub fn process_cpu(pid: u32) -> Duration {
    stat_cpu(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default())
}

/// VmRSS of process `pid` (this one for `None`), in KiB.
pub fn resident_kib(pid: Option<u32>) -> u64 {
    resident(pid).total
}

/// A process's resident memory, in KiB, and what it is made of.
#[derive(Clone, Copy, Debug, Default)]
pub struct Resident {
    /// VmRSS.
    pub total: u64,
    /// RssFile: pages of mapped files, the executable's code and read-only
    /// data above all (about 14 MiB of the manager's, whatever it caches).
    pub file: u64,
    /// RssAnon: the heap, the threads' stacks.
    pub anon: u64,
    /// VmHWM: the most VmRSS has been since the process started (what a
    /// container's memory limit must hold).
    pub peak: u64,
}

/// The resident memory of process `pid` (this one for `None`).
pub fn resident(pid: Option<u32>) -> Resident {
    let path = pid.map_or_else(
        || "/proc/self/status".to_owned(),
        |pid| format!("/proc/{pid}/status"),
    );
    let status = std::fs::read_to_string(path).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Resident {
        total: field("VmRSS:"),
        file: field("RssFile:"),
        anon: field("RssAnon:"),
        peak: field("VmHWM:"),
    }
}

/// Reconciles started so far, by controller, read from a text exposition.
pub fn reconciles(exposition: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix("socialweb_reconcile_total{controller=\"") else {
            continue;
        };
        if let Some((controller, value)) = rest.split_once("\"} ") {
            counts.insert(controller.to_owned(), value.trim().parse().unwrap_or(0));
        }
    }
    counts
}

/// The value of one series (`name{label="value"}` as exposed), if it is there.
pub fn sample(exposition: &str, series: &str) -> Option<f64> {
    exposition
        .lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// The manager's writes of a span, by writer, verb and resource.
pub struct Writes {
    /// (writer, verb, resource) -> requests, refused ones included.
    pub by_kind: BTreeMap<(String, String, String), u64>,
    /// Requests answered 409 Conflict.
    pub conflicts: u64,
    /// 409s by who was refused and whose write to the same object came last
    /// before it: (refused writer verb resource, last writer verb resource).
    pub conflicts_after: BTreeMap<(String, String), u64>,
    pub total: u64,
}

/// The object a request addresses: its path without the query and the
/// `/status` subresource (a create addresses its collection).
fn object_of(uri: &str) -> &str {
    let path = uri.split_once('?').map_or(uri, |(path, _)| path);
    path.strip_suffix("/status").unwrap_or(path)
}

fn writer_of(r: &RequestRecord) -> String {
    let writer = if r.field_manager.is_empty() {
        "-"
    } else {
        r.field_manager.as_str()
    };
    format!("{writer} {} {}", r.verb, r.resource)
}

impl Writes {
    /// The writes in `log` not made by `driver` (the benchmark's user agent and field manager).
    pub fn of_manager(log: &[RequestRecord], driver: &str) -> Self {
        let mut by_kind = BTreeMap::new();
        let mut conflicts = 0;
        let mut conflicts_after = BTreeMap::new();
        // The last write to each object that the server took, anyone's.
        let mut last_taken: BTreeMap<&str, &RequestRecord> = BTreeMap::new();
        for r in log {
            let object = object_of(&r.uri);
            let driven = r.user_agent == driver || r.field_manager == driver;
            if r.status == 409 && !driven {
                let before = last_taken
                    .get(object)
                    .map_or_else(|| "(none)".to_owned(), |w| writer_of(w));
                *conflicts_after.entry((writer_of(r), before)).or_default() += 1;
            }
            if (200..300).contains(&r.status) {
                last_taken.insert(object, r);
            }
            if driven {
                continue;
            }
            let writer = if r.field_manager.is_empty() {
                "-".to_owned()
            } else {
                r.field_manager.clone()
            };
            *by_kind
                .entry((writer, r.verb.clone(), r.resource.clone()))
                .or_default() += 1;
            conflicts += u64::from(r.status == 409);
        }
        let total = by_kind.values().sum();
        Self {
            by_kind,
            conflicts,
            conflicts_after,
            total,
        }
    }

    /// One line per writer, verb and resource, per node.
    pub fn print(&self, nodes: usize, indent: &str) {
        let per_node = |n: u64| n as f64 / nodes as f64;
        for ((writer, verb, resource), n) in &self.by_kind {
            println!(
                "{indent}{writer:<22} {verb:<7} {resource:<28} {n:>7}  {:>6.2}/node",
                per_node(*n)
            );
        }
        if !self.conflicts_after.is_empty() {
            println!(
                "{indent}409 Conflicts, by the refused write <- the last write the object took before it:"
            );
        }
        for ((refused, before), n) in &self.conflicts_after {
            println!("{indent}  {n:>6}  {refused:<50} <- {before}");
        }
    }
}

/// `p` (0..=1) of `samples`, by nearest rank.
pub fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    samples.sort_unstable();
    let rank = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1]
}
