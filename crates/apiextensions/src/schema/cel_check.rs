//! A light static check of CEL rules against the schema, standing in for cel-go's type
//! checker at CRD registration: a rule selecting a field the schema does not declare
//! (`self.replicsa`, `has(self.spec.typo)`) is refused with `undefined field`, where the
//! `cel` crate would only fail (or, under `has()`, silently pass) at run time.
//!
//! Only what is certain is checked: objects with declared properties and without
//! `x-kubernetes-preserve-unknown-fields`; anything dynamic is accepted.

use kube_cel::cel::common::ast::{EntryExpr, Expr};

use super::cel_values::escape_property;
use super::parse::Node;
use crate::error::{BadValue, FieldError};

/// What is statically known about an expression's value.
#[derive(Clone, Copy)]
enum Known<'a> {
    /// A value of this schema node; `resource` when it is the root or an embedded resource.
    Node(&'a Node, bool),
    /// The implicit `metadata` of a resource: only `name` and `generateName`.
    ResourceMeta,
    /// Anything else.
    Unknown,
}

/// Checks every rule under `node` (at CRD field path `path`).
pub(crate) fn check_rules(
    node: &Node,
    path: &str,
    is_resource: bool,
    errors: &mut Vec<FieldError>,
) {
    for rule in &node.rules {
        let mut env: Vec<(String, Known<'_>)> = vec![
            ("self".into(), Known::Node(node, is_resource)),
            (
                "oldSelf".into(),
                if rule.optional_old_self {
                    Known::Unknown
                } else {
                    Known::Node(node, is_resource)
                },
            ),
        ];
        let mut undefined = Vec::new();
        walk(&rule.program.expression().expr, &mut env, &mut undefined);
        if let Some(field) = undefined.first() {
            errors.push(FieldError::invalid(
                &format!("{path}.x-kubernetes-validations[{}].rule", rule.index),
                BadValue::Str(&rule.rule),
                &format!("compilation failed: ERROR: undefined field '{field}'"),
            ));
        }
    }
    for (key, prop) in &node.properties {
        check_rules(
            prop,
            &format!("{path}.properties[{key}]"),
            prop.embedded_resource,
            errors,
        );
    }
    if let Some(values) = node.additional_properties.as_deref() {
        check_rules(
            values,
            &format!("{path}.additionalProperties"),
            values.embedded_resource,
            errors,
        );
    }
    if let Some(items) = node.items.as_deref() {
        check_rules(
            items,
            &format!("{path}.items"),
            items.embedded_resource,
            errors,
        );
    }
}

fn lookup<'a>(env: &[(String, Known<'a>)], name: &str) -> Known<'a> {
    env.iter()
        .rev()
        .find(|(n, _)| n == name)
        .map_or(Known::Unknown, |(_, k)| *k)
}

fn select<'a>(operand: Known<'a>, field: &str, undefined: &mut Vec<String>) -> Known<'a> {
    match operand {
        Known::ResourceMeta => {
            if !matches!(field, "name" | "generateName") {
                undefined.push(field.to_string());
            }
            Known::Unknown
        }
        Known::Node(node, resource) => {
            if node.is_map() {
                return node
                    .additional_properties
                    .as_deref()
                    .map_or(Known::Unknown, |n| Known::Node(n, n.embedded_resource));
            }
            if let Some((_, child)) = node
                .properties
                .iter()
                .find(|(k, _)| escape_property(k).as_deref() == Some(field))
            {
                return Known::Node(child, child.embedded_resource);
            }
            if resource {
                return match field {
                    "metadata" => Known::ResourceMeta,
                    "apiVersion" | "kind" => Known::Unknown,
                    _ => undeclared(node, field, undefined),
                };
            }
            undeclared(node, field, undefined)
        }
        Known::Unknown => Known::Unknown,
    }
}

fn undeclared<'a>(node: &Node, field: &str, undefined: &mut Vec<String>) -> Known<'a> {
    let checkable = node.ty.as_deref() == Some("object")
        && !node.preserve_unknown_fields
        && !node.int_or_string;
    if checkable {
        undefined.push(field.to_string());
    }
    Known::Unknown
}

/// The type of elements when iterating (`all`, `exists`, `map`, `filter`) over `range`.
fn element_of(range: Known<'_>) -> Known<'_> {
    match range {
        Known::Node(node, _) => match node.items.as_deref() {
            Some(items) if node.ty.as_deref() == Some("array") => {
                Known::Node(items, items.embedded_resource)
            }
            _ => Known::Unknown, // map keys are strings
        },
        _ => Known::Unknown,
    }
}

fn walk<'a>(
    expr: &Expr,
    env: &mut Vec<(String, Known<'a>)>,
    undefined: &mut Vec<String>,
) -> Known<'a> {
    match expr {
        Expr::Ident(name) => lookup(env, name),
        Expr::Select(s) => {
            let operand = walk(&s.operand.expr, env, undefined);
            select(operand, &s.field, undefined)
        }
        Expr::Call(call) => {
            if let Some(target) = call.target.as_deref() {
                walk(&target.expr, env, undefined);
            }
            let args: Vec<Known<'a>> = call
                .args
                .iter()
                .map(|a| walk(&a.expr, env, undefined))
                .collect();
            match (call.func_name.as_str(), args.as_slice()) {
                ("_[_]", [Known::Node(node, _), _]) => {
                    let element = if node.ty.as_deref() == Some("array") {
                        node.items.as_deref()
                    } else {
                        node.additional_properties.as_deref()
                    };
                    element.map_or(Known::Unknown, |n| Known::Node(n, n.embedded_resource))
                }
                _ => Known::Unknown,
            }
        }
        Expr::Comprehension(c) => {
            let range = walk(&c.iter_range.expr, env, undefined);
            walk(&c.accu_init.expr, env, undefined);
            let before = env.len();
            env.push((c.iter_var.clone(), element_of(range)));
            if let Some(second) = &c.iter_var2 {
                env.push((second.clone(), Known::Unknown));
            }
            env.push((c.accu_var.clone(), Known::Unknown));
            for e in [&c.loop_cond, &c.loop_step, &c.result] {
                walk(&e.expr, env, undefined);
            }
            env.truncate(before);
            Known::Unknown
        }
        Expr::List(list) => {
            for e in &list.elements {
                walk(&e.expr, env, undefined);
            }
            Known::Unknown
        }
        Expr::Map(map) => {
            for entry in &map.entries {
                walk_entry(&entry.expr, env, undefined);
            }
            Known::Unknown
        }
        Expr::Struct(st) => {
            for entry in &st.entries {
                walk_entry(&entry.expr, env, undefined);
            }
            Known::Unknown
        }
        Expr::Literal(_) | Expr::Unspecified => Known::Unknown,
    }
}

fn walk_entry<'a>(
    entry: &EntryExpr,
    env: &mut Vec<(String, Known<'a>)>,
    undefined: &mut Vec<String>,
) {
    match entry {
        EntryExpr::MapEntry(e) => {
            walk(&e.key.expr, env, undefined);
            walk(&e.value.expr, env, undefined);
        }
        EntryExpr::StructField(f) => {
            walk(&f.value.expr, env, undefined);
        }
    }
}
