//! Writing an object's finalizer list, as the Requester controller does for
//! the Requester (root delete order) and for each ComputeContract (release).

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use api::names;

/// Sets `object`'s finalizers to `finalizers` (a merge patch under the field
/// manager `socialweb/requester`). It carries the resourceVersion that was
/// read, so a decision made from a stale view is refused (409) instead of
/// dropping a newer object's finalizer. An object already gone is fine.
pub(super) async fn set_finalizers<K>(
    api: &Api<K>,
    object: &K,
    finalizers: &[String],
) -> Result<(), kube::Error>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let value = if finalizers.is_empty() {
        serde_json::Value::Null
    } else {
        json!(finalizers)
    };
    let patch = json!({"metadata": {
        "resourceVersion": object.resource_version(),
        "finalizers": value,
    }});
    let params = PatchParams {
        field_manager: Some(names::REQUESTER_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match api
        .patch(&object.name_any(), &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
