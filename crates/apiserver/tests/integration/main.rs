//! The crate's integration tests, one module per file, linked into one test
//! binary: every binary links the whole workspace (~130 MB in debug), and one
//! per file filled CI's disk. nextest still runs each test in its own process.
//! A new test file is a `mod` line here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod access;
mod clients;
mod controller;
mod debug_endpoints;
mod durability_kill;
mod helm;
mod kubectl;
mod kubectl_apply;
mod kubectl_auth;
mod kubectl_builtins;
mod kubectl_lifecycle;
mod kubectl_smoke;
mod on_disk;
mod protobuf_messages;
mod protocol;
mod reviews;
mod smoke;
mod support;
