//! Label and field selectors (from `apimachinery::selector`).

pub use apimachinery::selector::{FieldSelector, LabelSelector};
