//! The standard atproto half of the compute market, without Kubernetes.
//!
//! This step holds the pure parts: the atproto data model and CIDs
//! ([`data`]), secp256k1/P-256 keys and did:key ([`keys`]), the market's
//! inline attestation signatures ([`attest`]) and TIDs ([`tid`]). The XRPC
//! client, DID resolution, sessions and service-auth JWTs follow (plan 0007).
//!
//! # Guarantees
//! - [`attest`] reproduces every signed record of the reference market's
//!   recorded run byte for byte (`tests/vectors.rs`).
//! - Signatures are low-S on both curves, and high-S is rejected.
//! - No secret reaches a `Debug` output or an error message: private keys and
//!   passwords travel as [`Secret`] or [`SigningKey`], both redacted.
//!
//! # Errors
//! One [`Error`] enum; [`Error::is_retryable`] says whether trying again can help.

pub mod attest;
pub mod data;
mod error;
pub mod keys;
mod secret;
pub mod tid;

pub use error::{Error, Result};
pub use keys::{Algorithm, PublicKey, SigningKey};
pub use secret::Secret;
pub use tid::{Tid, TidGenerator};
