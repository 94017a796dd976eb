//! What an operator reads from a Requester on the atproto market: its Ready
//! condition says which Secret or key is missing, that the PDS refused the
//! credentials or does not answer, or that no bidder answered, and turns
//! True once fixed without touching anything else; and the credentials never
//! reach a log line, an Event or a status (plan 0013, R2-SEAM).

use crate::support;

use api::Requester;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::atproto_market::{SECRET, three_bidders};
use support::{CONTRACT_NS, Env, eventually};

/// The Requester's Ready condition: (status, reason, message).
async fn ready(env: &Env) -> Option<(String, String, String)> {
    let requester: Requester = env.requesters().get("root").await.ok()?;
    let ready = requester
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Ready")?;
    Some((
        format!("{:?}", ready.status),
        ready.reason.into(),
        ready.message.into(),
    ))
}

/// Waits until the Requester's Ready condition has `reason` and a message
/// that contains `says`.
async fn wait_reason(env: &Env, reason: &str, says: &str) {
    eventually(
        &format!("Requester Ready {reason}: ...{says}..."),
        || async {
            ready(env)
                .await
                .filter(|(_, r, message)| r == reason && message.contains(says))
                .map(drop)
        },
    )
    .await;
}

/// `spec.market.atproto` naming the Secret `name` for the app password.
fn app_password_ref(name: &str) -> Value {
    json!({"appPasswordSecretRef": {"name": name, "key": "app-password"}})
}

/// Changes `spec.market.atproto` of the Requester `root` (a merge patch).
async fn patch_market(env: &Env, atproto: Value) {
    env.requesters()
        .patch(
            "root",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"market": {"atproto": atproto}}})),
        )
        .await
        .unwrap();
}

async fn create_secret(env: &Env, name: &str, data: &[(&str, &str)]) {
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(CONTRACT_NS.to_owned()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    };
    env.secrets()
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requester_conditions_say_what_is_wrong_and_heal_when_fixed() {
    let env = Env::start_atproto(&three_bidders()).await;
    wait_reason(&env, "MarketConfigured", "3 bidders found").await;
    let [password, key] = {
        let secret = env
            .atproto_env()
            .market
            .credentials_secret(CONTRACT_NS, SECRET);
        let data = secret.data.unwrap();
        let text = |k: &str| String::from_utf8(data[k].0.clone()).unwrap();
        [text("app-password"), text("signing-key")]
    };

    // A Secret that does not exist yet: said, then fixed by creating it.
    patch_market(&env, app_password_ref("later")).await;
    wait_reason(
        &env,
        "SecretMissing",
        "Secret socialweb-system/later (spec.market.atproto.appPasswordSecretRef) does not exist",
    )
    .await;
    create_secret(&env, "later", &[("other", "x")]).await;
    wait_reason(&env, "SecretMissing", "has no key app-password").await;
    env.secrets()
        .delete("later", &Default::default())
        .await
        .unwrap();
    create_secret(&env, "later", &[("app-password", &password)]).await;
    wait_reason(&env, "MarketConfigured", "").await;

    // A wrong app password, and a signing key that is not one.
    create_secret(
        &env,
        "wrong",
        &[("app-password", "not-it"), ("signing-key", "zz")],
    )
    .await;
    patch_market(&env, app_password_ref("wrong")).await;
    wait_reason(
        &env,
        "InvalidCredentials",
        "refused the account's credentials",
    )
    .await;
    patch_market(
        &env,
        json!({
            "appPasswordSecretRef": {"name": SECRET, "key": "app-password"},
            "signingKeySecretRef": {"name": "wrong", "key": "signing-key"},
        }),
    )
    .await;
    wait_reason(
        &env,
        "InvalidCredentials",
        "signing key in Secret socialweb-system/wrong",
    )
    .await;
    patch_market(
        &env,
        json!({"signingKeySecretRef": {"name": SECRET, "key": "signing-key"}}),
    )
    .await;
    wait_reason(&env, "MarketConfigured", "").await;

    // A PDS that does not answer.
    let pds = env.atproto_env().market.net.pds_url.clone();
    patch_market(&env, json!({"pdsUrl": "http://127.0.0.1:9"})).await;
    wait_reason(&env, "PdsUnreachable", "http://127.0.0.1:9").await;
    patch_market(&env, json!({"pdsUrl": pds})).await;
    wait_reason(&env, "MarketConfigured", "").await;

    // No bidder: none named that exists, no relay.
    patch_market(
        &env,
        json!({"bidders": ["did:plc:nobodyhereatall"], "relayUrl": null}),
    )
    .await;
    wait_reason(&env, "NoBidders", "did:plc:nobodyhereatall").await;

    // None of it ever showed a credential: not in a log line, an Event, a status.
    let logs = support::logs::text();
    let history = env.server.history();
    for value in [password, key] {
        assert!(!logs.contains(&value), "a credential is in the logs");
        for entry in history.iter().filter(|e| e.resource != "/secrets") {
            assert!(
                !entry.object().to_string().contains(&value),
                "a credential is in {} {}/{}",
                entry.resource,
                entry.namespace,
                entry.name
            );
        }
    }
}
