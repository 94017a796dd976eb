//! Kubernetes write semantics shared by the handlers and the background controllers.

pub mod crd;
pub mod defaults;
pub mod delete;
pub mod events;
pub mod gc;
pub mod meta;
pub mod namespace_conditions;
pub mod prepare;
#[cfg(test)]
mod prepare_status_tests;
pub mod strategic;
