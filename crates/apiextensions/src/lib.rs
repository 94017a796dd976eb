//! The pure part of the Kubernetes apiextensions-apiserver for the embedded API server.
//!
//! A CRD version's `openAPIV3Schema` is parsed once into a [`StructuralSchema`] when the CRD
//! is registered (rejecting non-structural schemas and CEL rules that do not compile, with the
//! real server's field paths), and then used on every request the way the real server uses it:
//! [`StructuralSchema::apply_defaults`] (on write and on read),
//! [`StructuralSchema::prune`] (unknown fields, reported for `fieldValidation=Strict|Warn`),
//! [`StructuralSchema::validate`] (OpenAPI value validations, list-type uniqueness and
//! `x-kubernetes-validations` CEL rules with transition rules and ratcheting on update), and
//! [`StructuralSchema::list_type`] for server-side apply. [`printer_column_value`] evaluates
//! `additionalPrinterColumns` JSONPaths for Table output.
//!
//! # Expected flow (what the real server does, in this order)
//!
//! - CRD create/update: [`StructuralSchema::from_value_at`] for each version (path
//!   `spec.versions[i].schema.openAPIV3Schema`), [`validate_status_subresource_root`] when the
//!   version has a status subresource, [`PrinterColumns::from_crd_version`]; any error is a
//!   422 whose message [`FieldError::invalid_status_message`] builds.
//! - Custom resource write: decode, [`StructuralSchema::prune`] (collect unknown paths for
//!   `fieldValidation`), [`StructuralSchema::apply_defaults`], then
//!   [`StructuralSchema::validate`] with the stored (pruned and defaulted) object as `old` on
//!   update; errors make a 422 `Invalid` with causes (`kind.reason()`, `field`, `message`).
//! - Custom resource read: [`StructuralSchema::apply_defaults`] on the stored object.
//! - `kubectl get`: [`PrinterColumns::column_definitions`] and [`PrinterColumns::cells`].
//!
//! Behaviour follows Kubernetes 1.32 (k8s.io/apiextensions-apiserver and apimachinery v0.32,
//! the kube-openapi they vendor): error texts follow apimachinery's `field.Error` and
//! kube-openapi's validation messages, so a client sees here what it would see from a real
//! cluster. No I/O, no async.

mod crd;
mod error;
mod jsonpath;
mod schema;
mod table;

pub use crd::{validate_printer_column, validate_status_subresource_root};
pub use error::{FieldError, FieldErrorKind, SchemaError};
pub use jsonpath::{
    JsonPathError, PrinterColumnPath, human_duration, parse_printer_column_path,
    printer_column_cell, printer_column_value,
};
pub use schema::{ListType, StructuralSchema, UpdatePass};
pub use table::PrinterColumns;
