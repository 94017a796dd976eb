//! Decodes Kubernetes protobuf request bodies (`application/vnd.kubernetes.protobuf`)
//! into the JSON form the rest of the server works on.
//!
//! client-go's typed clients (>= 1.31) send built-in kinds as protobuf: Helm 4 stores its
//! releases through the typed Secret client, and `kubectl create deployment|role|
//! rolebinding|clusterrole|clusterrolebinding|service|poddisruptionbudget` send their
//! objects that way. Every built-in kind the server serves, and meta/v1 DeleteOptions, is
//! decoded by one table-driven decoder ([`decode`]) whose table ([`messages`]) is
//! generated from the k8s-pb crate's prost types (field numbers) and k8s-openapi's
//! schemas (JSON names) by `tests/protobuf_messages.rs`, which also checks it against
//! prost's own encoding. Custom resources have no protobuf form (415, as on a real
//! server). Answers stay JSON (those clients accept `application/json`).
//!
//! Wire format: the 4-byte magic `k8s\0`, then a `runtime.Unknown` message
//! {1: TypeMeta{1: apiVersion, 2: kind}, 2: raw (the object's own message),
//! 3: contentEncoding, 4: contentType}. gogo-protobuf writes every non-pointer field,
//! empty ones included, so presence cannot tell "set" from "zero": an empty string, an
//! empty list or map and the zero time read as absent (`omitempty` in the JSON form),
//! while numbers and booleans are kept as written (a `replicas: 0` must not be lost).

use serde_json::Value;

mod decode;
#[rustfmt::skip]
mod messages;
pub mod table;

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
/// [`ProtobufError`] when the body is malformed or holds a kind the server does not decode.
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
    let Some(message) = table::root(&api_version, &kind) else {
        return Err(ProtobufError::UnsupportedKind { api_version, kind });
    };
    let mut object = decode::message(message, raw)?;
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
    Fixed64([u8; 8]),
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

    /// A double (fixed 64 bits, little-endian).
    fn double(self) -> Result<f64, ProtobufError> {
        match self.payload {
            Payload::Fixed64(bytes) => Ok(f64::from_le_bytes(bytes)),
            _ => Err(ProtobufError::WireType(1)),
        }
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
                let bytes = self.take(8)?;
                let mut fixed = [0; 8];
                fixed.copy_from_slice(bytes);
                Payload::Fixed64(fixed)
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
