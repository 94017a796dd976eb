#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::io::Write as _;

use super::*;
use crate::local::bidders;
use crate::local::records::tests::record;
use crate::{ContractKey, Location, RequestForProposal, Resources};

fn request(contract: &str) -> RequestForProposal {
    RequestForProposal {
        contract: ContractKey::new("ns", contract),
        resources: Resources::default(),
        location: Location::default(),
        owner_did: "did:owner".to_owned(),
    }
}

/// What the market does with a change: journal it, then apply it.
fn commit(journal: &mut Journal, state: &mut MarketState, change: Change) {
    journal.append(&change).unwrap();
    state.apply(change);
    journal.compact_if_due(state);
}

/// Publishes and accepts `contract`'s open round; returns the guest id.
fn rent(journal: &mut Journal, state: &mut MarketState, contract: &str) -> String {
    let rfp = state.open_round(&ContractKey::new("ns", contract)).unwrap();
    let published = Change::Published {
        rfp: rfp.clone(),
        request: request(contract),
    };
    commit(journal, state, published);
    let mut guest = record(contract, 0, None);
    guest.set_rfp(rfp.clone());
    let id = bidders::guest_id(&rfp);
    let accepted = Change::Accepted {
        guest: id.clone(),
        record: Box::new(guest),
    };
    commit(journal, state, accepted);
    id
}

fn reopen(dir: &Path) -> (Journal, MarketState) {
    Journal::open(Some(dir.to_owned())).unwrap()
}

#[test]
fn a_reopened_journal_finds_every_change_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut journal, mut state) = reopen(dir.path());
    let released = rent(&mut journal, &mut state, "a");
    rent(&mut journal, &mut state, "b");
    let change = Change::Released {
        guest: released,
        at_ms: 9,
    };
    commit(&mut journal, &mut state, change);
    assert_eq!(journal.lines(), 5);
    drop(journal);
    let (journal, again) = reopen(dir.path());
    assert_eq!(again, state);
    assert_eq!(journal.lines(), 5);
    assert!(Journal::open(None).unwrap().1.records() == 0);
}

#[test]
fn a_torn_last_line_is_ignored_and_cut_off() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(JOURNAL_FILE);
    let (mut journal, mut state) = reopen(dir.path());
    rent(&mut journal, &mut state, "a");
    drop(journal);
    let whole = fs::metadata(&path).unwrap().len();
    // A crash in the middle of the next append.
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"change":"published","rfp":"rfp-b","req"#)
        .unwrap();
    drop(file);

    let (mut journal, mut again) = reopen(dir.path());
    assert_eq!(again, state, "the torn line was never acknowledged");
    assert_eq!(
        fs::metadata(&path).unwrap().len(),
        whole,
        "and it is cut off"
    );
    // The next change starts a line of its own.
    rent(&mut journal, &mut again, "b");
    drop(journal);
    let (_, last) = reopen(dir.path());
    assert_eq!(last, again);
    assert_eq!(last.unreleased_guests(), 2);
}

#[test]
fn a_journal_whose_header_never_made_it_opens_empty() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join(JOURNAL_FILE), br#"{"vers"#).unwrap();
    let (mut journal, mut state) = reopen(dir.path());
    assert_eq!(state.records(), 0);
    rent(&mut journal, &mut state, "a");
    drop(journal);
    assert_eq!(reopen(dir.path()).1, state);
}

#[test]
fn a_corrupt_line_before_the_last_or_a_future_version_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(JOURNAL_FILE);
    let (mut journal, mut state) = reopen(dir.path());
    rent(&mut journal, &mut state, "a");
    drop(journal);
    let mut text = fs::read_to_string(&path).unwrap();
    text.insert_str(text.find('\n').unwrap() + 1, "{not json}\n");
    fs::write(&path, text).unwrap();
    let err = Journal::open(Some(dir.path().to_owned())).unwrap_err();
    assert_eq!(err.category(), "corrupt_state");
    assert!(format!("{:?}", err).contains("line 2"), "{err:?}");

    fs::write(&path, "{\"version\":99}\n").unwrap();
    let err = Journal::open(Some(dir.path().to_owned())).unwrap_err();
    assert_eq!(err.category(), "corrupt_state");
}

#[test]
fn compaction_keeps_the_journal_in_proportion_to_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(JOURNAL_FILE);
    let (mut journal, mut state) =
        Journal::open_compacting_after(Some(dir.path().to_owned()), 8).unwrap();
    let mut longest = 0;
    // The same contract rented and released 100 times: 300 changes.
    for round in 0..100 {
        let guest = rent(&mut journal, &mut state, "churn");
        let change = Change::Released {
            guest,
            at_ms: round,
        };
        commit(&mut journal, &mut state, change);
        longest = longest.max(journal.lines());
        // Never more than twice the state, plus the slack.
        assert!(journal.lines() <= 2 * state.records() + 8, "{round}");
    }
    assert!(longest < 300, "the journal was compacted");
    assert_eq!(state.released_guests(), 100);
    assert!(!dir.path().join(format!("{JOURNAL_FILE}.tmp")).exists());
    // Compacted or not, the journal rebuilds the same market.
    drop(journal);
    let (journal, again) = reopen(dir.path());
    assert_eq!(again, state);
    assert_eq!(
        journal.lines(),
        fs::read_to_string(&path).unwrap().lines().count() - 1
    );
    assert_eq!(again.rfps_published(&ContractKey::new("ns", "churn")), 100);
}

#[test]
fn a_legacy_state_file_becomes_a_journal() {
    let dir = tempfile::tempdir().unwrap();
    let key = ContractKey::new("ns", "a");
    let closed = bidders::rfp_id(&key, 0);
    let open = bidders::rfp_id(&key, 1);
    let guest = |rfp: &RfpId, released_at_ms: Option<u64>| {
        let mut guest = record("a", 0, None);
        guest.set_rfp(rfp.clone());
        let mut value = serde_json::to_value(guest).unwrap();
        value["released_at_ms"] = serde_json::json!(released_at_ms);
        value
    };
    let legacy = serde_json::json!({
        "version": 1,
        "rfps": {
            closed.as_str(): {"request": request("a"), "guest": bidders::guest_id(&closed)},
            open.as_str(): {"request": request("a"), "guest": bidders::guest_id(&open)},
        },
        "guests": {
            bidders::guest_id(&closed): guest(&closed, Some(5)),
            bidders::guest_id(&open): guest(&open, None),
        },
    });
    fs::write(dir.path().join(LEGACY_FILE), legacy.to_string()).unwrap();
    let (_, state) = reopen(dir.path());
    assert_eq!(state.open_round(&key), Some(bidders::rfp_id(&key, 1)));
    assert_eq!(state.guests_rented(&key), 2);
    assert_eq!(state.running_of("did:p", 0), 1);
    assert!(state.released(&bidders::guest_id(&closed)).is_some());
    assert!(!dir.path().join(LEGACY_FILE).exists());
    assert_eq!(reopen(dir.path()).1, state);

    fs::write(dir.path().join(LEGACY_FILE), "[]").unwrap();
    fs::remove_file(dir.path().join(JOURNAL_FILE)).unwrap();
    let err = Journal::open(Some(dir.path().to_owned())).unwrap_err();
    assert_eq!(err.category(), "corrupt_state");
}
