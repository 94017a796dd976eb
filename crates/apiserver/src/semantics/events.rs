//! events.k8s.io/v1 Events and core/v1 Events are one resource stored once (as on a real
//! cluster): stored in the core/v1 form, converted at the events.k8s.io/v1 boundary, so
//! events the kube-runtime Recorder writes show in `kubectl describe`.

use serde_json::{Map, Value, json};

use crate::registry::Resource;

/// Whether `res` is events.k8s.io/v1 Events.
#[must_use]
pub fn is_events_v1(res: &Resource) -> bool {
    res.group == "events.k8s.io" && res.plural == "events"
}

fn copy(from: &Value, from_key: &str, to: &mut Map<String, Value>, to_key: &str) {
    if let Some(v) = from.get(from_key).filter(|v| !v.is_null()) {
        to.insert(to_key.to_string(), v.clone());
    }
}

/// core/v1 -> events.k8s.io/v1.
#[must_use]
pub fn to_events_v1(core: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    out.insert("kind".into(), json!("Event"));
    copy(core, "metadata", &mut out, "metadata");
    copy(core, "eventTime", &mut out, "eventTime");
    copy(core, "series", &mut out, "series");
    copy(core, "action", &mut out, "action");
    copy(core, "reason", &mut out, "reason");
    copy(core, "type", &mut out, "type");
    copy(core, "message", &mut out, "note");
    copy(core, "involvedObject", &mut out, "regarding");
    copy(core, "related", &mut out, "related");
    copy(core, "source", &mut out, "deprecatedSource");
    copy(core, "firstTimestamp", &mut out, "deprecatedFirstTimestamp");
    copy(core, "lastTimestamp", &mut out, "deprecatedLastTimestamp");
    copy(core, "count", &mut out, "deprecatedCount");
    copy(core, "reportingComponent", &mut out, "reportingController");
    copy(core, "reportingInstance", &mut out, "reportingInstance");
    Value::Object(out)
}

/// events.k8s.io/v1 -> core/v1.
#[must_use]
pub fn to_core(event: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    copy(event, "metadata", &mut out, "metadata");
    copy(event, "eventTime", &mut out, "eventTime");
    copy(event, "series", &mut out, "series");
    copy(event, "action", &mut out, "action");
    copy(event, "reason", &mut out, "reason");
    copy(event, "type", &mut out, "type");
    copy(event, "note", &mut out, "message");
    copy(event, "regarding", &mut out, "involvedObject");
    copy(event, "related", &mut out, "related");
    copy(event, "reportingController", &mut out, "reportingComponent");
    copy(event, "reportingInstance", &mut out, "reportingInstance");
    copy(
        event,
        "deprecatedFirstTimestamp",
        &mut out,
        "firstTimestamp",
    );
    copy(event, "deprecatedLastTimestamp", &mut out, "lastTimestamp");
    copy(event, "deprecatedCount", &mut out, "count");
    // As the real conversion: `source` only from deprecatedSource (kubectl describe falls
    // back to reportingController for its From column).
    copy(event, "deprecatedSource", &mut out, "source");
    Value::Object(out)
}

/// The object in the form `res` serves.
#[must_use]
pub fn served(res: &Resource, stored: Value) -> Value {
    if is_events_v1(res) {
        to_events_v1(&stored)
    } else {
        stored
    }
}

/// The object in the stored form.
#[must_use]
pub fn stored(res: &Resource, served: Value) -> Value {
    if is_events_v1(res) {
        to_core(&served)
    } else {
        served
    }
}

/// A events.k8s.io field selector name in the stored (core) form.
#[must_use]
pub fn stored_field(field: &str) -> String {
    if let Some(rest) = field.strip_prefix("regarding.") {
        return format!("involvedObject.{rest}");
    }
    match field {
        "reportingController" => "reportingComponent".into(),
        other => other.into(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_the_recorder_fields() {
        let event = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "w.1", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "action": "Reconcile", "reason": "Ready",
            "type": "Normal", "note": "ready now", "reportingController": "ctl", "reportingInstance": "ctl-1",
            "regarding": {"kind": "Widget", "name": "w", "namespace": "default", "uid": "u1"},
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"},
        });
        let core = to_core(&event);
        assert_eq!(core["message"], "ready now");
        assert_eq!(core["involvedObject"]["name"], "w");
        assert_eq!(core["reportingComponent"], "ctl");
        assert_eq!(to_events_v1(&core), event);
    }
}
