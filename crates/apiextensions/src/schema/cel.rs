//! `x-kubernetes-validations`: compiling CEL rules when the CRD is registered and evaluating
//! them against objects (apiextensions-apiserver `pkg/apiserver/schema/cel`).
//!
//! CEL evaluation uses the `cel` crate with the Kubernetes extension libraries of `kube-cel`
//! (the crates kube-core's `cel` feature uses). The `cel` crate only parses, it does not
//! type-check, so a rule calling a function neither library provides is rejected here at
//! registration, instead of failing every write at run time.

use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::common::ast::{EntryExpr, Expr};
use kube_cel::cel::objects::OptionalValue;
use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::Value;

use super::cel_functions::KNOWN_FUNCTIONS;
use super::cel_values::to_cel;
use super::parse::Node;
use crate::error::{BadValue, FieldError};

/// A compiled `x-kubernetes-validations` entry.
#[derive(Debug)]
pub(crate) struct CompiledRule {
    /// The rule's index in `x-kubernetes-validations`.
    pub index: usize,
    pub rule: String,
    pub message: Option<String>,
    pub message_expression: Option<Program>,
    pub reason: Option<String>,
    /// `fieldPath` normalized to a relative apimachinery path (`spec.x` form, no leading dot).
    pub field_path: Option<String>,
    pub optional_old_self: bool,
    pub uses_old_self: bool,
    pub program: Program,
}

impl CompiledRule {
    /// Compiles one rule; compile errors are reported at `path` like the real CRD validation.
    pub fn compile(
        rule: &Value,
        index: usize,
        path: &str,
        errors: &mut Vec<FieldError>,
    ) -> Option<Self> {
        let text = rule.get("rule").and_then(Value::as_str).unwrap_or_default();
        if text.trim().is_empty() {
            errors.push(FieldError::required(
                &format!("{path}.rule"),
                "rule is not specified",
            ));
            return None;
        }
        let program = match compile_program(text) {
            Ok(p) => p,
            Err(e) => {
                errors.push(FieldError::invalid(
                    &format!("{path}.rule"),
                    BadValue::Str(text),
                    &format!("compilation failed: {e}"),
                ));
                return None;
            }
        };
        let message = rule
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string);
        if message.is_none() && text.contains('\n') {
            errors.push(FieldError::required(
                &format!("{path}.message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        let message_expression = match rule.get("messageExpression").and_then(Value::as_str) {
            None => None,
            Some(expr) => match compile_program(expr) {
                Ok(p) => Some(p),
                Err(e) => {
                    errors.push(FieldError::invalid(
                        &format!("{path}.messageExpression"),
                        BadValue::Str(expr),
                        &format!("messageExpression compilation failed: {e}"),
                    ));
                    return None;
                }
            },
        };
        let reason = rule
            .get("reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        if let Some(r) = reason.as_deref()
            && !matches!(
                r,
                "FieldValueInvalid"
                    | "FieldValueForbidden"
                    | "FieldValueRequired"
                    | "FieldValueDuplicate"
            )
        {
            errors.push(FieldError::not_supported(
                &format!("{path}.reason"),
                &Value::String(r.to_string()),
                &[
                    "FieldValueDuplicate",
                    "FieldValueForbidden",
                    "FieldValueInvalid",
                    "FieldValueRequired",
                ]
                .map(String::from),
            ));
        }
        let uses_old_self = program.references().has_variable("oldSelf");
        let optional_old_self = rule
            .get("optionalOldSelf")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if optional_old_self && !uses_old_self {
            errors.push(FieldError::invalid(
                &format!("{path}.optionalOldSelf"),
                BadValue::Json(&Value::Bool(true)),
                "may not be set if oldSelf is not used in rule",
            ));
        }
        // resolved against the schema by the parser (`resolve_field_path`)
        let field_path = None;
        Some(Self {
            index,
            rule: text.to_string(),
            message,
            message_expression,
            reason,
            field_path,
            optional_old_self,
            uses_old_self,
            program,
        })
    }
}

fn compile_program(text: &str) -> Result<Program, String> {
    let program = Program::compile(text).map_err(|e| e.to_string().trim().to_string())?;
    let mut unknown = Vec::new();
    free_variables(&program.expression().expr, &mut Vec::new(), &mut unknown);
    if let Some(name) = unknown.first() {
        return Err(format!("undeclared reference to '{name}'"));
    }
    Ok(program)
}

/// Variables a CRD rule may use (apiextensions `cel/compilation.go` declares only these).
const VARIABLES: &[&str] = &["self", "oldSelf"];

/// Identifiers that name types (`type(x) == int`) or function namespaces (`math.least`).
const TYPE_AND_NAMESPACE_IDENTS: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "math",
    "sets",
    "strings",
    "base64",
    "lists",
    "optional",
    "format",
    "jsonpatch",
    "ip",
    "cel",
];

/// Collects identifiers that are neither declared variables nor bound by a comprehension,
/// and functions no library provides (cel-go's checker reports both as undeclared
/// references). Namespaced functions (`math.least`) parse as calls on an identifier.
fn free_variables(expr: &Expr, bound: &mut Vec<String>, free: &mut Vec<String>) {
    match expr {
        Expr::Ident(name) => {
            let known = VARIABLES.contains(&name.as_str())
                || TYPE_AND_NAMESPACE_IDENTS.contains(&name.as_str())
                || bound.iter().any(|b| b == name);
            if !known && !free.contains(name) {
                free.push(name.clone());
            }
        }
        Expr::Call(call) => {
            let namespaced = match call.target.as_deref().map(|t| &t.expr) {
                Some(Expr::Ident(ns))
                    if !bound.contains(ns) && !VARIABLES.contains(&ns.as_str()) =>
                {
                    Some(format!("{ns}.{}", call.func_name))
                }
                _ => None,
            };
            let known = is_operator(&call.func_name)
                || namespaced
                    .as_deref()
                    .is_some_and(|n| KNOWN_FUNCTIONS.contains(&n))
                || KNOWN_FUNCTIONS.contains(&call.func_name.as_str());
            if !known {
                let name = namespaced.unwrap_or_else(|| call.func_name.clone());
                if !free.contains(&name) {
                    free.push(name);
                }
            }
            if let Some(target) = &call.target {
                free_variables(&target.expr, bound, free);
            }
            for arg in &call.args {
                free_variables(&arg.expr, bound, free);
            }
        }
        Expr::Comprehension(c) => {
            free_variables(&c.iter_range.expr, bound, free);
            free_variables(&c.accu_init.expr, bound, free);
            let before = bound.len();
            bound.push(c.iter_var.clone());
            bound.extend(c.iter_var2.clone());
            bound.push(c.accu_var.clone());
            for e in [&c.loop_cond, &c.loop_step, &c.result] {
                free_variables(&e.expr, bound, free);
            }
            bound.truncate(before);
        }
        Expr::List(list) => {
            for e in &list.elements {
                free_variables(&e.expr, bound, free);
            }
        }
        Expr::Map(map) => map
            .entries
            .iter()
            .for_each(|e| entry_variables(&e.expr, bound, free)),
        Expr::Struct(st) => st
            .entries
            .iter()
            .for_each(|e| entry_variables(&e.expr, bound, free)),
        Expr::Select(select) => free_variables(&select.operand.expr, bound, free),
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}

fn entry_variables(entry: &EntryExpr, bound: &mut Vec<String>, free: &mut Vec<String>) {
    match entry {
        EntryExpr::MapEntry(e) => {
            free_variables(&e.key.expr, bound, free);
            free_variables(&e.value.expr, bound, free);
        }
        EntryExpr::StructField(f) => free_variables(&f.value.expr, bound, free),
    }
}

/// Operators appear as functions named like `_==_`, `!_`, `@in`, `_[_]`.
fn is_operator(name: &str) -> bool {
    name.starts_with('_') || name.starts_with('!') || name.starts_with('-') || name.starts_with('@')
}

/// Resolves a rule's `fieldPath` (`.spec.foo`, `.labels['a.b/c']`) against the schema of
/// the rule's node like `ValidFieldPath`: named properties become `spec.foo`, map keys
/// `labels[a.b/c]`. Fails when the path does not name a field of the schema.
pub(crate) fn resolve_field_path(node: &Node, path: &str) -> Result<String, String> {
    let invalid = || "does not refer to a valid field".to_string();
    let mut out = String::new();
    let mut current = node;
    let mut rest = path.trim();
    let mut first = true;
    while !rest.is_empty() {
        let name: String;
        if let Some(after) = rest.strip_prefix("['") {
            let end = after
                .find("']")
                .ok_or_else(|| "unexpected end of JSON path".to_string())?;
            name = after[..end].replace("\\'", "'");
            rest = &after[end + 2..];
        } else {
            let after = match rest.strip_prefix('.') {
                Some(a) => a,
                None if first => rest,
                None => return Err(invalid()),
            };
            let end = after.find(['.', '[']).unwrap_or(after.len());
            if end == 0 {
                return Err(invalid());
            }
            name = after[..end].to_string();
            rest = &after[end..];
        }
        first = false;
        if !current.properties.is_empty() {
            current = current.properties.get(&name).ok_or_else(invalid)?;
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if let Some(values) = current.additional_properties.as_deref() {
            current = values;
            out.push('[');
            out.push_str(&name);
            out.push(']');
        } else {
            return Err(invalid());
        }
    }
    Ok(out)
}

/// A context with the standard and Kubernetes CEL libraries.
fn base_context() -> Context<'static> {
    let mut ctx = Context::default();
    ctx.register_all();
    // RE2 semantics for `matches` (ASCII \d, \w, \s, \b), as in cel-go
    ctx.add_function("matches", re2_matches);
    ctx
}

fn re2_matches(
    ftx: &kube_cel::cel::FunctionContext,
    kube_cel::cel::extractors::This(this): kube_cel::cel::extractors::This<Arc<String>>,
    regex: Arc<String>,
) -> Result<bool, kube_cel::cel::ExecutionError> {
    match regex::Regex::new(&super::parse::re2_compatible(&regex)) {
        Ok(re) => Ok(re.is_match(&this)),
        Err(err) => Err(ftx.error(format!("'{regex}' not a valid regex:\n{err}"))),
    }
}

thread_local! {
    /// Registering ~150 functions costs tens of microseconds: do it once per thread.
    static BASE_CONTEXT: Context<'static> = base_context();
}

/// Runs `f` with the shared base context of this thread.
pub(crate) fn with_context<R>(f: impl FnOnce(&Context<'static>) -> R) -> R {
    BASE_CONTEXT.with(f)
}

/// Evaluates the rules of one node at `path` (apimachinery form, empty for the root).
/// `old` is the correlated old value (None on create or when the value cannot be correlated),
/// which decides whether transition rules run. `unchanged` says whether the value, or when it
/// cannot be correlated its nearest correlatable ancestor, equals the old one: rules without
/// `oldSelf` are then ratcheted (skipped), as the real server does on update.
pub(crate) fn evaluate_rules(
    ctx: &Context<'_>,
    node: &Node,
    path: &str,
    value: &Value,
    old: Option<&Value>,
    unchanged: bool,
    errors: &mut Vec<FieldError>,
) {
    if node.rules.is_empty() {
        return;
    }
    let at = |p: &str| {
        if p.is_empty() {
            "<nil>".to_string()
        } else {
            p.to_string()
        }
    };
    let mut scope = ctx.new_inner_scope();
    scope.add_variable_from_value("self", to_cel(value, Some(node)));
    let old_cel = old.map(|o| to_cel(o, Some(node)));
    // Kubernetes 1.32 reports the schema type (`"object"`, `"string"`) as the bad value.
    let type_name = node.ty.as_deref().unwrap_or("");
    for rule in &node.rules {
        if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
            continue;
        }
        if unchanged && !rule.uses_old_self {
            continue;
        }
        let mut rule_scope = scope.new_inner_scope();
        if rule.optional_old_self {
            let optional = match &old_cel {
                Some(v) => OptionalValue::of(v.clone()),
                None => OptionalValue::none(),
            };
            rule_scope.add_variable_from_value("oldSelf", CelValue::Opaque(Arc::new(optional)));
        } else if let Some(v) = &old_cel {
            rule_scope.add_variable_from_value("oldSelf", v.clone());
        }
        let rule_error_string = rule
            .message
            .as_deref()
            .map(str::trim)
            .unwrap_or(rule.rule.trim());
        match rule.program.execute(&rule_scope) {
            Ok(CelValue::Bool(true)) => {}
            Ok(CelValue::Bool(false)) => {
                let field = match rule.field_path.as_deref() {
                    Some(p) if !p.is_empty() => join(path, p),
                    _ => at(path),
                };
                let detail = rule
                    .message_expression
                    .as_ref()
                    .and_then(|m| match m.execute(&rule_scope) {
                        Ok(CelValue::String(s)) if !s.trim().is_empty() => Some(s.to_string()),
                        _ => None,
                    })
                    .unwrap_or_else(|| match rule.message.as_deref() {
                        Some(m) if !m.trim().is_empty() => m.trim().to_string(),
                        _ => format!("failed rule: {}", rule.rule.trim()),
                    });
                let bad = BadValue::Str(type_name);
                errors.push(match rule.reason.as_deref() {
                    Some("FieldValueForbidden") => FieldError::forbidden(&field, &detail),
                    Some("FieldValueRequired") => FieldError::required(&field, &detail),
                    Some("FieldValueDuplicate") => FieldError::duplicate(&field, bad),
                    _ => FieldError::invalid(&field, bad, &detail),
                });
            }
            Ok(other) => errors.push(FieldError::invalid(
                &at(path),
                BadValue::Str(type_name),
                &format!(
                    "rule did not evaluate to a bool but to {:?} for rule: {rule_error_string}",
                    other.type_of()
                ),
            )),
            Err(e) => errors.push(FieldError::invalid(
                &at(path),
                BadValue::Str(type_name),
                &format!("{e} evaluating rule: {rule_error_string}"),
            )),
        }
    }
}

fn join(base: &str, child: &str) -> String {
    if base.is_empty() {
        child.to_string()
    } else if child.starts_with('[') {
        format!("{base}{child}")
    } else {
        format!("{base}.{child}")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn field_paths_resolve_to_apimachinery_form() {
        let mut errors = Vec::new();
        let node = super::super::parse::parse(
            &serde_json::json!({"type": "object", "properties": {
                "spec": {"type": "object", "properties": {"foo": {"type": "string"}, "a.b": {"type": "string"}}},
                "testMap": {"type": "object", "additionalProperties": {"type": "string"}}}}),
            "s",
            super::super::parse::Position::Root,
            &mut errors,
        );
        assert!(errors.is_empty());
        assert_eq!(resolve_field_path(&node, ".spec.foo").unwrap(), "spec.foo");
        assert_eq!(
            resolve_field_path(&node, ".spec['a.b']").unwrap(),
            "spec.a.b"
        );
        assert_eq!(
            resolve_field_path(&node, ".testMap['foo.34$']").unwrap(),
            "testMap[foo.34$]"
        );
        assert_eq!(
            resolve_field_path(&node, ".testMap.x").unwrap(),
            "testMap[x]"
        );
        assert!(resolve_field_path(&node, ".spec.nope").is_err());
        assert!(resolve_field_path(&node, ".spec[0]").is_err());
    }

    #[test]
    fn unknown_functions_fail_to_compile() {
        assert!(compile_program("self.size() > 1").is_ok());
        assert!(compile_program("has(self.a) && self.all(x, x > 0)").is_ok());
        let err = compile_program("self.frobnicate()").unwrap_err();
        assert!(err.contains("frobnicate"), "{err}");
        assert!(compile_program("self ==").is_err());
        assert!(compile_program("foo == 1").is_err());
        assert!(
            compile_program(
                "self.items.exists(i, i == self.x) && [1, 2].map(v, v * 2).size() == 2"
            )
            .is_ok()
        );
        assert!(compile_program("math.greatest([1, 2]) == 2 && sets.contains([1], [1])").is_ok());
        assert!(compile_program("type(self) == int || optional.none().hasValue()").is_ok());
        assert!(compile_program("self.all(k, self[k] > 0) && {'a': 1}.all(k, k == 'a')").is_ok());
    }
}
