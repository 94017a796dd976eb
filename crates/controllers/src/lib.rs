//! The reconcilers of the socialweb.computer node controller manager.
//!
//! - [`infra`]: the ONLY writer of ComputeContract spec; composes one
//!   ComputeContract per Infra contract entry and runs the release finalizer.
//! - [`requester`]: runs each ComputeContract against the market and writes
//!   its status; the Requester object's finalizer keeps the root delete order.
//! - [`nodeclaim`]: composes all NodeClaims of a Cluster into one Infra and
//!   keeps the join secrets, the grant, adoption and the graces.
//! - [`record`]: publishes each Infra's declaration as an atproto record in
//!   its Requester's repository (AtprotoRecord status, putRecord, deleteRecord).
//!
//! Every reconciler reads one shared cache ([`cache::SharedCaches`]) and never
//! lists from the API server; each is a pure `decide` step and a thin `act` step.

pub mod admission;
pub mod cache;
pub mod error;
pub mod event_recorder;
pub mod infra;
pub mod market_adapter;
pub mod message;
pub mod metrics;
pub mod nodeclaim;
pub mod object_uid;
pub mod own_writes;
pub mod reconciler;
pub mod record;
pub mod requester;
pub mod status_pace;
pub mod stop;
pub mod time;
pub mod write;

pub use cache::{CacheReadiness, Shared, SharedCaches};
pub use error::{Error, Result};
pub use stop::StopSignal;
pub use time::{Clock, ManualClock, SystemClock};
