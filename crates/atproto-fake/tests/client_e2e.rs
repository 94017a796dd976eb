//! The atproto client against the fake services, over real HTTP.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use atproto::did::{ATPROTO_KEY, DidResolver};
use atproto::jwt::{self, Audience};
use atproto::{AtUri, Error, PdsClient, Secret, SigningKey, attest, xrpc};
use atproto_fake::{FakeNetwork, Fault, Service};
use serde_json::{Value, json};

const RFP: &str = "com.publicdomainrelay.temp.market.rfp";
const SUBMIT_RFP: &str = "com.publicdomainrelay.temp.market.submitRfp";

async fn logged_in(net: &FakeNetwork, handle: &str) -> (PdsClient, String) {
    let password: Secret<String> = format!("pw-{handle}").into();
    let account = net.pds.create_account(handle, &password).unwrap();
    let client = PdsClient::new(
        xrpc::http_client().unwrap(),
        &net.pds_url,
        xrpc::DEFAULT_TIMEOUT,
    );
    client.login(handle, &password).await.unwrap();
    (client, account.did)
}

#[tokio::test]
async fn records_round_trip_with_cursors_and_typed_not_found() {
    let net = FakeNetwork::start().await.unwrap();
    let (client, did) = logged_in(&net, "requester.test").await;

    let mut written = Vec::new();
    for n in 0..5 {
        let rkey = atproto::Tid::new(1_783_489_824_000_000 + n, 0).to_string();
        let record = json!({"$type": RFP, "n": n});
        let strong = client.put_record(RFP, &rkey, &record, None).await.unwrap();
        assert_eq!(strong.uri, AtUri::new(&did, RFP, &rkey).to_string());
        assert_eq!(
            strong.cid,
            atproto::data::record_cid(&record).unwrap().to_string(),
            "the PDS's cid is the record's dag-cbor cid"
        );
        written.push(strong);
    }

    // Newest first, two a page, the cursor carries on where the page ended.
    let reader = client.xrpc();
    let first = reader.list_records(&did, RFP, 2, None).await.unwrap();
    assert_eq!(
        first
            .records
            .iter()
            .map(|r| r.value["n"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [4, 3]
    );
    let second = reader
        .list_records(&did, RFP, 2, first.cursor.as_deref())
        .await
        .unwrap();
    assert_eq!(
        second
            .records
            .iter()
            .map(|r| r.value["n"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        [2, 1]
    );
    let all = reader.list_all_records(&did, RFP, 10).await.unwrap();
    assert_eq!(all.len(), 5);

    let uri: AtUri = written[0].uri.parse().unwrap();
    let got = reader.get_record(&uri).await.unwrap();
    assert_eq!(got.strong_ref(), written[0]);

    // Replace with a compare-and-swap on the current cid; a stale cid fails.
    let replaced = client
        .put_record(
            RFP,
            &uri.rkey,
            &json!({"$type": RFP, "n": 10}),
            Some(&written[0].cid),
        )
        .await
        .unwrap();
    let stale = client
        .put_record(
            RFP,
            &uri.rkey,
            &json!({"$type": RFP, "n": 11}),
            Some(&written[0].cid),
        )
        .await
        .unwrap_err();
    assert_eq!(stale.xrpc_error(), Some("InvalidSwap"), "{stale}");
    assert_eq!(reader.get_record(&uri).await.unwrap().cid, replaced.cid);

    client.delete_record(RFP, &uri.rkey).await.unwrap();
    let missing = reader.get_record(&uri).await.unwrap_err();
    assert!(matches!(missing, Error::RecordNotFound { .. }), "{missing}");
    client.delete_record(RFP, &uri.rkey).await.unwrap();
    let no_repo = reader
        .get_record(&AtUri::new("did:plc:nobody", RFP, &uri.rkey))
        .await
        .unwrap_err();
    assert!(matches!(no_repo, Error::RecordNotFound { .. }), "{no_repo}");

    // A record of another type than its collection is refused, as Bluesky's PDS does.
    let wrong = client
        .put_record(RFP, "3mq4ger7lvs23", &json!({"$type": "x.y.z"}), None)
        .await
        .unwrap_err();
    assert_eq!(wrong.xrpc_error(), Some("InvalidRequest"));
}

#[tokio::test]
async fn a_signed_market_record_verifies_after_the_round_trip() {
    let net = FakeNetwork::start().await.unwrap();
    let (client, did) = logged_in(&net, "requester.test").await;
    let key = SigningKey::generate(atproto::Algorithm::K256);
    let mut rfp =
        json!({"$type": RFP, "domain": "compute", "createdAt": "2026-07-08T05:50:24.475Z"});
    attest::sign_record(&mut rfp, &key, &did, Some(&did)).unwrap();
    let strong = client.create_record(RFP, None, &rfp).await.unwrap();
    let rkey = strong.at_uri().unwrap().rkey;
    assert!(
        rkey.parse::<atproto::Tid>().is_ok(),
        "createRecord picks a TID: {rkey}"
    );
    let read = client
        .xrpc()
        .get_record(&strong.at_uri().unwrap())
        .await
        .unwrap();
    let verified = attest::verify_record(&read.value, &did).unwrap();
    assert_eq!(verified[0].key, key.public_key());
}

#[tokio::test]
async fn service_auth_from_the_pds_verifies_with_the_did_document_key() {
    let net = FakeNetwork::start().await.unwrap();
    let (client, did) = logged_in(&net, "requester.test").await;
    // As Bluesky's PDS, the fake refuses a did:web aud with a port (raw or
    // encoded) unless the host is localhost.
    for refused in [
        jwt::audience_for_url("https://bidder.example:8443").unwrap(),
        jwt::did_web_for_url("https://bidder.example:8443").unwrap(),
        jwt::audience_for_url("http://localhost:8443").unwrap(),
        "did:plc:tooshort".to_owned(),
    ] {
        let err = client
            .service_auth(&refused, SUBMIT_RFP, None)
            .await
            .unwrap_err();
        assert_eq!(err.xrpc_error(), Some("InvalidRequest"), "{refused}: {err}");
    }
    let local = jwt::did_web_for_url("http://localhost:8443").unwrap();
    client.service_auth(&local, SUBMIT_RFP, None).await.unwrap();
    let aud = jwt::audience_for_url("https://bidder.example").unwrap();
    let token = client.service_auth(&aud, SUBMIT_RFP, None).await.unwrap();

    let resolver = DidResolver::new(
        xrpc::http_client().unwrap(),
        &net.plc_url,
        Duration::from_secs(10),
    );
    let decoded = jwt::decode(token.expose()).unwrap();
    assert_eq!(decoded.claims.iss, did);
    let doc = resolver.resolve(&decoded.claims.iss).await.unwrap();
    assert_eq!(doc.pds().unwrap(), net.pds_url);
    assert_eq!(doc.handle(), Some("requester.test"));
    let audience = Audience {
        host: "bidder.example".into(),
        did: None,
        service_id: None,
    };
    let claims = jwt::verify(
        &decoded,
        &doc.key(ATPROTO_KEY).unwrap(),
        SUBMIT_RFP,
        &audience,
        jwt::unix_seconds_now(),
    )
    .unwrap();
    jwt::check_issuer_is_author(&claims, &format!("at://{did}/{RFP}/3mq4ger7lvs23")).unwrap();
    // Another account's key does not verify it.
    let (_, other) = logged_in(&net, "other.test").await;
    let other_key = resolver
        .resolve(&other)
        .await
        .unwrap()
        .key(ATPROTO_KEY)
        .unwrap();
    assert!(
        jwt::verify(
            &decoded,
            &other_key,
            SUBMIT_RFP,
            &audience,
            jwt::unix_seconds_now()
        )
        .is_err()
    );
    // An exp more than an hour ahead is refused by the PDS.
    let far = client
        .service_auth(&aud, SUBMIT_RFP, Some(jwt::unix_seconds_now() + 7200))
        .await
        .unwrap_err();
    assert_eq!(far.xrpc_error(), Some("BadExpiration"));
}

#[tokio::test]
async fn app_passwords_log_in_and_bad_ones_are_auth_errors_without_the_password() {
    let net = FakeNetwork::start().await.unwrap();
    let (client, did) = logged_in(&net, "requester.test").await;
    let app_password = client.create_app_password("socialweb").await.unwrap();
    let second = PdsClient::new(
        xrpc::http_client().unwrap(),
        &net.pds_url,
        xrpc::DEFAULT_TIMEOUT,
    );
    assert_eq!(second.login(&did, &app_password).await.unwrap().did, did);

    let wrong: Secret<String> = "wrong-password-123".into();
    let err = second.login("requester.test", &wrong).await.unwrap_err();
    assert!(err.is_auth(), "{err}");
    let printed = format!("{err} {err:?} {second:?}");
    assert!(
        !printed.contains("wrong-password-123") && !printed.contains(app_password.expose()),
        "{printed}"
    );
}

#[tokio::test]
async fn an_expired_access_token_is_refreshed_once() {
    let net = FakeNetwork::start().await.unwrap();
    let (client, _) = logged_in(&net, "requester.test").await;
    net.pds.expire_access_tokens();
    client
        .put_record(RFP, "3mq4ger7lvs23", &json!({"$type": RFP}), None)
        .await
        .unwrap();
    net.pds.expire_access_tokens();
    client
        .service_auth("did:web:bidder.example", SUBMIT_RFP, None)
        .await
        .unwrap();
}

#[tokio::test]
async fn injected_faults_become_typed_errors() {
    let net = FakeNetwork::start().await.unwrap();
    let (client, did) = logged_in(&net, "requester.test").await;
    let put = "com.atproto.repo.putRecord";

    net.faults.once(Service::Pds, put, Fault::internal());
    let err = client
        .put_record(RFP, "3mq4ger7lvs23", &json!({"$type": RFP}), None)
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert_eq!(err.xrpc_error(), Some("internal error"));
    client
        .put_record(RFP, "3mq4ger7lvs23", &json!({"$type": RFP}), None)
        .await
        .unwrap();

    for (fault, auth) in [
        (Fault::unauthorized(), true),
        (Fault::forbidden(), false),
        (Fault::invalid_request(), false),
    ] {
        net.faults.once(Service::Pds, put, fault);
        let err = client
            .put_record(RFP, "3mq4ger7lvs23", &json!({"$type": RFP}), None)
            .await
            .unwrap_err();
        assert_eq!(err.is_auth(), auth, "{err}");
        assert!(!err.is_retryable(), "{err}");
    }

    // A stall longer than the client's timeout is a timeout, and retryable.
    net.faults.once(
        Service::Pds,
        "com.atproto.repo.getRecord",
        Fault::Stall(Duration::from_secs(5)),
    );
    let impatient = atproto::XrpcClient::new(
        xrpc::http_client().unwrap(),
        &net.pds_url,
        Duration::from_millis(200),
    );
    let err = impatient
        .get_record(&AtUri::new(&did, RFP, "3mq4ger7lvs23"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Transport {
                timed_out: true,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_retryable());

    // A lost answer: the write happened, the caller cannot tell.
    net.faults.once(Service::Pds, put, Fault::LoseAnswer);
    let err = client
        .put_record(RFP, "3mq4ger7lvs24", &json!({"$type": RFP}), None)
        .await
        .unwrap_err();
    assert!(err.is_retryable(), "{err}");
    assert!(
        net.pds
            .record(&AtUri::new(&did, RFP, "3mq4ger7lvs24"))
            .is_some()
    );
}

#[tokio::test]
async fn plc_answers_404_for_an_unknown_did_and_the_relay_lags_as_told() {
    let net = FakeNetwork::start().await.unwrap();
    let resolver = DidResolver::new(
        xrpc::http_client().unwrap(),
        &net.plc_url,
        Duration::from_secs(10),
    );
    let err = resolver
        .resolve("did:plc:aaaaaaaaaaaaaaaaaaaaaaaa")
        .await
        .unwrap_err();
    assert!(
        matches!(err, Error::Resolve { .. }) && err.to_string().contains("404"),
        "{err}"
    );

    let offering = "com.publicdomainrelay.temp.market.offering";
    let relay = atproto::XrpcClient::new(
        xrpc::http_client().unwrap(),
        &net.relay_url,
        xrpc::DEFAULT_TIMEOUT,
    );
    let list = || async {
        let out: Value = relay
            .query(
                "com.atproto.sync.listReposByCollection",
                &[("collection", offering), ("limit", "1000")],
                None,
            )
            .await
            .unwrap();
        out["repos"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["did"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    net.faults.set_relay_lag(Duration::from_secs(3600));
    let (bidder, did) = logged_in(&net, "bidder.test").await;
    bidder
        .create_record(offering, None, &json!({"$type": offering, "appliesTo": []}))
        .await
        .unwrap();
    assert!(list().await.is_empty(), "not yet indexed");
    net.faults.set_relay_lag(Duration::ZERO);
    assert_eq!(list().await, [did]);
}

#[tokio::test]
async fn did_web_documents_resolve_over_http_and_a_bidder_style_issuer_verifies() {
    let mut net = FakeNetwork::start().await.unwrap();
    let key = SigningKey::generate(atproto::Algorithm::P256);
    let document: atproto::DidDocument = serde_json::from_value(json!({
        "id": "replaced",
        "verificationMethod": [{"id": "#attestation", "type": "Multikey", "controller": "replaced",
                                "publicKeyMultibase": key.public_key().multibase()}],
        "service": [{"id": "#pdr_temp_market", "type": "x", "serviceEndpoint": "https://bidder.example"}]
    }))
    .unwrap();
    let (did, _host) = net.serve_did_web(document).await.unwrap();
    let resolver = DidResolver::new(
        xrpc::http_client().unwrap(),
        &net.plc_url,
        Duration::from_secs(10),
    );
    let resolved = resolver.resolve(&did).await.unwrap();
    assert_eq!(resolved.id, did);
    assert_eq!(resolved.key("attestation").unwrap(), key.public_key());
    let endpoint = atproto::did::resolve_service(&resolver, &format!("{did}#pdr_temp_market"))
        .await
        .unwrap();
    assert_eq!(endpoint, "https://bidder.example");
    assert_eq!(
        atproto::did::resolve_service(&resolver, "https://direct.example")
            .await
            .unwrap(),
        "https://direct.example"
    );

    // A record signed by that key, as the reference bidder signs its bids.
    let mut bid = json!({"$type": "com.publicdomainrelay.temp.market.bid", "createdAt": "2026-07-08T05:50:24.489Z"});
    attest::sign_record(&mut bid, &key, "did:plc:bidderrepo", Some(&did)).unwrap();
    let verified = attest::verify_record(&bid, "did:plc:bidderrepo").unwrap();
    assert_eq!(verified[0].issuer.as_deref(), Some(did.as_str()));
    assert_eq!(verified[0].key, resolved.key("attestation").unwrap());
}
