//! Resource descriptors: the built-in kinds and the custom resources registered by CRDs.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use apiextensions::PrinterColumns;

use crate::schema::CrdSchema;
use crate::status::Cause;

/// The storage identity of a resource: `<group>/<plural>` (all served versions share it).
pub type StorageKey = Arc<str>;

/// Everything the server knows about one served group/version/resource.
#[derive(Debug, Clone)]
pub struct Resource {
    /// API group ("" for core).
    pub group: String,
    /// Served version.
    pub version: String,
    /// Plural name (the URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// Kind of lists.
    pub list_kind: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names for kubectl.
    pub short_names: Vec<String>,
    /// Categories (`all`, ...).
    pub categories: Vec<String>,
    /// Whether the kind has a `/status` subresource.
    pub has_status: bool,
    /// The structural schema of a custom resource version.
    pub schema: Option<Arc<CrdSchema>>,
    /// Printer columns of a custom resource version.
    pub printer_columns: Option<Arc<PrinterColumns>>,
    /// Extra field selectors (`selectableFields`), as dotted paths without the leading dot.
    pub selectable_fields: Vec<String>,
    /// Where objects are stored.
    pub storage: StorageKey,
    /// Whether a CRD defines this resource.
    pub custom: bool,
    /// The storage version (custom resources convert by rewriting apiVersion).
    pub storage_version: String,
    /// The k8s-openapi type of a built-in kind: every write is decoded through it.
    pub typed: Option<Typed>,
    /// The resourceVersion from which this resource is served (a custom resource: when its
    /// CRD's spec last changed). As the real server's watch cache for a new CRD starts
    /// there, a watch from an older resourceVersion is 410 Expired.
    pub served_since: u64,
    /// A review (SelfSubjectAccessReview, ...): only created, answered by
    /// [`crate::reviews`], never stored.
    pub review: bool,
}

impl Resource {
    /// Whether a watch from `rv` starts before this resource was served (410 Expired).
    #[must_use]
    pub fn watch_too_old(&self, rv: Option<u64>) -> bool {
        rv.is_some_and(|rv| rv < self.served_since)
    }

    /// `group/version` or `version` for core.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The verbs served.
    #[must_use]
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.review {
            return vec!["create"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }
}

/// Builds the storage key of a resource.
#[must_use]
pub fn storage_key(group: &str, plural: &str) -> StorageKey {
    Arc::from(format!("{group}/{plural}"))
}

mod builtins;
pub mod typed;

use builtins::BUILTINS;
pub use typed::Typed;

/// The storage key of CRDs.
pub const CRD_STORAGE: &str = "apiextensions.k8s.io/customresourcedefinitions";
/// The storage key of namespaces.
pub const NAMESPACE_STORAGE: &str = "/namespaces";

/// All served resources.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    by_path: BTreeMap<(String, String, String), Arc<Resource>>,
    /// CRD name -> the (group, version, plural) entries it added.
    crds: BTreeMap<String, Vec<(String, String, String)>>,
    /// CRD name -> what its storage depends on (spec and accepted names) and since when
    /// that has been served.
    crd_serving: BTreeMap<String, (Value, u64)>,
}

impl Registry {
    /// A registry with the built-in kinds.
    #[must_use]
    pub fn with_builtins() -> Self {
        let mut registry = Self::default();
        for b in BUILTINS {
            let resource = Resource {
                group: b.group.into(),
                version: b.version.into(),
                plural: b.plural.into(),
                singular: b.kind.to_lowercase(),
                kind: b.kind.into(),
                list_kind: format!("{}List", b.kind),
                namespaced: b.namespaced,
                short_names: b.short.iter().map(|s| (*s).to_string()).collect(),
                categories: if b.all {
                    vec!["all".into()]
                } else {
                    Vec::new()
                },
                has_status: b.status,
                schema: None,
                printer_columns: None,
                selectable_fields: Vec::new(),
                // events.k8s.io/v1 Events are core/v1 Events served in another form.
                storage: if b.group == "events.k8s.io" {
                    storage_key("", b.plural)
                } else {
                    storage_key(b.group, b.plural)
                },
                custom: false,
                storage_version: b.version.into(),
                typed: Some(b.typed),
                served_since: 0,
                review: false,
            };
            registry.insert(resource);
        }
        for r in crate::reviews::KINDS {
            registry.insert(Resource {
                group: r.group.into(),
                version: r.version.into(),
                plural: r.plural.into(),
                singular: r.kind.to_lowercase(),
                kind: r.kind.into(),
                list_kind: format!("{}List", r.kind),
                namespaced: r.namespaced,
                short_names: Vec::new(),
                categories: Vec::new(),
                has_status: false,
                schema: None,
                printer_columns: None,
                selectable_fields: Vec::new(),
                storage: storage_key(r.group, r.plural),
                custom: false,
                storage_version: r.version.into(),
                typed: Some(r.typed),
                served_since: 0,
                review: true,
            });
        }
        registry
    }

    fn insert(&mut self, resource: Resource) {
        let key = (
            resource.group.clone(),
            resource.version.clone(),
            resource.plural.clone(),
        );
        self.by_path.insert(key, Arc::new(resource));
    }

    /// Looks up a served resource.
    #[must_use]
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Resource>> {
        self.by_path
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Any served version of a storage key (the storage version when served).
    #[must_use]
    pub fn by_storage(&self, storage: &str) -> Option<Arc<Resource>> {
        let mut found = None;
        for resource in self.by_path.values() {
            if &*resource.storage == storage {
                if resource.version == resource.storage_version {
                    return Some(resource.clone());
                }
                found = Some(resource.clone());
            }
        }
        found
    }

    /// Every served resource.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Resource>> {
        self.by_path.values()
    }

    /// Served resources of one group/version.
    #[must_use]
    pub fn group_version(&self, group: &str, version: &str) -> Vec<Arc<Resource>> {
        self.by_path
            .values()
            .filter(|r| r.group == group && r.version == version)
            .cloned()
            .collect()
    }

    /// Groups with their served versions, preferred version first.
    #[must_use]
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut preferred: BTreeMap<String, String> = BTreeMap::new();
        for r in self.by_path.values() {
            let versions = groups.entry(r.group.clone()).or_default();
            if !versions.contains(&r.version) {
                versions.push(r.version.clone());
            }
            if r.version == r.storage_version {
                preferred.insert(r.group.clone(), r.version.clone());
            }
        }
        groups
            .into_iter()
            .map(|(group, mut versions)| {
                versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
                if let Some(p) = preferred.get(&group)
                    && let Some(pos) = versions.iter().position(|v| v == p)
                {
                    let v = versions.remove(pos);
                    versions.insert(0, v);
                }
                (group, versions)
            })
            .collect()
    }

    /// Registers (or re-registers) the resources a CRD object defines.
    ///
    /// # Errors
    /// The causes when the CRD is not usable (missing names, no served version, bad schema).
    pub fn register_crd(&mut self, crd: &Value) -> Result<(), Vec<Cause>> {
        let resources = resources_of_crd(crd)?;
        let crd_name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        // Like the real CRD handler, only a change of spec or accepted names makes new
        // storage (and a new watch cache); a status write keeps the old one.
        let signature = serde_json::json!([crd["spec"], crd["status"]["acceptedNames"]]);
        let served_since = match self.crd_serving.get(&crd_name) {
            Some((old, since)) if *old == signature => *since,
            _ => crd["metadata"]["resourceVersion"]
                .as_str()
                .and_then(|rv| rv.parse().ok())
                .unwrap_or(0),
        };
        self.unregister_crd(&crd_name);
        self.crd_serving
            .insert(crd_name.clone(), (signature, served_since));
        let mut keys = Vec::new();
        for mut resource in resources {
            resource.served_since = served_since;
            keys.push((
                resource.group.clone(),
                resource.version.clone(),
                resource.plural.clone(),
            ));
            self.insert(resource);
        }
        self.crds.insert(crd_name, keys);
        Ok(())
    }

    /// Removes the resources of a CRD.
    pub fn unregister_crd(&mut self, crd_name: &str) {
        self.crd_serving.remove(crd_name);
        if let Some(keys) = self.crds.remove(crd_name) {
            for key in keys {
                self.by_path.remove(&key);
            }
        }
    }
}

/// Orders Kubernetes versions: GA > beta > alpha, then by numbers.
#[must_use]
pub fn version_priority(version: &str) -> (u8, u32, u32) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (level, num) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    (level, major, num.parse().unwrap_or(0))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn cause(reason: &str, field: &str, message: &str) -> Vec<Cause> {
    vec![Cause {
        reason: reason.into(),
        field: field.into(),
        message: message.into(),
    }]
}

/// The resources (one per served version) a CRD defines.
///
/// # Errors
/// The field errors (Status causes) of what is missing or invalid.
pub fn resources_of_crd(crd: &Value) -> Result<Vec<Resource>, Vec<Cause>> {
    let spec = &crd["spec"];
    let required = |field: &str| cause("FieldValueRequired", field, "Required value");
    let group = spec["group"]
        .as_str()
        .ok_or_else(|| required("spec.group"))?;
    let names = &spec["names"];
    let plural = names["plural"]
        .as_str()
        .ok_or_else(|| required("spec.names.plural"))?;
    let kind = names["kind"]
        .as_str()
        .ok_or_else(|| required("spec.names.kind"))?;
    let singular = names["singular"]
        .as_str()
        .map_or_else(|| kind.to_lowercase(), str::to_string);
    let list_kind = names["listKind"]
        .as_str()
        .map_or_else(|| format!("{kind}List"), str::to_string);
    let namespaced = match spec["scope"].as_str() {
        Some("Namespaced") => true,
        Some("Cluster") => false,
        other => {
            return Err(cause(
                "FieldValueNotSupported",
                "spec.scope",
                &format!(
                    "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ),
            ));
        }
    };
    let versions = spec["versions"]
        .as_array()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| required("spec.versions"))?;
    let storage: Vec<&str> = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .filter_map(|v| v["name"].as_str())
        .collect();
    let [storage_version] = storage.as_slice() else {
        return Err(cause(
            "FieldValueInvalid",
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version",
        ));
    };
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let Some(version) = v["name"].as_str() else {
            errors.extend(required(&format!("spec.versions[{i}].name")));
            continue;
        };
        if v["served"].as_bool() != Some(true) {
            continue;
        }
        let schema = match v.pointer("/schema/openAPIV3Schema") {
            Some(raw) => {
                match CrdSchema::new(raw, &format!("spec.versions[{i}].schema.openAPIV3Schema")) {
                    Ok(schema) => Some(Arc::new(schema)),
                    Err(causes) => {
                        errors.extend(causes);
                        None
                    }
                }
            }
            None => None,
        };
        let printer_columns = match PrinterColumns::from_crd_version(
            v,
            &format!("spec.versions[{i}].additionalPrinterColumns"),
        ) {
            Ok(columns) => Some(Arc::new(columns)),
            Err(field_errors) => {
                errors.extend(crate::schema::causes(&field_errors));
                None
            }
        };
        let selectable_fields = v["selectableFields"]
            .as_array()
            .map(|fields| {
                fields
                    .iter()
                    .filter_map(|f| f["jsonPath"].as_str())
                    .map(|p| p.trim_start_matches('.').to_string())
                    .collect()
            })
            .unwrap_or_default();
        out.push(Resource {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            singular: singular.clone(),
            kind: kind.to_string(),
            list_kind: list_kind.clone(),
            namespaced,
            short_names: strings(&names["shortNames"]),
            categories: strings(&names["categories"]),
            has_status: v.pointer("/subresources/status").is_some(),
            schema,
            printer_columns,
            selectable_fields,
            storage: storage_key(group, plural),
            custom: true,
            storage_version: (*storage_version).to_string(),
            typed: None,
            served_since: 0,
            review: false,
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn versions_order_like_kubernetes() {
        let mut v = vec!["v1alpha1", "v2", "v1beta2", "v1", "v1beta1"];
        v.sort_by_key(|x| std::cmp::Reverse(version_priority(x)));
        assert_eq!(v, vec!["v2", "v1", "v1beta2", "v1beta1", "v1alpha1"]);
    }

    #[test]
    fn builtins_are_served() {
        let r = Registry::with_builtins();
        let ns = r.get("", "v1", "namespaces").unwrap();
        assert!(!ns.namespaced);
        assert!(r.get("apps", "v1", "deployments").unwrap().namespaced);
        assert!(r.get("", "v1", "widgets").is_none());
    }
}
