//! [`SchemaTypes`] read from a structural OpenAPI v3 schema, as a CRD version's
//! `schema.openAPIV3Schema` carries it.

use serde_json::Value;

use super::{ListType, SchemaTypes};

/// The list and map types a structural schema declares with `x-kubernetes-list-type`,
/// `x-kubernetes-list-map-keys` and `x-kubernetes-map-type`. Lists without a list type
/// are atomic, objects without a map type granular, as on the real server.
#[derive(Debug, Clone, Copy)]
pub struct OpenApiTypes<'a> {
    root: &'a Value,
}

impl<'a> OpenApiTypes<'a> {
    /// Reads types from the schema of the whole object (`openAPIV3Schema`).
    #[must_use]
    pub fn new(root: &'a Value) -> Self {
        Self { root }
    }

    /// The schema node for a path of field names; list items add nothing to the path.
    fn node(&self, path: &[&str]) -> Option<&'a Value> {
        let mut current = self.root;
        for name in path {
            while let Some(items) = current.get("items") {
                current = items;
            }
            current = current
                .get("properties")
                .and_then(|properties| properties.get(*name))
                .or_else(|| {
                    current
                        .get("additionalProperties")
                        .filter(|a| a.is_object())
                })?;
        }
        Some(current)
    }
}

impl SchemaTypes for OpenApiTypes<'_> {
    fn list_type(&self, path: &[&str]) -> ListType {
        let Some(node) = self.node(path) else {
            return ListType::Atomic;
        };
        match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(
                node.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => ListType::Atomic,
        }
    }

    fn map_is_atomic(&self, path: &[&str]) -> bool {
        self.node(path)
            .and_then(|node| node.get("x-kubernetes-map-type"))
            .and_then(Value::as_str)
            == Some("atomic")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_list_and_map_types_through_lists() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "contracts": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {
                    "ports": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "integer"}},
                    "plain": {"type": "array", "items": {"type": "string"}}
                }}},
            "selector": {"type": "object", "x-kubernetes-map-type": "atomic"},
            "extra": {"type": "object", "additionalProperties": {"type": "array", "x-kubernetes-list-type": "set"}}
        }}}});
        let types = OpenApiTypes::new(&schema);
        assert_eq!(
            types.list_type(&["spec", "contracts"]),
            ListType::Map(vec!["name".into()])
        );
        assert_eq!(
            types.list_type(&["spec", "contracts", "ports"]),
            ListType::Set
        );
        assert_eq!(
            types.list_type(&["spec", "contracts", "plain"]),
            ListType::Atomic
        );
        assert_eq!(
            types.list_type(&["spec", "extra", "anything"]),
            ListType::Set
        );
        assert_eq!(types.list_type(&["spec", "unknown"]), ListType::Atomic);
        assert!(types.map_is_atomic(&["spec", "selector"]));
        assert!(!types.map_is_atomic(&["spec"]));
    }
}
