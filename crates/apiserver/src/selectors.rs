//! Label and field selectors (the boundary to `apimachinery::selector`).

pub use crate::compat::{FieldSelector, LabelSelector};
