//! A name the caches keep only when it is not the one derived from another
//! (a join Secret's from its entry, a contract's from its Infra and entry,
//! a node's from its claim and entry): derived names are most of them, and
//! each kept copy was a string of its own.
//!
//! # Guarantees
//! - [`name_or`] of [`unless_derived`]`(name, derived)`, given the same
//!   derivation, is `name`.

/// A name as kept: `None` when it is the derived one.
pub(crate) type DerivedName = Option<Box<str>>;

/// `name` as kept: `None` when it is `derived`.
pub(crate) fn unless_derived(name: String, derived: &str) -> DerivedName {
    (name != derived).then(|| name.into_boxed_str())
}

/// The name `kept` stands for: the one `derive` makes when it was derived.
pub(crate) fn name_or(kept: &DerivedName, derive: impl FnOnce() -> String) -> String {
    kept.as_deref().map_or_else(derive, str::to_owned)
}
