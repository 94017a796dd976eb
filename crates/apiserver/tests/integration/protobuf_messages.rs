//! The protobuf message table (`src/protobuf/messages.rs`) is what the Kubernetes protos
//! say, and the decoder reads what prost writes.
//!
//! The table is generated here from two crates.io packages: the k8s-pb crate's prost
//! types (generated from upstream's `generated.proto` files: field numbers and types) and
//! k8s-openapi's schemas (the JSON name of each field, and which fields the server knows).
//! `generated_table_is_committed` fails when the committed file differs;
//! `REGENERATE=1 cargo test -p apiserver --test integration protobuf_messages` writes it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use apiserver::registry::Registry;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// Messages decoded specially (their JSON form is not their fields').
const SPECIAL: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Duration",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
];

const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";

/// One field of a prost struct.
#[derive(Debug, Clone)]
struct ProstField {
    tag: u32,
    rust_name: String,
    /// string, bool, int32, int64, double, bytes, message, or `map:<value>`.
    kind: String,
    repeated: bool,
    /// The struct a message (or map of messages) refers to: (module, name).
    target: Option<(String, String)>,
}

/// The k8s-pb crate's source directory, from `cargo metadata`.
///
/// Not `--offline`: metadata reads the manifest of every package in the lock file,
/// other platforms' included (android_system_properties), which a build for this
/// machine never downloads, so a fresh clone fails offline.
fn k8s_pb_src() -> PathBuf {
    let output = std::process::Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let manifest = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "k8s-pb")
        .expect("k8s-pb is a dev-dependency")["manifest_path"]
        .as_str()
        .unwrap()
        .to_string();
    Path::new(&manifest).parent().unwrap().join("src")
}

/// Every prost struct of k8s-pb: (module path, struct name) -> fields.
fn prost_structs(src: &Path) -> BTreeMap<(String, String), Vec<ProstField>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == "mod.rs") {
                let module = path
                    .parent()
                    .unwrap()
                    .strip_prefix(src)
                    .unwrap()
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().to_string())
                    .collect::<Vec<_>>()
                    .join("::");
                parse_module(&module, &std::fs::read_to_string(&path).unwrap(), &mut out);
            }
        }
    }
    out
}

fn parse_module(module: &str, source: &str, out: &mut BTreeMap<(String, String), Vec<ProstField>>) {
    let mut lines = source.lines().map(str::trim).peekable();
    let mut current: Option<(String, Vec<ProstField>)> = None;
    let mut attribute: Option<String> = None;
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("pub struct ") {
            if let Some(name) = rest.strip_suffix(" {") {
                current = Some((name.to_string(), Vec::new()));
            } else if let Some(name) = rest.strip_suffix(" {}") {
                out.insert((module.to_string(), name.to_string()), Vec::new());
            }
            continue;
        }
        let Some((name, fields)) = current.as_mut() else {
            continue;
        };
        if line == "}" {
            out.insert((module.to_string(), name.clone()), std::mem::take(fields));
            current = None;
            continue;
        }
        if line.starts_with("#[prost(") {
            attribute = Some(line.to_string());
            continue;
        }
        if let (Some(attr), Some(rest)) = (attribute.take(), line.strip_prefix("pub ")) {
            let (field_name, ty) = rest.split_once(':').unwrap();
            let mut ty = ty.trim().to_string();
            let open = |t: &str| t.matches('<').count() > t.matches('>').count();
            while !ty.ends_with(',') || open(&ty) {
                ty.push_str(lines.next().unwrap());
            }
            let ty = ty.trim_end_matches(',').trim_end_matches(",>").to_string() + "";
            fields.push(prost_field(module, &attr, field_name.trim(), &ty));
        }
    }
}

fn prost_field(module: &str, attr: &str, rust_name: &str, ty: &str) -> ProstField {
    let inner = attr.trim_start_matches("#[prost(").trim_end_matches(")]");
    let tag = inner
        .split("tag = \"")
        .nth(1)
        .and_then(|t| t.split('"').next())
        .unwrap()
        .parse()
        .unwrap();
    let first = inner.split([',', ' ']).next().unwrap();
    let repeated = inner.contains("repeated");
    let target_of = |ty: &str| {
        let last = ty
            .trim_end_matches(['>', ',', ' '])
            .rsplit(['<', ','])
            .next()
            .unwrap()
            .trim();
        resolve(module, last)
    };
    let (kind, target) = match first {
        "btree_map" => {
            let value = inner.split('"').nth(1).unwrap().split(", ").nth(1).unwrap();
            let target = (value == "message").then(|| target_of(ty));
            (format!("map:{value}"), target)
        }
        "message" => ("message".to_string(), Some(target_of(ty))),
        "bytes" => ("bytes".to_string(), None),
        other => (other.to_string(), None),
    };
    ProstField {
        tag,
        rust_name: rust_name.trim_start_matches("r#").to_string(),
        kind,
        repeated,
        target,
    }
}

/// A type path relative to `module` (`super::super::X::Y`, or a bare name).
fn resolve(module: &str, path: &str) -> (String, String) {
    let mut base: Vec<&str> = module.split("::").collect();
    let mut rest = path;
    while let Some(after) = rest.strip_prefix("super::") {
        base.pop();
        rest = after;
    }
    let mut parts: Vec<&str> = rest.split("::").collect();
    let name = parts.pop().unwrap().to_string();
    base.extend(parts);
    (base.join("::"), name)
}

/// The OpenAPI name a k8s-pb struct would have, lowercased (k8s-pb writes `Json...` for
/// `JSON...`).
fn openapi_key(module: &str, name: &str) -> String {
    let prefix = module
        .replace("apiextensions_apiserver", "apiextensions-apiserver")
        .replace("kube_aggregator", "kube-aggregator")
        .replace("::", ".");
    format!("io.k8s.{prefix}.{name}").to_lowercase()
}

fn normalized(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_lowercase()
}

/// The generated table's source.
fn generate() -> String {
    let registry = Registry::with_builtins();
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut definitions: BTreeMap<String, Value> = BTreeMap::new();
    let mut roots: BTreeSet<(String, String, String)> = BTreeSet::new();
    for resource in registry.all() {
        let Some(typed) = &resource.typed else {
            continue;
        };
        let schema = (typed.json_schema)(&mut generator).to_value();
        let name = (typed.schema_name)().into_owned();
        definitions.insert(name.clone(), schema);
        roots.insert((resource.api_version(), resource.kind.clone(), name));
    }
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions>();
    roots.insert(("v1".into(), "DeleteOptions".into(), DELETE_OPTIONS.into()));
    definitions.extend(generator.take_definitions(false));
    let by_lowercase: BTreeMap<String, String> = definitions
        .keys()
        .map(|k| (k.to_lowercase(), k.clone()))
        .collect();

    let structs = prost_structs(&k8s_pb_src());
    let by_key: BTreeMap<String, &Vec<ProstField>> = structs
        .iter()
        .map(|((module, name), fields)| (openapi_key(module, name), fields))
        .collect();

    let mut pending: Vec<String> = roots.iter().map(|(_, _, n)| n.clone()).collect();
    pending.push("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps".into());
    let mut messages: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut inline_parents: BTreeMap<String, String> = BTreeMap::new();
    while let Some(name) = pending.pop() {
        if messages.contains_key(&name) || SPECIAL.contains(&name.as_str()) {
            continue;
        }
        let fields = by_key
            .get(&name.to_lowercase())
            .unwrap_or_else(|| panic!("k8s-pb has no message for {name}"));
        let schema_of = inline_parents.get(&name).unwrap_or(&name);
        let properties = definitions[schema_of]["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let json_of: BTreeMap<String, String> = properties
            .keys()
            .map(|k| (normalized(k), k.clone()))
            .collect();
        let mut lines = Vec::new();
        for field in fields.iter() {
            // Go's `json:",inline"` embeddings (a Volume's VolumeSource, a Probe's
            // ProbeHandler) are fields in protobuf but flattened into their parent in JSON.
            if !json_of.contains_key(&normalized(&field.rust_name))
                && let Some((module, n)) = &field.target
                && let Some(inner) = structs.get(&(module.clone(), n.clone()))
                && !inner.is_empty()
                && inner
                    .iter()
                    .any(|f| json_of.contains_key(&normalized(&f.rust_name)))
            {
                // OpenAPI has no definition for an inlined struct: name it by its proto.
                let target = by_lowercase
                    .get(&openapi_key(module, n))
                    .cloned()
                    .unwrap_or_else(|| {
                        format!("{}.{n}", openapi_key(module, "").trim_end_matches('.'))
                    });
                lines.push(format!(
                    "            Field {{ tag: {}, json: \"\", kind: Kind::Inline({target:?}), repeated: false }},",
                    field.tag
                ));
                // The inline message's fields take their JSON names from the parent.
                inline_parents.insert(target.clone(), name.clone());
                pending.push(target);
                continue;
            }
            // A field k8s-openapi does not know is one the typed decoding would drop.
            let Some(json) = json_of.get(&normalized(&field.rust_name)) else {
                continue;
            };
            // Go's ExtraValue is a []string: a wrapper message in protobuf, an array in JSON.
            if field.kind == "map:message"
                && field
                    .target
                    .as_ref()
                    .is_some_and(|(_, n)| n == "ExtraValue")
            {
                lines.push(format!(
                    "            Field {{ tag: {}, json: {json:?}, kind: Kind::Map(MapValue::StringLists), repeated: false }},",
                    field.tag
                ));
                continue;
            }
            let target = field.target.as_ref().map(|(module, n)| {
                let key = openapi_key(module, n);
                by_lowercase
                    .get(&key)
                    .cloned()
                    .unwrap_or_else(|| panic!("{name}.{json}: k8s-openapi has no schema for {key}"))
            });
            let kind = match (field.kind.as_str(), &target) {
                ("string", _) => "Kind::String".to_string(),
                ("bool", _) => "Kind::Bool".to_string(),
                ("int32", _) => "Kind::Int32".to_string(),
                ("int64", _) => "Kind::Int64".to_string(),
                ("double", _) => "Kind::Double".to_string(),
                ("bytes", _) => "Kind::Bytes".to_string(),
                ("message", Some(t)) => format!("Kind::Message({t:?})"),
                ("map:string", _) => "Kind::Map(MapValue::String)".to_string(),
                ("map:bytes", _) => "Kind::Map(MapValue::Bytes)".to_string(),
                ("map:message", Some(t)) => format!("Kind::Map(MapValue::Message({t:?}))"),
                (other, _) => panic!("{name}.{json}: unknown prost type {other}"),
            };
            if let Some(t) = target {
                pending.push(t);
            }
            lines.push(format!(
                "            Field {{ tag: {}, json: {json:?}, kind: {kind}, repeated: {} }},",
                field.tag, field.repeated
            ));
        }
        messages.insert(name, lines);
    }

    let mut out = String::from(
        "//! Generated by `REGENERATE=1 cargo test -p apiserver --test integration protobuf_messages` from the\n//! k8s-pb crate's prost types (field numbers) and k8s-openapi's schemas (JSON names).\n//! Do not edit.\n\nuse super::table::{Field, Kind, MapValue, Message};\n\n/// The root message of each body kind: (apiVersion, kind, message).\npub static ROOTS: &[(&str, &str, &str)] = &[\n",
    );
    for (api_version, kind, name) in &roots {
        out.push_str(&format!("    ({api_version:?}, {kind:?}, {name:?}),\n"));
    }
    out.push_str("];\n\n/// Every message the decoder reads, sorted by name.\npub static MESSAGES: &[Message] = &[\n");
    for (name, lines) in &messages {
        out.push_str(&format!(
            "    Message {{\n        name: {name:?},\n        fields: &[\n"
        ));
        for line in lines {
            out.push_str(line);
            out.push('\n');
        }
        out.push_str("        ],\n    },\n");
    }
    out.push_str("];\n");
    out
}

#[test]
fn generated_table_is_committed() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protobuf/messages.rs");
    let generated = generate();
    if std::env::var_os("REGENERATE").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "src/protobuf/messages.rs is not what k8s-pb and k8s-openapi say: run REGENERATE=1 cargo test -p apiserver --test integration protobuf_messages"
    );
}

mod decoding {
    //! prost (the k8s-pb types) encodes; the server's decoder must read back what was set.

    use k8s_pb::api::apps::v1 as apps;
    use k8s_pb::api::authorization::v1 as authz;
    use k8s_pb::api::coordination::v1 as coordination;
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::api::policy::v1 as policy;
    use k8s_pb::api::rbac::v1 as rbac;
    use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as ext;
    use k8s_pb::apimachinery::pkg::api::resource::Quantity;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
    use prost::Message;
    use serde_json::{Value, json};

    fn body(api_version: &str, kind: &str, object: &impl Message) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(object.encode_to_vec()),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut out = b"k8s\0".to_vec();
        out.extend(unknown.encode_to_vec());
        out
    }

    fn decoded(api_version: &str, kind: &str, object: &impl Message) -> Value {
        apiserver::protobuf::decode_object(&body(api_version, kind, object)).unwrap()
    }

    fn named(name: &str) -> Option<meta::ObjectMeta> {
        Some(meta::ObjectMeta {
            name: Some(name.into()),
            // gogo writes non-pointer fields even when empty: the decoder drops them.
            generate_name: Some(String::new()),
            generation: Some(0),
            creation_timestamp: Some(meta::Time::default()),
            labels: [("app".to_string(), "web".to_string())].into(),
            ..Default::default()
        })
    }

    fn int(value: i32) -> Option<IntOrString> {
        Some(IntOrString {
            r#type: Some(0),
            int_val: Some(value),
            str_val: Some(String::new()),
        })
    }

    fn string(value: &str) -> Option<IntOrString> {
        Some(IntOrString {
            r#type: Some(1),
            int_val: Some(0),
            str_val: Some(value.into()),
        })
    }

    #[test]
    fn a_subject_access_review_with_extra_user_attributes() {
        let review = authz::SubjectAccessReview {
            metadata: Some(meta::ObjectMeta::default()),
            spec: Some(authz::SubjectAccessReviewSpec {
                resource_attributes: Some(authz::ResourceAttributes {
                    namespace: Some("default".into()),
                    verb: Some("get".into()),
                    resource: Some("secrets".into()),
                    ..Default::default()
                }),
                user: Some("alice".into()),
                groups: vec!["dev".into()],
                extra: [(
                    "scopes".to_string(),
                    authz::ExtraValue {
                        items: vec!["a".into(), "b".into()],
                    },
                )]
                .into(),
                ..Default::default()
            }),
            status: None,
        };
        let json = decoded("authorization.k8s.io/v1", "SubjectAccessReview", &review);
        assert_eq!(
            json["spec"],
            json!({
                "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "secrets"},
                "user": "alice", "groups": ["dev"], "extra": {"scopes": ["a", "b"]},
            })
        );
    }

    #[test]
    fn a_deployment_as_kubectl_create_sends_it() {
        let container = core::Container {
            name: Some("nginx".into()),
            image: Some("nginx:1".into()),
            ports: vec![core::ContainerPort {
                container_port: Some(80),
                protocol: Some("TCP".into()),
                ..Default::default()
            }],
            env: vec![core::EnvVar {
                name: Some("A".into()),
                value: Some("1".into()),
                ..Default::default()
            }],
            resources: Some(core::ResourceRequirements {
                limits: [(
                    "cpu".to_string(),
                    Quantity {
                        string: Some("500m".into()),
                    },
                )]
                .into(),
                ..Default::default()
            }),
            readiness_probe: Some(core::Probe {
                handler: Some(core::ProbeHandler {
                    http_get: Some(core::HttpGetAction {
                        path: Some("/".into()),
                        port: string("http"),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                period_seconds: Some(5),
                ..Default::default()
            }),
            ..Default::default()
        };
        let deployment = apps::Deployment {
            metadata: named("web"),
            spec: Some(apps::DeploymentSpec {
                replicas: Some(0),
                selector: Some(meta::LabelSelector {
                    match_labels: [("app".to_string(), "web".to_string())].into(),
                    ..Default::default()
                }),
                template: Some(core::PodTemplateSpec {
                    metadata: named("ignored"),
                    spec: Some(core::PodSpec {
                        containers: vec![container],
                        ..Default::default()
                    }),
                }),
                strategy: Some(apps::DeploymentStrategy::default()),
                ..Default::default()
            }),
            status: Some(apps::DeploymentStatus::default()),
        };
        let object = decoded("apps/v1", "Deployment", &deployment);
        assert_eq!(
            object,
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labels": {"app": "web"}},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                    "strategy": {},
                    "template": {"metadata": {"name": "ignored", "labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "nginx", "image": "nginx:1",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "env": [{"name": "A", "value": "1"}],
                            "resources": {"limits": {"cpu": "500m"}},
                            "readinessProbe": {"httpGet": {"path": "/", "port": "http"},
                                "periodSeconds": 5}}]}}},
                "status": {}})
        );
        let typed: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(object).unwrap();
        assert_eq!(typed.spec.unwrap().replicas, Some(0));
    }

    #[test]
    fn rbac_objects() {
        let rule = rbac::PolicyRule {
            verbs: vec!["get".into(), "list".into()],
            api_groups: vec![String::new()],
            resources: vec!["pods".into()],
            ..Default::default()
        };
        let role = rbac::Role {
            metadata: named("reader"),
            rules: vec![rule.clone()],
        };
        assert_eq!(
            decoded("rbac.authorization.k8s.io/v1", "Role", &role)["rules"],
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
        );
        let cluster_role = rbac::ClusterRole {
            metadata: named("agg"),
            rules: vec![rule],
            aggregation_rule: Some(rbac::AggregationRule {
                cluster_role_selectors: vec![meta::LabelSelector {
                    match_expressions: vec![meta::LabelSelectorRequirement {
                        key: Some("k".into()),
                        operator: Some("Exists".into()),
                        values: vec![],
                    }],
                    ..Default::default()
                }],
            }),
        };
        let object = decoded("rbac.authorization.k8s.io/v1", "ClusterRole", &cluster_role);
        assert_eq!(
            object["aggregationRule"],
            json!({"clusterRoleSelectors": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]})
        );
        let binding = rbac::RoleBinding {
            metadata: named("b"),
            subjects: vec![rbac::Subject {
                kind: Some("ServiceAccount".into()),
                name: Some("sa".into()),
                namespace: Some("default".into()),
                api_group: Some(String::new()),
            }],
            role_ref: Some(rbac::RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: Some("Role".into()),
                name: Some("reader".into()),
            }),
        };
        let object = decoded("rbac.authorization.k8s.io/v1", "RoleBinding", &binding);
        assert_eq!(
            (object["subjects"].clone(), object["roleRef"].clone()),
            (
                json!([{"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]),
                json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"})
            )
        );
        let cluster_binding = rbac::ClusterRoleBinding {
            metadata: named("cb"),
            subjects: vec![],
            role_ref: binding.role_ref.clone(),
        };
        assert_eq!(
            decoded(
                "rbac.authorization.k8s.io/v1",
                "ClusterRoleBinding",
                &cluster_binding
            )["roleRef"]["name"],
            "reader"
        );
    }

    #[test]
    fn services_pdbs_leases_and_events() {
        let service = core::Service {
            metadata: named("s"),
            spec: Some(core::ServiceSpec {
                r#type: Some("ClusterIP".into()),
                ports: vec![core::ServicePort {
                    name: Some("80-8080".into()),
                    port: Some(80),
                    target_port: int(8080),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }],
                selector: [("app".to_string(), "s".to_string())].into(),
                ..Default::default()
            }),
            status: None,
        };
        assert_eq!(
            decoded("v1", "Service", &service)["spec"],
            json!({"type": "ClusterIP", "selector": {"app": "s"},
                "ports": [{"name": "80-8080", "port": 80, "targetPort": 8080, "protocol": "TCP"}]})
        );
        let pdb = policy::PodDisruptionBudget {
            metadata: named("p"),
            spec: Some(policy::PodDisruptionBudgetSpec {
                min_available: string("50%"),
                selector: Some(meta::LabelSelector::default()),
                ..Default::default()
            }),
            status: None,
        };
        assert_eq!(
            decoded("policy/v1", "PodDisruptionBudget", &pdb)["spec"],
            json!({"minAvailable": "50%", "selector": {}})
        );
        let lease = coordination::Lease {
            metadata: named("l"),
            spec: Some(coordination::LeaseSpec {
                holder_identity: Some("me".into()),
                lease_duration_seconds: Some(15),
                renew_time: Some(meta::MicroTime {
                    seconds: Some(1_700_000_000),
                    nanos: Some(123_456_000),
                }),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        assert_eq!(
            decoded("coordination.k8s.io/v1", "Lease", &lease)["spec"],
            json!({"holderIdentity": "me", "leaseDurationSeconds": 15, "leaseTransitions": 0,
                "renewTime": "2023-11-14T22:13:20.123456Z"})
        );
        let event = k8s_pb::api::events::v1::Event {
            metadata: named("e"),
            event_time: Some(meta::MicroTime {
                seconds: Some(1_700_000_000),
                nanos: Some(0),
            }),
            reason: Some("Started".into()),
            note: Some("hello".into()),
            regarding: Some(core::ObjectReference {
                kind: Some("Pod".into()),
                name: Some("p".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let object = decoded("events.k8s.io/v1", "Event", &event);
        assert_eq!(object["eventTime"], "2023-11-14T22:13:20.000000Z");
        assert_eq!(object["regarding"], json!({"kind": "Pod", "name": "p"}));
    }

    #[test]
    fn a_crd_with_a_schema() {
        let string = ext::JsonSchemaProps {
            r#type: Some("string".into()),
            ..Default::default()
        };
        let schema = ext::JsonSchemaProps {
            r#type: Some("object".into()),
            properties: [
                ("name".to_string(), string.clone()),
                (
                    "tags".to_string(),
                    ext::JsonSchemaProps {
                        r#type: Some("array".into()),
                        items: Some(Box::new(ext::JsonSchemaPropsOrArray {
                            schema: Some(Box::new(string.clone())),
                            j_son_schemas: vec![],
                        })),
                        ..Default::default()
                    },
                ),
                (
                    "size".to_string(),
                    ext::JsonSchemaProps {
                        r#type: Some("integer".into()),
                        default: Some(ext::Json {
                            raw: Some(b"3".to_vec()),
                        }),
                        ..Default::default()
                    },
                ),
            ]
            .into(),
            additional_properties: Some(Box::new(ext::JsonSchemaPropsOrBool {
                allows: Some(false),
                schema: None,
            })),
            x_kubernetes_preserve_unknown_fields: Some(true),
            ..Default::default()
        };
        let crd = ext::CustomResourceDefinition {
            metadata: named("things.example.com"),
            spec: Some(ext::CustomResourceDefinitionSpec {
                group: Some("example.com".into()),
                names: Some(ext::CustomResourceDefinitionNames {
                    plural: Some("things".into()),
                    kind: Some("Thing".into()),
                    ..Default::default()
                }),
                scope: Some("Namespaced".into()),
                versions: vec![ext::CustomResourceDefinitionVersion {
                    name: Some("v1".into()),
                    served: Some(true),
                    storage: Some(true),
                    schema: Some(ext::CustomResourceValidation {
                        open_apiv3_schema: Some(schema),
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: None,
        };
        let object = decoded("apiextensions.k8s.io/v1", "CustomResourceDefinition", &crd);
        assert_eq!(
            object["spec"]["versions"][0]["schema"]["openAPIV3Schema"],
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                "additionalProperties": false,
                "properties": {"name": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "size": {"type": "integer", "default": 3}}})
        );
    }

    #[test]
    fn custom_resources_have_no_protobuf_form() {
        let role = rbac::Role {
            metadata: named("w"),
            rules: vec![],
        };
        assert!(matches!(
            apiserver::protobuf::decode_object(&body("example.com/v1", "Widget", &role)),
            Err(apiserver::protobuf::ProtobufError::UnsupportedKind { .. })
        ));
    }
}
