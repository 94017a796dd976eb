//! The shape of the generated message table ([`super::messages`]): for each Kubernetes
//! protobuf message the server decodes, its fields' numbers, JSON names and types.

/// One message, named as its OpenAPI definition (`io.k8s.api.apps.v1.Deployment`).
#[derive(Debug)]
pub struct Message {
    /// The OpenAPI definition name.
    pub name: &'static str,
    /// Its fields, by field number.
    pub fields: &'static [Field],
}

/// One field of a message.
#[derive(Debug)]
pub struct Field {
    /// The field number.
    pub tag: u32,
    /// The JSON name.
    pub json: &'static str,
    /// The value's type.
    pub kind: Kind,
    /// A repeated field (a JSON list).
    pub repeated: bool,
}

/// The type of a field's value.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A string.
    String,
    /// A bool.
    Bool,
    /// An int32 (varint, negative values sign-extended to 64 bits).
    Int32,
    /// An int64.
    Int64,
    /// A double (fixed 64 bits).
    Double,
    /// Bytes, base64 in JSON.
    Bytes,
    /// A message, by OpenAPI name (in the table, or special).
    Message(&'static str),
    /// A `map<string, V>` (a JSON object).
    Map(MapValue),
    /// A message embedded with Go's `json:",inline"`: its fields join the parent's.
    Inline(&'static str),
}

/// The value type of a map.
#[derive(Debug, Clone, Copy)]
pub enum MapValue {
    /// Strings.
    String,
    /// Bytes, base64 in JSON.
    Bytes,
    /// Messages, by OpenAPI name.
    Message(&'static str),
    /// Lists of strings: Go's `ExtraValue` (a `[]string`), in protobuf a message
    /// {1: repeated string}, in JSON an array (`extra` of the review kinds' user info).
    StringLists,
}

/// The table entry of a message, by OpenAPI name.
#[must_use]
pub fn find(name: &str) -> Option<&'static Message> {
    let messages = super::messages::MESSAGES;
    messages
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .and_then(|i| messages.get(i))
}

/// The message of a body's `apiVersion` and `kind` (DeleteOptions under any group).
#[must_use]
pub fn root(api_version: &str, kind: &str) -> Option<&'static str> {
    super::messages::ROOTS
        .iter()
        .find(|(v, k, _)| *k == kind && (*v == api_version || kind == "DeleteOptions"))
        .map(|(_, _, name)| *name)
}
