//! The standard atproto half of the compute market, without Kubernetes: what
//! the market adapter, the fake bidders and the record controller use to
//! speak atproto.
//!
//! - [`did`]: DID documents (`#atproto`, `#attestation` keys; `#atproto_pds`,
//!   `#pdr_temp_market`, `#pdr_temp_compute_event` services) and
//!   [`DidResolver`] (did:plc through a configured PLC URL, did:web).
//! - [`xrpc`]: [`XrpcClient`], queries and procedures with a timeout, errors
//!   read from the `{error, message}` body.
//! - [`pds`]: [`PdsClient`], a session on an existing PDS (app password,
//!   refresh), `getServiceAuth`, and the repository methods; public reads
//!   (`getRecord`, `listRecords`) on any PDS through [`XrpcClient`].
//! - [`jwt`]: service-auth JWTs, issued (ES256K, ES256) and verified with the
//!   receiver's checks of MARKET.md section 4.
//! - [`attest`]: the market's inline attestation signatures and the
//!   receipt's binding CID; [`data`]: the atproto data model and CIDs;
//!   [`keys`]: secp256k1/P-256 keys and did:key; [`tid`]: record keys;
//!   [`market`]: the compute market's NSIDs and shared record conventions.
//!
//! # Expected flow (a requester)
//! 1. `PdsClient::login(handle_or_did, app_password)`.
//! 2. Build a record (with `$type`), [`attest::sign_record`] it with the
//!    attestation key for our DID, then `put_record` on a TID rkey.
//! 3. Resolve a bidder: [`DidResolver::resolve`], then
//!    [`DidDocument::pds`] to read its records, or [`did::resolve_service`] for
//!    a `did#service` endpoint.
//! 4. Call it: `PdsClient::service_auth(aud, lxm)` for a JWT
//!    ([`jwt::audience_for_url`] gives `aud`), then [`XrpcClient::procedure`]
//!    with [`Auth::Bearer`].
//! 5. Receiving a call: [`jwt::decode`], resolve `iss`, [`jwt::verify`] with
//!    its `#atproto` key, then [`jwt::check_issuer_is_author`] on the record
//!    named, then fetch it and [`attest::verify_record`].
//!
//! # Guarantees
//! - [`attest`] reproduces every signed record of the reference market's
//!   recorded run byte for byte (`tests/vectors.rs`).
//! - Signatures are low-S on both curves, and high-S is rejected.
//! - No secret reaches a `Debug` output or an error message: app passwords,
//!   access/refresh/service JWTs and private keys travel as [`Secret`] or
//!   [`SigningKey`], both redacted, and no error formats a request.
//! - Every network call has a timeout; the clock of JWT checks is passed in.
//!
//! # Errors
//! One [`Error`] enum: [`Error::RecordNotFound`] is typed (a PDS's
//! `RecordNotFound`, unknown repository or 404), [`Error::is_retryable`]
//! (transport, 5xx, 429) and [`Error::is_auth`] (401, expired or invalid
//! token) say what a caller can do. A 401 from a receiver is
//! [`Error::Unauthorized`], a 403 [`Error::Forbidden`].

pub mod attest;
pub mod data;
pub mod did;
mod error;
pub mod jwt;
pub mod keys;
pub mod market;
pub mod pds;
mod secret;
pub mod tid;
mod uri;
pub mod xrpc;

pub use did::{DidDocument, DidResolver};
pub use error::{Error, Result};
pub use keys::{Algorithm, PublicKey, SigningKey};
pub use pds::{PdsClient, Record, RecordPage, SessionInfo};
pub use secret::Secret;
pub use tid::{Tid, TidGenerator};
pub use uri::{AtUri, StrongRef};
pub use xrpc::{Auth, XrpcClient};
