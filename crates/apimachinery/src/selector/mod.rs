//! Label and field selectors as the kube-apiserver parses and evaluates them
//! (k8s.io/apimachinery `pkg/labels/selector.go` and `pkg/fields/selector.go`).

mod fields;
mod labels;
pub mod validation;

pub use fields::{FieldRequirement, FieldSelector};
pub use labels::{LabelRequirement, LabelSelector, Operator};

/// A selector string the real server would reject. The `Display` text is the real
/// parser's message, so the server can put it in a 400 `BadRequest` Status unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The label selector does not follow the grammar or names an invalid key or value.
    #[error("{0}")]
    Label(String),
    /// The field selector has a term without an operator or a bad escape.
    #[error("{0}")]
    Field(String),
}

#[cfg(test)]
mod tests;
