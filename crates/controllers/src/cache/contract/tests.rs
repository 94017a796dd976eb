//! The read model keeps what its readers read, decoded from a contract's
//! JSON as the watch delivers it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use api::names::{CONTRACT_LABEL, INFRA_NAME_LABEL};
use serde_json::{Value, json};

use super::*;
use crate::cache::decode::Decoded;

/// The whole contract's fixture, with a guest and a winner.
fn contract_json() -> Value {
    let mut json = crate::requester::contract::whole::tests::contract_json();
    json["status"]["guest"] =
        json!({"provider": "did:web:b", "address": "10.0.0.1", "nodeId": "n-1"});
    json["status"]["winner"] = json!({"bidder": "did:web:b", "cost": 95, "currency": "EUR"});
    json
}

fn cached(value: Value) -> CachedContract {
    match serde_json::from_value::<Decoded<CachedContract>>(value).unwrap() {
        Decoded::Object(contract) => contract,
        Decoded::Undecodable(bad) => panic!("a readable contract decodes: {bad:?}"),
    }
}

fn receipt(guest: &str, cid: &str) -> Receipt {
    Receipt {
        uri: format!("local://guests/{guest}"),
        cid: cid.to_owned(),
    }
}

#[test]
fn it_keeps_what_the_readers_read() {
    let contract = cached(contract_json());
    assert_eq!(contract.label(CONTRACT_LABEL), Some("node-1"));
    assert_eq!(contract.label(INFRA_NAME_LABEL), Some("nodes-a"));
    assert_eq!(contract.uid().as_deref(), Some("u1"));
    assert_eq!(contract.metadata.resource_version.as_deref(), Some("59"));
    assert_eq!(contract.metadata.finalizers.as_ref().map(Vec::len), Some(1));
    for (field, absent) in [
        ("labels", contract.metadata.labels.is_none()),
        ("annotations", contract.metadata.annotations.is_none()),
        (
            "ownerReferences",
            contract.metadata.owner_references.is_none(),
        ),
        (
            "creationTimestamp",
            contract.metadata.creation_timestamp.is_none(),
        ),
    ] {
        assert!(absent, "metadata.{field} is not kept");
    }
    assert_eq!(contract.phase(), Some(ComputeContractPhase::Deployed));
    let status = contract.status.as_ref().unwrap();
    assert_eq!(status.message.as_deref(), Some("on the network"));
    assert_eq!(status.guest.as_ref().and_then(|g| g.node_id()), Some("n-1"));
    assert!(status.won);
    assert!(!status.retrying);
    assert_eq!(contract.spec.machine.resources.cpus, 2);
    assert_eq!(contract.spec.machine.location.country, "DE");
    assert!(!contract.spec.release);
    assert!(!contract.spec.released_by_infra);
}

/// The receipt `contract` holds, as the API types hold it.
fn held(contract: &CachedContract) -> Option<Receipt> {
    contract.receipt.as_ref().map(CachedReceipt::receipt)
}

#[test]
fn the_receipt_is_the_status_one_else_the_annotated_one() {
    let annotated_only = cached(contract_json());
    assert_eq!(held(&annotated_only), Some(receipt("g-1", "sha256:00")));
    assert!(!annotated_only.status.as_ref().unwrap().receipt_recorded);

    let mut json = contract_json();
    json["status"]["receipt"] = json!({"uri": "local://guests/g-2", "cid": "sha256:02"});
    let recorded = cached(json);
    assert_eq!(
        held(&recorded),
        Some(receipt("g-2", "sha256:02")),
        "the status's receipt wins over the annotation"
    );
    assert!(recorded.status.as_ref().unwrap().receipt_recorded);

    let mut json = contract_json();
    json.as_object_mut().unwrap().remove("status");
    let no_status = cached(json);
    assert_eq!(
        held(&no_status),
        Some(receipt("g-1", "sha256:00")),
        "a receipt annotated before any status was written is still held"
    );
    assert!(no_status.status.is_none());
}

#[test]
fn the_spec_digest_tells_exactly_when_the_spec_differs() {
    let contract = cached(contract_json());
    let whole: ComputeContract = serde_json::from_value(contract_json()).unwrap();
    assert_eq!(contract.spec.digest, spec_digest(&whole.spec));
    let mut released = whole.spec.clone();
    released.release = true;
    assert_ne!(contract.spec.digest, spec_digest(&released));
    let mut elsewhere = whole.spec.clone();
    elsewhere.owner_did = Some("did:plc:b".to_owned());
    assert_ne!(contract.spec.digest, spec_digest(&elsewhere));
}

#[test]
fn it_knows_its_owners_by_digest() {
    let contract = cached(contract_json());
    let whole: ComputeContract = serde_json::from_value(contract_json()).unwrap();
    let owner = whole.metadata.owner_references.unwrap().remove(0);
    assert!(contract.owned_by(&owner));
    let other = OwnerReference {
        uid: "u9".to_owned(),
        ..owner
    };
    assert!(!contract.owned_by(&other));
}

#[test]
fn it_knows_its_owners_however_many_it_has() {
    let whole: ComputeContract = serde_json::from_value(contract_json()).unwrap();
    let owner = whole.metadata.owner_references.unwrap().remove(0);
    let second = OwnerReference {
        uid: "u9".to_owned(),
        ..owner.clone()
    };
    let mut json = contract_json();
    json["metadata"]["ownerReferences"] = serde_json::to_value([&owner, &second]).unwrap();
    let both = cached(json.clone());
    assert!(both.owned_by(&owner) && both.owned_by(&second));
    json["metadata"]["ownerReferences"] = json!([]);
    let none = cached(json);
    assert!(!none.owned_by(&owner));
    assert!(
        cached(contract_json()).rare.is_none(),
        "one owner, the Infra's two labels and no adoption take no box"
    );
}

#[test]
fn its_adoption_is_read_back() {
    let mut json = contract_json();
    let guest = receipt("g-7", "c-7");
    json["spec"]["adopt"] = serde_json::to_value(&guest).unwrap();
    assert_eq!(cached(json).adopt(), Some(&guest));
    assert_eq!(cached(contract_json()).adopt(), None);
}

/// What the API server makes every uid: a UUID in lowercase text.
const UUID: &str = "0f8e2c7a-5b1d-4e3f-9a6b-1c2d3e4f5a6b";

#[test]
fn a_uuid_is_kept_apart_from_the_metadata_and_out_of_the_store_key() {
    let mut json = contract_json();
    json["metadata"]["uid"] = UUID.into();
    let contract = cached(json);
    assert_eq!(contract.uid().as_deref(), Some(UUID));
    assert_eq!(
        crate::object_uid::ObjectUid::object_uid(&contract).as_deref(),
        Some(UUID)
    );
    assert_eq!(crate::write::Seen::of(&contract).uid.as_deref(), Some(UUID));
    assert_eq!(kube::Resource::meta(&contract).uid, None);
    let key = kube::runtime::reflector::ObjectRef::from_obj(&contract);
    assert_eq!(
        key.extra.uid, None,
        "kube-runtime's store key copies no uid"
    );
    assert_eq!(key.extra.resource_version.as_deref(), Some("59"));
}

#[test]
fn any_other_uid_stays_in_the_metadata_as_it_came() {
    for uid in ["u1", &UUID.to_uppercase(), &UUID[1..]] {
        let mut json = contract_json();
        json["metadata"]["uid"] = uid.into();
        let contract = cached(json);
        assert_eq!(contract.uid().as_deref(), Some(uid));
        assert_eq!(kube::Resource::meta(&contract).uid.as_deref(), Some(uid));
    }
    let mut json = contract_json();
    json["metadata"].as_object_mut().unwrap().remove("uid");
    assert_eq!(cached(json).uid(), None);
}

#[test]
fn a_release_by_the_infra_and_a_retried_rent_are_told() {
    let mut json = contract_json();
    json["metadata"]["annotations"][INFRA_RELEASED_ANNOTATION] = json!("true");
    json["spec"]["release"] = json!(true);
    let released = cached(json);
    assert!(released.spec.released_by_infra);
    assert!(released.spec.release);

    let mut json = contract_json();
    json["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    json["status"] = json!({"phase": "Failed", "nextAttemptAt": "2026-12-05T05:00:00Z"});
    let retried = cached(json);
    assert!(retried.status.as_ref().unwrap().renting_retried());
    assert_eq!(retried.receipt, None);
}

mod labels {
    use proptest::prelude::*;

    use super::*;

    /// Label keys: the Infra's two and another.
    fn key() -> impl Strategy<Value = &'static str> {
        prop_oneof![Just(INFRA_NAME_LABEL), Just(CONTRACT_LABEL), Just("a/b")]
    }

    proptest! {
        /// Whether read off the name or kept, each label reads as it came.
        #[test]
        fn each_label_reads_as_it_came(
            labels in proptest::collection::btree_map(key(), "[a-c]{0,2}(-[a-c]{0,2})?", 0..4),
            name in "[a-c]{0,2}(-[a-c]{0,2}){0,2}",
            // 0: any name; 1: `<infra>-<entry>` of its labels; 2: the two
            // joined by another character (read off the name the same).
            named_after_them in 0..3u8,
        ) {
            let mut json = contract_json();
            let name = match (named_after_them, labels.get(INFRA_NAME_LABEL), labels.get(CONTRACT_LABEL)) {
                (1, Some(infra), Some(entry)) => format!("{infra}-{entry}"),
                (2, Some(infra), Some(entry)) => format!("{infra}a{entry}"),
                _ => name,
            };
            json["metadata"]["name"] = name.clone().into();
            json["metadata"]["labels"] = serde_json::to_value(&labels).unwrap();
            let contract = cached(json);
            for key in [INFRA_NAME_LABEL, CONTRACT_LABEL, "a/b", "other"] {
                prop_assert_eq!(contract.label(key), labels.get(key).map(String::as_str), "{}", key);
            }
        }
    }

    #[test]
    fn the_infras_two_are_read_off_the_name() {
        let mut json = contract_json();
        json["metadata"]["name"] = "nodes-a-node-1".into();
        let contract = cached(json);
        assert_eq!(contract.labels_split, Some(7));
        assert!(contract.rare.is_none(), "no map kept for them");
        assert_eq!(contract.label(INFRA_NAME_LABEL), Some("nodes-a"));
        assert_eq!(contract.label(CONTRACT_LABEL), Some("node-1"));
    }
}
