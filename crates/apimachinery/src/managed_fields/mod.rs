//! Managed fields.
