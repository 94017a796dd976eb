//! Interoperability tier: our client against Bluesky's own PDS
//! (`@atproto/pds`, see `support/real_pds.rs`), registered in the fake's PLC.
//!
//! Cost: the first run installs Node 22 and the PDS under
//! `target/atproto-pds` (npm ci, then a node-gyp build of better-sqlite3;
//! minutes, once per target dir); every run after that starts the PDS
//! (a few seconds) and runs the calls below.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/real_pds.rs"]
mod real_pds;

use std::time::Duration;

use atproto::did::{ATPROTO_KEY, DidResolver};
use atproto::jwt::{self, Audience};
use atproto::{AtUri, Error, PdsClient, SigningKey, TidGenerator, attest, data, xrpc};
use atproto_fake::FakeNetwork;
use serde_json::json;

const VM: &str = "com.publicdomainrelay.temp.compute.vm";
const RFP: &str = "com.publicdomainrelay.temp.market.rfp";
const SUBMIT_RFP: &str = "com.publicdomainrelay.temp.market.submitRfp";

#[tokio::test]
async fn our_client_speaks_to_blueskys_pds() {
    let Some(dir) = real_pds::ensure_installed() else {
        return;
    };
    let net = FakeNetwork::start().await.unwrap();
    let pds = real_pds::RealPds::start(&dir, &net.plc_url).await;
    let http = xrpc::http_client().unwrap();

    // An account: createAccount registers the did:plc in the fake PLC.
    let (owner, did) = pds.create_account("requester.test").await;
    assert!(did.starts_with("did:plc:"), "{did}");
    let resolver = DidResolver::new(http.clone(), &net.plc_url, Duration::from_secs(10));
    let doc = resolver.resolve(&did).await.unwrap();
    assert_eq!(doc.handle(), Some("requester.test"));

    // The operator's path: an app password, a session with it, a refresh.
    let app_password = owner.create_app_password("socialweb").await.unwrap();
    let client = PdsClient::new(http.clone(), &pds.url, xrpc::DEFAULT_TIMEOUT);
    assert_eq!(
        client
            .login("requester.test", &app_password)
            .await
            .unwrap()
            .did,
        did
    );
    client.refresh().await.unwrap();
    let wrong = PdsClient::new(http.clone(), &pds.url, xrpc::DEFAULT_TIMEOUT)
        .login("requester.test", &"not-the-password".into())
        .await
        .unwrap_err();
    assert!(wrong.is_auth(), "{wrong}");

    // Market records: a vm, then a signed rfp on a TID rkey.
    let attestation = SigningKey::generate(atproto::Algorithm::K256);
    let vm = client
        .create_record(VM, None, &json!({"$type": VM, "role": "compute-test", "user_data": "#cloud-config\n", "createdAt": "2026-07-08T05:50:24.474Z"}))
        .await
        .unwrap();
    let mut rfp = json!({"$type": RFP, "domain": "compute", "payload": vm.to_record_value(),
                         "createdAt": "2026-07-08T05:50:24.475Z", "submitBid": format!("{did}#pdr_temp_market")});
    attest::sign_record(&mut rfp, &attestation, &did, Some(&did)).unwrap();
    let mut tids = TidGenerator::new();
    let rkey = tids.next_now().to_string();
    let written = client.put_record(RFP, &rkey, &rfp, None).await.unwrap();
    // Bluesky's PDS hashes {$bytes} as bytes: its CID is our data model's.
    assert_eq!(written.cid, data::record_cid(&rfp).unwrap().to_string());

    let uri = AtUri::new(&did, RFP, &rkey);
    let read = client.xrpc().get_record(&uri).await.unwrap();
    assert_eq!(read.strong_ref(), written);
    assert_eq!(
        attest::verify_record(&read.value, &did).unwrap()[0].key,
        attestation.public_key()
    );

    // Listing with cursors: three rfps, two a page, newest first.
    for n in 0..2 {
        let mut more = json!({"$type": RFP, "domain": "compute", "n": n, "createdAt": "2026-07-08T05:50:25.000Z"});
        attest::sign_record(&mut more, &attestation, &did, None).unwrap();
        client
            .put_record(RFP, &tids.next_now().to_string(), &more, None)
            .await
            .unwrap();
    }
    let first = client
        .xrpc()
        .list_records(&did, RFP, 2, None)
        .await
        .unwrap();
    assert_eq!(first.records.len(), 2);
    let second = client
        .xrpc()
        .list_records(&did, RFP, 2, first.cursor.as_deref())
        .await
        .unwrap();
    assert_eq!(
        second
            .records
            .iter()
            .map(|r| r.uri.as_str())
            .collect::<Vec<_>>(),
        [uri.to_string()]
    );
    assert_eq!(
        client
            .xrpc()
            .list_all_records(&did, RFP, 10)
            .await
            .unwrap()
            .len(),
        3
    );

    // Delete, then absent: typed not-found, and a second delete is fine.
    client.delete_record(RFP, &rkey).await.unwrap();
    let gone = client.xrpc().get_record(&uri).await.unwrap_err();
    assert!(matches!(gone, Error::RecordNotFound { .. }), "{gone}");
    client.delete_record(RFP, &rkey).await.unwrap();
    let no_repo = client
        .xrpc()
        .get_record(&AtUri::new("did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", RFP, &rkey))
        .await
        .unwrap_err();
    assert!(matches!(no_repo, Error::RecordNotFound { .. }), "{no_repo}");

    // Service auth: the PDS signs with the account's #atproto key, which our
    // verifier finds in the DID document the PDS registered in the PLC.
    // Bluesky's PDS refuses a did:web aud with a port (the reference's raw
    // form is a did:web path; the encoded one is allowed for localhost only),
    // so a receiver is named by its DID and service id.
    for refused in [
        jwt::audience_for_url("https://bidder.test:8443").unwrap(),
        jwt::did_web_for_url("https://bidder.test:8443").unwrap(),
    ] {
        let err = client
            .service_auth(&refused, SUBMIT_RFP, None)
            .await
            .unwrap_err();
        assert_eq!(err.xrpc_error(), Some("InvalidRequest"), "{refused}: {err}");
    }
    let local = jwt::did_web_for_url("http://localhost:8443").unwrap();
    let token = client.service_auth(&local, SUBMIT_RFP, None).await.unwrap();
    let local_audience = Audience {
        host: "localhost:8443".into(),
        did: None,
        service_id: None,
    };
    let key = resolver
        .resolve(&did)
        .await
        .unwrap()
        .key(ATPROTO_KEY)
        .unwrap();
    jwt::verify(
        &jwt::decode(token.expose()).unwrap(),
        &key,
        SUBMIT_RFP,
        &local_audience,
        jwt::unix_seconds_now(),
    )
    .unwrap();
    let bidder_did = "did:plc:bidderbidderbidderbidder";
    let aud = format!("{bidder_did}#pdr_temp_market");
    let token = client.service_auth(&aud, SUBMIT_RFP, None).await.unwrap();
    let decoded = jwt::decode(token.expose()).unwrap();
    assert_eq!(decoded.claims.iss, did);
    let key = resolver
        .resolve(&decoded.claims.iss)
        .await
        .unwrap()
        .key(ATPROTO_KEY)
        .unwrap();
    let audience = Audience {
        host: "bidder.test".into(),
        did: Some(bidder_did.into()),
        service_id: Some("pdr_temp_market".into()),
    };
    let claims = jwt::verify(
        &decoded,
        &key,
        SUBMIT_RFP,
        &audience,
        jwt::unix_seconds_now(),
    )
    .unwrap();
    jwt::check_issuer_is_author(&claims, &uri.to_string()).unwrap();
    assert!(
        jwt::verify(
            &decoded,
            &key,
            "com.publicdomainrelay.temp.market.submitAccept",
            &audience,
            jwt::unix_seconds_now()
        )
        .is_err()
    );
    assert!(
        jwt::verify(&decoded, &key, SUBMIT_RFP, &audience, claims.exp).is_err(),
        "expired at exp"
    );
    let bidder_audience = Audience {
        host: "other.test".into(),
        did: None,
        service_id: None,
    };
    assert!(
        jwt::verify(
            &decoded,
            &key,
            SUBMIT_RFP,
            &bidder_audience,
            jwt::unix_seconds_now()
        )
        .is_err()
    );
    // An explicit exp is honoured.
    let exp = jwt::unix_seconds_now() + 120;
    let token = client
        .service_auth(&aud, SUBMIT_RFP, Some(exp))
        .await
        .unwrap();
    assert_eq!(jwt::decode(token.expose()).unwrap().claims.exp, exp);
}
