//! The two patch formats a custom resource accepts besides apply: RFC 7386 JSON merge
//! patch and RFC 6902 JSON patch, the latter with the semantics of
//! `gopkg.in/evanphx/json-patch.v4` that the kube-apiserver links.

mod json;
mod merge;

pub use json::{PatchError, json_patch};
pub use merge::{check_merge_patch, diff_merge_patch, merge_patch};

#[cfg(test)]
mod tests;
