//! `additionalPrinterColumns`: the client-go JSONPath subset CRD columns use, evaluated the
//! way apiextensions-apiserver's table convertor does (missing keys allowed, first result
//! only), and the cell formatting by column type (`cellForJSONValue`).

use serde_json::Value;

use crate::error::go_number;

/// Why a printer column JSONPath cannot be parsed (the real server rejects the CRD).
#[derive(Debug, thiserror::Error)]
#[error("unrecognized column definition {path:?}: {reason}")]
pub struct JsonPathError {
    /// The JSONPath as written.
    pub path: String,
    /// What is wrong with it.
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Segment {
    Field(String),
    Index(i64),
    Slice(Option<i64>, Option<i64>),
    Wildcard,
    Recursive(String),
    Filter(Filter),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    path: Vec<Segment>,
    comparison: Option<(String, Value)>,
}

/// A parsed printer column path.
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumnPath(Vec<Segment>);

/// Parses a printer column JSONPath (`.spec.x`, `.a[0].b`, `.a[*].b`,
/// `.status.conditions[?(@.type=="Ready")].status`, `.metadata.labels['app\.x/y']`);
/// `{...}` braces are optional, as CRDs write paths without them.
///
/// # Errors
/// [`JsonPathError`] when the path is not in the supported subset.
pub fn parse_printer_column_path(json_path: &str) -> Result<PrinterColumnPath, JsonPathError> {
    let trimmed = json_path.trim();
    let inner = trimmed
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(trimmed);
    let error = |reason: &str| JsonPathError {
        path: json_path.to_string(),
        reason: reason.to_string(),
    };
    let segments = parse_segments(inner.trim()).map_err(|r| error(&r))?;
    Ok(PrinterColumnPath(segments))
}

fn parse_segments(mut rest: &str) -> Result<Vec<Segment>, String> {
    let mut segments = Vec::new();
    if let Some(r) = rest.strip_prefix('$') {
        rest = r;
    }
    if rest.starts_with('@') {
        rest = &rest[1..];
    }
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("..") {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return Err("empty recursive descent".into());
            }
            segments.push(Segment::Recursive(r[..end].to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = field_end(r);
            if end == 0 {
                if r.is_empty() {
                    break; // a lone "." is the object itself
                }
                return Err(format!("unexpected {:?}", r.chars().next().unwrap_or(' ')));
            }
            let name = &r[..end];
            segments.push(if name == "*" {
                Segment::Wildcard
            } else {
                Segment::Field(unescape(name))
            });
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = bracket_end(r).ok_or("unterminated [")?;
            segments.push(parse_bracket(r[..end].trim())?);
            rest = &r[end + 1..];
        } else {
            return Err(format!(
                "unexpected {:?}",
                rest.chars().next().unwrap_or(' ')
            ));
        }
    }
    Ok(segments)
}

/// Field names end at an unescaped `.` or `[`; `\.` keeps a dot in the name.
fn field_end(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'.' | b'[' => return i,
            _ => i += 1,
        }
    }
    s.len()
}

fn unescape(name: &str) -> String {
    name.replace("\\.", ".")
}

/// The index of the `]` closing a bracket, skipping quoted strings and nested brackets.
fn bracket_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') if depth == 0 => return Some(i),
            (None, ']') => depth -= 1,
            _ => {}
        }
    }
    None
}

fn parse_bracket(inner: &str) -> Result<Segment, String> {
    if inner == "*" {
        return Ok(Segment::Wildcard);
    }
    if let Some(quoted) = strip_quotes(inner) {
        return Ok(Segment::Field(quoted.to_string()));
    }
    if let Some(filter) = inner.strip_prefix("?(").and_then(|s| s.strip_suffix(')')) {
        return parse_filter(filter.trim()).map(Segment::Filter);
    }
    if let Some((start, end)) = inner.split_once(':') {
        let parse = |s: &str| -> Result<Option<i64>, String> {
            let s = s.trim();
            if s.is_empty() {
                Ok(None)
            } else {
                s.parse()
                    .map(Some)
                    .map_err(|_| format!("invalid slice {inner:?}"))
            }
        };
        let end = end.split(':').next().unwrap_or("");
        return Ok(Segment::Slice(parse(start)?, parse(end)?));
    }
    inner
        .parse()
        .map(Segment::Index)
        .map_err(|_| format!("invalid array index {inner:?}"))
}

fn strip_quotes(s: &str) -> Option<&str> {
    s.strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .or_else(|| s.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
}

fn parse_filter(filter: &str) -> Result<Filter, String> {
    for op in ["==", "!=", ">=", "<=", ">", "<"] {
        if let Some((left, right)) = filter.split_once(op) {
            let path = parse_segments(left.trim())?;
            let right = right.trim();
            let literal = match strip_quotes(right) {
                Some(s) => Value::String(s.to_string()),
                None => serde_json::from_str(right)
                    .map_err(|_| format!("invalid filter literal {right:?}"))?,
            };
            return Ok(Filter {
                path,
                comparison: Some((op.to_string(), literal)),
            });
        }
    }
    Ok(Filter {
        path: parse_segments(filter)?,
        comparison: None,
    })
}

impl PrinterColumnPath {
    /// All values the path selects, in order (missing keys select nothing).
    #[must_use]
    pub fn find<'a>(&self, object: &'a Value) -> Vec<&'a Value> {
        eval(&self.0, vec![object])
    }
}

fn eval<'a>(segments: &[Segment], mut current: Vec<&'a Value>) -> Vec<&'a Value> {
    for segment in segments {
        let mut next = Vec::new();
        for value in current {
            match segment {
                Segment::Field(name) => next.extend(value.get(name)),
                Segment::Index(i) => {
                    if let Some(items) = value.as_array() {
                        let index = if *i < 0 { items.len() as i64 + i } else { *i };
                        next.extend(usize::try_from(index).ok().and_then(|i| items.get(i)));
                    }
                }
                Segment::Slice(start, end) => {
                    if let Some(items) = value.as_array() {
                        let len = items.len() as i64;
                        let clamp =
                            |x: i64| (if x < 0 { len + x } else { x }).clamp(0, len) as usize;
                        let (s, e) = (clamp(start.unwrap_or(0)), clamp(end.unwrap_or(len)));
                        if s < e {
                            next.extend(&items[s..e]);
                        }
                    }
                }
                Segment::Wildcard => match value {
                    Value::Array(items) => next.extend(items),
                    Value::Object(map) => next.extend(map.values()),
                    _ => {}
                },
                Segment::Recursive(name) => collect_recursive(value, name, &mut next),
                Segment::Filter(filter) => {
                    if let Some(items) = value.as_array() {
                        next.extend(items.iter().filter(|item| filter_matches(filter, item)));
                    }
                }
            }
        }
        current = next;
    }
    current
}

fn collect_recursive<'a>(value: &'a Value, name: &str, out: &mut Vec<&'a Value>) {
    match value {
        Value::Object(map) => {
            if let Some(v) = map.get(name) {
                out.push(v);
            }
            for v in map.values() {
                collect_recursive(v, name, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_recursive(v, name, out)),
        _ => {}
    }
}

fn filter_matches(filter: &Filter, item: &Value) -> bool {
    let found = eval(&filter.path, vec![item]);
    let Some((op, literal)) = &filter.comparison else {
        return !found.is_empty();
    };
    found.iter().any(|left| {
        let ordering = match (left, literal) {
            (Value::Number(a), Value::Number(b)) => a.as_f64().partial_cmp(&b.as_f64()),
            (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
            _ => None,
        };
        match op.as_str() {
            "==" => ordering == Some(std::cmp::Ordering::Equal) || *left == literal,
            "!=" => !(ordering == Some(std::cmp::Ordering::Equal) || *left == literal),
            ">" => ordering == Some(std::cmp::Ordering::Greater),
            "<" => ordering == Some(std::cmp::Ordering::Less),
            ">=" => matches!(
                ordering,
                Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
            ),
            "<=" => matches!(
                ordering,
                Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
            ),
            _ => false,
        }
    })
}

/// Evaluates a printer column JSONPath against an object: the first selected value, or None
/// when nothing matches or the path does not parse (the real server leaves the cell empty).
#[must_use]
pub fn printer_column_value(object: &Value, json_path: &str) -> Option<Value> {
    let path = parse_printer_column_path(json_path).ok()?;
    path.find(object).first().map(|v| (*v).clone())
}

/// The Table cell for a column of `column_type` (`string`, `integer`, `number`, `boolean`,
/// `date`) like the real table convertor: strings print Go-style (`fmt.Print`), integers and
/// numbers convert, `date` cells become the age relative to `now` (`5m`, `3d4h`), and a value
/// of the wrong type gives an empty (`null`) cell.
#[must_use]
pub fn printer_column_cell(
    object: &Value,
    json_path: &str,
    column_type: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Value {
    match parse_printer_column_path(json_path) {
        Ok(path) => printer_column_cell_at(object, &path, column_type, now),
        Err(_) => Value::Null,
    }
}

/// [`printer_column_cell`] with a parsed path.
pub(crate) fn printer_column_cell_at(
    object: &Value,
    path: &PrinterColumnPath,
    column_type: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Value {
    let Some(value) = path.find(object).first().map(|v| (*v).clone()) else {
        return Value::Null;
    };
    match (column_type, &value) {
        (_, Value::Null) => Value::Null,
        ("string", v) => Value::String(go_print(v)),
        ("integer", Value::Number(n)) => match n.as_i64() {
            Some(i) => Value::from(i),
            None => n.as_f64().map_or(Value::Null, |f| Value::from(f as i64)),
        },
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => match chrono::DateTime::parse_from_rfc3339(s) {
            Ok(t) => Value::String(human_duration(now.signed_duration_since(t))),
            Err(_) => Value::String("<invalid>".into()),
        },
        _ => Value::Null,
    }
}

/// Go's `fmt.Print` of a decoded JSON value (what client-go's JSONPath printer writes).
fn go_print(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_print).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_print(v)))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// apimachinery `duration.HumanDuration`.
#[must_use]
pub fn human_duration(d: chrono::Duration) -> String {
    let seconds = d.num_seconds();
    if seconds < -1 {
        return "<invalid>".into();
    } else if seconds < 0 {
        return "0s".into();
    } else if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = d.num_minutes();
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    } else if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = d.num_hours();
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        }
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        }
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        }
    } else {
        format!("{}y", hours / 24 / 365)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn object() -> Value {
        json!({
            "metadata": {"name": "n1", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"cpus": 4, "markets": [{"name": "a", "price": 1.5}, {"name": "b", "price": 2}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False"}
            ]}
        })
    }

    #[test]
    fn simple_paths_select_values() {
        let o = object();
        assert_eq!(printer_column_value(&o, ".spec.cpus"), Some(json!(4)));
        assert_eq!(
            printer_column_value(&o, ".spec.markets[1].name"),
            Some(json!("b"))
        );
        assert_eq!(
            printer_column_value(&o, ".spec.markets[*].name"),
            Some(json!("a"))
        );
        assert_eq!(
            printer_column_value(&o, ".spec.markets[-1].name"),
            Some(json!("b"))
        );
        assert_eq!(
            printer_column_value(&o, "{.metadata.name}"),
            Some(json!("n1"))
        );
        assert_eq!(printer_column_value(&o, ".spec.missing.deeper"), None);
    }

    #[test]
    fn filters_and_escaped_keys() {
        let o = object();
        assert_eq!(
            printer_column_value(&o, r#".status.conditions[?(@.type=="Ready")].status"#),
            Some(json!("True"))
        );
        assert_eq!(
            printer_column_value(&o, ".status.conditions[?(@.type=='Synced')].status"),
            Some(json!("False"))
        );
        assert_eq!(
            printer_column_value(&o, ".spec.markets[?(@.price > 1.6)].name"),
            Some(json!("b"))
        );
        assert_eq!(
            printer_column_value(&o, r".metadata.labels.app\.kubernetes\.io/name"),
            Some(json!("web"))
        );
        assert_eq!(
            printer_column_value(&o, ".metadata.labels['app.kubernetes.io/name']"),
            Some(json!("web"))
        );
    }

    #[test]
    fn bad_paths_do_not_parse() {
        assert!(parse_printer_column_path(".spec[").is_err());
        assert!(parse_printer_column_path(".spec[abc]").is_err());
    }

    #[test]
    fn cells_follow_column_types() {
        let o = object();
        let now = chrono::DateTime::parse_from_rfc3339("2024-01-01T01:00:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(
            printer_column_cell(&o, ".spec.cpus", "integer", now),
            json!(4)
        );
        assert_eq!(
            printer_column_cell(&o, ".spec.cpus", "string", now),
            json!("4")
        );
        assert_eq!(
            printer_column_cell(&o, ".spec.cpus", "number", now),
            json!(4.0)
        );
        assert_eq!(
            printer_column_cell(&o, ".spec.cpus", "boolean", now),
            Value::Null
        );
        let dated = json!({"metadata": {"creationTimestamp": "2024-01-01T00:55:00Z"}});
        assert_eq!(
            printer_column_cell(&dated, ".metadata.creationTimestamp", "date", now),
            json!("5m")
        );
    }

    #[test]
    fn human_durations_match_apimachinery() {
        assert_eq!(human_duration(chrono::Duration::seconds(90)), "90s");
        assert_eq!(human_duration(chrono::Duration::seconds(150)), "2m30s");
        assert_eq!(human_duration(chrono::Duration::hours(5)), "5h");
        assert_eq!(human_duration(chrono::Duration::hours(50)), "2d2h");
        assert_eq!(human_duration(chrono::Duration::days(400)), "400d");
    }
}
