//! Every integer field of every generated schema has bounds its Rust type can
//! hold, so the API server refuses a number the manager could not decode (one
//! such object stopped every tenant's reconciles: issue 10, item 2).
//!
//! The schemas are walked, so a new integer field without a `maximum` fails
//! here without anyone listing it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

/// The range a schema integer `format` stands for (schemars writes the Rust
/// type there), as exact values.
fn range_of(format: &str) -> Option<(i128, i128)> {
    Some(match format {
        "int8" => (i8::MIN.into(), i8::MAX.into()),
        "int16" => (i16::MIN.into(), i16::MAX.into()),
        "int32" => (i32::MIN.into(), i32::MAX.into()),
        "int64" => (i64::MIN.into(), i64::MAX.into()),
        "uint8" => (0, u8::MAX.into()),
        "uint16" => (0, u16::MAX.into()),
        "uint32" => (0, u32::MAX.into()),
        "uint64" => (0, u64::MAX.into()),
        _ => return None,
    })
}

/// The largest integer a JSON reader that uses doubles holds exactly.
const EXACT: i128 = (1 << 53) - 1;

/// A bound as the exact integer it is, if it is one a double holds exactly.
fn exact(bound: f64) -> Option<i128> {
    #[allow(clippy::cast_possible_truncation)] // checked: integral and within 2^53
    let whole = bound as i128;
    (bound.fract() == 0.0 && whole.abs() <= EXACT).then_some(whole)
}

/// Every problem with the integer fields under `node`, as `<path>: <what>`.
fn check(path: &str, node: &JSONSchemaProps, integers: &mut usize, problems: &mut Vec<String>) {
    if node.type_.as_deref() == Some("integer") {
        *integers += 1;
        check_integer(path, node, problems);
    }
    for (name, child) in node.properties.iter().flatten() {
        check(&format!("{path}.{name}"), child, integers, problems);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(child)) = &node.additional_properties {
        check(&format!("{path}.*"), child, integers, problems);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &node.items {
        check(&format!("{path}[]"), items, integers, problems);
    }
}

fn check_integer(path: &str, node: &JSONSchemaProps, problems: &mut Vec<String>) {
    let Some((type_min, type_max)) = node.format.as_deref().and_then(range_of) else {
        problems.push(format!(
            "{path}: integer without a Rust integer format ({:?})",
            node.format
        ));
        return;
    };
    match node.maximum.map(|m| (m, exact(m))) {
        None => problems.push(format!("{path}: no maximum")),
        Some((max, None)) => {
            problems.push(format!("{path}: maximum {max} is not an exact integer"))
        }
        Some((_, Some(max))) if max > type_max => problems.push(format!(
            "{path}: maximum {max} does not fit {}",
            node.format.as_deref().unwrap_or_default()
        )),
        Some(_) if node.exclusive_maximum == Some(true) => {
            problems.push(format!("{path}: exclusive maximum (say the inclusive one)"));
        }
        Some(_) => {}
    }
    match node.minimum.map(|m| (m, exact(m))) {
        None => problems.push(format!("{path}: no minimum")),
        Some((min, None)) => {
            problems.push(format!("{path}: minimum {min} is not an exact integer"))
        }
        Some((_, Some(min))) if min < type_min => problems.push(format!(
            "{path}: minimum {min} does not fit {}",
            node.format.as_deref().unwrap_or_default()
        )),
        Some(_) => {}
    }
    if let (Some(min), Some(max)) = (node.minimum, node.maximum)
        && min > max
    {
        problems.push(format!("{path}: minimum {min} above maximum {max}"));
    }
}

#[test]
fn every_integer_field_has_bounds_its_rust_type_holds() {
    let mut problems = Vec::new();
    let mut integers = 0;
    for crd in api::crds() {
        let kind = crd.spec.names.kind.clone();
        for version in &crd.spec.versions {
            let root = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("every version has a schema");
            check(&kind, root, &mut integers, &mut problems);
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
    // Resources (x3 kinds), costs, graces, windows, counts, generations, ...
    assert!(
        integers >= 30,
        "the walk found only {integers} integer fields"
    );
}

#[test]
fn the_check_catches_what_it_is_for() {
    let integer = |format: &str, min: Option<f64>, max: Option<f64>| JSONSchemaProps {
        type_: Some("integer".into()),
        format: Some(format.into()),
        minimum: min,
        maximum: max,
        ..JSONSchemaProps::default()
    };
    let problems_of = |node: &JSONSchemaProps| {
        let mut problems = Vec::new();
        check("x", node, &mut 0, &mut problems);
        problems
    };
    assert!(problems_of(&integer("uint32", Some(0.0), Some(1024.0))).is_empty());
    // The value that stopped the manager: cpus 4294967296 in a uint32.
    assert_eq!(
        problems_of(&integer("uint32", Some(0.0), None)),
        ["x: no maximum"]
    );
    assert_eq!(
        problems_of(&integer("uint32", Some(0.0), Some(4_294_967_296.0))),
        ["x: maximum 4294967296 does not fit uint32"]
    );
    assert_eq!(
        problems_of(&integer("uint64", Some(-1.0), Some(1.0))),
        ["x: minimum -1 does not fit uint64"]
    );
    assert_eq!(
        problems_of(&integer(
            "int64",
            Some(0.0),
            Some(9_223_372_036_854_775_807.0)
        )),
        ["x: maximum 9223372036854776000 is not an exact integer"]
    );
    let nested = JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some([("n".to_owned(), integer("int32", None, Some(1.0)))].into()),
        ..JSONSchemaProps::default()
    };
    assert_eq!(problems_of(&nested), ["x.n: no minimum"]);
}
