//! The crate's integration tests, one module per file, linked into one test
//! binary: every binary links the whole workspace (~130 MB in debug), and one
//! per file filled CI's disk. nextest still runs each test in its own process.
//! A new test file is a `mod` line here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod atproto_faults;
mod atproto_flow;
mod atproto_health;
mod atproto_inbound;
mod atproto_restart;
mod atproto_support;
mod local_market;
mod properties;
