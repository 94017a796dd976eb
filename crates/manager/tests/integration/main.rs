//! The crate's integration tests, one module per file, linked into one test
//! binary: every binary links the whole workspace (~130 MB in debug), and one
//! per file filled CI's disk. nextest still runs each test in its own process.
//! A new test file is a `mod` line here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod acceptance;
mod api_client;
mod atproto_acceptance;
mod atproto_requester;
mod atproto_restarts;
mod chaos;
mod chaos_support;
mod demo;
mod dev_atproto;
mod examples_flow;
mod graces;
mod helm_chart;
mod http_endpoints;
mod leader_fencing;
mod leader_lease;
mod production;
mod production_support;
mod rbac;
mod restart_storm;
mod secret_logs;
mod signals;
mod support;
mod undecodable_objects;
