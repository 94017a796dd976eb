//! The window, the order, and what a burst leaves behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::collections::HashSet;

use futures::FutureExt as _;
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::Secret;
use proptest::prelude::*;

use super::*;

type Triggers = mpsc::UnboundedSender<Key>;

fn gated(window: usize) -> (Admission, Triggers, BoxStream<'static, ObjectRef<Secret>>) {
    gated_reporting(window, Gauge::default())
}

/// [`gated`], setting `waiting` to the keys that wait.
fn gated_reporting(
    window: usize,
    waiting: Gauge,
) -> (Admission, Triggers, BoxStream<'static, ObjectRef<Secret>>) {
    let admission = Admission::new(window, waiting);
    let (triggers, rx) = mpsc::unbounded();
    let admitted = admission.admit::<Secret>(rx.boxed());
    (admission, triggers, admitted)
}

fn trigger(triggers: &Triggers, name: &str) {
    triggers.unbounded_send(key_of(name, Some("ns"))).unwrap();
}

/// The names the stream hands out now, without waiting.
fn ready(admitted: &mut BoxStream<'static, ObjectRef<Secret>>) -> Vec<String> {
    let mut names = Vec::new();
    while let Some(Some(object)) = admitted.next().now_or_never() {
        assert_eq!(object.namespace.as_deref(), Some("ns"));
        names.push(object.name);
    }
    names
}

fn names(range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("c{i}")).collect()
}

#[test]
fn a_burst_goes_out_a_window_at_a_time_in_order() {
    let (admission, triggers, mut admitted) = gated(3);
    for name in names(0..10) {
        trigger(&triggers, &name);
    }
    assert_eq!(ready(&mut admitted), names(0..3));
    let keys = admission.keys();
    assert_eq!((keys.waiting.len(), keys.admitted.len()), (7, 3));
    drop(keys);
    admission.finished("c1", Some("ns"));
    assert_eq!(ready(&mut admitted), names(3..4));
    // A finish of a key it never admitted (a requeue's reconcile) changes nothing.
    admission.finished("other", Some("ns"));
    admission.finished("c1", Some("ns"));
    assert!(ready(&mut admitted).is_empty());
    for name in ["c0", "c2", "c3"] {
        admission.finished(name, Some("ns"));
    }
    assert_eq!(ready(&mut admitted), names(4..7));
}

#[test]
fn the_gauge_tells_how_many_keys_wait() {
    let waiting = Gauge::default();
    let (admission, triggers, mut admitted) = gated_reporting(2, waiting.clone());
    for name in names(0..5) {
        trigger(&triggers, &name);
    }
    assert_eq!(ready(&mut admitted), names(0..2));
    assert_eq!(waiting.get(), 3);
    // Triggered again while it waits: still one key waiting.
    trigger(&triggers, "c4");
    assert!(ready(&mut admitted).is_empty());
    assert_eq!(waiting.get(), 3);
    admission.finished("c0", Some("ns"));
    assert_eq!(ready(&mut admitted), names(2..3));
    assert_eq!(waiting.get(), 2);
    for name in names(1..3) {
        admission.finished(&name, Some("ns"));
    }
    assert_eq!(ready(&mut admitted), names(3..5));
    assert_eq!(waiting.get(), 0);
}

#[test]
fn a_stopped_controller_has_nothing_waiting() {
    let waiting = Gauge::default();
    let (_admission, triggers, mut admitted) = gated_reporting(1, waiting.clone());
    for name in names(0..3) {
        trigger(&triggers, &name);
    }
    assert_eq!(ready(&mut admitted), names(0..1));
    assert_eq!(waiting.get(), 2);
    // The leader's term ends: kube's controller, and the stream, are dropped.
    drop(admitted);
    assert_eq!(waiting.get(), 0);
}

#[test]
fn a_waiting_key_triggered_again_goes_out_once() {
    let (admission, triggers, mut admitted) = gated(1);
    for name in ["a", "b", "b", "c", "b"] {
        trigger(&triggers, name);
    }
    assert_eq!(ready(&mut admitted), ["a"]);
    admission.finished("a", Some("ns"));
    assert_eq!(ready(&mut admitted), ["b"]);
    admission.finished("b", Some("ns"));
    assert_eq!(ready(&mut admitted), ["c"]);
}

#[test]
fn an_admitted_key_triggered_again_goes_out_at_once_whatever_waits() {
    let (admission, triggers, mut admitted) = gated(1);
    trigger(&triggers, "a");
    trigger(&triggers, "b");
    assert_eq!(ready(&mut admitted), ["a"]);
    // kube-runtime reconciles it again after the one running: not held behind b.
    trigger(&triggers, "a");
    assert_eq!(ready(&mut admitted), ["a"]);
    admission.finished("a", Some("ns"));
    assert_eq!(ready(&mut admitted), ["b"]);
}

#[test]
fn a_finish_wakes_the_stream() {
    let (admission, triggers, admitted) = gated(1);
    trigger(&triggers, "a");
    trigger(&triggers, "b");
    let mut admitted = admitted;
    let first = futures::executor::block_on(admitted.next()).unwrap();
    assert_eq!(first.name, "a");
    let finisher = {
        let admission = admission.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            admission.finished("a", Some("ns"));
        })
    };
    // Blocks until the other thread's finish wakes it.
    let second = futures::executor::block_on(admitted.next()).unwrap();
    assert_eq!(second.name, "b");
    finisher.join().unwrap();
}

#[test]
fn what_a_burst_grew_is_given_back_once_it_is_through() {
    let (admission, triggers, mut admitted) = gated(4);
    for name in names(0..5000) {
        trigger(&triggers, &name);
    }
    let mut out = Vec::new();
    loop {
        let now = ready(&mut admitted);
        if now.is_empty() {
            break;
        }
        for name in &now {
            admission.finished(name, Some("ns"));
        }
        out.extend(now);
    }
    assert_eq!(out, names(0..5000));
    let keys = admission.keys();
    assert!(keys.waiting.capacity() <= 4, "{}", keys.waiting.capacity());
    assert!(
        keys.waiting_set.capacity() <= 4,
        "{}",
        keys.waiting_set.capacity()
    );
    assert!(
        keys.admitted.capacity() < 64,
        "{}",
        keys.admitted.capacity()
    );
}

#[test]
fn it_ends_when_its_triggers_end_and_nothing_waits() {
    let (admission, triggers, mut admitted) = gated(1);
    trigger(&triggers, "a");
    trigger(&triggers, "b");
    drop(triggers);
    assert_eq!(ready(&mut admitted), ["a"]);
    assert!(admitted.next().now_or_never().is_none(), "b still waits");
    admission.finished("a", Some("ns"));
    assert_eq!(ready(&mut admitted), ["b"]);
    assert!(matches!(admitted.next().now_or_never(), Some(None)));
}

#[derive(Clone, Debug)]
enum Step {
    Trigger(u8),
    /// Finishes the admitted key at this position (modulo their count).
    Finish(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u8..12).prop_map(Step::Trigger),
        2 => any::<usize>().prop_map(Step::Finish),
    ]
}

proptest! {
    /// Whatever the triggers and finishes: never more unfinished keys out
    /// than the window (counting a key once however often it went out), and
    /// once everything out finishes, every key triggered went out after its
    /// last trigger.
    #[test]
    fn the_window_holds_and_no_trigger_is_lost(
        window in 1usize..5,
        steps in proptest::collection::vec(step(), 0..60),
    ) {
        let (admission, triggers, mut admitted) = gated(window);
        // Out and not finished (what the controller holds), in order out.
        let mut running: Vec<String> = Vec::new();
        // Triggered and not out since.
        let mut owed: HashSet<String> = HashSet::new();
        let mut take = |running: &mut Vec<String>, owed: &mut HashSet<String>| {
            for name in ready(&mut admitted) {
                owed.remove(&name);
                if !running.contains(&name) {
                    running.push(name);
                }
            }
        };
        for step in steps {
            match step {
                Step::Trigger(i) => {
                    let name = format!("c{i}");
                    trigger(&triggers, &name);
                    owed.insert(name);
                }
                Step::Finish(at) if !running.is_empty() => {
                    let name = running.remove(at % running.len());
                    admission.finished(&name, Some("ns"));
                }
                Step::Finish(_) => {}
            }
            take(&mut running, &mut owed);
            prop_assert!(running.len() <= window, "{} out with a window of {window}", running.len());
        }
        while !running.is_empty() {
            let name = running.remove(0);
            admission.finished(&name, Some("ns"));
            take(&mut running, &mut owed);
            prop_assert!(running.len() <= window);
        }
        prop_assert!(owed.is_empty(), "never went out after their trigger: {owed:?}");
    }
}
