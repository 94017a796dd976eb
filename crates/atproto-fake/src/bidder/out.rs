//! What a fake bidder sends and writes: records in its repository, pushes
//! to the requester, and reads of other repositories.

use std::sync::Arc;

use atproto::did::{self, COMPUTE_EVENT_SERVICE};
use atproto::market as m;
use atproto::{AtUri, Auth, Record, Secret, XrpcClient, attest, jwt, xrpc};
use serde_json::{Value, json};

use super::{Inner, Machine};

type Result<T> = std::result::Result<T, atproto::Error>;

/// The latest version of any record, `None` when it does not exist.
pub async fn fetch(inner: &Inner, uri: &str) -> Result<Option<Record>> {
    let at: AtUri = uri.parse()?;
    let doc = inner.resolver.resolve(&at.did).await?;
    let reader = XrpcClient::new(inner.http.clone(), doc.pds()?, xrpc::DEFAULT_TIMEOUT);
    match reader.get_record(&at).await {
        Ok(record) => Ok(Some(record)),
        Err(atproto::Error::RecordNotFound { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// Writes a record in the bidder's repository (a TID key), signed or not.
pub async fn write(
    inner: &Inner,
    collection: &str,
    mut value: Value,
    sign: bool,
) -> Result<Record> {
    if sign {
        attest::sign_record(&mut value, &inner.attest_key, &inner.did, Some(&inner.did))?;
    }
    let written = inner.pds.create_record(collection, None, &value).await?;
    Ok(Record {
        uri: written.uri,
        cid: written.cid,
        value,
    })
}

/// A service-auth JWT for a call to `requester` at `url`: from the PDS,
/// naming the requester by DID and service id; or, with the `aud_with_port`
/// knob, minted with our own key for `did:web:<host>:<port>`, as the
/// reference's bidders send it.
async fn token(
    inner: &Inner,
    requester: &str,
    url: &str,
    lxm: &str,
    service: &str,
) -> Result<Secret<String>> {
    if inner.knobs().aud_with_port {
        let aud = jwt::audience_for_url(url)?;
        jwt::issue(
            &inner.atproto_key,
            &inner.did,
            &aud,
            lxm,
            jwt::unix_seconds_now(),
            jwt::DEFAULT_TTL_SECONDS,
        )
    } else {
        inner
            .pds
            .service_auth(&format!("{requester}#{service}"), lxm, None)
            .await
    }
}

/// Pushes `record` to `requester`'s `lxm` at `endpoint` (URL or `did#id`).
pub async fn push(
    inner: &Inner,
    requester: &str,
    endpoint: &str,
    lxm: &str,
    service: &str,
    record: &Record,
) -> Result<()> {
    let url = did::resolve_service(&inner.resolver, endpoint).await?;
    let token = token(inner, requester, &url, lxm, service).await?;
    let input = json!({ "uri": record.uri, "cid": record.cid, "record": record.value });
    let _: Value = XrpcClient::new(inner.http.clone(), &url, xrpc::DEFAULT_TIMEOUT)
        .procedure(lxm, &input, Some(&Auth::Bearer(token)))
        .await?;
    Ok(())
}

/// Writes an event about `machine` with `payload`, and pushes it to the
/// requester unless callbacks are lost.
async fn report(inner: &Inner, machine: &Machine, payload: Value) {
    let Some(endpoint) = &machine.submit_event else {
        return;
    };
    let result = async {
        let collection = m::collection_of(&payload).to_owned();
        let payload = write(inner, &collection, payload, false).await?;
        let event = json!({
            "$type": m::EVENT,
            "receipt": machine.receipt.to_record_value(),
            "payload": payload.strong_ref().to_record_value(),
            "createdAt": m::datetime(inner.now()),
        });
        let event = write(inner, m::EVENT, event, true).await?;
        if !inner.knobs().lose_callbacks {
            push(
                inner,
                &machine.requester,
                endpoint,
                m::SUBMIT_EVENT,
                COMPUTE_EVENT_SERVICE,
                &event,
            )
            .await?;
        }
        Ok::<_, atproto::Error>(())
    }
    .await;
    if let Err(error) = result {
        tracing::info!(%error, receipt = %machine.receipt.uri, "fake bidder could not report");
    }
}

pub async fn report_on_network(inner: &Inner, machine: &Machine) {
    let payload = json!({ "$type": m::VM_ON_NETWORK, "createdAt": m::datetime(inner.now()) });
    report(inner, machine, payload).await;
}

pub async fn report_identity(inner: &Inner, machine: &Machine) {
    let payload = json!({
        "$type": m::VM_REGISTER_IDENTITY,
        "computeIdentity": { "nodeId": machine.node_id },
        "createdAt": m::datetime(inner.now()),
    });
    report(inner, machine, payload).await;
}

/// A machine boots: after the provisioning delay it reports on the network,
/// then its identity; with silent provisioning failure, never.
pub fn provision(inner: &Arc<Inner>, machine: Machine) {
    let knobs = inner.knobs();
    if knobs.silent_provisioning_failure {
        return;
    }
    let task_inner = Arc::clone(inner);
    inner.background(async move {
        if !knobs.provisioning_delay.is_zero() {
            tokio::time::sleep(knobs.provisioning_delay).await;
        }
        report_on_network(&task_inner, &machine).await;
        report_identity(&task_inner, &machine).await;
    });
}
