//! What the Helm chart gives the manager's process, so that the
//! `--external` manager runs as the chart deploys it: the allocator's
//! settings and the worker threads its CPU limit leaves it.

use std::path::Path;

use anyhow::{Context as _, bail};

/// The chart's Deployment template and values, from this crate.
const DEPLOYMENT: &str = "../../deploy/helm/socialweb-manager/templates/deployment.yaml";
const VALUES: &str = "../../deploy/helm/socialweb-manager/values.yaml";

/// The environment the `--external` manager runs with: the chart's
/// `MIMALLOC_` variables, and `TOKIO_WORKER_THREADS` as many as the chart's
/// CPU limit gives (tokio reads the cgroup's quota: 500m is one worker).
/// Each unless this process's environment sets it, to compare.
pub fn manager_env() -> anyhow::Result<Vec<(String, String)>> {
    let mut env = read(DEPLOYMENT).map(|template| allocator_env(&template))?;
    let workers = read(VALUES).and_then(|values| workers_of(&values))?;
    env.push(("TOKIO_WORKER_THREADS".to_owned(), workers.to_string()));
    for (name, value) in &mut env {
        if let Ok(own) = std::env::var(&*name) {
            *value = own;
        }
    }
    Ok(env)
}

fn read(file: &str) -> anyhow::Result<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    std::fs::read_to_string(&path).with_context(|| format!("read the chart's {}", path.display()))
}

/// The `MIMALLOC_` entries of a container's `env` list: a `- name:` line
/// followed by its `value:` line, as the template writes them.
fn allocator_env(template: &str) -> Vec<(String, String)> {
    let mut lines = template.lines().map(str::trim);
    let mut env = Vec::new();
    while let Some(line) = lines.next() {
        let Some(name) = line.strip_prefix("- name: ") else {
            continue;
        };
        if !name.starts_with("MIMALLOC_") {
            continue;
        }
        if let Some(value) = lines.next().and_then(|l| l.strip_prefix("value: ")) {
            env.push((name.to_owned(), value.trim_matches('"').to_owned()));
        }
    }
    env
}

/// The worker threads `resources.limits.cpu` leaves the manager: its whole
/// CPUs, at least one (as Rust's `available_parallelism` reads a quota).
fn workers_of(values: &str) -> anyhow::Result<u64> {
    let mut in_limits = false;
    for line in values.lines() {
        let trimmed = line.trim();
        if trimmed == "limits:" {
            in_limits = true;
        } else if in_limits && let Some(cpu) = trimmed.strip_prefix("cpu: ") {
            let millis = match cpu.strip_suffix('m') {
                Some(millis) => millis.parse::<u64>().ok(),
                None => cpu.parse::<u64>().ok().map(|cpus| cpus * 1000),
            };
            let Some(millis) = millis else {
                bail!("the chart's CPU limit {cpu:?} is not a quantity this benchmark reads");
            };
            return Ok((millis / 1000).max(1));
        }
    }
    bail!("the chart's values set no resources.limits.cpu")
}
