//! The field paths of the schema walks, built as a chain of borrowed steps and rendered
//! only when an error or a pruned field names them (plan 0016 C3: building every step's
//! path with `format!` was about 4 % of the API server's samples, on values that are
//! almost always valid).
//!
//! A path renders exactly as the walks' strings did: `parent.key` (just `key` under an
//! empty parent), `parent[key]`, `parent[i]`.

use std::fmt;

/// A path from the walk's root, borrowed from the walk's stack.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Path<'a> {
    /// A path given as text (the root's is empty).
    Text(&'a str),
    /// `parent.key`, or `key` when the parent renders empty.
    Field(&'a Path<'a>, &'a str),
    /// `parent[key]`
    Key(&'a Path<'a>, &'a str),
    /// `parent[i]`
    Index(&'a Path<'a>, usize),
}

impl<'a> Path<'a> {
    /// The empty path of a walk's root.
    pub(crate) const ROOT: Path<'static> = Path::Text("");

    /// `self.key` (`key` under an empty path).
    pub(crate) fn field(&'a self, key: &'a str) -> Self {
        Path::Field(self, key)
    }

    /// `self[key]`
    pub(crate) fn key(&'a self, key: &'a str) -> Self {
        Path::Key(self, key)
    }

    /// `self[i]`
    pub(crate) fn index(&'a self, position: usize) -> Self {
        Path::Index(self, position)
    }

    /// Whether the path renders as the empty string.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Path::Text(text) => text.is_empty(),
            Path::Field(parent, key) => key.is_empty() && parent.is_empty(),
            Path::Key(..) | Path::Index(..) => false,
        }
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Text(text) => f.write_str(text),
            Path::Field(parent, key) if parent.is_empty() => f.write_str(key),
            Path::Field(parent, key) => write!(f, "{parent}.{key}"),
            Path::Key(parent, key) => write!(f, "{parent}[{key}]"),
            Path::Index(parent, position) => write!(f, "{parent}[{position}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use proptest::prelude::*;

    use super::*;

    /// One step of a walk.
    #[derive(Debug, Clone)]
    enum Step {
        Field(String),
        Key(String),
        Index(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            "[a-c.]{0,2}".prop_map(Step::Field),
            "[a-c]{0,2}".prop_map(Step::Key),
            (0..12usize).prop_map(Step::Index),
        ]
    }

    /// The string the walks built with `format!` before, step by step.
    fn formatted(start: &str, steps: &[Step]) -> String {
        let mut path = start.to_owned();
        for step in steps {
            path = match step {
                Step::Field(key) if path.is_empty() => key.clone(),
                Step::Field(key) => format!("{path}.{key}"),
                Step::Key(key) => format!("{path}[{key}]"),
                Step::Index(position) => format!("{path}[{position}]"),
            };
        }
        path
    }

    /// The chain for `steps` under `parent`, rendered and checked for emptiness.
    fn chained(parent: &Path<'_>, steps: &[Step]) -> (String, bool) {
        let Some((first, rest)) = steps.split_first() else {
            return (parent.to_string(), parent.is_empty());
        };
        match first {
            Step::Field(key) => chained(&parent.field(key), rest),
            Step::Key(key) => chained(&parent.key(key), rest),
            Step::Index(position) => chained(&parent.index(*position), rest),
        }
    }

    proptest! {
        #[test]
        fn a_chain_renders_as_the_formatted_path(
            start in prop_oneof![Just(String::new()), "[a-c]{1,2}".prop_map(String::from)],
            steps in proptest::collection::vec(step(), 0..6),
        ) {
            let expected = formatted(&start, &steps);
            let (rendered, empty) = chained(&Path::Text(&start), &steps);
            prop_assert_eq!(&rendered, &expected);
            prop_assert_eq!(empty, expected.is_empty());
        }
    }
}
