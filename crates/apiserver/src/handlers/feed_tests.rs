#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use super::*;

/// A log that starts after `from_rv` (lines no watch needs are dropped at once: join
/// first, then append).
fn log_from(from_rv: u64) -> Log {
    Log {
        floor_rv: from_rv,
        seen_rv: from_rv,
        ..Log::default()
    }
}

/// Appends lines `"<rv>\n"` in one buffer, as the task does with a batch of changes.
fn append(log: &mut Log, rvs: &[u64]) {
    let mut out = BytesMut::new();
    let mut lines = Vec::new();
    for rv in rvs {
        lines.push((*rv, out.len()));
        out.extend_from_slice(format!("{rv}\n").as_bytes());
    }
    let seen = rvs.last().copied().unwrap_or(log.seen_rv);
    log.append(out.freeze(), &lines, seen);
}

fn text(bytes: &Bytes) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

#[test]
fn a_watch_reads_every_line_after_its_resource_version_once_across_buffers() {
    let mut log = log_from(10);
    let mut early = log.join(10).unwrap();
    for batch in [&[11, 12][..], &[14], &[15, 17]] {
        append(&mut log, batch);
    }
    let mut late = log.join(14).unwrap();
    let (chunk, lines) = log.take(&mut early, u64::MAX, usize::MAX);
    assert_eq!((text(&chunk), lines), ("11\n12\n14\n15\n17\n", 5));
    assert_eq!(early.rv, 17);
    let (chunk, lines) = log.take(&mut late, u64::MAX, usize::MAX);
    assert_eq!((text(&chunk), lines), ("15\n17\n", 2));
    assert_eq!(log.available(&mut early), Available::Nothing);
    // A change the watches do not see still moves their resourceVersion on (bookmarks).
    log.append(Bytes::new(), &[], 19);
    assert_eq!(log.available(&mut late), Available::Nothing);
    assert_eq!(late.rv, 19);
}

#[test]
fn a_watch_that_joined_before_the_feed_caught_up_skips_the_lines_it_had() {
    // The watch had everything up to 13 from its replay; the feed had seen up to 11.
    let mut log = log_from(10);
    let _early = log.join(10).unwrap();
    append(&mut log, &[11]);
    let mut cursor = log.join(13).unwrap();
    assert_eq!(log.available(&mut cursor), Available::Nothing);
    append(&mut log, &[12, 13, 16]);
    let (chunk, lines) = log.take(&mut cursor, u64::MAX, usize::MAX);
    assert_eq!((text(&chunk), lines), ("16\n", 1));
}

#[test]
fn a_chunk_stops_at_the_byte_and_line_limits_but_holds_at_least_one_line() {
    let mut log = log_from(0);
    let mut cursor = log.join(0).unwrap();
    append(&mut log, &[1, 2, 3]);
    append(&mut log, &[4, 5]);
    // Each line is two bytes: five bytes hold two lines.
    let (chunk, lines) = log.take(&mut cursor, u64::MAX, 5);
    assert_eq!((text(&chunk), lines), ("1\n2\n", 2));
    let (chunk, lines) = log.take(&mut cursor, u64::MAX, 1);
    assert_eq!((text(&chunk), lines), ("3\n", 1));
    let (chunk, lines) = log.take(&mut cursor, 1, usize::MAX);
    assert_eq!((text(&chunk), lines), ("4\n", 1));
    let (chunk, lines) = log.take(&mut cursor, u64::MAX, usize::MAX);
    assert_eq!((text(&chunk), lines), ("5\n", 1));
}

#[test]
fn buffers_are_joined_once_and_dropped_once_every_watch_read_them() {
    let mut log = log_from(0);
    let mut a = log.join(0).unwrap();
    let mut b = log.join(0).unwrap();
    for rv in 1..=3 {
        append(&mut log, &[rv]);
    }
    let (first, _) = log.take(&mut a, u64::MAX, usize::MAX);
    assert_eq!(log.segments.len(), 1, "the three buffers became one");
    let (second, _) = log.take(&mut b, u64::MAX, usize::MAX);
    assert_eq!(first.as_ptr(), second.as_ptr(), "both read the same bytes");
    append(&mut log, &[4]);
    assert_eq!(log.marks.len(), 1, "lines both watches read are dropped");
    assert_eq!(log.segments.len(), 1);
    drop(b);
    log.take(&mut a, u64::MAX, usize::MAX);
    append(&mut log, &[5]);
    assert_eq!(log.marks.len(), 1, "a watch that ended holds nothing");
}

#[test]
fn a_watch_that_lags_past_the_kept_lines_ends_and_a_later_one_cannot_join_before_them() {
    let mut log = log_from(0);
    let mut slow = log.join(0).unwrap();
    let rvs: Vec<u64> = (1..=MAX_LINES as u64 + 2).collect();
    append(&mut log, &rvs);
    assert_eq!(log.available(&mut slow), Available::Ended);
    assert!(log.join(1).is_none(), "its lines are gone");
    let mut fresh = log.join(log.seen_rv).unwrap();
    assert_eq!(log.available(&mut fresh), Available::Nothing);
}

#[test]
fn a_stopped_feed_ends_its_watches_once_they_read_what_it_holds() {
    let mut log = log_from(0);
    let mut cursor = log.join(0).unwrap();
    append(&mut log, &[1]);
    log.broken = true;
    assert_eq!(log.available(&mut cursor), Available::Bytes(2));
    log.take(&mut cursor, u64::MAX, usize::MAX);
    assert_eq!(log.available(&mut cursor), Available::Ended);
    assert!(log.join(1).is_none());
}
