//! The Table columns of built-in kinds, as the real server's printers make them
//! (kubernetes/pkg/printers/internalversion/printers.go, 1.32). The server always prints the
//! wide form: kubectl hides the columns of priority 1 unless `-o wide`. Kinds without a
//! printer there (Roles, ClusterRoles, CRDs) get the default: Name and Created At.

use serde_json::{Value, json};

use crate::registry::Resource;

mod cells;

use cells::{
    age_of, binding_cells, entries, event_cells, event_columns, int, joined, label_selector, name,
    pod_cells, replicas, service_cells, text,
};

pub(crate) type Now = chrono::DateTime<chrono::Utc>;

/// Makes the cells of one object.
pub type Cells = fn(&Value, Now) -> Vec<Value>;

/// The columns and the cells of one built-in kind.
pub struct Printer {
    /// Column definitions (`name`, `type`, `format`, `description`, `priority`).
    pub columns: Vec<Value>,
    /// The cells of one object (stored form: core/v1 for both kinds of Event).
    pub cells: Cells,
}

pub(crate) fn column(name: &str, kind: &str, priority: u8, description: &str) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": kind, "format": format, "description": description, "priority": priority})
}

pub(crate) const NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const CREATED: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.";
const CONTAINERS: &str = "Names of each container in the template.";
const IMAGES: &str = "Images referenced by each container in the template.";

fn named(rest: &[(&str, &str, u8, &str)]) -> Vec<Value> {
    let mut columns = vec![column("Name", "string", 0, NAME)];
    columns.extend(
        rest.iter()
            .map(|(name, kind, priority, description)| column(name, kind, *priority, description)),
    );
    columns
}

/// The printer of a built-in kind (None: custom resources, which use their CRD's columns).
#[must_use]
pub fn printer(res: &Resource) -> Option<Printer> {
    if res.custom {
        return None;
    }
    let age = ("Age", "string", 0, CREATED);
    let (columns, cells): (Vec<Value>, Cells) = match (res.group.as_str(), res.plural.as_str()) {
        ("", "namespaces") => (
            named(&[("Status", "string", 0, "The status of the namespace"), age]),
            |o, now| vec![name(o), text(&o["status"]["phase"]), age_of(o, now)],
        ),
        ("", "configmaps") => (
            named(&[
                ("Data", "string", 0, "Data contains the configuration data."),
                age,
            ]),
            |o, now| {
                let count = entries(&o["data"]) + entries(&o["binaryData"]);
                vec![name(o), json!(count), age_of(o, now)]
            },
        ),
        ("", "secrets") => (
            named(&[
                (
                    "Type",
                    "string",
                    0,
                    "Used to facilitate programmatic handling of secret data.",
                ),
                ("Data", "string", 0, "Data contains the secret data."),
                age,
            ]),
            |o, now| {
                vec![
                    name(o),
                    text(&o["type"]),
                    json!(entries(&o["data"])),
                    age_of(o, now),
                ]
            },
        ),
        ("", "serviceaccounts") => (
            named(&[
                (
                    "Secrets",
                    "string",
                    0,
                    "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
                ),
                age,
            ]),
            |o, now| vec![name(o), json!(cells::count(&o["secrets"])), age_of(o, now)],
        ),
        ("", "services") => (
            named(&[
                (
                    "Type",
                    "string",
                    0,
                    "type determines how the Service is exposed.",
                ),
                (
                    "Cluster-IP",
                    "string",
                    0,
                    "clusterIP is the IP address of the service.",
                ),
                (
                    "External-IP",
                    "string",
                    0,
                    "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
                ),
                (
                    "Port(s)",
                    "string",
                    0,
                    "The list of ports that are exposed by this service.",
                ),
                age,
                (
                    "Selector",
                    "string",
                    1,
                    "Route service traffic to pods with label keys and values matching this selector.",
                ),
            ]),
            service_cells,
        ),
        ("", "pods") => (
            named(&[
                (
                    "Ready",
                    "string",
                    0,
                    "The aggregate readiness state of this pod for accepting traffic.",
                ),
                (
                    "Status",
                    "string",
                    0,
                    "The aggregate status of the containers in this pod.",
                ),
                (
                    "Restarts",
                    "string",
                    0,
                    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                ),
                age,
                ("IP", "string", 1, "podIP address allocated to the pod."),
                (
                    "Node",
                    "string",
                    1,
                    "NodeName indicates in which node this pod is scheduled.",
                ),
                (
                    "Nominated Node",
                    "string",
                    1,
                    "nominatedNodeName is set only when this pod preempts other pods on the node.",
                ),
                (
                    "Readiness Gates",
                    "string",
                    1,
                    "If specified, all readiness gates will be evaluated for pod readiness.",
                ),
            ]),
            pod_cells,
        ),
        ("" | "events.k8s.io", "events") => (event_columns(), event_cells),
        ("apps", "deployments") => (
            named(&[
                ("Ready", "string", 0, "Number of the pod with ready state"),
                (
                    "Up-to-date",
                    "string",
                    0,
                    "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
                ),
                (
                    "Available",
                    "string",
                    0,
                    "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
                ),
                age,
                ("Containers", "string", 1, CONTAINERS),
                ("Images", "string", 1, IMAGES),
                ("Selector", "string", 1, "Label selector for pods."),
            ]),
            |o, now| {
                let template = &o["spec"]["template"]["spec"];
                vec![
                    name(o),
                    json!(format!(
                        "{}/{}",
                        int(&o["status"]["readyReplicas"]),
                        replicas(o)
                    )),
                    json!(int(&o["status"]["updatedReplicas"])),
                    json!(int(&o["status"]["availableReplicas"])),
                    age_of(o, now),
                    json!(joined(&template["containers"], "name", ",")),
                    json!(joined(&template["containers"], "image", ",")),
                    json!(label_selector(&o["spec"]["selector"])),
                ]
            },
        ),
        ("apps", "statefulsets") => (
            named(&[
                ("Ready", "string", 0, "Number of the pod with ready state"),
                age,
                ("Containers", "string", 1, CONTAINERS),
                ("Images", "string", 1, IMAGES),
            ]),
            |o, now| {
                let template = &o["spec"]["template"]["spec"];
                vec![
                    name(o),
                    json!(format!(
                        "{}/{}",
                        int(&o["status"]["readyReplicas"]),
                        replicas(o)
                    )),
                    age_of(o, now),
                    json!(joined(&template["containers"], "name", ",")),
                    json!(joined(&template["containers"], "image", ",")),
                ]
            },
        ),
        ("rbac.authorization.k8s.io", "rolebindings" | "clusterrolebindings") => (
            named(&[
                (
                    "Role",
                    "string",
                    0,
                    "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
                ),
                age,
                ("Users", "string", 1, "Users in the roleBinding"),
                ("Groups", "string", 1, "Groups in the roleBinding"),
                (
                    "ServiceAccounts",
                    "string",
                    1,
                    "ServiceAccounts in the roleBinding",
                ),
            ]),
            binding_cells,
        ),
        ("policy", "poddisruptionbudgets") => (
            named(&[
                (
                    "Min Available",
                    "string",
                    0,
                    "The minimum number of pods that must be available.",
                ),
                (
                    "Max Unavailable",
                    "string",
                    0,
                    "The maximum number of pods that may be unavailable.",
                ),
                (
                    "Allowed Disruptions",
                    "integer",
                    0,
                    "Calculated number of pods that may be disrupted at this time.",
                ),
                age,
            ]),
            |o, now| {
                let or_na = |v: &Value| match v {
                    Value::Null => json!("N/A"),
                    Value::String(s) => json!(s),
                    other => json!(other.to_string()),
                };
                vec![
                    name(o),
                    or_na(&o["spec"]["minAvailable"]),
                    or_na(&o["spec"]["maxUnavailable"]),
                    json!(int(&o["status"]["disruptionsAllowed"])),
                    age_of(o, now),
                ]
            },
        ),
        ("coordination.k8s.io", "leases") => (
            named(&[
                (
                    "Holder",
                    "string",
                    0,
                    "holderIdentity contains the identity of the holder of a current lease.",
                ),
                age,
            ]),
            |o, now| vec![name(o), text(&o["spec"]["holderIdentity"]), age_of(o, now)],
        ),
        _ => (named(&[("Created At", "date", 0, CREATED)]), |o, _| {
            vec![name(o), o["metadata"]["creationTimestamp"].clone()]
        }),
    };
    Some(Printer { columns, cells })
}
