//! Two texts in one allocation, for a kept object whose two texts are
//! always read together: `<tag><length of the first>:<first><second>`.
//!
//! A kept object's size class counts (plan 0018 R7): two boxed texts take 32
//! bytes inline and two allocations, one packed text 16 and one. The length
//! prefix reads back whatever the texts hold, `:` included.

/// `first` and `second` packed behind `tag`, which the reader strips before
/// [`unpack`].
pub(super) fn pack(tag: &str, first: &str, second: &str) -> Box<str> {
    format!("{tag}{}:{first}{second}", first.len()).into_boxed_str()
}

/// The two texts of what [`pack`] made, its tag already stripped.
pub(super) fn unpack(packed: &str) -> (&str, &str) {
    let (length, texts) = packed.split_once(':').unwrap_or(("0", packed));
    // Made by `pack`: the prefix is the first text's length, at a char boundary.
    texts
        .split_at_checked(length.parse().unwrap_or(0))
        .unwrap_or(("", texts))
}
