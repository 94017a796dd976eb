//! The inbound seam over HTTP: submitBid and submitEvent check the JWT
//! (401), the issuer against the record's author (403) and the record's
//! signatures (400), and what they take is only a wake-up.

use crate::atproto_support;

use atproto::did::{COMPUTE_EVENT_SERVICE, MARKET_SERVICE};
use atproto::market as m;
use atproto::{Algorithm, SigningKey, jwt};
use atproto_fake::BidderKnobs;
use atproto_support::{Harness, request, usd_hourly};
use market::Market;
use serde_json::{Value, json};

struct Push<'a> {
    h: &'a Harness,
    lxm: &'static str,
}

impl Push<'_> {
    async fn send(
        &self,
        token: Option<&str>,
        uri: &str,
        cid: &str,
        record: &Value,
    ) -> (u16, Value) {
        let url = format!("{}/xrpc/{}", self.h.config.public_url, self.lxm);
        let mut call = reqwest::Client::new()
            .post(url)
            .json(&json!({ "uri": uri, "cid": cid, "record": record }));
        if let Some(token) = token {
            call = call.bearer_auth(token);
        }
        let answer = call.send().await.unwrap();
        let status = answer.status().as_u16();
        (status, answer.json().await.unwrap_or(Value::Null))
    }

    /// A token from `iss` signed with `key`, for us.
    fn token(&self, key: &SigningKey, iss: &str, lxm: &str, service: &str) -> String {
        let aud = format!("{}#{service}", self.h.requester);
        jwt::issue(key, iss, &aud, lxm, jwt::unix_seconds_now(), 60)
            .unwrap()
            .expose()
            .clone()
    }
}

#[tokio::test]
async fn submit_bid_answers_401_403_400_and_200_as_the_reference() {
    let h = Harness::start(vec![usd_hourly(0.05), usd_hourly(0.07)]).await;
    h.net.faults.set_bidder(BidderKnobs {
        lose_callbacks: true,
        ..BidderKnobs::default()
    });
    let (alice, bob) = (h.bidder(0).did().to_owned(), h.bidder(1).did().to_owned());
    let alice_key = h.net.pds.signing_key(&alice).unwrap();
    let bob_key = h.net.pds.signing_key(&bob).unwrap();
    let push = Push {
        h: &h,
        lxm: m::SUBMIT_BID,
    };

    let market = h.market();
    let placeholder = json!({"$type": m::BID});
    let (status, body) = push
        .send(Some("x.y.z"), "at://did:plc:a/c/r", "bafy", &placeholder)
        .await;
    assert_eq!(status, 503, "no market logged in yet: {body}");

    let rfp = market.publish_rfp(request("c")).await.unwrap();
    market.settled().await;
    let (rkey, bid) = h.net.pds.records(&alice, m::BID).remove(0);
    let uri = format!("at://{alice}/{}/{rkey}", m::BID);
    let good = push.token(&alice_key, &alice, m::SUBMIT_BID, MARKET_SERVICE);

    let cases = [
        ("no token", None, 401, "Unauthorized"),
        ("not a jwt", Some("garbage".to_owned()), 401, "Unauthorized"),
        (
            "signed by another key",
            Some(push.token(
                &SigningKey::generate(Algorithm::K256),
                &alice,
                m::SUBMIT_BID,
                MARKET_SERVICE,
            )),
            401,
            "Unauthorized",
        ),
        (
            "for another procedure",
            Some(push.token(&alice_key, &alice, m::SUBMIT_EVENT, MARKET_SERVICE)),
            401,
            "Unauthorized",
        ),
        (
            "for someone else",
            Some(
                jwt::issue(
                    &alice_key,
                    &alice,
                    &bob,
                    m::SUBMIT_BID,
                    jwt::unix_seconds_now(),
                    60,
                )
                .unwrap()
                .expose()
                .clone(),
            ),
            401,
            "Unauthorized",
        ),
        (
            "issuer is not the author",
            Some(push.token(&bob_key, &bob, m::SUBMIT_BID, MARKET_SERVICE)),
            403,
            "Forbidden",
        ),
    ];
    for (name, token, want, error) in cases {
        let (status, body) = push
            .send(token.as_deref(), &uri, &bid.cid, &bid.value)
            .await;
        assert_eq!(
            (status, body["error"].as_str()),
            (want, Some(error)),
            "{name}: {body}"
        );
    }
    let mut tampered = bid.value.clone();
    tampered["createdAt"] = json!("2020-01-01T00:00:00.000Z");
    let (status, body) = push.send(Some(&good), &uri, &bid.cid, &tampered).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("InvalidRequest")),
        "{body}"
    );
    assert!(
        h.inbox().bids_for(rfp.as_str()).is_empty(),
        "nothing refused is kept"
    );

    let (status, body) = push.send(Some(&good), &uri, &bid.cid, &bid.value).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"ok": true}));
    // A well signed record under a made-up address is only a wake-up: it
    // is read again from the repository, where it is not.
    let forged = format!("at://{alice}/{}/3zzzzzzzzzzzz", m::BID);
    assert_eq!(
        push.send(Some(&good), &forged, &bid.cid, &bid.value)
            .await
            .0,
        200
    );
    let mut pushed = vec![uri.clone(), forged];
    pushed.sort();
    assert_eq!(h.inbox().bids_for(rfp.as_str()), pushed);
    let bids = market.collect_bids(&rfp).await.unwrap();
    assert_eq!(bids.len(), 2, "alice's and bob's real bids only: {bids:?}");
}

#[tokio::test]
async fn submit_event_takes_a_providers_event_and_the_guest_is_deployed_by_it() {
    let h = Harness::start(vec![usd_hourly(0.05)]).await;
    h.net.faults.set_bidder(BidderKnobs {
        lose_callbacks: true,
        ..BidderKnobs::default()
    });
    let alice = h.bidder(0).did().to_owned();
    let alice_key = h.net.pds.signing_key(&alice).unwrap();
    let market = h.market();
    let receipt = h.rent(&market, "c").await;
    let events = h.net.pds.records(&alice, m::EVENT);
    assert_eq!(
        events.len(),
        2,
        "onNetwork and registerIdentity, written, not pushed"
    );

    let push = Push {
        h: &h,
        lxm: m::SUBMIT_EVENT,
    };
    let bid_token = push.token(&alice_key, &alice, m::SUBMIT_BID, MARKET_SERVICE);
    let token = push.token(&alice_key, &alice, m::SUBMIT_EVENT, COMPUTE_EVENT_SERVICE);
    for (rkey, event) in &events {
        let uri = format!("at://{alice}/{}/{rkey}", m::EVENT);
        let (status, _) = push
            .send(Some(&bid_token), &uri, &event.cid, &event.value)
            .await;
        assert_eq!(status, 401, "a submitBid token does not push events");
        let (status, body) = push
            .send(Some(&token), &uri, &event.cid, &event.value)
            .await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(h.inbox().events_for(&receipt.uri).len(), 2);
    assert!(market.guest_status(&receipt).await.unwrap().is_on_network());
}
