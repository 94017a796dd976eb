//! The root reconciler's decisions, without a server: where a Requester
//! stands, its live status, and each step of the root delete order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use api::{ComputeContractPhase as Phase, ComputeContractStatus, InfraSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource as _;

use super::*;
use crate::requester::test_fixtures::{contract, requester_with, t0, with_status};

fn deleted_at() -> Option<Time> {
    Some(Time(
        k8s_openapi::jiff::Timestamp::from_second(1_700_000_100).unwrap(),
    ))
}

/// The Requester `root` of the contract namespace, with its finalizer.
fn root() -> Requester {
    let mut requester = requester_with("root", vec![]);
    requester.metadata.finalizers = Some(vec![names::REQUESTER_FINALIZER.to_owned()]);
    requester
}

fn deleting_root() -> Requester {
    let mut requester = root();
    requester.metadata.deletion_timestamp = deleted_at();
    requester
}

fn infra(name: &str, deleting: bool) -> Arc<CachedInfra> {
    let mut infra = api::Infra::new(
        name,
        InfraSpec {
            description: String::new(),
            contracts: vec![],
            secrets: vec![],
            record: None,
            cluster_ref: None,
            nodes: vec![],
        },
    );
    infra.metadata.namespace = Some("socialweb-system".to_owned());
    if deleting {
        infra.metadata.deletion_timestamp = deleted_at();
    }
    Arc::new(CachedInfra::from(infra))
}

fn named(name: &str, phase: Option<Phase>) -> Arc<CachedContract> {
    let mut c = with_status(
        contract(),
        ComputeContractStatus {
            phase,
            ..ComputeContractStatus::default()
        },
    );
    c.metadata.name = Some(name.to_owned());
    Arc::new(CachedContract::from(&c))
}

fn ready_condition(status: &RequesterStatus) -> &api::Condition {
    api::find_condition(&status.conditions, cond::READY).unwrap()
}

fn live_plan(requester: &Requester, readiness: Readiness, contracts: usize) -> LivePlan {
    live(LiveInputs {
        requester,
        runner: Some("root"),
        readiness: Some(readiness),
        contracts,
        now: t0(),
    })
}

fn delete_step<'a>(
    requester: &'a Requester,
    runner: Option<&'a str>,
    infras: &'a [Arc<CachedInfra>],
    contracts: &'a [Arc<CachedContract>],
) -> DeletePlan<'a> {
    deleting(DeletingInputs {
        requester,
        runner,
        infras,
        contracts,
        now: t0(),
    })
}

#[test]
fn the_finalizer_comes_first_and_holds_a_deleted_requester() {
    let mut requester = requester_with("root", vec![]);
    assert_eq!(stage(&requester), Stage::AddFinalizer);
    requester.metadata.finalizers = Some(vec![names::REQUESTER_FINALIZER.to_owned()]);
    assert_eq!(stage(&requester), Stage::Live);
    requester.metadata.deletion_timestamp = deleted_at();
    assert_eq!(stage(&requester), Stage::Deleting);
    requester.metadata.finalizers = None;
    assert_eq!(stage(&requester), Stage::Released);
}

#[test]
fn only_the_requester_that_runs_the_namespace_asks_its_market() {
    let requester = root();
    assert!(asks_market(&requester, Some("root")));
    assert!(asks_market(&requester, None));
    assert!(!asks_market(&requester, Some("older")));
}

#[test]
fn each_market_readiness_is_its_own_reason() {
    let cases = [
        (
            Readiness::Ready("ok".into()),
            S::True,
            cond::MARKET_CONFIGURED,
        ),
        (Readiness::NoBidders("b".into()), S::False, cond::NO_BIDDERS),
        (Readiness::NoMarket("m".into()), S::False, cond::NO_MARKET),
        (
            Readiness::SecretMissing("s".into()),
            S::False,
            cond::SECRET_MISSING,
        ),
        (
            Readiness::InvalidCredentials("c".into()),
            S::False,
            cond::INVALID_CREDENTIALS,
        ),
        (
            Readiness::PdsUnreachable("p".into()),
            S::False,
            cond::PDS_UNREACHABLE,
        ),
    ];
    for (readiness, status, reason) in cases {
        let expected_message = match &readiness {
            Readiness::Ready(m)
            | Readiness::NoBidders(m)
            | Readiness::NoMarket(m)
            | Readiness::SecretMissing(m)
            | Readiness::InvalidCredentials(m)
            | Readiness::PdsUnreachable(m) => m.clone(),
        };
        assert_eq!(
            live_ready(Some("root"), Some(readiness)),
            (status, reason, expected_message)
        );
    }
}

#[test]
fn a_superseded_requester_is_not_ready_and_names_the_runner() {
    let (ready, reason, message) = live_ready(Some("older"), None);
    assert_eq!((ready, reason), (S::False, cond::SUPERSEDED));
    assert!(message.contains("older"), "{message}");
}

#[test]
fn a_live_status_counts_contracts_names_the_market_and_is_written_once() {
    let mut requester = root();
    let plan = live_plan(&requester, Readiness::Ready("rents".into()), 3);
    let status = plan.write.clone().expect("a first status is written");
    assert_eq!(status.contracts, 3);
    assert_eq!(status.market, Some(api::MarketKind::Local));
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(ready_condition(&status).status, S::True);
    assert!(!plan.count_only, "a first status is more than a count");
    assert_eq!(
        plan.requeue, None,
        "a local market changes only with its spec"
    );

    requester.status = Some(status);
    let later = live(LiveInputs {
        requester: &requester,
        runner: Some("root"),
        readiness: Some(Readiness::Ready("rents".into())),
        contracts: 3,
        now: t0() + chrono::Duration::seconds(30),
    });
    assert_eq!(later.write, None, "nothing changed, nothing is written");

    let counted = live_plan(&requester, Readiness::Ready("rents".into()), 4);
    assert_eq!(counted.write.map(|s| s.contracts), Some(4));
    assert!(counted.count_only, "only the count moved: paced");

    let broken = live_plan(&requester, Readiness::NoBidders("none".into()), 4);
    assert!(
        !broken.count_only,
        "a readiness change is written at once, with the count"
    );
}

#[test]
fn an_atproto_market_is_rechecked_slowly_when_ready_and_soon_when_not() {
    let mut requester = root();
    requester.spec.market.local = None;
    requester.spec.market.atproto = Some(market_adapter::atproto::test_spec());
    let ready = live_plan(&requester, Readiness::Ready("logs in".into()), 0);
    assert_eq!(ready.requeue, Some(market_adapter::OUTSIDE_RECHECK));
    let unreachable = live_plan(&requester, Readiness::PdsUnreachable("down".into()), 0);
    assert_eq!(unreachable.requeue, Some(market_adapter::OUTSIDE_RETRY));
}

#[test]
fn a_deleted_requester_that_does_not_run_the_namespace_lets_go_at_once() {
    let requester = deleting_root();
    let infras = [infra("tenant", false)];
    let contracts = [named("c", Some(Phase::Deployed))];
    assert!(matches!(
        delete_step(&requester, Some("older"), &infras, &contracts),
        DeletePlan::LetGo
    ));
    assert!(matches!(
        delete_step(&requester, None, &infras, &contracts),
        DeletePlan::LetGo
    ));
}

#[test]
fn infras_go_first_and_no_contract_is_deleted_while_one_remains() {
    let requester = deleting_root();
    let infras = [infra("live", false), infra("going", true)];
    let contracts = [named("released", Some(Phase::Released))];
    let DeletePlan::Step {
        infras: to_delete,
        contracts: contracts_to_delete,
        write,
    } = delete_step(&requester, Some("root"), &infras, &contracts)
    else {
        panic!("a step while Infras remain");
    };
    let names: Vec<String> = to_delete.iter().map(|i| i.name_any()).collect();
    assert_eq!(
        names,
        ["live"],
        "an Infra already being deleted is not deleted again"
    );
    assert!(
        contracts_to_delete.is_empty(),
        "contracts wait for the Infras"
    );
    let status = write.expect("the Deleting status is written");
    let ready = ready_condition(&status);
    assert_eq!(
        (ready.status, ready.reason.as_str()),
        (S::False, cond::DELETING)
    );
    assert!(
        ready.message.contains("2 Infras and 1 ComputeContracts"),
        "{}",
        ready.message
    );
    assert_eq!(status.contracts, 1);
}

#[test]
fn once_no_infra_remains_only_finished_contracts_without_a_guest_are_deleted() {
    let requester = deleting_root();
    let mut already_deleting = (*named("deleting", Some(Phase::Released))).clone();
    already_deleting.meta_mut().deletion_timestamp = deleted_at();
    let contracts = [
        named("released", Some(Phase::Released)),
        named("deployed", Some(Phase::Deployed)),
        named("failed-empty", Some(Phase::Failed)),
        Arc::new(already_deleting),
    ];
    let DeletePlan::Step {
        infras,
        contracts: to_delete,
        ..
    } = delete_step(&requester, Some("root"), &[], &contracts)
    else {
        panic!("a step while contracts remain");
    };
    assert!(infras.is_empty());
    let names: Vec<String> = to_delete.iter().map(|c| c.name_any()).collect();
    assert_eq!(
        names,
        ["released", "failed-empty"],
        "a contract with a guest is released by the contract reconciler first"
    );
}

#[test]
fn the_finalizer_goes_only_when_nothing_is_left() {
    let mut requester = deleting_root();
    let DeletePlan::Done { write } = delete_step(&requester, Some("root"), &[], &[]) else {
        panic!("nothing is left");
    };
    let status = write.expect("the last status says nothing remains");
    assert_eq!(status.contracts, 0);
    requester.status = Some(status);
    assert!(
        matches!(
            delete_step(&requester, Some("root"), &[], &[]),
            DeletePlan::Done { write: None }
        ),
        "the same status is not written twice"
    );
}
