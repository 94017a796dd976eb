//! Correlating a new value with the old one on update (apiserver `common.CorrelatedObject`):
//! object fields and map values by key, list items only in `x-kubernetes-list-type: map`
//! lists (by their keys). Atomic and set lists do not correlate, so transition rules and
//! ratcheting do not apply to their items.

use serde_json::Value;

use super::listtype::map_key;
use super::parse::Node;

/// The old value of an object field.
pub(crate) fn old_property<'a>(old: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    old.and_then(Value::as_object).and_then(|o| o.get(key))
}

/// The old item matching `item` of a list at `list_node`, for list-type map only.
pub(crate) fn old_item<'a>(
    list_node: &Node,
    old_list: Option<&'a Value>,
    item: &Value,
) -> Option<&'a Value> {
    if list_node.list_type.as_deref() != Some("map") || list_node.list_map_keys.is_empty() {
        return None;
    }
    let key = map_key(&list_node.list_map_keys, item);
    old_list.and_then(Value::as_array).and_then(|items| {
        items
            .iter()
            .find(|o| map_key(&list_node.list_map_keys, o) == key)
    })
}
