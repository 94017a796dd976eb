//! The crate's integration tests, one module per file, linked into one test
//! binary: every binary links the whole workspace (~130 MB in debug), and one
//! per file filled CI's disk. nextest still runs each test in its own process.
//! A new test file is a `mod` line here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod contract_finalizer_e2e;
mod infra_decide;
mod infra_decide_hand;
mod infra_decide_props;
mod infra_e2e;
mod infra_faults_e2e;
mod infra_pace;
mod infra_release_e2e;
mod infra_restart;
mod infra_support;
mod nodeclaim_decide;
mod nodeclaim_e2e;
mod nodeclaim_e2e_adopt;
mod nodeclaim_e2e_hand;
mod nodeclaim_e2e_restart;
mod nodeclaim_e2e_stale;
mod nodeclaim_e2e_support;
mod nodeclaim_graces;
mod nodeclaim_root;
mod nodeclaim_support;
mod record_decide;
mod record_e2e;
mod record_real_pds;
mod record_restart;
mod record_support;
mod requester_e2e;
mod requester_restart;
mod requester_support;
mod write_e2e;
