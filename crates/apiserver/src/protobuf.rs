//! Decodes Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`)
//! into the JSON form the rest of the server works on.
//!
//! Typed client-go clients (>= 1.31) send built-in kinds as protobuf by default; Helm 4
//! stores its releases through the typed Secret client, so `helm install` depends on
//! it. Only the kinds such clients write here are decoded: core/v1 Secret, ConfigMap,
//! Namespace and ServiceAccount, and meta/v1 DeleteOptions. Answers stay JSON (those
//! clients accept `application/json`).
//!
//! Wire format: the 4-byte magic `k8s\0`, then a `runtime.Unknown` message
//! {1: TypeMeta{1: apiVersion, 2: kind}, 2: raw (the object's own message),
//! 3: contentEncoding, 4: contentType}. Field numbers are those of the
//! `generated.proto` files of k8s.io/api and k8s.io/apimachinery. gogo-protobuf writes
//! every non-pointer field, empty ones included, so an empty string, a zero number or
//! a zero time decodes as "absent", like `omitempty` in the JSON form.

use base64::Engine;
use serde_json::{Map, Value, json};

/// The magic prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body could not be decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("protobuf body does not start with the k8s magic prefix")]
    NoMagic,
    /// The bytes end inside a field, or a length runs past the end.
    #[error("protobuf body is truncated")]
    Truncated,
    /// A varint longer than 10 bytes.
    #[error("protobuf body has a malformed varint")]
    BadVarint,
    /// A wire type this decoder does not know (groups, or garbage).
    #[error("protobuf body has unsupported wire type {0}")]
    WireType(u64),
    /// A string field that is not UTF-8.
    #[error("protobuf string field {0} is not UTF-8")]
    NotUtf8(u64),
    /// A kind this server does not accept as protobuf.
    #[error("protobuf is not supported for {api_version} {kind}; send application/json")]
    UnsupportedKind {
        /// apiVersion from the envelope.
        api_version: String,
        /// kind from the envelope.
        kind: String,
    },
}

/// Decodes a `k8s\0`-prefixed protobuf body into the object's JSON form, with
/// `apiVersion` and `kind` set from the envelope.
///
/// # Errors
///
/// [`ProtobufError`] when the body is malformed or holds a kind not listed in the module docs.
pub fn decode_object(body: &[u8]) -> Result<Value, ProtobufError> {
    let envelope = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for field in Fields::new(envelope) {
        let field = field?;
        match field.number {
            1 => {
                for type_field in Fields::new(field.bytes()?) {
                    let type_field = type_field?;
                    match type_field.number {
                        1 => api_version = type_field.string()?,
                        2 => kind = type_field.string()?,
                        _ => {}
                    }
                }
            }
            2 => raw = field.bytes()?,
            _ => {}
        }
    }
    let mut object = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => secret(raw)?,
        ("v1", "ConfigMap") => config_map(raw)?,
        ("v1", "Namespace") => namespace(raw)?,
        ("v1", "ServiceAccount") => service_account(raw)?,
        (_, "DeleteOptions") => delete_options(raw)?,
        _ => return Err(ProtobufError::UnsupportedKind { api_version, kind }),
    };
    object.insert("apiVersion".into(), Value::String(api_version));
    object.insert("kind".into(), Value::String(kind));
    Ok(Value::Object(object))
}

/// One field of a message: its number and its payload.
#[derive(Debug, Clone, Copy)]
struct Field<'a> {
    number: u64,
    payload: Payload<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Payload<'a> {
    Varint(u64),
    Fixed64,
    Bytes(&'a [u8]),
    Fixed32,
}

impl<'a> Field<'a> {
    fn bytes(self) -> Result<&'a [u8], ProtobufError> {
        match self.payload {
            Payload::Bytes(bytes) => Ok(bytes),
            _ => Err(ProtobufError::WireType(0)),
        }
    }

    fn string(self) -> Result<String, ProtobufError> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| ProtobufError::NotUtf8(self.number))
    }

    fn varint(self) -> Result<u64, ProtobufError> {
        match self.payload {
            Payload::Varint(value) => Ok(value),
            _ => Err(ProtobufError::WireType(2)),
        }
    }

    /// An int64 field (two's complement in a varint).
    fn int64(self) -> Result<i64, ProtobufError> {
        // Reinterpreting the bits is how protobuf encodes negative int64 values.
        self.varint().map(|v| i64::from_ne_bytes(v.to_ne_bytes()))
    }

    fn bool(self) -> Result<bool, ProtobufError> {
        self.varint().map(|v| v != 0)
    }
}

/// Iterates over the fields of one message.
struct Fields<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Fields<'a> {
    fn new(message: &'a [u8]) -> Self {
        Self {
            rest: message,
            failed: false,
        }
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut value: u64 = 0;
        for (index, byte) in self.rest.iter().enumerate().take(10) {
            value |= u64::from(byte & 0x7f) << (7 * index);
            if byte & 0x80 == 0 {
                self.rest = &self.rest[index + 1..];
                return Ok(value);
            }
        }
        Err(if self.rest.len() < 10 {
            ProtobufError::Truncated
        } else {
            ProtobufError::BadVarint
        })
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], ProtobufError> {
        if self.rest.len() < len {
            return Err(ProtobufError::Truncated);
        }
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(taken)
    }

    fn field(&mut self) -> Result<Field<'a>, ProtobufError> {
        let key = self.varint()?;
        let payload = match key & 7 {
            0 => Payload::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Payload::Fixed64
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| ProtobufError::Truncated)?;
                Payload::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Payload::Fixed32
            }
            other => return Err(ProtobufError::WireType(other)),
        };
        Ok(Field {
            number: key >> 3,
            payload,
        })
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>, ProtobufError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        let field = self.field();
        self.failed = field.is_err();
        Some(field)
    }
}

/// Inserts `value` under `key` unless it is the JSON zero value (`omitempty`).
fn put(object: &mut Map<String, Value>, key: &str, value: Value) {
    let empty = match &value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Bool(_) => false,
    };
    if !empty {
        object.insert(key.to_owned(), value);
    }
}

/// A `map<string, string>` or `map<string, bytes>` entry: {1: key, 2: value}.
fn map_entry(entry: &[u8], base64_value: bool) -> Result<(String, Value), ProtobufError> {
    let mut key = String::new();
    let mut value = Value::String(String::new());
    for field in Fields::new(entry) {
        let field = field?;
        match field.number {
            1 => key = field.string()?,
            2 if base64_value => {
                value =
                    Value::String(base64::engine::general_purpose::STANDARD.encode(field.bytes()?));
            }
            2 => value = Value::String(field.string()?),
            _ => {}
        }
    }
    Ok((key, value))
}

/// meta/v1 Time {1: seconds, 2: nanos} as RFC 3339 in whole seconds; the zero time is absent.
fn time(message: &[u8]) -> Result<Value, ProtobufError> {
    let mut seconds = 0;
    for field in Fields::new(message) {
        let field = field?;
        if field.number == 1 {
            seconds = field.int64()?;
        }
    }
    if seconds == 0 {
        return Ok(Value::Null);
    }
    Ok(
        chrono::DateTime::from_timestamp(seconds, 0).map_or(Value::Null, |t| {
            Value::String(t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        }),
    )
}

fn owner_reference(message: &[u8]) -> Result<Value, ProtobufError> {
    let mut owner = Map::new();
    for field in Fields::new(message) {
        let field = field?;
        match field.number {
            1 => put(&mut owner, "kind", Value::String(field.string()?)),
            3 => put(&mut owner, "name", Value::String(field.string()?)),
            4 => put(&mut owner, "uid", Value::String(field.string()?)),
            5 => put(&mut owner, "apiVersion", Value::String(field.string()?)),
            6 => {
                owner.insert("controller".into(), Value::Bool(field.bool()?));
            }
            7 => {
                owner.insert("blockOwnerDeletion".into(), Value::Bool(field.bool()?));
            }
            _ => {}
        }
    }
    Ok(Value::Object(owner))
}

fn managed_fields_entry(message: &[u8]) -> Result<Value, ProtobufError> {
    let mut entry = Map::new();
    for field in Fields::new(message) {
        let field = field?;
        match field.number {
            1 => put(&mut entry, "manager", Value::String(field.string()?)),
            2 => put(&mut entry, "operation", Value::String(field.string()?)),
            3 => put(&mut entry, "apiVersion", Value::String(field.string()?)),
            4 => put(&mut entry, "time", time(field.bytes()?)?),
            6 => put(&mut entry, "fieldsType", Value::String(field.string()?)),
            7 => {
                // FieldsV1 {1: Raw}: the JSON of the field set.
                for raw in Fields::new(field.bytes()?) {
                    let raw = raw?;
                    if raw.number == 1 {
                        let fields = serde_json::from_slice(raw.bytes()?).unwrap_or(Value::Null);
                        put(&mut entry, "fieldsV1", fields);
                    }
                }
            }
            8 => put(&mut entry, "subresource", Value::String(field.string()?)),
            _ => {}
        }
    }
    Ok(Value::Object(entry))
}

/// meta/v1 ObjectMeta.
fn object_meta(message: &[u8]) -> Result<Value, ProtobufError> {
    let mut meta = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    let mut owners = Vec::new();
    let mut finalizers = Vec::new();
    let mut managed = Vec::new();
    for field in Fields::new(message) {
        let field = field?;
        match field.number {
            1 => put(&mut meta, "name", Value::String(field.string()?)),
            2 => put(&mut meta, "generateName", Value::String(field.string()?)),
            3 => put(&mut meta, "namespace", Value::String(field.string()?)),
            5 => put(&mut meta, "uid", Value::String(field.string()?)),
            6 => put(&mut meta, "resourceVersion", Value::String(field.string()?)),
            7 => put(&mut meta, "generation", json!(field.int64()?)),
            8 => put(&mut meta, "creationTimestamp", time(field.bytes()?)?),
            9 => put(&mut meta, "deletionTimestamp", time(field.bytes()?)?),
            10 => {
                meta.insert("deletionGracePeriodSeconds".into(), json!(field.int64()?));
            }
            11 => {
                let (key, value) = map_entry(field.bytes()?, false)?;
                labels.insert(key, value);
            }
            12 => {
                let (key, value) = map_entry(field.bytes()?, false)?;
                annotations.insert(key, value);
            }
            13 => owners.push(owner_reference(field.bytes()?)?),
            14 => finalizers.push(Value::String(field.string()?)),
            17 => managed.push(managed_fields_entry(field.bytes()?)?),
            _ => {}
        }
    }
    put(&mut meta, "labels", Value::Object(labels));
    put(&mut meta, "annotations", Value::Object(annotations));
    put(&mut meta, "ownerReferences", Value::Array(owners));
    put(&mut meta, "finalizers", Value::Array(finalizers));
    put(&mut meta, "managedFields", Value::Array(managed));
    Ok(Value::Object(meta))
}

/// core/v1 Secret {1: metadata, 2: data map<string,bytes>, 3: type, 4: stringData, 5: immutable}.
fn secret(message: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let mut secret = Map::new();
    let mut data = Map::new();
    let mut string_data = Map::new();
    for field in Fields::new(message) {
        let field = field?;
        match field.number {
            1 => put(&mut secret, "metadata", object_meta(field.bytes()?)?),
            2 => {
                let (key, value) = map_entry(field.bytes()?, true)?;
                data.insert(key, value);
            }
            3 => put(&mut secret, "type", Value::String(field.string()?)),
            4 => {
                let (key, value) = map_entry(field.bytes()?, false)?;
                string_data.insert(key, value);
            }
            5 => {
                secret.insert("immutable".into(), Value::Bool(field.bool()?));
            }
            _ => {}
        }
    }
    put(&mut secret, "data", Value::Object(data));
    put(&mut secret, "stringData", Value::Object(string_data));
    Ok(secret)
}

/// core/v1 ConfigMap {1: metadata, 2: data, 3: binaryData, 4: immutable}.
fn config_map(message: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let mut config_map = Map::new();
    let mut data = Map::new();
    let mut binary_data = Map::new();
    for field in Fields::new(message) {
        let field = field?;
        match field.number {
            1 => put(&mut config_map, "metadata", object_meta(field.bytes()?)?),
            2 => {
                let (key, value) = map_entry(field.bytes()?, false)?;
                data.insert(key, value);
            }
            3 => {
                let (key, value) = map_entry(field.bytes()?, true)?;
                binary_data.insert(key, value);
            }
            4 => {
                config_map.insert("immutable".into(), Value::Bool(field.bool()?));
            }
            _ => {}
        }
    }
    put(&mut config_map, "data", Value::Object(data));
    put(&mut config_map, "binaryData", Value::Object(binary_data));
    Ok(config_map)
}

/// core/v1 Namespace {1: metadata, 2: spec{1: finalizers}}; status is the server's.
fn namespace(message: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let mut namespace = Map::new();
    for field in Fields::new(message) {
        let field = field?;
        match field.number {
            1 => put(&mut namespace, "metadata", object_meta(field.bytes()?)?),
            2 => {
                let mut finalizers = Vec::new();
                for spec_field in Fields::new(field.bytes()?) {
                    let spec_field = spec_field?;
                    if spec_field.number == 1 {
                        finalizers.push(Value::String(spec_field.string()?));
                    }
                }
                let mut spec = Map::new();
                put(&mut spec, "finalizers", Value::Array(finalizers));
                put(&mut namespace, "spec", Value::Object(spec));
            }
            _ => {}
        }
    }
    Ok(namespace)
}

/// core/v1 ServiceAccount {1: metadata, 2: secrets (ObjectReference), 3: imagePullSecrets, 4: automount}.
fn service_account(message: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let mut account = Map::new();
    let mut secrets = Vec::new();
    let mut pull_secrets = Vec::new();
    for field in Fields::new(message) {
        let field = field?;
        match field.number {
            1 => put(&mut account, "metadata", object_meta(field.bytes()?)?),
            // ObjectReference {3: name} and LocalObjectReference {1: name}.
            2 | 3 => {
                let name_field = if field.number == 2 { 3 } else { 1 };
                let mut reference = Map::new();
                for reference_field in Fields::new(field.bytes()?) {
                    let reference_field = reference_field?;
                    if reference_field.number == name_field {
                        put(
                            &mut reference,
                            "name",
                            Value::String(reference_field.string()?),
                        );
                    }
                }
                if field.number == 2 {
                    secrets.push(Value::Object(reference));
                } else {
                    pull_secrets.push(Value::Object(reference));
                }
            }
            4 => {
                account.insert(
                    "automountServiceAccountToken".into(),
                    Value::Bool(field.bool()?),
                );
            }
            _ => {}
        }
    }
    put(&mut account, "secrets", Value::Array(secrets));
    put(&mut account, "imagePullSecrets", Value::Array(pull_secrets));
    Ok(account)
}

/// meta/v1 DeleteOptions {1: gracePeriodSeconds, 2: preconditions{1: uid, 2: resourceVersion},
/// 3: orphanDependents, 4: propagationPolicy, 5: dryRun}. Optional fields are pointers in Go,
/// so they are on the wire only when set.
fn delete_options(message: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let mut options = Map::new();
    let mut dry_run = Vec::new();
    for field in Fields::new(message) {
        let field = field?;
        match field.number {
            1 => {
                options.insert("gracePeriodSeconds".into(), json!(field.int64()?));
            }
            2 => {
                let mut preconditions = Map::new();
                for precondition in Fields::new(field.bytes()?) {
                    let precondition = precondition?;
                    match precondition.number {
                        1 => {
                            preconditions
                                .insert("uid".into(), Value::String(precondition.string()?));
                        }
                        2 => {
                            preconditions.insert(
                                "resourceVersion".into(),
                                Value::String(precondition.string()?),
                            );
                        }
                        _ => {}
                    }
                }
                options.insert("preconditions".into(), Value::Object(preconditions));
            }
            3 => {
                options.insert("orphanDependents".into(), Value::Bool(field.bool()?));
            }
            4 => {
                options.insert("propagationPolicy".into(), Value::String(field.string()?));
            }
            5 => dry_run.push(Value::String(field.string()?)),
            _ => {}
        }
    }
    put(&mut options, "dryRun", Value::Array(dry_run));
    Ok(options)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
