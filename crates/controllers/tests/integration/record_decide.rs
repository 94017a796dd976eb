//! The pure decisions about an Infra's record: the record controller's
//! (`record::decide`) and the Infra controller's part (`infra::record::decide`).

use api::names::{INFRA_NAME_LABEL, RECORD_DELETE_FINALIZER, record_key};
use api::{
    AtprotoRecord, AtprotoRecordPhase, AtprotoRecordStatus, ContractEntry, ContractState,
    ContractStatus, DECLARATION_COLLECTION, DeletionPolicy, Infra, InfraSpec, InfraStatus,
    Location, Resources, Role, declaration, declaration_record, find_condition,
    infra_declaration_hash,
};
use chrono::{DateTime, Utc};
use controllers::infra::record as infra_side;
use controllers::record::conditions::{READY, reason};
use controllers::record::decide::{Call, Observed, RELEASE_POLL, decide};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

const NS: &str = "socialweb-system";
const INFRA: &str = "nodes-2b726ab7ba6f76600839";

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_800_000_000, 0).unwrap()
}

fn stamp() -> Time {
    Time(Timestamp::from_second(1_800_000_000).unwrap())
}

fn entry(name: &str, cpus: u32) -> ContractEntry {
    ContractEntry {
        name: name.into(),
        resources: Resources {
            cpus,
            memory: 4096,
            disk: 40,
            network: 100,
        },
        location: Location {
            country: "DE".into(),
            region: None,
        },
        role: Role::Worker,
    }
}

fn infra(record: Option<bool>) -> Infra {
    let mut infra = Infra::new(
        INFRA,
        InfraSpec {
            description: "web".into(),
            contracts: vec![entry("node-a", 2)],
            secrets: vec![],
            record,
            cluster_ref: None,
            nodes: vec![],
        },
    );
    infra.metadata.namespace = Some(NS.into());
    infra.metadata.uid = Some("infra-uid-1".into());
    infra.metadata.generation = Some(1);
    infra
}

fn deleting_infra(mut infra: Infra, contracts: usize) -> Infra {
    infra.metadata.deletion_timestamp = Some(stamp());
    infra.status = Some(InfraStatus {
        contracts: (0..contracts)
            .map(|i| ContractStatus {
                name: format!("node-{i}"),
                compute_contract: format!("{INFRA}-node-{i}"),
                state: ContractState::Released,
                phase: None,
            })
            .collect(),
        ..InfraStatus::default()
    });
    infra
}

/// The object the Infra controller writes, as the API server holds it.
fn record_of(infra: &Infra, policy: DeletionPolicy) -> AtprotoRecord {
    let mut record = infra_side::desired(infra, None, policy);
    record.metadata.uid = Some("record-uid-1".into());
    record.metadata.resource_version = Some("7".into());
    record.metadata.generation = Some(1);
    record
}

fn published(mut record: AtprotoRecord, infra: &Infra) -> AtprotoRecord {
    record.status = Some(AtprotoRecordStatus {
        phase: Some(AtprotoRecordPhase::Published),
        repository: Some("did:plc:requester".into()),
        uri: Some(format!(
            "at://did:plc:requester/{DECLARATION_COLLECTION}/{}",
            record.spec.rkey
        )),
        cid: Some("bafyrei".into()),
        declaration_hash: Some(infra_declaration_hash(&infra.spec).unwrap()),
        ..AtprotoRecordStatus::default()
    });
    record
}

fn deleting(mut record: AtprotoRecord) -> AtprotoRecord {
    record.metadata.deletion_timestamp = Some(stamp());
    record
}

/// What `decide` calls for on these observations.
fn call_for(record: &AtprotoRecord, infra: Option<&Infra>, contracts_left: usize) -> Call {
    decide(&observe(record, infra, contracts_left)).call
}

fn observe<'a>(
    record: &'a AtprotoRecord,
    infra: Option<&'a Infra>,
    contracts_left: usize,
) -> Observed<'a> {
    Observed {
        record,
        infra,
        contracts_left,
        now: now(),
    }
}

// ---- the record controller ----

#[test]
fn a_new_record_publishes_exactly_the_declaration() {
    let infra = infra(Some(true));
    let record = record_of(&infra, DeletionPolicy::Delete);
    let plan = decide(&observe(&record, Some(&infra), 0));
    let expected = declaration_record(&declaration(&infra.spec)).unwrap();
    assert_eq!(
        plan.call,
        Call::Publish {
            record: expected,
            hash: infra_declaration_hash(&infra.spec).unwrap(),
        }
    );
    assert!(plan.status.is_none());
}

#[test]
fn a_current_record_writes_nothing() {
    let infra = infra(Some(true));
    let record = published(record_of(&infra, DeletionPolicy::Delete), &infra);
    let plan = decide(&observe(&record, Some(&infra), 1));
    assert_eq!(plan.call, Call::None);
    assert_eq!(plan.status, None);
    assert_eq!(plan.requeue, None);
}

#[test]
fn a_changed_declaration_is_written_again() {
    let mut infra = infra(Some(true));
    let record = published(record_of(&infra, DeletionPolicy::Delete), &infra);
    infra.spec.contracts.push(entry("node-b", 4));
    let plan = decide(&observe(&record, Some(&infra), 1));
    let Call::Publish {
        hash,
        record: value,
    } = plan.call
    else {
        panic!("expected a publish, got {:?}", plan.call);
    };
    assert_eq!(hash, infra_declaration_hash(&infra.spec).unwrap());
    assert_eq!(value["contracts"].as_array().unwrap().len(), 2);
}

#[test]
fn a_private_change_writes_nothing() {
    let mut infra = infra(Some(true));
    let record = published(record_of(&infra, DeletionPolicy::Delete), &infra);
    infra.spec.secrets.push(api::SecretEntry {
        contract: "node-a".into(),
        secret_ref: api::SecretRef {
            name: "join-node-a".into(),
        },
    });
    assert_eq!(call_for(&record, Some(&infra), 1), Call::None);
}

#[test]
fn a_failed_write_is_tried_again() {
    let infra = infra(Some(true));
    let mut record = published(record_of(&infra, DeletionPolicy::Delete), &infra);
    record.status.as_mut().unwrap().phase = Some(AtprotoRecordPhase::Failed);
    assert!(matches!(
        call_for(&record, Some(&infra), 1),
        Call::Publish { .. }
    ));
}

#[test]
fn without_the_finalizer_nothing_is_published() {
    let infra = infra(Some(true));
    let mut record = record_of(&infra, DeletionPolicy::Delete);
    record.metadata.finalizers = None;
    assert_eq!(call_for(&record, Some(&infra), 0), Call::AddFinalizer);
}

#[test]
fn a_missing_infra_says_so() {
    let infra = infra(Some(true));
    let record = record_of(&infra, DeletionPolicy::Delete);
    let plan = decide(&observe(&record, None, 0));
    assert_eq!(plan.call, Call::None);
    let status = plan.status.unwrap();
    let ready = find_condition(&status.conditions, READY).unwrap();
    assert_eq!(ready.reason, reason::INFRA_MISSING);
    assert!(plan.requeue.is_some());
}

#[test]
fn orphan_lets_go_and_keeps_the_record() {
    let infra = infra(None);
    let record = deleting(published(record_of(&infra, DeletionPolicy::Orphan), &infra));
    let plan = decide(&observe(&record, Some(&infra), 3));
    assert_eq!(plan.call, Call::LetGo { kept: true });
}

#[test]
fn delete_waits_for_the_releases_of_a_deleting_infra() {
    let infra = infra(Some(true));
    let record = deleting(published(record_of(&infra, DeletionPolicy::Delete), &infra));
    // Contracts in the cache.
    let going = deleting_infra(infra.clone(), 0);
    let plan = decide(&observe(&record, Some(&going), 2));
    assert_eq!(plan.call, Call::None);
    assert_eq!(plan.requeue, Some(RELEASE_POLL));
    let status = plan.status.unwrap();
    assert_eq!(status.phase, Some(AtprotoRecordPhase::Deleting));
    let ready = find_condition(&status.conditions, READY).unwrap();
    assert_eq!(ready.reason, reason::WAITING_FOR_RELEASES);
    // Contracts the Infra's status still lists, though the cache shows none.
    let listed = deleting_infra(infra.clone(), 1);
    assert_eq!(call_for(&record, Some(&listed), 0), Call::None);
    // Infra gone, contracts still cached (the garbage collector's foreground deletion).
    assert_eq!(call_for(&record, None, 1), Call::None);
    // Every contract gone.
    let done = deleting_infra(infra, 0);
    assert_eq!(call_for(&record, Some(&done), 0), Call::DeleteRecord);
    assert_eq!(call_for(&record, None, 0), Call::DeleteRecord);
}

#[test]
fn delete_of_a_live_infras_object_deletes_at_once() {
    let infra = infra(Some(true));
    let record = deleting(published(record_of(&infra, DeletionPolicy::Delete), &infra));
    assert_eq!(call_for(&record, Some(&infra), 3), Call::DeleteRecord);
}

#[test]
fn nothing_written_nothing_to_delete() {
    let infra = deleting_infra(infra(Some(true)), 0);
    let record = deleting(record_of(&infra, DeletionPolicy::Delete));
    assert_eq!(
        call_for(&record, Some(&infra), 0),
        Call::LetGo { kept: false }
    );
    // Once the repository is recorded a putRecord may have happened: delete.
    let mut tried = record.clone();
    tried.status = Some(AtprotoRecordStatus {
        repository: Some("did:plc:requester".into()),
        ..AtprotoRecordStatus::default()
    });
    assert_eq!(call_for(&tried, Some(&infra), 0), Call::DeleteRecord);
}

#[test]
fn without_our_finalizer_a_deleting_object_is_left_alone() {
    let infra = infra(Some(true));
    let mut record = deleting(published(record_of(&infra, DeletionPolicy::Delete), &infra));
    record.metadata.finalizers = Some(vec!["someone.else/keep".into()]);
    assert_eq!(call_for(&record, Some(&infra), 0), Call::None);
}

// ---- the Infra controller's part ----

#[test]
fn a_bound_infra_gets_its_record_object() {
    let bound = infra(Some(true));
    let plan = infra_side::decide(&bound, None, false);
    let record = plan.apply.unwrap();
    assert_eq!(record.metadata.name.as_deref(), Some(INFRA));
    assert_eq!(record.metadata.namespace.as_deref(), Some(NS));
    assert_eq!(
        record.metadata.labels.as_ref().unwrap()[INFRA_NAME_LABEL],
        INFRA
    );
    let owner = &record.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Infra", "infra-uid-1")
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(
        record.metadata.finalizers,
        Some(vec![RECORD_DELETE_FINALIZER.to_owned()])
    );
    assert_eq!(record.spec.infra_name, INFRA);
    assert_eq!(record.spec.collection, DECLARATION_COLLECTION);
    assert_eq!(record.spec.rkey, record_key(NS, INFRA, "infra-uid-1"));
    assert_eq!(record.spec.deletion_policy, DeletionPolicy::Delete);
    // Applied again: nothing to write.
    let existing = record_of(&bound, DeletionPolicy::Delete);
    assert_eq!(
        infra_side::decide(&bound, Some(&existing), false),
        infra_side::RecordPlan::default()
    );
    // An unbound Infra without an object: nothing.
    assert_eq!(infra_side::decide(&infra(None), None, false).apply, None);
}

#[test]
fn unbinding_orphans_first_then_deletes_the_orphan_version() {
    let unbound = infra(None);
    let existing = published(record_of(&unbound, DeletionPolicy::Delete), &unbound);
    let first = infra_side::decide(&unbound, Some(&existing), false);
    assert_eq!(
        first.apply.as_ref().unwrap().spec.deletion_policy,
        DeletionPolicy::Orphan
    );
    assert_eq!(first.delete, None);

    let orphan = published(record_of(&unbound, DeletionPolicy::Orphan), &unbound);
    let second = infra_side::decide(&unbound, Some(&orphan), false);
    assert_eq!(second.apply, None);
    let deletion = second.delete.unwrap();
    assert_eq!(deletion.uid.as_deref(), Some("record-uid-1"));
    assert_eq!(deletion.resource_version.as_deref(), Some("7"));
    assert!(second.kept_uri.unwrap().starts_with("at://"));
    // Going: wait, then (re-bound) a new one once it is gone.
    let going = deleting(orphan);
    assert_eq!(
        infra_side::decide(&unbound, Some(&going), false).delete,
        None
    );
    let rebound = infra(Some(true));
    let plan = infra_side::decide(&rebound, Some(&going), false);
    assert_eq!((plan.apply, plan.delete), (None, None));
    assert!(infra_side::decide(&rebound, None, false).apply.is_some());
}

#[test]
fn a_deleting_infra_deletes_its_record_object_only_after_its_contracts() {
    let infra = deleting_infra(infra(Some(true)), 0);
    let existing = published(record_of(&infra, DeletionPolicy::Delete), &infra);
    let waiting = infra_side::decide(&infra, Some(&existing), false);
    assert_eq!(waiting, infra_side::RecordPlan::default());
    assert!(!waiting.gone);
    let after = infra_side::decide(&infra, Some(&existing), true);
    assert!(after.delete.is_some());
    assert_eq!(after.kept_uri, None);
    assert!(!after.gone);
    assert!(infra_side::decide(&infra, None, true).gone);
    // No object is created for a deleting Infra.
    assert_eq!(infra_side::decide(&infra, None, true).apply, None);
}

#[test]
fn a_deleting_unbound_infra_keeps_the_record() {
    let infra = deleting_infra(infra(None), 0);
    let existing = published(record_of(&infra, DeletionPolicy::Orphan), &infra);
    let plan = infra_side::decide(&infra, Some(&existing), true);
    assert!(plan.delete.is_some());
    assert!(plan.kept_uri.is_some());
}

#[test]
fn a_deleting_object_that_lost_the_finalizer_is_not_given_it_again() {
    let infra = deleting_infra(infra(Some(true)), 0);
    let mut existing = deleting(record_of(&infra, DeletionPolicy::Orphan));
    existing.metadata.finalizers = None;
    let plan = infra_side::decide(&infra, Some(&existing), true);
    let applied = plan.apply.unwrap();
    assert_eq!(applied.spec.deletion_policy, DeletionPolicy::Delete);
    assert_eq!(applied.metadata.finalizers, None);
}

#[test]
fn the_key_and_collection_of_an_existing_object_are_kept() {
    let infra = infra(Some(true));
    let mut existing = record_of(&infra, DeletionPolicy::Delete);
    existing.spec.rkey = "3kxyz2222222a".into();
    let desired = infra_side::desired(&infra, Some(&existing), DeletionPolicy::Delete);
    assert_eq!(desired.spec.rkey, "3kxyz2222222a");
}

proptest! {
    /// Whatever the declaration, once the record holds it, the record
    /// controller and the Infra controller write nothing.
    #[test]
    fn converged_writes_nothing(cpus in 1u32..64, names in proptest::collection::btree_set("node-[a-z]{3}", 0..4), description in "[a-z ]{0,12}") {
        let mut infra = infra(Some(true));
        infra.spec.description = description;
        infra.spec.contracts = names.iter().map(|n| entry(n, cpus)).collect();
        let record = published(record_of(&infra, DeletionPolicy::Delete), &infra);
        let plan = decide(&observe(&record, Some(&infra), names.len()));
        prop_assert_eq!(plan.call, Call::None);
        prop_assert_eq!(plan.status, None);
        prop_assert_eq!(infra_side::decide(&infra, Some(&record), false), infra_side::RecordPlan::default());
    }
}
