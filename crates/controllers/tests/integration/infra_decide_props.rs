//! Property tests of the Infra controller's decide against a simulated API
//! server and Requester: any sequence of entry changes, Requester steps,
//! crashes mid-act and restarts keeps the release invariants and converges.

use crate::infra_support;

use std::collections::BTreeSet;

use api::{ComputeContractPhase as P, InfraPhase};
use controllers::infra::decide::InfraPlan;
use controllers::infra::events::InfraEvent;
use infra_support::{World, Write, cc_name, infra, phase_of};
use proptest::prelude::*;

/// Entry names the ops pick from; removing one and adding another is a recreated claim.
const POOL: [&str; 5] = ["node-a", "node-b", "node-c", "node-d", "node-e"];

#[derive(Clone, Debug)]
enum Op {
    /// Add `POOL[i]` to the spec.
    Add(usize),
    /// Remove `POOL[i]` from the spec.
    Remove(usize),
    /// The Requester moves the i-th contract one step (maybe to Failed).
    Requester(usize, bool),
    /// Garbage collection removes the i-th contract if it is marked for deletion.
    Collect(usize),
    /// A reconcile that crashes after `n` writes (the manager restarts; decide has no memory).
    Crash(usize),
    /// A full reconcile.
    Reconcile,
    /// The Infra is deleted.
    Delete,
    /// The cache starts lagging behind creates.
    Lag,
    /// The cache catches up.
    Sync,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (0..POOL.len()).prop_map(Op::Add),
        1 => (0..POOL.len()).prop_map(Op::Remove),
        4 => (0..8usize, proptest::bool::weighted(0.1)).prop_map(|(i, f)| Op::Requester(i, f)),
        1 => (0..8usize).prop_map(Op::Collect),
        1 => (0..6usize).prop_map(Op::Crash),
        3 => Just(Op::Reconcile),
        1 => Just(Op::Delete),
        1 => Just(Op::Lag),
        1 => Just(Op::Sync),
    ]
}

/// The invariants every plan keeps, checked against the world it was made from.
fn check_plan(world: &World, plan: &InfraPlan) -> Result<(), TestCaseError> {
    let deleting = world.infra.metadata.deletion_timestamp.is_some();
    for deletion in &plan.delete {
        let contract = &world.contracts[&deletion.name];
        prop_assert_eq!(
            phase_of(contract),
            Some(P::Released),
            "delete before Released"
        );
        prop_assert!(
            contract.spec.release,
            "deleted a contract that was never released"
        );
    }
    if deleting {
        prop_assert!(plan.apply.is_empty(), "a deleting Infra creates nothing");
        let all_released = world
            .contracts
            .values()
            .all(|c| phase_of(c) == Some(P::Released));
        prop_assert!(
            all_released || plan.delete.is_empty(),
            "deleted before ALL were Released"
        );
    }
    for object in &plan.apply {
        let name = object.metadata.name.clone().unwrap();
        if let Some(existing) = world.contracts.get(&name) {
            prop_assert!(!existing.spec.release, "un-released {}", name);
        }
        prop_assert!(!object.spec.release);
    }
    for object in plan.apply.iter().chain(&world.released(plan)) {
        prop_assert!(
            object
                .metadata
                .owner_references
                .as_ref()
                .is_some_and(|o| o.len() == 1)
        );
        prop_assert_eq!(object.metadata.labels.as_ref().map(|l| l.len()), Some(2));
    }
    // Events are only failures a person acts on: no routine step (a create,
    // release or delete) publishes one.
    for event in &plan.events {
        prop_assert!(
            matches!(
                event,
                InfraEvent::ContractFailed { .. } | InfraEvent::ReleasedByHand { .. }
            ),
            "{:?}",
            event
        );
    }
    Ok(())
}

fn reconcile_checked(world: &mut World, limit: usize) -> Result<InfraPlan, TestCaseError> {
    let plan = world.plan();
    check_plan(world, &plan)?;
    world.enact(&plan, limit);
    Ok(plan)
}

fn contract_at(world: &World, i: usize) -> Option<String> {
    world
        .contracts
        .keys()
        .nth(i % world.contracts.len().max(1))
        .cloned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn releases_before_deletes_and_converges(initial in proptest::collection::btree_set(0..POOL.len(), 0..4),
                                             ops in proptest::collection::vec(op(), 0..60)) {
        let mut spec: BTreeSet<usize> = initial;
        let names = |spec: &BTreeSet<usize>| spec.iter().map(|i| POOL[*i]).collect::<Vec<_>>();
        let mut world = World::new(infra(&names(&spec)));
        let mut ever_in_spec: BTreeSet<String> = spec.iter().map(|i| POOL[*i].to_owned()).collect();

        for op in ops {
            if world.infra_gone {
                break;
            }
            let deleting = world.infra.metadata.deletion_timestamp.is_some();
            match op {
                Op::Add(i) if !deleting => {
                    spec.insert(i);
                    ever_in_spec.insert(POOL[i].to_owned());
                    world.set_spec(&names(&spec));
                }
                Op::Remove(i) if !deleting => {
                    spec.remove(&i);
                    world.set_spec(&names(&spec));
                }
                Op::Add(_) | Op::Remove(_) => {}
                Op::Requester(i, fail) => {
                    if let Some(name) = contract_at(&world, i) {
                        world.requester_step(&name, fail);
                    }
                }
                Op::Collect(i) => {
                    if let Some(name) = contract_at(&world, i) {
                        world.collect(&name);
                    }
                }
                Op::Crash(n) => {
                    reconcile_checked(&mut world, n)?;
                    // The restarted manager lists afresh: its cache shows everything.
                    world.sync();
                }
                Op::Lag => world.lagging = true,
                Op::Sync => world.sync(),
                Op::Reconcile => { reconcile_checked(&mut world, usize::MAX)?; }
                Op::Delete => world.start_deletion(),
            }
        }

        // Drain: the Requester finishes what it was asked, GC runs, the controller reconciles.
        // Contracts that failed stay Failed unless released; nothing fails from here on.
        world.sync();
        for _ in 0..12 {
            if world.infra_gone {
                break;
            }
            reconcile_checked(&mut world, usize::MAX)?;
            world.settle_requester();
            world.collect_all();
        }

        if world.infra.metadata.deletion_timestamp.is_some() {
            prop_assert!(world.infra_gone, "the finalizer never finished");
            prop_assert!(world.contracts.is_empty());
        } else {
            // Exactly one contract per live entry; every removed entry's contract is gone.
            let expected: BTreeSet<String> = names(&spec).iter().map(|e| cc_name(e)).collect();
            let actual: BTreeSet<String> = world.contracts.keys().cloned().collect();
            prop_assert_eq!(&actual, &expected);
            for contract in world.contracts.values() {
                prop_assert!(!contract.spec.release);
                prop_assert!(matches!(phase_of(contract), Some(P::Deployed | P::Failed)));
            }
            // Every entry that left was released before its contract was deleted.
            for entry in &ever_in_spec {
                let name = cc_name(entry);
                let released = world.history.iter().position(|w| *w == Write::Release(name.clone()));
                for (at, write) in world.history.iter().enumerate() {
                    if *write == Write::Delete(name.clone()) {
                        prop_assert!(released.is_some_and(|r| r < at), "{} deleted before its release", name);
                    }
                }
            }
            // Converged: no writes at all (invariant 8), and a status that tells the truth.
            let converged = world.plan();
            prop_assert!(converged.writes_nothing(), "not converged: {:?}", converged);
            let status = world.infra.status.clone().unwrap();
            let deployed = world.contracts.values().filter(|c| phase_of(c) == Some(P::Deployed)).count();
            prop_assert_eq!(status.ready_contracts as usize, deployed);
            prop_assert_eq!(status.contract_count as usize, expected.len());
            let want = if deployed < expected.len() { InfraPhase::Failed } else { InfraPhase::Deployed };
            prop_assert_eq!(status.phase, Some(want));
        }
    }

    #[test]
    fn a_deleting_infra_deletes_nothing_before_all_are_released(
        entries in proptest::collection::btree_set(0..POOL.len(), 1..5),
        steps in proptest::collection::vec((0..8usize, proptest::bool::weighted(0.2), 0..3u8), 0..40),
    ) {
        let names: Vec<&str> = entries.iter().map(|i| POOL[*i]).collect();
        let mut world = World::new(infra(&names));
        world.reconcile();
        // Advance the contracts to arbitrary phases first, then delete the Infra.
        for (i, fail, _) in steps.iter().take(steps.len() / 2) {
            if let Some(name) = contract_at(&world, *i) {
                world.requester_step(&name, *fail);
            }
        }
        world.start_deletion();
        let mut first_delete = None;
        for (i, _, action) in steps.iter().skip(steps.len() / 2) {
            match action {
                0 => { if let Some(name) = contract_at(&world, *i) { world.requester_step(&name, false); } }
                1 => { if let Some(name) = contract_at(&world, *i) { world.collect(&name); } }
                _ => { reconcile_checked(&mut world, usize::MAX)?; }
            }
        }
        for _ in 0..10 {
            if world.infra_gone { break; }
            reconcile_checked(&mut world, usize::MAX)?;
            world.settle_requester();
            world.collect_all();
        }
        prop_assert!(world.infra_gone);
        // From the write history: every release comes before the first delete.
        for (at, write) in world.history.iter().enumerate() {
            if matches!(write, Write::Delete(_)) && first_delete.is_none() {
                first_delete = Some(at);
            }
        }
        let last_release = world.history.iter().rposition(|w| matches!(w, Write::Release(_)));
        if let (Some(first_delete), Some(last_release)) = (first_delete, last_release) {
            prop_assert!(last_release < first_delete, "{:?}", world.history);
        }
    }
}
