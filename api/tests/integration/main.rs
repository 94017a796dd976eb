//! The crate's integration tests, one module per file, linked into one test
//! binary: every binary links the whole workspace (~130 MB in debug), and one
//! per file filled CI's disk. nextest still runs each test in its own process.
//! A new test file is a `mod` line here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod examples;
mod mapping;
mod record;
mod types;
