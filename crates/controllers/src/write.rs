//! The one write layer: every write a reconciler makes to the API server goes
//! through here, one style per kind of write.
//!
//! | write | how | guarded by | object gone (404) |
//! |---|---|---|---|
//! | a child's spec (Infra, ComputeContract, join Secret) | [`apply`]: server-side apply, forced | the controller owns these fields alone | created |
//! | a new object the cache may not show yet (a join Secret's token) | [`create`] | 409 when it exists | — |
//! | status | [`replace_status`]: replace of the status subresource, only when changed | the resourceVersion it was decided from | `None` |
//! | finalizers, annotations, ownerReferences | [`patch_metadata`], [`add_finalizer`], [`remove_finalizer`]: a merge patch | the resourceVersion read | `None` / [`Finalizers::Gone`] |
//! | delete | [`delete_if_present`], [`delete`] | the uid (and resourceVersion) read | done |
//!
//! Every write is made under the controller's field manager
//! (`api::names::*_MANAGER`), passed in by the caller.
//!
//! # Why status is a guarded replace, not server-side apply
//! A status is decided from the cache. Carrying the resourceVersion it was
//! decided from turns a stale decision into a 409 (the reconcile requeues and
//! decides again) instead of a lost write. A replace also removes whatever the
//! new status no longer says, whoever wrote it before; an apply would keep a
//! field that an earlier writer (another field manager, or this controller
//! before it applied) still owns. Where the controller owns one field of
//! someone else's status (a Cluster's `status.nodes`), it replaces the status
//! as read with that field changed, and the API server records only the
//! changed field as its own.
//!
//! # Guarantees
//! - A guarded write never succeeds against an object newer than the one
//!   decided from: it is a 409, which [`Error::is_conflict`] turns into a quick
//!   requeue.
//! - A write to an object that is gone is not an error: the caller is told
//!   (`None`, [`Finalizers::Gone`], `false`) and the next reconcile starts from
//!   the cache.

use futures::{Stream, StreamExt, stream};
use std::borrow::Cow;
use std::fmt::Debug;

use kube::api::{DeleteParams, GetParams, Patch, PatchParams, PostParams, Preconditions};
use kube::core::object::HasStatus;
use kube::core::{NamespaceResourceScope, Request};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::cache::decode;
use crate::object_uid::ObjectUid;
use crate::{Error, Result};

/// An object as a reconcile read it: what a write addresses and is guarded by.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// Its uid: a delete removes only this object, never a newer one of the same name.
    pub uid: Option<String>,
    /// The resourceVersion it was read at: a write decided from it is refused (409) once it changed.
    pub resource_version: Option<String>,
    /// Its finalizers as read.
    pub finalizers: Vec<String>,
}

impl Seen {
    /// `object` as it was read.
    #[must_use]
    pub fn of<K: ResourceExt + ObjectUid>(object: &K) -> Self {
        Self {
            namespace: object.namespace().unwrap_or_default(),
            name: object.name_any(),
            uid: object.object_uid().map(Cow::into_owned),
            resource_version: object.resource_version(),
            finalizers: object.finalizers().to_vec(),
        }
    }

    /// The same object, unpinned from its resourceVersion: a delete then
    /// removes it whatever changed since, as long as it is the same object (uid).
    #[must_use]
    pub fn any_version(mut self) -> Self {
        self.resource_version = None;
        self
    }

    /// Whether the object, as read, carries `finalizer`.
    #[must_use]
    pub fn has_finalizer(&self, finalizer: &str) -> bool {
        self.finalizers.iter().any(|f| f == finalizer)
    }
}

/// What a finalizer write did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finalizers {
    /// The list was written.
    Written,
    /// The list already was as asked (nothing written).
    Unchanged,
    /// The object is gone.
    Gone,
}

/// Bounds of the objects the reconcilers write: namespaced, typed.
pub trait Object:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + Debug
    + Serialize
    + DeserializeOwned
{
}

impl<K> Object for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned
{
}

/// The requests of kind `K` in `namespace`, as `Api::namespaced` builds them.
fn requests<K: Resource<DynamicType = (), Scope = NamespaceResourceScope>>(
    namespace: &str,
) -> Request {
    Request::new(K::url_path(&(), Some(namespace)))
}

/// Sends one write (`verb` names it, as kube's own calls do) and reads the
/// object it answers with as the caches parse a watch event
/// ([`decode::trimmed_as`], straight into `K`; a delete's answer, which may
/// be a Status, through [`decode::trimmed`]'s value): without
/// `managedFields`, which no caller reads (a join Secret keeps its data:
/// only the caches compact it).
/// kube's typed calls decoded every entry of them, a tree of maps per field
/// manager, in every answer: about 6 % of the manager's CPU on the way to
/// Deployed (perf, plan 0016 C3). Unlike kube's, a body that does not decode
/// is not logged (it may be a Secret's).
async fn send<K: DeserializeOwned>(
    client: &Client,
    verb: &'static str,
    request: std::result::Result<http::Request<Vec<u8>>, kube::core::request::Error>,
) -> kube::Result<Answer<K>> {
    let mut request = request.map_err(kube::Error::BuildRequest)?;
    request.extensions_mut().insert(verb);
    let text = client.request_text(request).await?;
    if verb != DELETE {
        return decode::trimmed_as(&text)
            .map(Answer::Object)
            .map_err(kube::Error::SerdeError);
    }
    let value = decode::trimmed(&text).map_err(kube::Error::SerdeError)?;
    // A delete answers with the object while finalizers keep it, else with
    // a success Status (a failure is an error status code, taken above).
    if value.get("kind").and_then(Value::as_str) == Some("Status") {
        return Ok(Answer::Status);
    }
    K::deserialize(value)
        .map(Answer::Object)
        .map_err(kube::Error::SerdeError)
}

/// The verb of a delete, whose answer is the object or a Status.
const DELETE: &str = "delete";

/// `object` as a request's JSON body.
///
/// # Errors
/// [`Error::Invalid`] when it does not serialize.
fn json_body<K: Object>(object: &K) -> Result<Vec<u8>> {
    serde_json::to_vec(object).map_err(|e| Error::Invalid {
        object: describe_object(object),
        reason: format!("cannot be serialized: {e}"),
    })
}

/// What a write answered with.
enum Answer<K> {
    /// The object as the server now holds it.
    Object(K),
    /// A success Status (a delete that removed the object at once).
    Status,
}

impl<K> Answer<K> {
    /// The object of a write that always answers with one.
    fn object(self, what: &str) -> kube::Result<K> {
        match self {
            Self::Object(object) => Ok(object),
            Self::Status => Err(kube::Error::SerdeError(serde::de::Error::custom(format!(
                "{what}: the server answered with a Status, not the object"
            )))),
        }
    }
}

/// `Kind namespace/name`, as errors and logs name an object.
#[must_use]
pub fn describe<K: Resource<DynamicType = ()>>(namespace: &str, name: &str) -> String {
    format!("{} {namespace}/{name}", K::kind(&()))
}

/// `Kind namespace/name` of an object as read.
#[must_use]
pub fn describe_object<K: Resource<DynamicType = ()>>(object: &K) -> String {
    describe::<K>(
        object.meta().namespace.as_deref().unwrap_or_default(),
        object.meta().name.as_deref().unwrap_or_default(),
    )
}

fn is_gone(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// How many writes of one group (a Cluster's claims' finalizers, its join
/// Secrets, an Infra's contract applies or deletes) one reconcile has in
/// flight at once: enough that a group of ten is not ten round trips in a
/// row, few enough that one reconcile does not crowd out the others'
/// requests on the server.
pub const WRITES_AT_ONCE: usize = 8;

/// The writes of one group, sent together (at most [`WRITES_AT_ONCE`] in
/// flight), their answers in the order of `writes`. The futures are made by
/// the caller before the stream (not by a closure in it): a closure over
/// borrowed items makes the reconcile's future fail the higher-ranked Send
/// check.
pub fn together<F: Future>(writes: Vec<F>) -> impl Stream<Item = F::Output> {
    stream::iter(writes).buffered(WRITES_AT_ONCE)
}

/// The object `namespace`/`name` as the API server holds it now (a GET,
/// not the cache: for a write that must not be built from a cached copy);
/// `None` when it is gone. Read as a write's answer is ([`send`]: without
/// `managedFields`, which no caller reads; the Requester reads a contract
/// so at nearly every reconcile).
///
/// # Errors
/// The read failed ([`Error::Kube`], naming the object).
pub async fn read<K>(client: &Client, namespace: &str, name: &str) -> Result<Option<K>>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + DeserializeOwned,
{
    let what = describe::<K>(namespace, name);
    let request = requests::<K>(namespace).get(name, &GetParams::default());
    match send(client, "get", request)
        .await
        .and_then(|answer| answer.object(&what))
    {
        Ok(object) => Ok(Some(object)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(Error::kube(format!("read {what}"), e)),
    }
}

/// Server-side applies `object` (its spec and metadata; never its status)
/// under `manager`, forced: these fields are the controller's alone.
///
/// # Errors
/// The write failed ([`Error::Kube`]), or `object` does not serialize ([`Error::Invalid`]).
pub async fn apply<K: Object>(client: &Client, manager: &str, object: &K) -> Result<K> {
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let what = describe::<K>(&namespace, &name);
    let mut body = serde_json::to_value(object).map_err(|e| Error::Invalid {
        object: what.clone(),
        reason: format!("cannot be serialized: {e}"),
    })?;
    if let Some(map) = body.as_object_mut() {
        // An apply body needs both; a status in it would be ignored at best.
        map.insert("apiVersion".to_owned(), json!(K::api_version(&())));
        map.insert("kind".to_owned(), json!(K::kind(&())));
        map.remove("status");
    }
    let request = requests::<K>(&namespace).patch(
        &name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(body),
    );
    send(client, "patch", request)
        .await
        .and_then(|answer| answer.object(&what))
        .map_err(|e| Error::kube(format!("apply {what}"), e))
}

/// Creates `object` under `manager`; a 409 when it already exists (a cache
/// that has not seen it yet never replaces it).
///
/// # Errors
/// The write failed, a conflict included.
pub async fn create<K: Object>(client: &Client, manager: &str, object: &K) -> Result<K> {
    let namespace = object.namespace().unwrap_or_default();
    let params = PostParams {
        field_manager: Some(manager.to_owned()),
        ..PostParams::default()
    };
    let what = || describe::<K>(&namespace, &object.name_any());
    let body = json_body(object)?;
    send(
        client,
        "create",
        requests::<K>(&namespace).create(&params, body),
    )
    .await
    .and_then(|answer| answer.object(&what()))
    .map_err(|e| Error::kube(format!("create {}", what()), e))
}

/// Replaces the status of `object` with `status` under `manager`, guarded by
/// the resourceVersion `object` carries (the one it was decided from).
/// `None` when the object is gone. Callers write only a status that changed.
///
/// # Errors
/// The write failed; a 409 means the decision was made from a stale object.
pub async fn replace_status<K>(
    client: &Client,
    manager: &str,
    object: &K,
    status: K::Status,
) -> Result<Option<K>>
where
    K: Object + HasStatus,
{
    let mut next = object.clone();
    next.meta_mut().managed_fields = None;
    *next.status_mut() = Some(status);
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let params = PostParams {
        field_manager: Some(manager.to_owned()),
        ..PostParams::default()
    };
    let what = || format!("write the status of {}", describe::<K>(&namespace, &name));
    let body = json_body(&next)?;
    let request = requests::<K>(&namespace).replace_subresource("status", &name, &params, body);
    match send(client, "replace_status", request)
        .await
        .and_then(|answer| answer.object(&what()))
    {
        Ok(written) => Ok(Some(written)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(Error::kube(what(), e)),
    }
}

/// Merge-patches `metadata` (finalizers, annotations, ownerReferences) into
/// the object `seen`, under `manager`, guarded by the resourceVersion it was
/// read at. `None` when the object is gone.
///
/// # Errors
/// The write failed; a 409 means the object changed since it was read.
pub async fn patch_metadata<K: Object>(
    client: &Client,
    manager: &str,
    seen: &Seen,
    metadata: serde_json::Map<String, Value>,
) -> Result<Option<K>> {
    let mut metadata = metadata;
    metadata.insert("resourceVersion".to_owned(), json!(seen.resource_version));
    let params = PatchParams {
        field_manager: Some(manager.to_owned()),
        ..PatchParams::default()
    };
    let patch = json!({ "metadata": metadata });
    let what = || {
        format!(
            "patch the metadata of {}",
            describe::<K>(&seen.namespace, &seen.name)
        )
    };
    let request = requests::<K>(&seen.namespace).patch(&seen.name, &params, &Patch::Merge(&patch));
    match send(client, "patch", request)
        .await
        .and_then(|answer| answer.object(&what()))
    {
        Ok(written) => Ok(Some(written)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(Error::kube(what(), e)),
    }
}

/// The metadata of a patch that leaves `finalizers` (null for none, which
/// removes the field rather than writing an empty list).
fn finalizers_patch(finalizers: &[String]) -> serde_json::Map<String, Value> {
    let value = if finalizers.is_empty() {
        Value::Null
    } else {
        json!(finalizers)
    };
    serde_json::Map::from_iter([("finalizers".to_owned(), value)])
}

/// Sets the finalizers of `seen` to `finalizers` (a guarded merge patch; an
/// empty list removes the field).
///
/// # Errors
/// As [`patch_metadata`].
pub async fn set_finalizers<K: Object>(
    client: &Client,
    manager: &str,
    seen: &Seen,
    finalizers: &[String],
) -> Result<Finalizers> {
    Ok(
        match patch_metadata::<K>(client, manager, seen, finalizers_patch(finalizers)).await? {
            Some(_) => Finalizers::Written,
            None => Finalizers::Gone,
        },
    )
}

/// Adds `finalizer` to `seen`'s list as read, unless it is there.
///
/// # Errors
/// As [`patch_metadata`].
pub async fn add_finalizer<K: Object>(
    client: &Client,
    manager: &str,
    seen: &Seen,
    finalizer: &str,
) -> Result<Finalizers> {
    Ok(add_finalizer_written::<K>(client, manager, seen, finalizer)
        .await?
        .0)
}

/// As [`add_finalizer`], with the object as the server wrote it (`Some` only
/// for [`Finalizers::Written`]): a later guarded write of the same reconcile
/// decided from `seen` carries its resourceVersion instead of the stale one.
///
/// # Errors
/// As [`patch_metadata`].
pub async fn add_finalizer_written<K: Object>(
    client: &Client,
    manager: &str,
    seen: &Seen,
    finalizer: &str,
) -> Result<(Finalizers, Option<K>)> {
    if seen.has_finalizer(finalizer) {
        return Ok((Finalizers::Unchanged, None));
    }
    let mut wanted = seen.finalizers.clone();
    wanted.push(finalizer.to_owned());
    let value = json!(wanted);
    let metadata = serde_json::Map::from_iter([("finalizers".to_owned(), value)]);
    Ok(
        match patch_metadata::<K>(client, manager, seen, metadata).await? {
            Some(written) => (Finalizers::Written, Some(written)),
            None => (Finalizers::Gone, None),
        },
    )
}

/// Removes `finalizer` from `seen`'s list as read, if it is there.
///
/// # Errors
/// As [`patch_metadata`].
pub async fn remove_finalizer<K: Object>(
    client: &Client,
    manager: &str,
    seen: &Seen,
    finalizer: &str,
) -> Result<Finalizers> {
    Ok(
        remove_finalizer_written::<K>(client, manager, seen, finalizer)
            .await?
            .0,
    )
}

/// As [`remove_finalizer`], with the object as the server wrote it (`Some`
/// only for [`Finalizers::Written`]), so the caller can record the version
/// its write replaced ([`crate::own_writes`]).
///
/// # Errors
/// As [`patch_metadata`].
pub async fn remove_finalizer_written<K: Object>(
    client: &Client,
    manager: &str,
    seen: &Seen,
    finalizer: &str,
) -> Result<(Finalizers, Option<K>)> {
    if !seen.has_finalizer(finalizer) {
        return Ok((Finalizers::Unchanged, None));
    }
    let wanted: Vec<String> = seen
        .finalizers
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    Ok(
        match patch_metadata::<K>(client, manager, seen, finalizers_patch(&wanted)).await? {
            Some(written) => (Finalizers::Written, Some(written)),
            None => (Finalizers::Gone, None),
        },
    )
}

/// Deletes the object `seen` if it is still there: preconditions on its uid,
/// and on its resourceVersion unless [`Seen::any_version`]. `false` when it
/// was already gone.
///
/// # Errors
/// The delete failed; a 409 means another object of that name, or a newer
/// version of it, is there now.
pub async fn delete_if_present<K: Object>(client: &Client, seen: &Seen) -> Result<bool> {
    Ok(!matches!(
        delete::<K>(client, seen).await?,
        Deleted::AlreadyGone
    ))
}

/// What a [`delete`] did.
#[derive(Clone, Debug)]
pub enum Deleted<K> {
    /// Nothing was there (404): done before.
    AlreadyGone,
    /// The object went at once.
    Removed,
    /// Finalizers keep the object: it is marked for deletion, as returned
    /// (its new resourceVersion is what a cache shows once it catches up).
    Marked(K),
}

/// Deletes the object `seen` as [`delete_if_present`] does, and says whether
/// finalizers keep it for now (with the object the server now holds).
///
/// # Errors
/// As [`delete_if_present`].
pub async fn delete<K: Object>(client: &Client, seen: &Seen) -> Result<Deleted<K>> {
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: seen.uid.clone(),
            resource_version: seen.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    let request = requests::<K>(&seen.namespace).delete(&seen.name, &params);
    match send(client, DELETE, request).await {
        Ok(Answer::Object(marked)) => Ok(Deleted::Marked(marked)),
        Ok(Answer::Status) => Ok(Deleted::Removed),
        Err(e) if is_gone(&e) => Ok(Deleted::AlreadyGone),
        Err(e) => Err(Error::kube(
            format!("delete {}", describe::<K>(&seen.namespace, &seen.name)),
            e,
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn seen_keeps_what_guards_a_write() {
        let mut contract = crate::requester::test_fixtures::contract();
        contract.metadata.name = Some("c1".to_owned());
        contract.metadata.namespace = Some("ns".to_owned());
        contract.metadata.uid = Some("u1".to_owned());
        contract.metadata.resource_version = Some("7".to_owned());
        contract.metadata.finalizers = Some(vec!["a/b".to_owned()]);
        let seen = Seen::of(&contract);
        assert_eq!((seen.namespace.as_str(), seen.name.as_str()), ("ns", "c1"));
        assert!(seen.has_finalizer("a/b"));
        assert!(!seen.has_finalizer("c/d"));
        let any = seen.clone().any_version();
        assert_eq!(any.resource_version, None);
        assert_eq!(any.uid.as_deref(), Some("u1"));
        assert_eq!(
            describe::<api::ComputeContract>("ns", "c1"),
            "ComputeContract ns/c1"
        );
    }
}
