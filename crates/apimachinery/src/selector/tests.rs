#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn selects(selector: &str, pairs: &[(&str, &str)]) -> bool {
    LabelSelector::parse(selector)
        .unwrap()
        .matches(&labels(pairs))
}

fn label_error(selector: &str) -> String {
    LabelSelector::parse(selector).unwrap_err().to_string()
}

#[test]
fn empty_selects_everything() {
    let selector = LabelSelector::parse("").unwrap();
    assert!(selector.is_empty());
    assert!(selector.matches(&labels(&[])));
    assert!(LabelSelector::parse("  ").unwrap().is_empty());
}

#[test]
fn exists_and_does_not_exist() {
    assert!(selects("app", &[("app", "")]));
    assert!(!selects("app", &[("other", "x")]));
    assert!(selects("!app", &[("other", "x")]));
    assert!(!selects("!app", &[("app", "x")]));
    assert!(selects(" ! app ", &[]));
}

#[test]
fn equality_forms() {
    assert!(selects("app=web", &[("app", "web")]));
    assert!(selects("app==web", &[("app", "web")]));
    assert!(!selects("app=web", &[("app", "db")]));
    assert!(!selects("app=web", &[]));
    assert!(selects("app = web", &[("app", "web")]));
    // An empty value is a value.
    assert!(selects("app=", &[("app", "")]));
    assert!(!selects("app=", &[]));
}

#[test]
fn inequality_matches_objects_without_the_key() {
    assert!(selects("app!=web", &[]));
    assert!(selects("app!=web", &[("app", "db")]));
    assert!(!selects("app!=web", &[("app", "web")]));
}

#[test]
fn set_forms() {
    assert!(selects("env in (prod,staging)", &[("env", "prod")]));
    assert!(!selects("env in (prod,staging)", &[("env", "dev")]));
    assert!(!selects("env in (prod)", &[]));
    assert!(selects("env notin (prod,staging)", &[("env", "dev")]));
    assert!(selects("env notin (prod,staging)", &[]));
    assert!(!selects("env notin (prod)", &[("env", "prod")]));
    // `in` and `notin` are values in a value position.
    assert!(selects("x in (in,notin)", &[("x", "notin")]));
    // Empty values in sets, as the Go parser reads them.
    assert!(selects("x in ()", &[("x", "")]));
    assert!(selects("x in (a,,b)", &[("x", "")]));
    assert!(selects("x in (,a)", &[("x", "")]));
    assert!(LabelSelector::parse("x in (,,)").is_err());
}

#[test]
fn numeric_comparisons() {
    assert!(selects("n>5", &[("n", "6")]));
    assert!(!selects("n>5", &[("n", "5")]));
    assert!(!selects("n>5", &[("n", "x")]));
    assert!(!selects("n>5", &[]));
    assert!(selects("n<5", &[("n", "-1")]));
    assert_eq!(
        label_error("n>x"),
        "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
}

#[test]
fn requirements_are_anded() {
    let selector = "app=web,tier in (fe),!legacy,env!=prod";
    assert!(selects(selector, &[("app", "web"), ("tier", "fe")]));
    assert!(!selects(
        selector,
        &[("app", "web"), ("tier", "fe"), ("legacy", "1")]
    ));
    assert!(!selects(
        selector,
        &[("app", "web"), ("tier", "fe"), ("env", "prod")]
    ));
    assert!(!selects(selector, &[("app", "web")]));
}

#[test]
fn prefixed_keys() {
    assert!(selects(
        "app.kubernetes.io/name=web",
        &[("app.kubernetes.io/name", "web")]
    ));
}

#[test]
fn canonical_display_sorts_keys_and_values() {
    let selector = LabelSelector::parse("z in (b,a,b), a==x ,!m, k notin (q)").unwrap();
    assert_eq!(selector.to_string(), "a==x,k notin (q),!m,z in (a,b)");
    assert_eq!(selector.exact_match("a"), Some("x"));
    assert_eq!(selector.exact_match("z"), None);
}

#[test]
fn grammar_errors_have_the_real_messages() {
    assert_eq!(
        label_error("app=web,"),
        "found '', expected: identifier after ','"
    );
    assert_eq!(
        label_error(",app"),
        "found ',', expected: !, identifier, or 'end of string'"
    );
    assert_eq!(
        label_error("app web"),
        "unable to parse requirement: found 'web', expected: in, notin, =, ==, !=, gt, lt"
    );
    assert_eq!(
        label_error("app in web"),
        "unable to parse requirement: found 'web' expected: '('"
    );
    assert_eq!(
        label_error("app in (a b)"),
        "unable to parse requirement: found 'b', expected: ',' or ')'"
    );
    assert_eq!(
        label_error("app in (a"),
        "unable to parse requirement: found '', expected: ',' or ')'"
    );
    assert_eq!(
        label_error("app=a=b"),
        "found '=', expected: ',' or 'end of string'"
    );
    assert_eq!(
        label_error("!app=x"),
        "found '=', expected: ',' or 'end of string'"
    );
    assert_eq!(
        label_error("!"),
        "unable to parse requirement: found '', expected: identifier"
    );
    assert_eq!(
        label_error("a=>b"),
        "unable to parse requirement: found '>', expected: identifier"
    );
}

#[test]
fn invalid_keys_and_values_are_rejected() {
    assert_eq!(
        label_error("a@b=c"),
        "unable to parse requirement: <nil>: Invalid value: \"a@b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    );
    assert_eq!(
        label_error("app=a@b"),
        "unable to parse requirement: values[0][app]: Invalid value: \"a@b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    );
    assert!(
        label_error("app in (ok,-bad-)")
            .starts_with("unable to parse requirement: values[0][app]: Invalid value: \"-bad-\"")
    );
    assert!(label_error("x/y/z").contains("a qualified name must consist"));
}

fn fields(text: &str) -> FieldSelector {
    FieldSelector::parse(text).unwrap()
}

#[test]
fn field_selector_forms() {
    let name =
        |n: &'static str| move |field: &str| (field == "metadata.name").then(|| n.to_owned());
    assert!(fields("").is_empty());
    assert!(fields("metadata.name=a").matches(name("a")));
    assert!(fields("metadata.name==a").matches(name("a")));
    assert!(!fields("metadata.name=a").matches(name("b")));
    assert!(fields("metadata.name!=a").matches(name("b")));
    assert!(!fields("metadata.name!=a").matches(name("a")));
    // An absent field compares as "".
    assert!(fields("spec.x=").matches(name("a")));
    assert!(fields("spec.x!=y").matches(name("a")));
    assert!(!fields("metadata.name=a,spec.x=y").matches(name("a")));
}

#[test]
fn field_selector_names_and_exact_name() {
    let selector = fields("metadata.namespace=ns,metadata.name=a");
    assert_eq!(
        selector.field_names(),
        vec!["metadata.name", "metadata.namespace"]
    );
    assert_eq!(selector.exact_name(), Some("a"));
    assert_eq!(fields("metadata.name!=a").exact_name(), None);
    assert_eq!(fields("metadata.namespace=x").exact_name(), None);
}

#[test]
fn field_selector_escapes() {
    let selector = fields(r"metadata.name=a\,b\=c\\d");
    assert_eq!(selector.exact_name(), Some(r"a,b=c\d"));
    assert_eq!(selector.to_string(), r"metadata.name=a\,b\=c\\d");
}

#[test]
fn field_selector_errors() {
    let error = |text: &str| FieldSelector::parse(text).unwrap_err().to_string();
    assert_eq!(
        error("foo"),
        "invalid selector: 'foo'; can't understand 'foo'"
    );
    assert_eq!(
        error("a=b,foo"),
        "invalid selector: 'a=b,foo'; can't understand 'foo'"
    );
    assert_eq!(
        error("a=b=c"),
        "invalid field selector: unescaped character in value: 61"
    );
    assert_eq!(
        error(r"a=b\x"),
        r"invalid field selector: invalid escape sequence: \x"
    );
    assert_eq!(
        error(r"a=b\"),
        r"invalid field selector: invalid escape sequence: \"
    );
}

fn label_key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9]{0,5}",
        "[a-z]{1,4}\\.io/[A-Za-z][A-Za-z0-9_.-]{0,4}[a-z]"
    ]
}

fn label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        "",
        "[A-Za-z0-9]",
        "[A-Za-z0-9][A-Za-z0-9_.-]{0,5}[A-Za-z0-9]"
    ]
}

fn requirement_text() -> impl Strategy<Value = String> {
    (
        label_key(),
        0..7usize,
        proptest::collection::vec(label_value(), 1..4),
    )
        .prop_map(|(key, form, values)| match form {
            0 => key,
            1 => format!("!{key}"),
            2 => format!("{key}={}", values[0]),
            3 => format!("{key}=={}", values[0]),
            4 => format!("{key}!={}", values[0]),
            // Two empty values in a row (`(x,,)`) are a syntax error in Go too.
            5 => format!("{key} in ({})", values.join("x,")),
            _ => format!("{key} notin ({})", values.join("y,")),
        })
}

proptest! {
    #[test]
    fn label_selector_display_round_trips(
        requirements in proptest::collection::vec(requirement_text(), 0..5),
        pairs in proptest::collection::btree_map(label_key(), label_value(), 0..4),
    ) {
        let text = requirements.join(",");
        let parsed = LabelSelector::parse(&text).unwrap();
        let again = LabelSelector::parse(&parsed.to_string()).unwrap();
        prop_assert_eq!(&parsed, &again);
        prop_assert_eq!(parsed.matches(&pairs), again.matches(&pairs));
    }

    #[test]
    fn field_selector_display_round_trips(value in "[a-z,=\\\\]{0,8}") {
        let selector = FieldSelector::parse(&format!("metadata.name={}", value.replace('\\', "\\\\").replace(',', "\\,").replace('=', "\\="))).unwrap();
        prop_assert_eq!(selector.exact_name(), Some(value.as_str()));
        prop_assert_eq!(FieldSelector::parse(&selector.to_string()).unwrap(), selector);
    }

    #[test]
    fn label_parser_never_panics(text in "[a-z!=(), <>in]{0,16}") {
        let _ = LabelSelector::parse(&text);
    }
}
