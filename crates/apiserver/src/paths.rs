//! Request path parsing: turns `/api/v1/...` and `/apis/<g>/<v>/...` into a [`Route`].

/// Where a resource request points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// The namespace segment, when the path has one.
    pub namespace: Option<String>,
    /// The resource's plural name.
    pub plural: String,
    /// The object's name, for item paths.
    pub name: Option<String>,
    /// The subresource (`status`, ...).
    pub subresource: Option<String>,
}

/// A parsed request path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`
    Version,
    /// `/healthz`, `/readyz`, `/livez`, or one of their checks (`/readyz/ping`)
    Health {
        /// `healthz`, `readyz` or `livez`.
        endpoint: String,
        /// The one check asked for.
        check: Option<String>,
    },
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/<g>`
    Group(String),
    /// `/api/v1` or `/apis/<g>/<v>`
    ResourceList {
        /// API group ("" for core).
        group: String,
        /// API version.
        version: String,
    },
    /// `/openapi/v2`
    OpenApiV2,
    /// `/openapi/v3`
    OpenApiV3Index,
    /// `/openapi/v3/<api/v1 | apis/g/v>`
    OpenApiV3 {
        /// API group ("" for core).
        group: String,
        /// API version.
        version: String,
    },
    /// A resource collection or object.
    Resource(ResourcePath),
    /// Anything else.
    Unknown,
}

/// Parses a request path (without query).
#[must_use]
pub fn parse(path: &str) -> Route {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        [endpoint @ ("healthz" | "readyz" | "livez"), rest @ ..] => Route::Health {
            endpoint: (*endpoint).to_string(),
            check: (!rest.is_empty()).then(|| rest.join("/")),
        },
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_string()),
        ["api", version] => Route::ResourceList {
            group: String::new(),
            version: (*version).to_string(),
        },
        ["apis", group, version] => Route::ResourceList {
            group: (*group).to_string(),
            version: (*version).to_string(),
        },
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3Index,
        ["openapi", "v3", "api", version] => Route::OpenApiV3 {
            group: String::new(),
            version: (*version).to_string(),
        },
        ["openapi", "v3", "apis", group, version] => Route::OpenApiV3 {
            group: (*group).to_string(),
            version: (*version).to_string(),
        },
        ["api", version, rest @ ..] => resource("", version, rest),
        ["apis", group, version, rest @ ..] => resource(group, version, rest),
        _ => Route::Unknown,
    }
}

fn percent_decode(segment: &str) -> String {
    form_urlencoded::parse(format!("x={}", segment.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| segment.to_string())
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let (namespace, rest) = match rest {
        // `namespaces/<ns>` alone, or with a namespace subresource, is the namespace itself.
        ["namespaces", _] | ["namespaces", _, "status" | "finalize"] => (None, rest),
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some((*ns).to_string()), tail),
        _ => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some((*name).to_string()), None),
        [plural, name, sub] => (*plural, Some((*name).to_string()), Some((*sub).to_string())),
        _ => return Route::Unknown,
    };
    Route::Resource(ResourcePath {
        group: group.to_string(),
        version: version.to_string(),
        namespace,
        plural: plural.to_string(),
        name,
        subresource,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail loudly
mod tests {
    use super::*;

    #[test]
    fn parses_namespaced_item_with_status() {
        let route = parse("/apis/example.com/v1/namespaces/ns1/widgets/w1/status");
        assert_eq!(
            route,
            Route::Resource(ResourcePath {
                group: "example.com".into(),
                version: "v1".into(),
                namespace: Some("ns1".into()),
                plural: "widgets".into(),
                name: Some("w1".into()),
                subresource: Some("status".into()),
            })
        );
    }

    #[test]
    fn a_namespace_is_a_cluster_scoped_object() {
        let Route::Resource(path) = parse("/api/v1/namespaces/ns1") else {
            panic!("not a resource");
        };
        assert_eq!(path.plural, "namespaces");
        assert_eq!(path.name.as_deref(), Some("ns1"));
        assert_eq!(path.namespace, None);
        let Route::Resource(path) = parse("/api/v1/namespaces/ns1/configmaps") else {
            panic!("not a resource");
        };
        assert_eq!(path.namespace.as_deref(), Some("ns1"));
        assert_eq!(path.plural, "configmaps");
    }

    proptest::proptest! {
        #[test]
        fn parsing_any_path_is_total(path in "(/[a-z0-9%.{}_-]{0,12}){0,8}") {
            let _ = parse(&path);
        }

        #[test]
        fn parsing_any_query_is_total(query in "[a-zA-Z=&%0-9,!()]{0,60}") {
            let _ = crate::handlers::params::Params::parse(Some(&query));
        }
    }

    #[test]
    fn discovery_and_unknown() {
        assert_eq!(parse("/api"), Route::CoreVersions);
        assert_eq!(
            parse("/apis/apps/v1"),
            Route::ResourceList {
                group: "apps".into(),
                version: "v1".into()
            }
        );
        assert_eq!(parse("/nope/x"), Route::Unknown);
        assert_eq!(parse("/api/v1/a/b/c/d"), Route::Unknown);
    }
}
