//! The table-driven decoder: a message's fields by the generated table, and the
//! Kubernetes types whose JSON form is not their message's (times, IntOrString,
//! Quantity, raw JSON, the JSONSchemaProps unions).

use base64::Engine;
use serde_json::{Map, Value, json};

use super::table;
use super::table::{Field as TableField, Kind, MapValue};
use super::{Field, Fields, Payload, ProtobufError};

const TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Time";
const MICRO_TIME: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime";
const DURATION: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Duration";
const FIELDS_V1: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1";
const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";
const RAW_EXTENSION: &str = "io.k8s.apimachinery.pkg.runtime.RawExtension";
const EXTENSIONS: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.";

/// The pointer fields (Go `*int32`/`*int64`) whose zero is a value and not "unset": gogo
/// writes a non-pointer zero just as it writes a pointer to zero, and the JSON form of a
/// non-pointer zero is usually absent (`omitempty`, `generation: 0`), so a zero number is
/// absent unless its field is one of these. Booleans are kept as written (a written false
/// is harmless where Go would omit it, and meaningful where it is a pointer).
const ZERO_MEANS_SOMETHING: &[&str] = &[
    "replicas",
    "terminationGracePeriodSeconds",
    "gracePeriodSeconds",
    "deletionGracePeriodSeconds",
    "activeDeadlineSeconds",
    "runAsUser",
    "runAsGroup",
    "fsGroup",
    "revisionHistoryLimit",
    "leaseDurationSeconds",
    "leaseTransitions",
    "expirationSeconds",
    "priority",
];

/// Decodes the message named `name` (an OpenAPI definition name) into its JSON form.
///
/// # Errors
/// [`ProtobufError`] for malformed bytes, or a message the table does not hold.
pub(super) fn message(name: &str, bytes: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let Some(table) = table::find(name) else {
        return Err(ProtobufError::UnsupportedKind {
            api_version: String::new(),
            kind: name.to_string(),
        });
    };
    let mut object = Map::new();
    let mut lists: Vec<(&TableField, Vec<Value>)> = Vec::new();
    let mut maps: Vec<(&TableField, Map<String, Value>)> = Vec::new();
    for field in Fields::new(bytes) {
        let field = field?;
        let Some(spec) = table
            .fields
            .iter()
            .find(|f| u64::from(f.tag) == field.number)
        else {
            continue;
        };
        if let Kind::Inline(inner) = spec.kind {
            object.extend(message(inner, field.bytes()?)?);
            continue;
        }
        if let Kind::Map(value_kind) = spec.kind {
            let (key, value) = map_entry(field.bytes()?, value_kind)?;
            match maps.iter_mut().find(|(f, _)| f.tag == spec.tag) {
                Some((_, map)) => {
                    map.insert(key, value);
                }
                None => maps.push((spec, Map::from_iter([(key, value)]))),
            }
            continue;
        }
        if spec.repeated {
            let values = repeated(spec.kind, field)?;
            match lists.iter_mut().find(|(f, _)| f.tag == spec.tag) {
                Some((_, list)) => list.extend(values),
                None => lists.push((spec, values)),
            }
            continue;
        }
        let value = single(spec.kind, field)?;
        let empty = match &value {
            Value::Null => true,
            Value::String(s) => s.is_empty(),
            Value::Number(n) => {
                n.as_f64() == Some(0.0) && !ZERO_MEANS_SOMETHING.contains(&spec.json)
            }
            _ => false,
        };
        if !empty {
            object.insert(spec.json.to_string(), value);
        }
    }
    for (spec, list) in lists {
        if !list.is_empty() {
            object.insert(spec.json.to_string(), Value::Array(list));
        }
    }
    for (spec, map) in maps {
        if !map.is_empty() {
            object.insert(spec.json.to_string(), Value::Object(map));
        }
    }
    Ok(object)
}

/// The values of a repeated field: one element, or several when scalars are packed.
fn repeated(kind: Kind, field: Field<'_>) -> Result<Vec<Value>, ProtobufError> {
    match (kind, field.payload) {
        (Kind::Int32 | Kind::Int64 | Kind::Bool, Payload::Bytes(packed)) => {
            let mut values = Vec::new();
            let mut rest = Fields::new(packed);
            while !rest.rest.is_empty() {
                let raw = rest.varint()?;
                values.push(scalar(kind, Payload::Varint(raw))?);
            }
            Ok(values)
        }
        (Kind::Double, Payload::Bytes(packed)) => packed
            .chunks(8)
            .map(|chunk| {
                let mut fixed = [0; 8];
                if chunk.len() != 8 {
                    return Err(ProtobufError::Truncated);
                }
                fixed.copy_from_slice(chunk);
                scalar(kind, Payload::Fixed64(fixed))
            })
            .collect(),
        _ => Ok(vec![single(kind, field)?]),
    }
}

fn scalar(kind: Kind, payload: Payload<'_>) -> Result<Value, ProtobufError> {
    single(kind, Field { number: 0, payload })
}

/// One value of a field.
fn single(kind: Kind, field: Field<'_>) -> Result<Value, ProtobufError> {
    Ok(match kind {
        Kind::String => Value::String(field.string()?),
        Kind::Bool => Value::Bool(field.bool()?),
        // An int32 is sign-extended to 64 bits on the wire; its low half is the value.
        Kind::Int32 => json!(field.int64()? as i32),
        Kind::Int64 => json!(field.int64()?),
        Kind::Double => json!(field.double()?),
        Kind::Bytes => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(field.bytes()?))
        }
        Kind::Message(name) => typed_message(name, field.bytes()?)?,
        Kind::Map(_) | Kind::Inline(_) => Value::Null,
    })
}

/// A `map<string, V>` entry: {1: key, 2: value}.
fn map_entry(entry: &[u8], kind: MapValue) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut value = match kind {
        MapValue::Message(name) => typed_message(name, &[])?,
        MapValue::StringLists => Value::Array(Vec::new()),
        _ => Value::String(String::new()),
    };
    for field in Fields::new(entry) {
        let field = field?;
        match field.number {
            1 => key = field.string()?,
            2 => {
                value = match kind {
                    MapValue::String => Value::String(field.string()?),
                    MapValue::Bytes => single(Kind::Bytes, field)?,
                    MapValue::Message(name) => typed_message(name, field.bytes()?)?,
                    MapValue::StringLists => string_list(field.bytes()?)?,
                }
            }
            _ => {}
        }
    }
    Ok((key, value))
}

/// An `ExtraValue` message {1: repeated string} as its JSON array.
fn string_list(message: &[u8]) -> Result<Value, ProtobufError> {
    let mut items = Vec::new();
    for field in Fields::new(message) {
        let field = field?;
        if field.number == 1 {
            items.push(Value::String(field.string()?));
        }
    }
    Ok(Value::Array(items))
}

/// A message's JSON form: the special Kubernetes types, else the table's.
fn typed_message(name: &str, bytes: &[u8]) -> Result<Value, ProtobufError> {
    let fields = || -> Result<Vec<Field<'_>>, ProtobufError> { Fields::new(bytes).collect() };
    Ok(match name {
        TIME | MICRO_TIME => {
            let fields = fields()?;
            let seconds = number(&fields, 1)
                .map(Field::int64)
                .transpose()?
                .unwrap_or(0);
            let nanos = number(&fields, 2)
                .map(Field::int64)
                .transpose()?
                .unwrap_or(0);
            time(seconds, nanos, name == MICRO_TIME)
        }
        DURATION => {
            let fields = fields()?;
            let nanos = number(&fields, 1)
                .map(Field::int64)
                .transpose()?
                .unwrap_or(0);
            Value::String(go_duration(nanos))
        }
        INT_OR_STRING => {
            let fields = fields()?;
            let is_string = number(&fields, 1)
                .map(Field::int64)
                .transpose()?
                .unwrap_or(0)
                == 1;
            if is_string {
                Value::String(
                    number(&fields, 3)
                        .map(Field::string)
                        .transpose()?
                        .unwrap_or_default(),
                )
            } else {
                json!(
                    number(&fields, 2)
                        .map(Field::int64)
                        .transpose()?
                        .unwrap_or(0) as i32
                )
            }
        }
        QUANTITY => {
            let fields = fields()?;
            Value::String(
                number(&fields, 1)
                    .map(Field::string)
                    .transpose()?
                    .unwrap_or_default(),
            )
        }
        RAW_EXTENSION | FIELDS_V1 => raw_json(number(&fields()?, 1))?,
        _ if name.strip_prefix(EXTENSIONS) == Some("JSON") => raw_json(number(&fields()?, 1))?,
        _ if name.starts_with(EXTENSIONS) && name.contains("JSONSchemaPropsOr") => {
            schema_union(name, &fields()?)?
        }
        _ => Value::Object(message(name, bytes)?),
    })
}

/// The last occurrence of field `n` (protobuf: the last one wins).
fn number<'a>(fields: &[Field<'a>], n: u64) -> Option<Field<'a>> {
    fields.iter().rev().find(|f| f.number == n).copied()
}

/// Raw JSON bytes (RawExtension, FieldsV1, apiextensions JSON); absent is null.
fn raw_json(field: Option<Field<'_>>) -> Result<Value, ProtobufError> {
    match field {
        None => Ok(Value::Null),
        Some(field) => {
            let bytes = field.bytes()?;
            Ok(serde_json::from_slice(bytes).unwrap_or(Value::Null))
        }
    }
}

/// JSONSchemaPropsOrArray {1: schema, 2: schemas}, OrBool {1: allows, 2: schema},
/// OrStringArray {1: schema, 2: property}: the array (or bool) when set, else the schema.
fn schema_union(name: &str, fields: &[Field<'_>]) -> Result<Value, ProtobufError> {
    let props = format!("{EXTENSIONS}JSONSchemaProps");
    let schema_of = |field: &Field<'_>| -> Result<Value, ProtobufError> {
        Ok(Value::Object(message(&props, field.bytes()?)?))
    };
    if name.ends_with("OrBool") {
        return match fields.iter().rev().find(|f| f.number == 2) {
            Some(schema) => schema_of(schema),
            None => Ok(Value::Bool(
                fields
                    .iter()
                    .rev()
                    .find(|f| f.number == 1)
                    .map(|f| f.bool())
                    .transpose()?
                    .unwrap_or(false),
            )),
        };
    }
    let array: Vec<Value> = fields
        .iter()
        .filter(|f| f.number == 2)
        .map(|f| {
            if name.ends_with("OrStringArray") {
                f.string().map(Value::String)
            } else {
                schema_of(f)
            }
        })
        .collect::<Result<_, _>>()?;
    if !array.is_empty() {
        return Ok(Value::Array(array));
    }
    match fields.iter().rev().find(|f| f.number == 1) {
        Some(schema) => schema_of(schema),
        None => Ok(Value::Null),
    }
}

/// meta/v1 Time (whole seconds) or MicroTime (microseconds) as RFC 3339; the zero time is
/// absent.
fn time(seconds: i64, nanos: i64, micro: bool) -> Value {
    if seconds == 0 && nanos == 0 {
        return Value::Null;
    }
    let nanos = u32::try_from(nanos).unwrap_or(0);
    chrono::DateTime::from_timestamp(seconds, nanos).map_or(Value::Null, |t| {
        let format = if micro {
            "%Y-%m-%dT%H:%M:%S%.6fZ"
        } else {
            "%Y-%m-%dT%H:%M:%SZ"
        };
        Value::String(t.format(format).to_string())
    })
}

/// Go's `time.Duration.String` for a whole number of milliseconds or more: `1h2m3.5s`.
fn go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let nanos = nanos.unsigned_abs();
    if nanos < 1_000_000_000 {
        return format!("{sign}{}ms", nanos as f64 / 1_000_000.0);
    }
    let hours = nanos / 3_600_000_000_000;
    let minutes = nanos / 60_000_000_000 % 60;
    let seconds = (nanos % 60_000_000_000) as f64 / 1_000_000_000.0;
    let mut out = sign.to_string();
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{seconds}s"));
    out
}
