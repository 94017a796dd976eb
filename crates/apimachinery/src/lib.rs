//! The pure half of the embedded Kubernetes API server, after k8s.io/apimachinery and
//! sigs.k8s.io/structured-merge-diff: label and field selectors, JSON merge patch and
//! JSON patch, and server-side apply's managed fields.
//!
//! Nothing here does I/O or async work: `serde_json::Value` goes in, `serde_json::Value`
//! comes out. Each behaviour copies the real server's (including its error messages),
//! because a controller that passes against our server must not fail on a real one.
//!
//! | Request                                   | Call                                        | Error answer |
//! |-------------------------------------------|---------------------------------------------|--------------|
//! | `?labelSelector=`                         | [`selector::LabelSelector::parse`]          | 400 BadRequest, the error's text |
//! | `?fieldSelector=`                         | [`selector::FieldSelector::parse`]          | 400 BadRequest |
//! | `PATCH application/merge-patch+json`      | [`patch::check_merge_patch`], [`patch::merge_patch`], then [`managed_fields::update`] | 400 `Invalid JSON Patch` |
//! | `PATCH application/json-patch+json`       | [`patch::json_patch`], then [`managed_fields::update`]  | 400 if [`patch::PatchError::is_bad_request`], else 422 |
//! | `PATCH application/apply-patch+yaml`      | [`managed_fields::apply`]                   | 409 Conflict with causes, or 400 |
//! | create, replace                           | [`managed_fields::update`]                  | - |
//! | object and label key/value names          | [`selector::validation`]                    | 422 Invalid |

pub mod managed_fields;
pub mod patch;
pub mod selector;
