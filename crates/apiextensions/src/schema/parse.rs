//! Parsing `openAPIV3Schema` into a tree of [`Node`]s, with the structural-schema checks of
//! apiextensions-apiserver's CRD validation (`pkg/apiserver/schema/validation.go`).

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use super::cel::CompiledRule;
use crate::error::{BadValue, FieldError};

/// String formats the real server validates (`apiserver/validation/formats.go`, normalized
/// without dashes); any other string format is stripped, as the real server does.
const SUPPORTED_STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// ObjectMeta fields a root `metadata` may restrict (the real server allows only these).
const ROOT_METADATA_SCHEMA_FIELDS: &[&str] = &["name", "generateName"];

/// One node of a structural schema.
#[derive(Debug, Default)]
pub(crate) struct Node {
    pub ty: Option<String>,
    pub nullable: bool,
    /// The format as written, when the real server supports it (others are stripped).
    pub format: Option<String>,
    pub enumeration: Option<Vec<Value>>,
    pub pattern: Option<(String, Regex)>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub exclusive_minimum: bool,
    pub exclusive_maximum: bool,
    pub multiple_of: Option<f64>,
    pub min_length: Option<i64>,
    pub max_length: Option<i64>,
    pub min_items: Option<i64>,
    pub max_items: Option<i64>,
    pub min_properties: Option<i64>,
    pub max_properties: Option<i64>,
    pub unique_items: bool,
    pub required: Vec<String>,
    pub properties: BTreeMap<String, Node>,
    /// The schema of map values (`additionalProperties: {...}`).
    pub additional_properties: Option<Box<Node>>,
    /// `additionalProperties: true`: any values kept, nothing validated.
    pub additional_properties_any: bool,
    pub items: Option<Box<Node>>,
    pub int_or_string: bool,
    pub preserve_unknown_fields: bool,
    pub embedded_resource: bool,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    pub default: Option<Value>,
    pub all_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub rules: Vec<CompiledRule>,
    /// The node as written, for OpenAPI publication and `kubectl explain`.
    pub raw: Value,
}

/// Where a node sits, which decides the structural rules that apply to it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Position {
    Root,
    Property,
    Items,
    /// Inside allOf/anyOf/oneOf/not: value validations only.
    ValueValidation,
    /// A branch of the IntOrString pattern `anyOf: [{type: integer}, {type: string}]`, the
    /// one place a value validation may carry `type`.
    IntOrStringBranch,
}

impl Node {
    /// Whether `self` is a map-like object whose unknown keys are values (additionalProperties).
    pub fn is_map(&self) -> bool {
        self.additional_properties.is_some() || self.additional_properties_any
    }

    /// The schema of the value under `key` of an object of this node, if known.
    pub fn child(&self, key: &str) -> Option<&Node> {
        self.properties
            .get(key)
            .or(self.additional_properties.as_deref())
    }
}

/// Parses a schema node at `path` (the CRD field path of the node), collecting structural errors.
pub(crate) fn parse(
    value: &Value,
    path: &str,
    position: Position,
    errors: &mut Vec<FieldError>,
) -> Node {
    let Some(map) = value.as_object() else {
        errors.push(FieldError::invalid(
            path,
            BadValue::Json(value),
            "must be a JSON schema object",
        ));
        return Node::default();
    };
    let mut node = Node {
        raw: value.clone(),
        ..Node::default()
    };
    let flag = |key: &str| map.get(key).and_then(Value::as_bool).unwrap_or(false);
    let int = |key: &str| map.get(key).and_then(Value::as_i64);
    let float = |key: &str| map.get(key).and_then(Value::as_f64);

    node.ty = map
        .get("type")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_string);
    node.nullable = flag("nullable");
    node.int_or_string = flag("x-kubernetes-int-or-string");
    node.preserve_unknown_fields = flag("x-kubernetes-preserve-unknown-fields");
    node.embedded_resource = flag("x-kubernetes-embedded-resource");
    node.enumeration = map.get("enum").and_then(Value::as_array).cloned();
    node.minimum = float("minimum");
    node.maximum = float("maximum");
    node.exclusive_minimum = flag("exclusiveMinimum");
    node.exclusive_maximum = flag("exclusiveMaximum");
    node.multiple_of = float("multipleOf");
    node.min_length = int("minLength");
    node.max_length = int("maxLength");
    node.min_items = int("minItems");
    node.max_items = int("maxItems");
    node.min_properties = int("minProperties");
    node.max_properties = int("maxProperties");
    node.unique_items = flag("uniqueItems");
    node.default = map.get("default").cloned();
    node.required = string_list(map.get("required"));
    node.list_type = map
        .get("x-kubernetes-list-type")
        .and_then(Value::as_str)
        .map(str::to_string);
    node.list_map_keys = string_list(map.get("x-kubernetes-list-map-keys"));
    node.format = supported_format(
        node.ty.as_deref(),
        map.get("format").and_then(Value::as_str),
    );

    if let Some(pattern) = map.get("pattern").and_then(Value::as_str) {
        match Regex::new(&re2_compatible(pattern)) {
            Ok(re) => node.pattern = Some((pattern.to_string(), re)),
            Err(e) => errors.push(FieldError::invalid(
                &format!("{path}.pattern"),
                BadValue::Str(pattern),
                &format!("must be a valid regular expression, but isn't: {e}"),
            )),
        }
    }

    if let Some(props) = map.get("properties").and_then(Value::as_object) {
        for (name, schema) in props {
            let child_path = format!("{path}.properties[{name}]");
            let child_position = if position == Position::ValueValidation {
                position
            } else {
                Position::Property
            };
            let child = parse(schema, &child_path, child_position, errors);
            node.properties.insert(name.clone(), child);
        }
    }
    match map.get("additionalProperties") {
        Some(Value::Bool(true)) => node.additional_properties_any = true,
        Some(schema @ Value::Object(_)) => {
            let child_position = if position == Position::ValueValidation {
                position
            } else {
                Position::Property
            };
            let child = parse(
                schema,
                &format!("{path}.additionalProperties"),
                child_position,
                errors,
            );
            node.additional_properties = Some(Box::new(child));
        }
        _ => {}
    }
    if let Some(items) = map.get("items") {
        let child_position = if position == Position::ValueValidation {
            position
        } else {
            Position::Items
        };
        node.items = Some(Box::new(parse(
            items,
            &format!("{path}.items"),
            child_position,
            errors,
        )));
    }
    for (key, target) in [
        ("allOf", &mut node.all_of),
        ("anyOf", &mut node.any_of),
        ("oneOf", &mut node.one_of),
    ] {
        if let Some(list) = map.get(key).and_then(Value::as_array) {
            let int_or_string = key == "anyOf"
                && *list
                    == [
                        serde_json::json!({"type": "integer"}),
                        serde_json::json!({"type": "string"}),
                    ];
            let branch_position = if int_or_string {
                Position::IntOrStringBranch
            } else {
                Position::ValueValidation
            };
            for (i, schema) in list.iter().enumerate() {
                target.push(parse(
                    schema,
                    &format!("{path}.{key}[{i}]"),
                    branch_position,
                    errors,
                ));
            }
        }
    }
    if let Some(not) = map.get("not") {
        node.not = Some(Box::new(parse(
            not,
            &format!("{path}.not"),
            Position::ValueValidation,
            errors,
        )));
    }
    if let Some(rules) = map
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    {
        for (i, rule) in rules.iter().enumerate() {
            let rule_path = format!("{path}.x-kubernetes-validations[{i}]");
            if let Some(mut compiled) = CompiledRule::compile(rule, i, &rule_path, errors) {
                if let Some(field_path) = rule.get("fieldPath").and_then(Value::as_str) {
                    let at = format!("{rule_path}.fieldPath");
                    if field_path.trim().is_empty() {
                        errors.push(FieldError::invalid(
                            &at,
                            BadValue::Str(field_path),
                            "fieldPath must be non-empty if specified",
                        ));
                    } else {
                        match super::cel::resolve_field_path(&node, field_path) {
                            Ok(resolved) => compiled.field_path = Some(resolved),
                            Err(_) => errors.push(FieldError::invalid(
                                &at,
                                BadValue::Str(field_path),
                                "fieldPath must be a valid path",
                            )),
                        }
                    }
                }
                node.rules.push(compiled);
            }
        }
    }

    check_structural(&node, map, path, position, errors);
    node
}

/// Go's RE2 gives `\d`, `\w`, `\s` and `\b` their ASCII meaning; Rust's regex crate gives
/// them Unicode meaning (`^\d+$` would accept Arabic digits here and not on a cluster), so
/// they are rewritten to explicit ASCII classes.
pub(crate) fn re2_compatible(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('w') => out.push_str("[0-9A-Za-z_]"),
            Some('W') => out.push_str("[^0-9A-Za-z_]"),
            Some('s') => out.push_str("[\\t\\n\\f\\r ]"),
            Some('S') => out.push_str("[^\\t\\n\\f\\r ]"),
            Some('b') => out.push_str("(?-u:\\b)"),
            Some('B') => out.push_str("(?-u:\\B)"),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

fn string_list(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The real server strips formats it does not know (`StripUnsupportedFormatsPostProcess`).
fn supported_format(ty: Option<&str>, format: Option<&str>) -> Option<String> {
    let format = format.filter(|f| !f.is_empty())?;
    match ty {
        None | Some("string") => {
            let normalized = format.replace('-', "");
            SUPPORTED_STRING_FORMATS
                .contains(&normalized.as_str())
                .then(|| format.to_string())
        }
        Some("integer") => matches!(format, "int32" | "int64").then(|| format.to_string()),
        Some("number") => matches!(format, "float" | "double").then(|| format.to_string()),
        _ => None,
    }
}

fn check_structural(
    node: &Node,
    map: &serde_json::Map<String, Value>,
    path: &str,
    position: Position,
    errors: &mut Vec<FieldError>,
) {
    let type_path = format!("{path}.type");
    super::extensions::check_unsupported_keywords(map, path, errors);
    if position == Position::IntOrStringBranch {
        return;
    }
    if position == Position::ValueValidation {
        for (key, what) in [
            ("type", "must be empty to be structural"),
            ("additionalProperties", "must be undefined to be structural"),
            ("default", "must be undefined to be structural"),
            ("nullable", "must be false to be structural"),
            (
                "x-kubernetes-preserve-unknown-fields",
                "must be false to be structural",
            ),
            (
                "x-kubernetes-embedded-resource",
                "must be false to be structural",
            ),
            (
                "x-kubernetes-int-or-string",
                "must be false to be structural",
            ),
            (
                "x-kubernetes-list-type",
                "must be undefined to be structural",
            ),
            (
                "x-kubernetes-list-map-keys",
                "must be empty to be structural",
            ),
            ("x-kubernetes-validations", "must be empty to be structural"),
        ] {
            let set = match map.get(key) {
                None | Some(Value::Null) | Some(Value::Bool(false)) => false,
                Some(Value::String(s)) => !s.is_empty(),
                Some(Value::Array(a)) => !a.is_empty(),
                Some(_) => true,
            };
            if set {
                errors.push(FieldError::forbidden(&format!("{path}.{key}"), what));
            }
        }
        return;
    }

    if let Some(ty) = node.ty.as_deref()
        && !matches!(
            ty,
            "object" | "array" | "string" | "integer" | "number" | "boolean"
        )
    {
        errors.push(FieldError::not_supported(
            &type_path,
            &Value::String(ty.to_string()),
            &["array", "boolean", "integer", "number", "object", "string"].map(String::from),
        ));
    }
    if node.int_or_string && node.preserve_unknown_fields {
        errors.push(FieldError::invalid(
            &format!("{path}.x-kubernetes-preserve-unknown-fields"),
            BadValue::Json(&Value::Bool(true)),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if node.embedded_resource {
        match node.ty.as_deref() {
            None => errors.push(FieldError::required(
                &type_path,
                "must be object if x-kubernetes-embedded-resource is true",
            )),
            Some("object") => {}
            Some(other) => errors.push(FieldError::invalid(
                &type_path,
                BadValue::Str(other),
                "must be object if x-kubernetes-embedded-resource is true",
            )),
        }
        if node.additional_properties.is_some() {
            errors.push(FieldError::forbidden(
                &format!("{path}.additionalProperties"),
                "must not be used if x-kubernetes-embedded-resource is set",
            ));
        }
    } else if node.ty.is_none() && !node.int_or_string && !node.preserve_unknown_fields {
        let detail = match position {
            Position::Root => "must not be empty at the root",
            Position::Items => "must not be empty for specified array items",
            _ => "must not be empty for specified object fields",
        };
        errors.push(FieldError::required(&type_path, detail));
    }
    if position == Position::Root {
        if node.nullable {
            errors.push(FieldError::forbidden(
                &format!("{path}.nullable"),
                "nullable cannot be true at the root",
            ));
        }
        if let Some(ty) = node.ty.as_deref()
            && ty != "object"
        {
            errors.push(FieldError::invalid(
                &type_path,
                BadValue::Str(ty),
                "must be object at the root",
            ));
        }
        if node.additional_properties.is_some() || node.additional_properties_any {
            errors.push(FieldError::forbidden(
                &format!("{path}.additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(meta) = node.properties.get("metadata") {
            let meta_path = format!("{path}.properties[metadata]");
            let restricts_other = meta.raw.as_object().is_some_and(|m| {
                m.keys()
                    .any(|k| !matches!(k.as_str(), "type" | "properties" | "default"))
            }) || meta
                .properties
                .keys()
                .any(|k| !ROOT_METADATA_SCHEMA_FIELDS.contains(&k.as_str()));
            if let Some(ty) = meta.ty.as_deref()
                && ty != "object"
            {
                errors.push(FieldError::invalid(
                    &format!("{meta_path}.type"),
                    BadValue::Str(ty),
                    "must be object",
                ));
            }
            if restricts_other {
                errors.push(FieldError::forbidden(
                    &meta_path,
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                ));
            }
        }
    }
    if node.unique_items {
        errors.push(FieldError::forbidden(
            &format!("{path}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    let check_metadata = position == Position::Root || node.embedded_resource;
    if check_metadata {
        for key in ["kind", "apiVersion"] {
            if let Some(prop) = node.properties.get(key)
                && prop.ty.as_deref() != Some("string")
            {
                errors.push(FieldError::invalid(
                    &format!("{path}.properties[{key}].type"),
                    BadValue::Str(prop.ty.as_deref().unwrap_or("")),
                    "must be string",
                ));
            }
        }
        if position != Position::Root
            && let Some(meta) = node.properties.get("metadata")
            && meta.ty.as_deref() != Some("object")
        {
            errors.push(FieldError::invalid(
                &format!("{path}.properties[metadata].type"),
                BadValue::Str(meta.ty.as_deref().unwrap_or("")),
                "must be object",
            ));
        }
    }
    if node.embedded_resource && !node.preserve_unknown_fields && node.properties.is_empty() {
        errors.push(FieldError::required(
            &format!("{path}.properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
    if node.ty.as_deref() == Some("array") && node.items.is_none() {
        errors.push(FieldError::required(
            &format!("{path}.items"),
            "must be specified",
        ));
    }
    if !node.properties.is_empty()
        && (node.additional_properties.is_some() || node.additional_properties_any)
    {
        errors.push(FieldError::forbidden(
            &format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    super::extensions::check(node, map, path, errors);
}
