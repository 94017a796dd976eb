//! The socialweb.computer node controller manager.
//!
//! One binary runs the three reconcilers (NodeClaim, Infra, Requester) on one
//! shared cache. `run` talks to a real cluster; `dev` and `demo` start the
//! embedded API server and the local market on this machine.

pub mod api_client;
pub mod cli;
pub mod demo;
pub mod dev;
pub mod dev_atproto;
pub mod fake_market;
pub mod http;
pub mod leader;
pub mod market_port;
pub mod run;
pub mod shutdown;
pub mod telemetry;
pub mod tenant_side;
pub mod tree;
pub mod wiring;
