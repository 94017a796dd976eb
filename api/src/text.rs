//! [`Text`]: an immutable string that clones by reference, and [`intern`],
//! which makes equal short texts share one allocation.
//!
//! The manager caches every contract and claim (10,000 of each at scale), and
//! each repeats the same condition types and reasons; a `String` per copy
//! was a heap allocation and 24 bytes each (plan 0017). Its JSON and schema
//! are a string's.
//!
//! # Why our own
//! `smol_str` keeps strings of up to 23 bytes inline, but in 24 bytes, and
//! the label keys (`infra.socialweb.computer/contract`) are longer; the
//! interning crates (`internment`, `lasso`) keep every text they ever saw,
//! and these come from the API server, where anyone who can write a status
//! or a label can send new ones. An `Arc<str>` and a table that stops
//! growing at 1,024 texts are a few lines.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use schemars::JsonSchema;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};

/// An immutable, cheaply cloned string: a condition's type, reason or message.
/// Compares with `&str` and `String`, reads as a `&str`.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Text(Arc<str>);

impl Text {
    /// The text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether two texts share one allocation (equal texts need not).
    #[must_use]
    pub fn shares(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Text {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Self(text.into())
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Self(text.into())
    }
}

impl From<&String> for Text {
    fn from(text: &String) -> Self {
        Self(text.as_str().into())
    }
}

impl From<Text> for String {
    fn from(text: Text) -> Self {
        text.0.as_ref().to_owned()
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        **self == *other.0
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        *self == *other.0
    }
}

impl PartialEq<Text> for String {
    fn eq(&self, other: &Text) -> bool {
        **self == *other.0
    }
}

impl JsonSchema for Text {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        String::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }
}

/// Texts the process-wide table keeps at most: far more than the types and
/// reasons of every controller, so a server that sends texts of its own (a
/// condition written by hand) cannot grow it without bound.
const MOST_INTERNED: usize = 1024;
/// Longer texts are not interned: types and reasons are short words.
const LONGEST_INTERNED: usize = 64;

/// A bounded table of shared texts.
#[derive(Debug)]
struct Interner {
    texts: HashSet<Text>,
    most: usize,
}

impl Interner {
    fn intern(&mut self, text: &str) -> Text {
        if text.len() > LONGEST_INTERNED {
            return text.into();
        }
        if let Some(shared) = self.texts.get(text) {
            return shared.clone();
        }
        let shared = Text::from(text);
        if self.texts.len() < self.most {
            self.texts.insert(shared.clone());
        }
        shared
    }
}

static INTERNED: LazyLock<Mutex<Interner>> = LazyLock::new(|| {
    Mutex::new(Interner {
        texts: HashSet::new(),
        most: MOST_INTERNED,
    })
});

/// `text` as a shared allocation: the one of an equal text interned before,
/// while the process-wide table has room (at most 1,024 texts,
/// each at most 64 bytes; others are allocated apart).
#[must_use]
pub fn intern(text: &str) -> Text {
    // The table stays consistent whatever panicked while holding it.
    INTERNED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .intern(text)
}

/// Decodes a string as [`intern`] shares it.
pub(crate) fn interned<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Text, D::Error> {
    struct Interned;
    impl Visitor<'_> for Interned {
        type Value = Text;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string")
        }
        fn visit_str<E: de::Error>(self, text: &str) -> Result<Text, E> {
            Ok(intern(text))
        }
    }
    deserializer.deserialize_str(Interned)
}

pub(crate) fn is_empty(text: &Text) -> bool {
    text.is_empty()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn equal_texts_share_one_allocation_until_the_table_is_full() {
        let mut table = Interner {
            texts: HashSet::new(),
            most: 2,
        };
        let ready = table.intern("Ready");
        assert!(ready.shares(&table.intern("Ready")));
        assert!(
            !ready.shares(&Text::from("Ready")),
            "a text made apart is its own"
        );
        let _second = table.intern("Joined");
        let third = table.intern("Failed");
        assert_eq!(third, "Failed");
        assert!(
            !third.shares(&table.intern("Failed")),
            "a full table shares nothing new"
        );
        assert!(
            ready.shares(&table.intern("Ready")),
            "and keeps what it has"
        );
        assert_eq!(table.texts.len(), 2);
    }

    #[test]
    fn long_texts_are_not_interned() {
        let mut table = Interner {
            texts: HashSet::new(),
            most: 10,
        };
        let long = "x".repeat(LONGEST_INTERNED + 1);
        assert!(!table.intern(&long).shares(&table.intern(&long)));
        assert!(table.texts.is_empty());
    }

    #[test]
    fn decoding_interns_through_the_process_wide_table() {
        #[derive(Deserialize)]
        struct Reason(#[serde(deserialize_with = "interned")] Text);
        let a: Reason = serde_json::from_str(r#""NodeJoined""#).unwrap();
        let b: Reason = serde_json::from_str(r#""NodeJoined""#).unwrap();
        assert!(a.0.shares(&b.0));
        // An escaped string decodes through the same visitor.
        let c: Reason = serde_json::from_str(r#""Node\u004Aoined""#).unwrap();
        assert_eq!(c.0, "NodeJoined");
        assert!(a.0.shares(&c.0));
    }

    proptest! {
        #[test]
        fn it_is_a_string_in_json_and_compares_as_one(text in ".{0,80}") {
            let shared = Text::from(text.as_str());
            let json = serde_json::to_string(&shared).unwrap();
            prop_assert_eq!(&json, &serde_json::to_string(&text).unwrap());
            let back: Text = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&back, &text);
            prop_assert_eq!(back.as_str(), text.as_str());
            prop_assert_eq!(String::from(intern(&text)), text);
        }
    }
}
