//! The Infra controller: the ONLY writer of ComputeContract spec.
//!
//! For each entry of an Infra's `spec.contracts` it server-side applies the
//! ComputeContract `<infra>-<entry>` (field manager `socialweb/infra`, forced),
//! releases and then deletes contracts that no longer match an entry, and on
//! Infra deletion runs the release finalizer in the plan 0028 order. The
//! decision is pure ([`decide`]); writing it is the controller's thin `act` step.

pub mod conditions;
pub mod decide;
pub mod events;
