//! The fan-out, the spec-change filter and the readiness of the shared caches.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use kube::runtime::reflector::store::Writer;

fn secret(name: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    }
}

fn names(objects: &[Arc<Secret>]) -> Vec<String> {
    let mut names: Vec<String> = objects
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    names
}

/// Applies `event` as the reflector does and returns what the subscribers hear.
fn step(
    writer: &mut Writer<Secret>,
    relist: &mut Relist,
    event: watcher::Event<Secret>,
) -> Vec<String> {
    let store = writer.as_reader();
    let vanished = relist.observe(&event, &store);
    writer.apply_watcher_event(&event);
    names(&fan_out_of(event, &store, vanished).collect::<Vec<_>>())
}

#[tokio::test]
async fn spec_changes_drop_status_only_writes() {
    use futures::StreamExt as _;
    let version = |generation: i64, finalizers: &[&str], status: &str| {
        let mut object = secret("r");
        object.metadata.generation = Some(generation);
        object.metadata.finalizers = Some(finalizers.iter().map(|f| (*f).to_owned()).collect());
        // Stands for a status write: it changes nothing but the content.
        object.metadata.labels = Some([("status".to_owned(), status.to_owned())].into());
        Arc::new(object)
    };
    let changes = [
        (version(1, &[], "a"), true),     // first seen
        (version(1, &[], "b"), false),    // status only
        (version(1, &["f"], "b"), true),  // finalizer added
        (version(1, &["f"], "c"), false), // status only
        (version(2, &["f"], "c"), true),  // spec changed, or marked for deletion
        (version(2, &[], "c"), true),     // finalizer removed
    ];
    let mut writer: Writer<Secret> = Writer::default();
    let store = writer.as_reader();
    writer.apply_watcher_event(&watcher::Event::Apply((*version(2, &[], "c")).clone()));
    let objects: Vec<Arc<Secret>> = changes.iter().map(|(o, _)| Arc::clone(o)).collect();
    let stream = futures::stream::iter(objects).boxed();
    let passed: Vec<Arc<Secret>> = spec_changes(stream, store.clone()).collect().await;
    let expected: Vec<Arc<Secret>> = changes
        .iter()
        .filter(|(_, pass)| *pass)
        .map(|(o, _)| Arc::clone(o))
        .collect();
    assert_eq!(passed, expected);

    // Gone from the store: passed on, even with an unchanged signature.
    writer.apply_watcher_event(&watcher::Event::Delete((*version(2, &[], "c")).clone()));
    let stream = futures::stream::iter([version(2, &[], "c"), version(2, &[], "c")]).boxed();
    let gone: Vec<Arc<Secret>> = spec_changes(stream, store).collect().await;
    assert_eq!(gone.len(), 2, "a deletion always reaches the mappers");
}

#[tokio::test]
async fn every_waiter_wakes_when_the_caches_are_ready() {
    let senders: Vec<watch::Sender<bool>> = (0..3).map(|_| watch::Sender::new(false)).collect();
    let readiness = CacheReadiness {
        kinds: senders.iter().map(watch::Sender::subscribe).collect(),
    };
    // Many reconciles wait at once, in one task (as the controllers do) and in others.
    let mut waiting: futures::stream::FuturesUnordered<_> = (0..16)
        .map(|_| {
            let readiness = readiness.clone();
            async move { readiness.wait().await }
        })
        .collect();
    let spawned: Vec<_> = (0..16)
        .map(|_| {
            let readiness = readiness.clone();
            tokio::spawn(async move { readiness.wait().await })
        })
        .collect();
    assert!(futures::poll!(waiting.next()).is_pending());
    for sender in &senders[..2] {
        sender.send_replace(true);
    }
    assert!(
        futures::poll!(waiting.next()).is_pending(),
        "one kind is not listed yet"
    );
    assert!(!readiness.is_ready());
    senders[2].send_replace(true);
    let all = async {
        while waiting.next().await.is_some() {}
        for task in spawned {
            task.await.unwrap();
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), all)
        .await
        .expect("every waiter woke");
    assert!(readiness.is_ready());
}

#[test]
fn a_deleted_object_is_told_with_its_last_state() {
    let mut writer = Writer::default();
    let mut relist = Relist::default();
    assert_eq!(
        step(&mut writer, &mut relist, watcher::Event::Apply(secret("a"))),
        ["a"]
    );
    // kube-runtime's shared stream drops this one (the store no longer has it).
    assert_eq!(
        step(
            &mut writer,
            &mut relist,
            watcher::Event::Delete(secret("a"))
        ),
        ["a"]
    );
    assert!(writer.as_reader().state().is_empty());
}

#[test]
fn a_relist_tells_every_present_object_and_every_vanished_one() {
    let mut writer = Writer::default();
    let mut relist = Relist::default();
    step(
        &mut writer,
        &mut relist,
        watcher::Event::Apply(secret("kept")),
    );
    step(
        &mut writer,
        &mut relist,
        watcher::Event::Apply(secret("gone")),
    );
    assert!(step(&mut writer, &mut relist, watcher::Event::Init).is_empty());
    assert!(
        step(
            &mut writer,
            &mut relist,
            watcher::Event::InitApply(secret("kept"))
        )
        .is_empty()
    );
    assert!(
        step(
            &mut writer,
            &mut relist,
            watcher::Event::InitApply(secret("new"))
        )
        .is_empty()
    );
    assert_eq!(
        step(&mut writer, &mut relist, watcher::Event::InitDone),
        ["gone", "kept", "new"]
    );
    assert_eq!(names(&writer.as_reader().state()), ["kept", "new"]);
}

#[test]
fn each_relist_tells_what_vanished_since_the_one_before_with_its_last_state() {
    let mut writer = Writer::default();
    let mut relist = Relist::default();
    let mut told = |event| {
        let store = writer.as_reader();
        let vanished = relist.observe(&event, &store);
        writer.apply_watcher_event(&event);
        fan_out_of(event, &store, vanished).collect::<Vec<_>>()
    };
    // The first list: nothing was kept, nothing vanishes.
    told(watcher::Event::Init);
    told(watcher::Event::InitApply(colored("a", "red")));
    told(watcher::Event::InitApply(colored("b", "red")));
    assert_eq!(names(&told(watcher::Event::InitDone)), ["a", "b"]);
    told(watcher::Event::Apply(colored("b", "blue")));
    // A re-list without b: b goes out as last seen, after every listed object.
    told(watcher::Event::Init);
    told(watcher::Event::InitApply(colored("a", "red")));
    let heard = told(watcher::Event::InitDone);
    assert_eq!(names(&heard), ["a", "b"]);
    let color = |s: &Secret| s.metadata.labels.as_ref().unwrap()["color"].clone();
    assert_eq!(heard[1].metadata.name.as_deref(), Some("b"));
    assert_eq!(color(&heard[1]), "blue");
    // The next re-list forgets what the last one delivered: a vanishes now.
    told(watcher::Event::Init);
    assert_eq!(names(&told(watcher::Event::InitDone)), ["a"]);
}

/// Secret `name` labelled `color`.
fn colored(name: &str, color: &str) -> Secret {
    let mut secret = secret(name);
    secret.metadata.labels = Some([("color".to_owned(), color.to_owned())].into());
    secret
}

#[test]
fn indexes_take_every_event_their_store_takes() {
    let by_color: Arc<Index<Secret, String>> = Arc::new(Index::new(|s: &Secret| {
        s.metadata.labels.as_ref()?.get("color").cloned()
    }));
    let indexes: Vec<Arc<dyn Indexer<Secret>>> = vec![by_color.clone()];
    let mut keep = KubeStore::<Secret>::default();
    let store = keep.reader();
    let mut take = |event: watcher::Event<Secret>| take_event(&mut keep, &indexes, &event);
    let group = |color: &str| names(&by_color.objects(&color.to_owned(), &store));
    take(watcher::Event::Apply(colored("a", "red")));
    take(watcher::Event::Apply(colored("b", "red")));
    take(watcher::Event::Apply(colored("c", "blue")));
    assert_eq!(group("red"), ["a", "b"]);
    // A change that keeps the group, then one that moves the object: it
    // leaves its old group by the version the store held.
    take(watcher::Event::Apply(colored("a", "red")));
    take(watcher::Event::Apply(colored("b", "blue")));
    assert_eq!(group("red"), ["a"]);
    assert_eq!(group("blue"), ["b", "c"]);
    // A delete whose last state names another group still leaves the one it was in.
    take(watcher::Event::Delete(colored("b", "red")));
    assert_eq!(group("blue"), ["c"]);
    assert_eq!(group("red"), ["a"]);
    // A re-list that no longer has "a" and brings "d".
    take(watcher::Event::Init);
    take(watcher::Event::InitApply(colored("c", "blue")));
    take(watcher::Event::InitApply(colored("d", "red")));
    assert_eq!(
        group("red"),
        ["a"],
        "the store still has a until the list is done"
    );
    take(watcher::Event::InitDone);
    assert_eq!(group("red"), ["d"]);
    assert_eq!(by_color.counts().len(), 2);
}

#[test]
fn the_indexes_of_a_kind_share_each_objects_key() {
    let by_color: Arc<Index<Secret, String>> = Arc::new(Index::new(|s: &Secret| {
        s.metadata.labels.as_ref()?.get("color").cloned()
    }));
    let all: Arc<Index<Secret, ()>> = Arc::new(Index::new(|_: &Secret| Some(())));
    let indexes: Vec<Arc<dyn Indexer<Secret>>> = vec![by_color.clone(), all.clone()];
    let mut keep = KubeStore::<Secret>::default();
    take_event(
        &mut keep,
        &indexes,
        &watcher::Event::Apply(colored("a", "red")),
    );
    take_event(
        &mut keep,
        &indexes,
        &watcher::Event::Apply(colored("a", "blue")),
    );
    let in_color = by_color.keys(&"blue".to_owned());
    let in_all = all.keys(&());
    assert!(
        Arc::ptr_eq(&in_color[0], &in_all[0]),
        "one allocation for the object's key, kept as it moves"
    );
}

mod index_against_its_store {
    use super::*;
    use proptest::prelude::*;

    /// One watch event over a few names and colors (`None`: unlabelled).
    #[derive(Clone, Debug)]
    enum Step {
        Apply(usize, Option<usize>),
        Delete(usize, Option<usize>),
        Relist(Vec<(usize, Option<usize>)>),
    }

    fn object((name, color): (usize, Option<usize>)) -> Secret {
        match color {
            Some(color) => colored(&format!("s{name}"), &format!("c{color}")),
            None => secret(&format!("s{name}")),
        }
    }

    fn step() -> impl Strategy<Value = Step> {
        let object = (0..4usize, proptest::option::of(0..3usize));
        prop_oneof![
            4 => object.clone().prop_map(|(n, c)| Step::Apply(n, c)),
            2 => object.clone().prop_map(|(n, c)| Step::Delete(n, c)),
            1 => proptest::collection::vec(object, 0..5).prop_map(Step::Relist),
        ]
    }

    proptest! {
        /// Whatever the events, each group holds exactly the store's objects of that color.
        #[test]
        fn each_group_is_its_stores_objects_of_that_key(steps in proptest::collection::vec(step(), 0..24)) {
            let by_color: Arc<Index<Secret, String>> = Arc::new(Index::new(|s: &Secret| {
                s.metadata.labels.as_ref()?.get("color").cloned()
            }));
            let indexes: Vec<Arc<dyn Indexer<Secret>>> = vec![by_color.clone()];
            let mut keep = KubeStore::<Secret>::default();
            let store = keep.reader();
            for step in steps {
                let events = match step {
                    Step::Apply(n, c) => vec![watcher::Event::Apply(object((n, c)))],
                    Step::Delete(n, c) => vec![watcher::Event::Delete(object((n, c)))],
                    Step::Relist(objects) => std::iter::once(watcher::Event::Init)
                        .chain(objects.into_iter().map(|o| watcher::Event::InitApply(object(o))))
                        .chain(std::iter::once(watcher::Event::InitDone))
                        .collect(),
                };
                for event in &events {
                    take_event(&mut keep, &indexes, event);
                }
                for color in ["c0", "c1", "c2"] {
                    let expected: Vec<Arc<Secret>> = store
                        .state()
                        .into_iter()
                        .filter(|s| {
                            s.metadata.labels.as_ref().and_then(|l| l.get("color")).map(String::as_str)
                                == Some(color)
                        })
                        .collect();
                    let group = by_color.objects(&color.to_owned(), &store);
                    prop_assert_eq!(names(&group), names(&expected));
                    prop_assert_eq!(by_color.len(&color.to_owned()), expected.len());
                }
            }
        }
    }
}
