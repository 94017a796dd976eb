//! The Infra's release on a real API server (plan 0018 R2): the cache keeps
//! less of a contract than its spec, so `infra::act` reads each contract it
//! releases whole and applies it with `spec.release` set, keeping every
//! field of the spec; a contract found gone or already released is left
//! alone, and neither is an error.

use crate::infra_support;

use std::sync::Arc;

use api::names::INFRA_RELEASED_ANNOTATION;
use api::{ComputeContract, ComputeContractSpec, Infra};
use controllers::infra::decide::{InfraPlan, Release};
use controllers::infra::objects::contract_object;
use controllers::infra::{IDENTITY, OwnWrites, act};
use infra_support::{INFRA, NS, cc_name, e2e::install, spec_with};
use kube::api::PostParams;
use kube::{Api, ResourceExt};

/// A contract's spec as the Infra applies it for an entry of a node.
fn spec() -> ComputeContractSpec {
    serde_json::from_value(serde_json::json!({
        "resources": {"cpus": 2, "memory": 4096, "disk": 40, "network": 1000},
        "location": {"country": "DE"},
        "role": "Worker",
        "ownerDid": "did:plc:z72i7hdynmk6r22z27h6tvur",
        "secretsRef": {"name": "join-live"},
        "nodeJoin": {"apiServer": "https://tenant.invalid:6443", "nodeName": "worker-1"},
    }))
    .unwrap()
}

fn release(entry: &str) -> Release {
    Release {
        name: cc_name(entry),
        entry: entry.to_owned(),
    }
}

#[tokio::test]
async fn a_release_reads_the_contract_whole_and_leaves_one_gone_or_released_alone() {
    let server = apiserver::testing::TestServer::start().await.unwrap();
    let client = server.client();
    install(&client).await;
    let infras: Api<Infra> = Api::namespaced(client.clone(), NS);
    let mut infra = Infra::new(INFRA, spec_with(&["live", "released"]));
    infra.metadata.namespace = Some(NS.to_owned());
    let infra = infras.create(&PostParams::default(), &infra).await.unwrap();
    let contracts: Api<ComputeContract> = Api::namespaced(client.clone(), NS);
    let ctx = IDENTITY.context(client.clone(), Arc::new(controllers::SystemClock), NS);
    for (entry, released) in [("live", false), ("released", true)] {
        let spec = ComputeContractSpec {
            release: released,
            ..spec()
        };
        let object = contract_object(&infra, &cc_name(entry), entry, spec);
        controllers::write::apply(&client, IDENTITY.manager, &object)
            .await
            .unwrap();
    }
    let already = contracts.get(&cc_name("released")).await.unwrap();

    let plan = InfraPlan {
        release: vec![release("live"), release("released"), release("gone")],
        ..InfraPlan::default()
    };
    act::act(&ctx, &infra, &plan, &OwnWrites::default())
        .await
        .expect("a contract gone or already released is no error");

    let live = contracts.get(&cc_name("live")).await.unwrap();
    assert!(live.spec.release, "the live contract is released");
    assert_eq!(
        ComputeContractSpec {
            release: false,
            ..live.spec.clone()
        },
        spec(),
        "the release kept every other field of the spec"
    );
    assert!(live.annotations().contains_key(INFRA_RELEASED_ANNOTATION));
    assert_eq!(
        contracts
            .get(&cc_name("released"))
            .await
            .unwrap()
            .resource_version(),
        already.resource_version(),
        "a contract already released is not written again"
    );
    assert!(
        contracts.get_opt(&cc_name("gone")).await.unwrap().is_none(),
        "a contract gone is not created by its release"
    );
}
