//! Query parameters and content negotiation.

use http::HeaderMap;

use crate::status::{ApiError, ApiResult};

/// The query parameters the server understands.
#[derive(Debug, Clone, Default)]
pub struct Params {
    /// `verbose` (health checks list each check).
    pub verbose: bool,
    /// `labelSelector`.
    pub label_selector: Option<String>,
    /// `fieldSelector`.
    pub field_selector: Option<String>,
    /// `limit` (0 = none).
    pub limit: u64,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion` (None when absent).
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub resource_version_match: Option<String>,
    /// `watch`.
    pub watch: bool,
    /// `allowWatchBookmarks`.
    pub allow_bookmarks: bool,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<u64>,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `force`.
    pub force: bool,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldValidation` (Strict, Warn, Ignore).
    pub field_validation: Option<String>,
    /// `propagationPolicy` given as a query parameter.
    pub propagation_policy: Option<String>,
    /// `includeObject` for Tables (None, Metadata, Object).
    pub include_object: Option<String>,
}

/// A boolean query parameter, as Go's `strconv.ParseBool` reads it (the real server's
/// query decoding): the Python client, for one, sends `True`.
fn flag(value: &str) -> ApiResult<bool> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" | "" => Ok(false),
        other => Err(ApiError::bad_request(format!(
            "invalid boolean value {other:?}"
        ))),
    }
}

impl Params {
    /// Parses a raw query string.
    ///
    /// # Errors
    /// 400 for malformed numbers or booleans.
    pub fn parse(query: Option<&str>) -> ApiResult<Self> {
        let mut p = Self::default();
        let Some(query) = query else {
            return Ok(p);
        };
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            let value = value.into_owned();
            match key.as_ref() {
                "labelSelector" => p.label_selector = Some(value).filter(|v| !v.is_empty()),
                "fieldSelector" => p.field_selector = Some(value).filter(|v| !v.is_empty()),
                "limit" => {
                    p.limit = value
                        .parse()
                        .map_err(|_| ApiError::bad_request(format!("invalid limit {value:?}")))?;
                }
                "continue" => p.continue_token = Some(value).filter(|v| !v.is_empty()),
                "resourceVersion" => p.resource_version = Some(value),
                "resourceVersionMatch" => {
                    p.resource_version_match = Some(value).filter(|v| !v.is_empty())
                }
                "watch" => p.watch = flag(&value)?,
                "allowWatchBookmarks" => p.allow_bookmarks = flag(&value)?,
                "timeoutSeconds" => {
                    p.timeout_seconds = Some(value.parse().map_err(|_| {
                        ApiError::bad_request(format!("invalid timeoutSeconds {value:?}"))
                    })?);
                }
                "sendInitialEvents" => p.send_initial_events = Some(flag(&value)?),
                "fieldManager" => p.field_manager = Some(value).filter(|v| !v.is_empty()),
                "force" => p.force = flag(&value)?,
                "dryRun" => {
                    if value != "All" && !value.is_empty() {
                        return Err(ApiError::bad_request(format!(
                            "unsupported dry run value {value:?}, only All is supported"
                        )));
                    }
                    p.dry_run = value == "All";
                }
                "fieldValidation" => p.field_validation = Some(value).filter(|v| !v.is_empty()),
                "propagationPolicy" => p.propagation_policy = Some(value).filter(|v| !v.is_empty()),
                "includeObject" => p.include_object = Some(value).filter(|v| !v.is_empty()),
                // A bare `?verbose` is on, as on the real server.
                "verbose" => p.verbose = value.is_empty() || flag(&value)?,
                _ => {}
            }
        }
        if let Some(v) = &p.field_validation
            && !matches!(v.as_str(), "Strict" | "Warn" | "Ignore")
        {
            return Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, got {v:?}"
            )));
        }
        Ok(p)
    }

    /// `resourceVersion` as a number, when it is one and not "0".
    ///
    /// # Errors
    /// 400 when it is not a number.
    pub fn rv_number(&self) -> ApiResult<Option<u64>> {
        match self.resource_version.as_deref() {
            None | Some("" | "0") => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid resourceVersion {v:?}"))),
        }
    }
}

/// How the client wants objects rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Render {
    /// Full objects.
    Full,
    /// `PartialObjectMetadata(List)`.
    Metadata,
    /// `meta.k8s.io/v1` Table.
    Table,
}

/// Reads the Accept header.
#[must_use]
pub fn render_of(headers: &HeaderMap) -> Render {
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    // The first alternative the server can produce wins, as in the real negotiation.
    for alternative in accept.split(',') {
        let alt = alternative.replace(' ', "");
        if alt.contains("as=Table") {
            return Render::Table;
        }
        if alt.contains("as=PartialObjectMetadata") {
            return Render::Metadata;
        }
        if alt.starts_with("application/json") || alt.starts_with("*/*") || alt.is_empty() {
            return Render::Full;
        }
    }
    Render::Full
}
