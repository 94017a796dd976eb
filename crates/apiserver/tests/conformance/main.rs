//! Conformance suite of the embedded API server: one test per rule and per trap of
//! APISERVER.md, each asserting what the real kube-apiserver (1.32) answers: status code,
//! Status reason, resourceVersion and generation effects, events seen by a watcher.
//!
//! `RULES.md` (next to this file) lists every rule with its id and the module holding its
//! test; [`every_rule_has_a_test`] keeps the two in step. Tests marked
//! `#[ignore = "GAP: ..."]` are known differences from the real server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod kit;

mod access;
mod crds;
mod finalizers;
mod gc;
mod limits;
mod meta;
mod namespaces;
mod p1;
mod protobuf;
mod reads;
mod selectors;
mod ssa;
mod status;
mod traps;
mod typed;
mod views;
mod watch;
mod workloads;
mod writes;

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The id a test function name starts with: `r<section>_<n>` or `t<nn>`, if any.
fn id_of(function: &str) -> Option<String> {
    let mut parts = function.split('_');
    let first = parts.next()?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(section) = first.strip_prefix('r')
        && digits(section)
    {
        let n = parts.next()?;
        // A rule test has a slug after the id.
        return (digits(n) && parts.next().is_some()).then(|| format!("{first}_{n}"));
    }
    if let Some(n) = first.strip_prefix('t')
        && digits(n)
        && parts.next().is_some()
    {
        return Some(first.to_string());
    }
    None
}

/// The names of the functions defined in a Rust source file.
fn functions(source: &str) -> Vec<String> {
    source
        .split("fn ")
        .skip(1)
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

/// `id -> module` from the tables of RULES.md.
fn listed_rules(rules_md: &str) -> BTreeMap<String, String> {
    rules_md
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            // "| id | text | module |" splits into ["", id, text, module, ""].
            let [_, id, _, module, _] = cells.as_slice() else {
                return None;
            };
            id_of(&format!("{id}_x")).map(|_| (id.to_string(), module.to_string()))
        })
        .collect()
}

#[test]
fn every_rule_has_a_test() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    let rules = listed_rules(&std::fs::read_to_string(dir.join("RULES.md")).unwrap());
    assert!(rules.len() > 80, "RULES.md lists {} rules", rules.len());

    let mut tests: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let module = path.file_stem().unwrap().to_string_lossy().to_string();
        for function in functions(&std::fs::read_to_string(&path).unwrap()) {
            if let Some(id) = id_of(&function) {
                tests
                    .entry(id)
                    .or_default()
                    .push(format!("{module}::{function}"));
            }
        }
    }

    let mut problems = Vec::new();
    for (id, module) in &rules {
        match tests.get(id).map(Vec::as_slice) {
            None | Some([]) => {
                problems.push(format!("{id}: no test named {id}_* (in {module}.rs)"))
            }
            Some([one]) if !one.starts_with(&format!("{module}::")) => {
                problems.push(format!(
                    "{id}: RULES.md says {module}.rs, the test is {one}"
                ));
            }
            Some([_]) => {}
            Some(many) => problems.push(format!("{id}: more than one test: {many:?}")),
        }
    }
    for (id, found) in &tests {
        if !rules.contains_key(id) {
            problems.push(format!(
                "{found:?} names {id}, which RULES.md does not list"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn ids_are_read_from_test_names() {
    assert_eq!(id_of("r1_10_watch_x").as_deref(), Some("r1_10"));
    assert_eq!(id_of("r1_1_list").as_deref(), Some("r1_1"));
    assert_eq!(id_of("t07_bookmarks").as_deref(), Some("t07"));
    assert_eq!(id_of("r1_1"), None, "an id alone is not a test name");
    assert_eq!(id_of("reads_helper"), None);
    assert_eq!(id_of("every_rule_has_a_test"), None);
}
