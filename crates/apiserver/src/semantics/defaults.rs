//! The API defaults kube-apiserver 1.32 gives workloads when it decodes them (issue 15 item
//! 8): `SetDefaults_Deployment` and `SetDefaults_StatefulSet` (k8s.io/kubernetes/pkg/apis/
//! apps/v1/defaults.go) and, for their pod templates, `SetDefaults_PodSpec`,
//! `SetDefaults_Container`, probes, volumes and ports, and `SetDefaults_Service`
//! (pkg/apis/core/v1/defaults.go and the generated `+default` markers). Not what the
//! registries allocate (a Service's clusterIP and ipFamilies) nor what admission adds. Controllers and kubectl read these fields (`kubectl
//! describe deploy` prints the strategy, `rollout` the surge): without them an object here
//! reads differently from the same object on a cluster.
//!
//! Defaults fill only what is absent (and, as Go's zero-value checks do, empty strings and
//! zero counts where the Go field is not a pointer), so an explicit value always stays. They
//! run on every write before field ownership is taken, as upstream's decoder does: an
//! Update-type writer owns the defaults it caused, an applier does not.

use serde_json::{Map, Value, json};

/// Fills upstream's defaults into an apps/v1 Deployment or StatefulSet or a core/v1
/// Service; other kinds are left as they are.
pub fn apply(group: &str, plural: &str, object: &mut Value) {
    let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    match (group, plural) {
        ("apps", "deployments") => deployment(spec),
        ("apps", "statefulsets") => stateful_set(spec),
        ("", "services") => return service(spec),
        _ => return,
    }
    if let Some(pod) = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    {
        pod_spec(pod);
    }
}

/// Sets `key` when it is absent or null (a Go pointer field).
fn or_insert(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_string(), value);
    }
}

/// Sets `key` when it is absent, null, `""` or `0` (a Go value field, whose zero is "unset").
fn or_zero(map: &mut Map<String, Value>, key: &str, value: Value) {
    let zero = match map.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(_) => false,
    };
    if zero {
        map.insert(key.to_string(), value);
    }
}

/// The object at `key`, created (as `{}`) when absent or null; None when it is something
/// else, which the typed decoding refuses afterwards.
fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    or_insert(map, key, json!({}));
    map.get_mut(key).and_then(Value::as_object_mut)
}

/// The objects of the list at `key`, if it is a list.
fn items<'a>(
    map: &'a mut Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = &'a mut Map<String, Value>> {
    map.get_mut(key)
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

fn deployment(spec: &mut Map<String, Value>) {
    or_insert(spec, "replicas", json!(1));
    if let Some(strategy) = object_at(spec, "strategy") {
        or_zero(strategy, "type", json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate"
            && let Some(rolling) = object_at(strategy, "rollingUpdate")
        {
            or_insert(rolling, "maxUnavailable", json!("25%"));
            or_insert(rolling, "maxSurge", json!("25%"));
        }
    }
    or_insert(spec, "revisionHistoryLimit", json!(10));
    or_insert(spec, "progressDeadlineSeconds", json!(600));
}

fn stateful_set(spec: &mut Map<String, Value>) {
    or_zero(spec, "podManagementPolicy", json!("OrderedReady"));
    if let Some(strategy) = object_at(spec, "updateStrategy") {
        if strategy.get("type").is_none_or(|t| t.is_null() || t == "") {
            strategy.insert("type".into(), json!("RollingUpdate"));
            or_insert(strategy, "rollingUpdate", json!({}));
        }
        // MaxUnavailableStatefulSet is alpha (off) in 1.32: no maxUnavailable default.
        if strategy["type"] == "RollingUpdate"
            && let Some(rolling) = strategy
                .get_mut("rollingUpdate")
                .and_then(Value::as_object_mut)
        {
            or_insert(rolling, "partition", json!(0));
        }
    }
    // StatefulSetAutoDeletePVC is on by default since 1.27.
    if let Some(retention) = object_at(spec, "persistentVolumeClaimRetentionPolicy") {
        or_zero(retention, "whenDeleted", json!("Retain"));
        or_zero(retention, "whenScaled", json!("Retain"));
    }
    or_insert(spec, "replicas", json!(1));
    or_insert(spec, "revisionHistoryLimit", json!(10));
    for claim in items(spec, "volumeClaimTemplates") {
        if let Some(claim_spec) = claim.get_mut("spec").and_then(Value::as_object_mut) {
            or_insert(claim_spec, "volumeMode", json!("Filesystem"));
        }
        if let Some(status) = object_at(claim, "status") {
            or_zero(status, "phase", json!("Pending"));
        }
    }
}

/// `SetDefaults_Service` (no cluster IPs: this server allocates none).
fn service(spec: &mut Map<String, Value>) {
    or_zero(spec, "sessionAffinity", json!("None"));
    or_zero(spec, "type", json!("ClusterIP"));
    for port in items(spec, "ports") {
        or_zero(port, "protocol", json!("TCP"));
        if port
            .get("targetPort")
            .is_none_or(|t| t.is_null() || t == 0 || t == "")
            && let Some(number) = port.get("port").cloned()
        {
            port.insert("targetPort".into(), number);
        }
    }
    let service_type = spec["type"].as_str().unwrap_or_default().to_string();
    // `service.ExternallyAccessible`: a load balancer, a node port, or external IPs.
    let external = matches!(service_type.as_str(), "LoadBalancer" | "NodePort")
        || (service_type == "ClusterIP"
            && spec
                .get("externalIPs")
                .and_then(Value::as_array)
                .is_some_and(|ips| !ips.is_empty()));
    if external {
        or_zero(spec, "externalTrafficPolicy", json!("Cluster"));
    }
    if matches!(
        service_type.as_str(),
        "NodePort" | "LoadBalancer" | "ClusterIP"
    ) {
        or_insert(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if service_type == "LoadBalancer" {
        or_insert(spec, "allocateLoadBalancerNodePorts", json!(true));
    }
}

/// `SetDefaults_PodSpec` and what it holds (containers, probes, volumes, env).
fn pod_spec(pod: &mut Map<String, Value>) {
    or_zero(pod, "dnsPolicy", json!("ClusterFirst"));
    or_zero(pod, "restartPolicy", json!("Always"));
    or_insert(pod, "securityContext", json!({}));
    or_insert(pod, "terminationGracePeriodSeconds", json!(30));
    or_zero(pod, "schedulerName", json!("default-scheduler"));
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        for container in items(pod, key) {
            self::container(container);
        }
    }
    for volume in items(pod, "volumes") {
        self::volume(volume);
    }
}

fn container(container: &mut Map<String, Value>) {
    let image = container
        .get("image")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let policy = if image_tag(image) == Some("latest") {
        "Always"
    } else {
        "IfNotPresent"
    };
    or_zero(container, "imagePullPolicy", json!(policy));
    or_zero(
        container,
        "terminationMessagePath",
        json!("/dev/termination-log"),
    );
    or_zero(container, "terminationMessagePolicy", json!("File"));
    for port in items(container, "ports") {
        or_zero(port, "protocol", json!("TCP"));
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = container.get_mut(key).and_then(Value::as_object_mut) {
            self::probe(probe);
        }
    }
    for env in items(container, "env") {
        if let Some(field_ref) = env
            .get_mut("valueFrom")
            .and_then(|v| v.get_mut("fieldRef"))
            .and_then(Value::as_object_mut)
        {
            or_zero(field_ref, "apiVersion", json!("v1"));
        }
    }
}

/// The tag `parsers.ParseImageName` finds: the one after the last `:` of the last path
/// component, `latest` when there is neither a tag nor a digest, None with only a digest.
fn image_tag(image: &str) -> Option<&str> {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        Some((_, tag)) => Some(tag),
        None if digest.is_none() => Some("latest"),
        None => None,
    }
}

fn probe(probe: &mut Map<String, Value>) {
    or_zero(probe, "timeoutSeconds", json!(1));
    or_zero(probe, "periodSeconds", json!(10));
    or_zero(probe, "successThreshold", json!(1));
    or_zero(probe, "failureThreshold", json!(3));
    if let Some(get) = probe.get_mut("httpGet").and_then(Value::as_object_mut) {
        or_zero(get, "path", json!("/"));
        or_zero(get, "scheme", json!("HTTP"));
    }
}

/// Volume sources whose `defaultMode` defaults to 0644 (420).
const MODE_SOURCES: [&str; 4] = ["secret", "configMap", "downwardAPI", "projected"];

fn volume(volume: &mut Map<String, Value>) {
    // A volume is its name and one source (upstream's `AllPtrFieldsNil(&VolumeSource)`).
    let has_source = volume
        .iter()
        .any(|(key, value)| key != "name" && !value.is_null());
    if !has_source {
        volume.insert("emptyDir".into(), json!({}));
    }
    for key in MODE_SOURCES {
        if let Some(source) = volume.get_mut(key).and_then(Value::as_object_mut) {
            or_insert(source, "defaultMode", json!(420));
        }
    }
    if let Some(host_path) = volume.get_mut("hostPath").and_then(Value::as_object_mut) {
        or_insert(host_path, "type", json!(""));
    }
    if let Some(sources) = volume
        .get_mut("projected")
        .and_then(|p| p.get_mut("sources"))
        .and_then(Value::as_array_mut)
    {
        for token in sources
            .iter_mut()
            .filter_map(|s| s.get_mut("serviceAccountToken"))
            .filter_map(Value::as_object_mut)
        {
            or_insert(token, "expirationSeconds", json!(3600));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn image_tags_are_found_as_parse_image_name_does() {
        assert_eq!(image_tag("nginx"), Some("latest"));
        assert_eq!(image_tag("nginx:1.27"), Some("1.27"));
        assert_eq!(image_tag("registry:5000/team/app"), Some("latest"));
        assert_eq!(image_tag("registry:5000/team/app:v2"), Some("v2"));
        assert_eq!(image_tag("app@sha256:abc"), None);
        assert_eq!(image_tag("app:v1@sha256:abc"), Some("v1"));
    }

    #[test]
    fn explicit_values_stay_and_only_absent_ones_are_filled() {
        let mut deployment = json!({"spec": {"replicas": 0,
            "strategy": {"type": "Recreate"},
            "template": {"spec": {"restartPolicy": "Always", "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "busybox:1", "imagePullPolicy": "Never",
                    "readinessProbe": {"periodSeconds": 5, "httpGet": {"port": 80}}}],
                "volumes": [{"name": "scratch"}, {"name": "s", "secret": {"secretName": "x", "defaultMode": 256}}]}}}});
        apply("apps", "deployments", &mut deployment);
        let spec = &deployment["spec"];
        assert_eq!(spec["replicas"], 0);
        assert_eq!(spec["strategy"], json!({"type": "Recreate"}));
        let pod = &spec["template"]["spec"];
        assert_eq!(pod["terminationGracePeriodSeconds"], 0);
        assert_eq!(pod["containers"][0]["imagePullPolicy"], "Never");
        let probe = &pod["containers"][0]["readinessProbe"];
        assert_eq!(
            (
                &probe["periodSeconds"],
                &probe["timeoutSeconds"],
                &probe["httpGet"]["path"]
            ),
            (&json!(5), &json!(1), &json!("/"))
        );
        assert_eq!(pod["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(pod["volumes"][1]["secret"]["defaultMode"], 256);
    }

    #[test]
    fn other_kinds_and_odd_shapes_are_left_alone() {
        let mut map = json!({"data": {"a": "b"}});
        apply("", "configmaps", &mut map);
        assert_eq!(map, json!({"data": {"a": "b"}}));
        let mut odd = json!({"spec": {"strategy": "fast", "template": {"spec": []}}});
        apply("apps", "deployments", &mut odd);
        assert_eq!(odd["spec"]["strategy"], "fast");
        assert_eq!(odd["spec"]["template"]["spec"], json!([]));
    }
}
