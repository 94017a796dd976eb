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

/// The text of a chunk's frames, one after the other.
fn text(frames: &Frames) -> String {
    frames
        .iter()
        .map(|frame| std::str::from_utf8(frame).unwrap())
        .collect()
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
    assert_eq!((text(&chunk).as_str(), lines), ("11\n12\n14\n15\n17\n", 5));
    assert_eq!(early.rv, 17);
    let (chunk, lines) = log.take(&mut late, u64::MAX, usize::MAX);
    assert_eq!((text(&chunk).as_str(), lines), ("15\n17\n", 2));
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
    assert_eq!((text(&chunk).as_str(), lines), ("16\n", 1));
}

#[test]
fn a_chunk_stops_at_the_byte_and_line_limits_but_holds_at_least_one_line() {
    let mut log = log_from(0);
    let mut cursor = log.join(0).unwrap();
    append(&mut log, &[1, 2, 3]);
    append(&mut log, &[4, 5]);
    // Each line is two bytes: five bytes hold two lines.
    let (chunk, lines) = log.take(&mut cursor, u64::MAX, 5);
    assert_eq!((text(&chunk).as_str(), lines), ("1\n2\n", 2));
    let (chunk, lines) = log.take(&mut cursor, u64::MAX, 1);
    assert_eq!((text(&chunk).as_str(), lines), ("3\n", 1));
    let (chunk, lines) = log.take(&mut cursor, 1, usize::MAX);
    assert_eq!((text(&chunk).as_str(), lines), ("4\n", 1));
    let (chunk, lines) = log.take(&mut cursor, u64::MAX, usize::MAX);
    assert_eq!((text(&chunk).as_str(), lines), ("5\n", 1));
}

#[test]
fn buffers_are_merged_as_a_counter_and_read_as_slices_without_a_copy() {
    let mut log = log_from(0);
    let mut a = log.join(0).unwrap();
    let mut b = log.join(0).unwrap();
    // Lines of two bytes, one buffer each: merged as the bits of a counter.
    let sizes = |log: &Log| -> Vec<usize> { log.segments.iter().map(|(_, b)| b.len()).collect() };
    for rv in 1..=7 {
        append(&mut log, &[rv]);
    }
    assert_eq!(sizes(&log), [8, 4, 2]);
    let (first, lines) = log.take(&mut a, u64::MAX, usize::MAX);
    assert_eq!((text(&first).as_str(), lines), ("1\n2\n3\n4\n5\n6\n7\n", 7));
    assert_eq!(first.len(), 3, "a frame per buffer");
    let (second, _) = log.take(&mut b, u64::MAX, usize::MAX);
    for (x, y) in first.iter().zip(&second) {
        assert_eq!(x.as_ptr(), y.as_ptr(), "both read the same bytes");
    }
    append(&mut log, &[8]);
    assert_eq!(log.marks.len(), 1, "lines both watches read are dropped");
    assert_eq!(sizes(&log), [2]);
    drop(b);
    log.take(&mut a, u64::MAX, usize::MAX);
    append(&mut log, &[9]);
    assert_eq!(log.marks.len(), 1, "a watch that ended holds nothing");
}

#[test]
fn a_chunk_spans_at_most_max_frames_buffers_and_ends_at_the_end_of_one() {
    let mut log = log_from(0);
    let mut cursor = log.join(0).unwrap();
    // Buffers of decreasing size are never merged: one buffer per batch (of lines of
    // four bytes).
    let mut rv = 99;
    let mut expected = String::new();
    for batch in (1..=MAX_FRAMES + 2).rev() {
        let rvs: Vec<u64> = (0..batch)
            .map(|_| {
                rv += 1;
                rv
            })
            .collect();
        append(&mut log, &rvs);
        expected.extend(rvs.iter().map(|rv| format!("{rv}\n")));
    }
    assert_eq!(log.segments.len(), MAX_FRAMES + 2);
    let (chunk, lines) = log.take(&mut cursor, u64::MAX, usize::MAX);
    assert_eq!(chunk.len(), MAX_FRAMES);
    let (rest, more) = log.take(&mut cursor, u64::MAX, usize::MAX);
    assert_eq!(rest.len(), 2);
    assert_eq!(text(&chunk) + &text(&rest), expected);
    assert_eq!(u64::from(lines + more), rv - 99);
    assert_eq!(cursor.rv, rv);
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
