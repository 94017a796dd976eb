//! Sets of field paths and their FieldsV1 encoding (sigs.k8s.io/structured-merge-diff
//! `fieldpath`).
//!
//! A path is a list of encoded path elements, exactly as FieldsV1 spells them:
//! `f:<field>`, `k:<json object of the list-map keys>`, `v:<json value>` (set member),
//! `i:<index>`. Keeping the encoded form makes sets cheap to order and compare and makes
//! FieldsV1 a direct rendering.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde_json::{Map, Value};

/// One encoded path element, e.g. `f:spec` or `k:{"name":"a"}`.
pub type Element = String;
/// A path from the object root.
pub type FieldPath = Vec<Element>;

/// `f:<name>`
#[must_use]
pub fn field(name: &str) -> Element {
    let mut element = String::with_capacity(name.len() + 2);
    element.push_str("f:");
    element.push_str(name);
    element
}

/// `v:<json>`
#[must_use]
pub fn set_value(value: &Value) -> Element {
    format!("v:{}", canonical_json(value))
}

/// `k:{...}` from the key fields of a list-map element, keys sorted as Go's encoder does.
#[must_use]
pub fn map_key(keys: &[(&str, &Value)]) -> Element {
    let mut sorted: Vec<&(&str, &Value)> = keys.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut text = String::from("k:{");
    for (index, (name, value)) in sorted.iter().enumerate() {
        if index > 0 {
            text.push(',');
        }
        text.push_str(&Value::String((*name).to_owned()).to_string());
        text.push(':');
        text.push_str(&canonical_json(value));
    }
    text.push('}');
    text
}

/// `i:<index>`, for list elements that have no key.
#[must_use]
pub fn index(position: usize) -> Element {
    format!("i:{position}")
}

/// JSON with object keys sorted whatever serde_json's map ordering feature says.
fn canonical_json(value: &Value) -> String {
    match value {
        Value::Object(members) => {
            let mut keys: Vec<&String> = members.keys().collect();
            keys.sort();
            let mut text = String::from("{");
            for (position, key) in keys.iter().enumerate() {
                if position > 0 {
                    text.push(',');
                }
                text.push_str(&Value::String((*key).clone()).to_string());
                text.push(':');
                text.push_str(&canonical_json(&members[*key]));
            }
            text.push('}');
            text
        }
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(canonical_json).collect();
            format!("[{}]", parts.join(","))
        }
        scalar => scalar.to_string(),
    }
}

/// A path in the real server's human form: `.spec.contracts[name="a"].port`,
/// `.metadata.finalizers[="x"]`.
#[must_use]
pub fn display_path(path: &[Element]) -> String {
    let mut text = String::new();
    for element in path {
        if let Some(name) = element.strip_prefix("f:") {
            text.push('.');
            text.push_str(name);
        } else if let Some(keys) = element.strip_prefix("k:") {
            let parsed: Option<Map<String, Value>> = serde_json::from_str(keys).ok();
            match parsed {
                Some(members) => {
                    let mut names: Vec<&String> = members.keys().collect();
                    names.sort();
                    let parts: Vec<String> = names
                        .iter()
                        .map(|name| format!("{name}={}", canonical_json(&members[*name])))
                        .collect();
                    let _ = write!(text, "[{}]", parts.join(","));
                }
                None => {
                    let _ = write!(text, "[{keys}]");
                }
            }
        } else if let Some(value) = element.strip_prefix("v:") {
            let _ = write!(text, "[={value}]");
        } else if let Some(position) = element.strip_prefix("i:") {
            let _ = write!(text, "[{position}]");
        } else {
            text.push_str(element);
        }
    }
    text
}

/// A set of field paths. A path in the set owns that node; ancestors are implied
/// containers, not members, unless inserted themselves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    paths: BTreeSet<FieldPath>,
}

impl FieldSet {
    /// The empty set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a path (the root path is never a member).
    pub fn insert(&mut self, path: FieldPath) {
        if !path.is_empty() {
            self.paths.insert(path);
        }
    }

    /// The set of `paths` (root paths left out, duplicates once), built in one go: a walk
    /// finds its paths in order, and inserting each into the tree searched it from the
    /// root, comparing its long shared prefixes element by element again (plan 0016 C3:
    /// those inserts were about 2 % of the API server's samples). `BTreeSet`'s
    /// `FromIterator` sorts (one pass over paths already in order) and builds the tree
    /// without a search per path.
    #[must_use]
    pub fn from_paths(paths: Vec<FieldPath>) -> Self {
        Self {
            paths: paths.into_iter().filter(|path| !path.is_empty()).collect(),
        }
    }

    /// Whether the path itself is a member.
    #[must_use]
    pub fn contains(&self, path: &[Element]) -> bool {
        self.paths.contains(path)
    }

    /// Whether some member lies strictly below `path`.
    #[must_use]
    pub fn has_descendant(&self, path: &[Element]) -> bool {
        self.paths
            .range(path.to_vec()..)
            .find(|member| member.as_slice() != path)
            .is_some_and(|member| member.starts_with(path))
    }

    /// No member at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Number of member paths.
    #[must_use]
    pub fn len(&self) -> usize {
        self.paths.len()
    }

    /// The member paths, in order.
    pub fn iter(&self) -> impl Iterator<Item = &FieldPath> {
        self.paths.iter()
    }

    /// Members of either.
    #[must_use]
    pub fn union(&self, other: &Self) -> Self {
        Self {
            paths: self.paths.union(&other.paths).cloned().collect(),
        }
    }

    /// Adds the members of `other`, moved in (as `union`, without copying either set).
    pub fn insert_all(&mut self, other: Self) {
        if self.paths.len() < other.paths.len() {
            let mut other = other;
            std::mem::swap(&mut self.paths, &mut other.paths);
            self.paths.extend(other.paths);
        } else {
            self.paths.extend(other.paths);
        }
    }

    /// Members of `self` not in `other`.
    #[must_use]
    pub fn difference(&self, other: &Self) -> Self {
        Self {
            paths: self.paths.difference(&other.paths).cloned().collect(),
        }
    }

    /// Removes the members of `other` in place (as `difference`, without building a new
    /// set: the sets removed are usually the few fields one write changed).
    pub fn remove_all(&mut self, other: &Self) {
        if other.paths.len() < self.paths.len() {
            for path in &other.paths {
                self.paths.remove(path);
            }
        } else {
            self.paths.retain(|path| !other.paths.contains(path));
        }
    }

    /// Members of both.
    #[must_use]
    pub fn intersection(&self, other: &Self) -> Self {
        Self {
            paths: self.paths.intersection(&other.paths).cloned().collect(),
        }
    }

    /// The FieldsV1 rendering: one nested object per element, `{}` for a member
    /// without members below it, `".": {}` for a member with members below it.
    #[must_use]
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Node::default();
        for path in &self.paths {
            let mut node = &mut root;
            for element in path {
                node = node.children.entry(element.clone()).or_default();
            }
            node.member = true;
        }
        root.render()
    }

    /// Reads FieldsV1. Anything that is not an object of objects is ignored rather than
    /// failing, like a lenient decoder: the server validates what clients send elsewhere.
    #[must_use]
    pub fn from_fields_v1(fields: &Value) -> Self {
        let mut paths = Vec::new();
        let mut path = Vec::new();
        collect(fields, &mut path, &mut paths);
        Self::from_paths(paths)
    }
}

/// A FieldsV1 node under construction.
#[derive(Default)]
struct Node {
    member: bool,
    children: std::collections::BTreeMap<Element, Node>,
}

impl Node {
    fn render(&self) -> Value {
        let mut rendered = Map::new();
        if self.member && !self.children.is_empty() {
            rendered.insert(".".to_owned(), Value::Object(Map::new()));
        }
        for (element, child) in &self.children {
            rendered.insert(element.clone(), child.render());
        }
        Value::Object(rendered)
    }
}

fn collect(node: &Value, path: &mut FieldPath, paths: &mut Vec<FieldPath>) {
    let Value::Object(children) = node else {
        return;
    };
    if children.is_empty() || children.contains_key(".") {
        paths.push(path.clone());
    }
    for (element, child) in children {
        if element == "." {
            continue;
        }
        path.push(element.clone());
        collect(child, path, paths);
        path.pop();
    }
}

impl FromIterator<FieldPath> for FieldSet {
    fn from_iter<T: IntoIterator<Item = FieldPath>>(iter: T) -> Self {
        let mut set = Self::new();
        for path in iter {
            set.insert(path);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(paths: &[&[&str]]) -> FieldSet {
        paths
            .iter()
            .map(|path| path.iter().map(|e| (*e).to_owned()).collect::<FieldPath>())
            .collect()
    }

    #[test]
    fn remove_all_is_difference_in_place_whichever_set_is_larger() {
        let large = set(&[&["f:a"], &["f:b"], &["f:b", "f:c"], &["f:d"]]);
        for other in [
            set(&[&["f:b", "f:c"]]),
            set(&[&["f:a"], &["f:b"], &["f:x"], &["f:y"], &["f:z"]]),
            FieldSet::new(),
        ] {
            let mut in_place = large.clone();
            in_place.remove_all(&other);
            assert_eq!(in_place, large.difference(&other));
        }
    }

    #[test]
    fn from_paths_is_the_set_of_paths_inserted_one_by_one() {
        let paths: Vec<FieldPath> = [
            &["f:b"][..],
            &[],
            &["f:a", "f:c"],
            &["f:a"],
            &["f:b"],
            &["k:{\"x\":1}", "f:y"],
        ]
        .iter()
        .map(|path| path.iter().map(|e| (*e).to_owned()).collect())
        .collect();
        let one_by_one: FieldSet = paths.clone().into_iter().collect();
        assert_eq!(FieldSet::from_paths(paths), one_by_one);
        assert_eq!(one_by_one.len(), 4);
    }

    proptest::proptest! {
        /// Any paths, in any order, with duplicates and root paths: the set built in one
        /// go is the set inserted path by path.
        #[test]
        fn from_paths_answers_as_inserting_each(
            paths in proptest::collection::vec(
                proptest::collection::vec("(f:[ab]{0,2}|k:[ab]|\\.)", 0..4),
                0..24,
            )
        ) {
            let one_by_one: FieldSet = paths.clone().into_iter().collect();
            proptest::prop_assert_eq!(FieldSet::from_paths(paths), one_by_one);
        }
    }

    #[test]
    fn field_is_the_encoded_element() {
        assert_eq!(field("spec"), "f:spec");
        assert_eq!(field(""), "f:");
    }
}
