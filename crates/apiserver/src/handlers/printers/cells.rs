//! The cells of the built-in printers and the formatting helpers they share.

use serde_json::{Value, json};

use super::{NAME, Now, column};

pub(super) fn name(object: &Value) -> Value {
    object["metadata"]["name"].clone()
}

pub(super) fn text(value: &Value) -> Value {
    json!(value.as_str().unwrap_or_default())
}

pub(super) fn int(value: &Value) -> i64 {
    value.as_i64().unwrap_or(0)
}

/// spec.replicas, which the real server defaults to 1.
pub(super) fn replicas(object: &Value) -> i64 {
    object["spec"]["replicas"].as_i64().unwrap_or(1)
}

pub(super) fn entries(value: &Value) -> usize {
    value.as_object().map_or(0, serde_json::Map::len)
}

pub(super) fn count(value: &Value) -> usize {
    value.as_array().map_or(0, Vec::len)
}

pub(super) fn joined(list: &Value, key: &str, separator: &str) -> String {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|i| i[key].as_str())
                .collect::<Vec<_>>()
                .join(separator)
        })
        .unwrap_or_default()
}

pub(super) fn since(timestamp: &Value, now: Now) -> Option<String> {
    let then = chrono::DateTime::parse_from_rfc3339(timestamp.as_str()?).ok()?;
    Some(apiextensions::human_duration(
        now - then.with_timezone(&chrono::Utc),
    ))
}

pub(super) fn age_of(object: &Value, now: Now) -> Value {
    json!(
        since(&object["metadata"]["creationTimestamp"], now).unwrap_or_else(|| "<unknown>".into())
    )
}

/// `metav1.FormatLabelSelector`: `k=v,k in (a,b),...`, `<none>` when empty.
pub(super) fn label_selector(selector: &Value) -> String {
    let mut parts: Vec<String> = selector["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    for expression in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = expression["key"].as_str().unwrap_or_default();
        let values = joined_strings(&expression["values"], ",");
        parts.push(match expression["operator"].as_str().unwrap_or_default() {
            "In" => format!("{key} in ({values})"),
            "NotIn" => format!("{key} notin ({values})"),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other} ({values})"),
        });
    }
    if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    }
}

pub(super) fn joined_strings(list: &Value, separator: &str) -> String {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(separator)
        })
        .unwrap_or_default()
}

pub(super) fn service_cells(o: &Value, now: Now) -> Vec<Value> {
    let spec = &o["spec"];
    let kind = spec["type"].as_str().unwrap_or("ClusterIP");
    let cluster_ip = spec["clusterIPs"][0]
        .as_str()
        .or_else(|| spec["clusterIP"].as_str())
        .unwrap_or("<none>");
    let external_ips = joined_strings(&spec["externalIPs"], ",");
    let external = match kind {
        "ExternalName" => spec["externalName"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        "LoadBalancer" => {
            let ingress: Vec<&str> = o["status"]["loadBalancer"]["ingress"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|i| i["ip"].as_str().or_else(|| i["hostname"].as_str()))
                .chain(external_ips.split(',').filter(|s| !s.is_empty()))
                .collect();
            if ingress.is_empty() {
                "<pending>".into()
            } else {
                ingress.join(",")
            }
        }
        _ if external_ips.is_empty() => "<none>".into(),
        _ => external_ips,
    };
    let ports: Vec<String> = spec["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let protocol = p["protocol"].as_str().unwrap_or("TCP");
            match p["nodePort"].as_i64().filter(|n| *n != 0) {
                Some(node_port) => format!("{}:{node_port}/{protocol}", int(&p["port"])),
                None => format!("{}/{protocol}", int(&p["port"])),
            }
        })
        .collect();
    let selector = spec["selector"]
        .as_object()
        .filter(|m| !m.is_empty())
        .map_or_else(
            || "<none>".to_string(),
            |m| {
                m.iter()
                    .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join(",")
            },
        );
    vec![
        name(o),
        json!(kind),
        json!(cluster_ip),
        json!(external),
        json!(if ports.is_empty() {
            "<none>".to_string()
        } else {
            ports.join(",")
        }),
        age_of(o, now),
        json!(selector),
    ]
}

pub(super) fn pod_cells(o: &Value, now: Now) -> Vec<Value> {
    let statuses = o["status"]["containerStatuses"].as_array();
    let ready = statuses
        .into_iter()
        .flatten()
        .filter(|s| s["ready"].as_bool() == Some(true))
        .count();
    let restarts: i64 = statuses
        .into_iter()
        .flatten()
        .map(|s| int(&s["restartCount"]))
        .sum();
    let status = if o["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else {
        o["status"]["reason"]
            .as_str()
            .or_else(|| o["status"]["phase"].as_str())
            .unwrap_or("Pending")
    };
    let none = |v: &Value| json!(v.as_str().unwrap_or("<none>"));
    let gates = count(&o["spec"]["readinessGates"]);
    vec![
        name(o),
        json!(format!("{ready}/{}", count(&o["spec"]["containers"]))),
        json!(status),
        json!(restarts),
        age_of(o, now),
        none(&o["status"]["podIP"]),
        none(&o["spec"]["nodeName"]),
        none(&o["status"]["nominatedNodeName"]),
        json!(if gates == 0 {
            "<none>".to_string()
        } else {
            format!("0/{gates}")
        }),
    ]
}

pub(super) fn event_columns() -> Vec<Value> {
    vec![
        column(
            "Last Seen",
            "string",
            0,
            "The time at which the most recent occurrence of this event was recorded.",
        ),
        column(
            "Type",
            "string",
            0,
            "Type of this event (Normal, Warning), new types could be added in the future",
        ),
        column(
            "Reason",
            "string",
            0,
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        column(
            "Object",
            "string",
            0,
            "The object that this event is about.",
        ),
        column(
            "Subobject",
            "string",
            1,
            "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement.",
        ),
        column(
            "Source",
            "string",
            1,
            "The component reporting this event. Should be a short machine understandable string.",
        ),
        column(
            "Message",
            "string",
            0,
            "A human-readable description of the status of this operation.",
        ),
        column(
            "First Seen",
            "string",
            1,
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        ),
        column(
            "Count",
            "string",
            1,
            "The number of times this event has occurred.",
        ),
        column("Name", "string", 1, NAME),
    ]
}

/// `printEvent`: LAST SEEN from lastTimestamp, the series or eventTime; OBJECT `kind/name`.
pub(super) fn event_cells(o: &Value, now: Now) -> Vec<Value> {
    let first = since(&o["firstTimestamp"], now).or_else(|| since(&o["eventTime"], now));
    let mut last = since(&o["lastTimestamp"], now).or_else(|| first.clone());
    let mut occurrences = int(&o["count"]);
    if o["series"].is_object() {
        last = since(&o["series"]["lastObservedTime"], now);
        occurrences = int(&o["series"]["count"]);
    } else if occurrences == 0 {
        occurrences = 1;
    }
    let involved = &o["involvedObject"];
    let kind = involved["kind"].as_str().unwrap_or_default().to_lowercase();
    let target = match involved["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };
    let component = o["source"]["component"]
        .as_str()
        .filter(|s| !s.is_empty())
        .or_else(|| o["reportingComponent"].as_str())
        .unwrap_or_default();
    let instance = o["source"]["host"]
        .as_str()
        .filter(|s| !s.is_empty())
        .or_else(|| o["reportingInstance"].as_str())
        .unwrap_or_default();
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    let unknown = || "<unknown>".to_string();
    vec![
        json!(last.unwrap_or_else(unknown)),
        text(&o["type"]),
        text(&o["reason"]),
        json!(target),
        text(&involved["fieldPath"]),
        json!(source),
        json!(o["message"].as_str().unwrap_or_default().trim()),
        json!(first.unwrap_or_else(unknown)),
        json!(occurrences),
        name(o),
    ]
}

/// `printRoleBinding`: ROLE `Kind/name`; subjects by kind (service accounts `ns/name`).
pub(super) fn binding_cells(o: &Value, now: Now) -> Vec<Value> {
    let role = format!(
        "{}/{}",
        o["roleRef"]["kind"].as_str().unwrap_or_default(),
        o["roleRef"]["name"].as_str().unwrap_or_default()
    );
    let subjects = |kind: &str| {
        o["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["kind"] == kind)
            .map(|s| {
                let name = s["name"].as_str().unwrap_or_default();
                match s["namespace"].as_str() {
                    Some(ns) if kind == "ServiceAccount" => format!("{ns}/{name}"),
                    _ => name.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    vec![
        name(o),
        json!(role),
        age_of(o, now),
        json!(subjects("User")),
        json!(subjects("Group")),
        json!(subjects("ServiceAccount")),
    ]
}
