//! What `kubectl explain` prints for a list field reads as one text: kubectl
//! prints the field's description and then its items' description, so the
//! two must not say the same thing twice (`kubectl explain infra.spec.nodes`
//! printed two versions of one sentence: issue 10, item 13).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray,
};

/// The lower-case words of `text`, punctuation dropped.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Every run of three words in `text`.
fn phrases(text: &str) -> BTreeSet<String> {
    words(text).windows(3).map(|w| w.join(" ")).collect()
}

/// `<path>: <phrase>` for every list field whose description and items'
/// description share a phrase of three words.
fn repeats(path: &str, node: &JSONSchemaProps, found: &mut Vec<String>) {
    for (name, child) in node.properties.iter().flatten() {
        repeats(&format!("{path}.{name}"), child, found);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &node.items {
        if let (Some(field), Some(item)) = (&node.description, &items.description) {
            for phrase in phrases(field).intersection(&phrases(item)) {
                found.push(format!("{path}: {phrase:?}"));
            }
        }
        repeats(&format!("{path}[]"), items, found);
    }
}

#[test]
fn a_list_field_and_its_items_say_different_things() {
    let mut found = Vec::new();
    for crd in api::crds() {
        let root = crd.spec.versions[0]
            .schema
            .clone()
            .unwrap()
            .open_api_v3_schema
            .unwrap();
        repeats(&crd.spec.names.kind, &root, &mut found);
    }
    assert!(
        found.is_empty(),
        "said twice by kubectl explain: {found:#?}"
    );
}

#[test]
fn the_check_sees_a_repeated_phrase() {
    let list = JSONSchemaProps {
        description: Some("Per entry: what only a node has. Never published.".into()),
        items: Some(JSONSchemaPropsOrArray::Schema(Box::new(JSONSchemaProps {
            description: Some("What only a Cluster node has.".into()),
            ..JSONSchemaProps::default()
        }))),
        ..JSONSchemaProps::default()
    };
    let mut found = Vec::new();
    repeats("x", &list, &mut found);
    assert_eq!(found, [r#"x: "what only a""#]);
}
