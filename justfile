# Developer recipes. CI does not need `just`: see .ci/run.

# List the recipes.
default:
    @just --list

# Render the CRDs of the api crate into deploy/crds.
generate:
    cargo run -p xtask -- generate

# Run every test of the workspace.
test:
    cargo test --workspace --doc
    cargo nextest run --workspace

# Format check and clippy with warnings as errors.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# Run the manager against the embedded API server for development (arrives with the controllers).
dev:
    cargo run -p manager -- dev

# Run the end-to-end demo: a Cluster with NodeClaims on the local market (arrives with the controllers).
demo:
    cargo run -p manager -- demo

# Every benchmark, in release: the embedded API server, then the controllers on it: one life of
# 100 nodes, the manager alone in its process (memory), throughput (100 Clusters of 10, then one
# Cluster of 1,000), latency, the curve to 3,000 nodes,
# the manager's memory after a restart on 10,000 nodes, and what one cached object of each kind weighs.
bench:
    cargo run --release -p apiserver --example bench_apiserver
    cargo run --release -p manager --example bench_scale
    cargo run --release -p manager --example bench_scale -- --external --clusters 100 --nodes 10
    cargo run --release -p manager --example bench_scale -- --throughput
    cargo run --release -p manager --example bench_scale -- --throughput --external --clusters 1 --nodes 1000
    cargo run --release -p manager --example bench_scale -- --latency
    cargo run --release -p manager --example bench_scale -- --curve
    cargo run --release -p manager --example bench_scale -- --restart --external
    cargo run --release -p controllers --example cache_weight

# Everything CI checks.
ci:
    .ci/run

# Benchmark the embedded API server: creates/s (memory, fsynced), watch fan-out, memory per object.
bench-apiserver *ARGS:
    cargo run --release -p apiserver --example bench_apiserver -- {{ARGS}}

# Benchmark the controllers: N Clusters x M NodeClaims up to Joined, idle, and down to zero; writes, reconciles,
# CPU per node (--curve, --throughput, --latency, --external: see the example's docs).
bench-scale *ARGS:
    cargo run --release -p manager --example bench_scale -- {{ARGS}}

# The long chaos scenario: claims 0 -> 200 -> 50 -> 0 under API faults, compactions and SIGKILLs of the manager and the API server; prints its figures.
chaos:
    cargo nextest run --workspace --run-ignored only -E 'binary(integration) & test(chaos_long)' --no-capture
