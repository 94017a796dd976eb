//! Time as the reconcilers read and write it: one [`Clock`] (the market
//! port's, so the market and the reconcilers step together under one
//! [`ManualClock`]), and the conversions between a clock reading, a chrono
//! time and a Kubernetes `Time`.
//!
//! Graces, bid windows, retries and TTLs are decided from a clock passed in,
//! never from `SystemTime::now()` inside a reconciler, so tests step time
//! instead of sleeping (house style 4).
//!
//! # Guarantees
//! Every `Time` written is in whole seconds and every `MicroTime` in whole
//! microseconds: the API server keeps no more, so a status computed here
//! compares equal to what is read back, and a write that changes nothing is
//! never made.

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;

pub use market::{Clock, ManualClock, SystemClock};

/// The clock's reading as a chrono time.
#[must_use]
pub fn now(clock: &dyn Clock) -> DateTime<Utc> {
    DateTime::<Utc>::from(clock.now())
}

/// `t` cut to whole seconds: the precision a Kubernetes `Time` keeps on the
/// wire, so what is computed equals what is read back.
#[must_use]
pub fn whole_seconds(t: DateTime<Utc>) -> DateTime<Utc> {
    Utc.timestamp_opt(t.timestamp(), 0).single().unwrap_or(t)
}

/// `t` rounded up to whole seconds (for "retry at" deadlines, so a deadline is
/// never in the past once written).
#[must_use]
pub fn ceil_seconds(t: DateTime<Utc>) -> DateTime<Utc> {
    let floor = whole_seconds(t);
    if floor == t {
        t
    } else {
        floor + chrono::Duration::seconds(1)
    }
}

/// A chrono time as a Kubernetes `Time` (whole seconds).
#[must_use]
pub fn to_time(t: DateTime<Utc>) -> Time {
    Time(Timestamp::from_second(t.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// A Kubernetes `Time` as a chrono time.
#[must_use]
pub fn from_time(t: &Time) -> DateTime<Utc> {
    DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().unsigned_abs())
        .unwrap_or_default()
}

/// A chrono time as a Kubernetes `MicroTime` (cut to whole microseconds).
#[must_use]
pub fn to_micro_time(t: DateTime<Utc>) -> MicroTime {
    MicroTime(Timestamp::from_microsecond(t.timestamp_micros()).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// A Kubernetes `MicroTime` as a chrono time.
#[must_use]
pub fn from_micro_time(t: &MicroTime) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(t.0.as_microsecond()).unwrap_or_default()
}

/// `later - now` as a std duration, zero when `later` has passed.
#[must_use]
pub fn until(later: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (later - now).to_std().unwrap_or(Duration::ZERO)
}

/// `d` as a chrono duration (saturating).
#[must_use]
pub fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

/// The earlier of two optional instants (the shortest requeue wins).
#[must_use]
pub fn earliest(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn times_round_trip_at_second_precision() {
        let t = Utc.timestamp_opt(1_700_000_000, 700_000_000).unwrap();
        assert_eq!(from_time(&to_time(t)), whole_seconds(t));
        assert_eq!(
            ceil_seconds(t),
            Utc.timestamp_opt(1_700_000_001, 0).unwrap()
        );
        assert_eq!(ceil_seconds(whole_seconds(t)), whole_seconds(t));
        assert_eq!(until(t, t + chrono::Duration::seconds(1)), Duration::ZERO);
    }

    #[test]
    fn micro_times_read_back_as_they_were_computed() {
        let t = Utc.timestamp_opt(1_700_000_000, 123_456_789).unwrap();
        let written = to_micro_time(t);
        let json = serde_json::to_string(&written).unwrap();
        assert_eq!(json, "\"2023-11-14T22:13:20.123456Z\"");
        let read: MicroTime = serde_json::from_str(&json).unwrap();
        assert_eq!(
            read, written,
            "what is written compares equal to what is read back"
        );
        assert_eq!(
            from_micro_time(&read),
            Utc.timestamp_opt(1_700_000_000, 123_456_000).unwrap()
        );
    }

    #[test]
    fn a_manual_clock_moves_only_when_advanced() {
        let clock = ManualClock::default();
        let start = now(&clock);
        assert_eq!(now(&clock), start);
        clock.advance(Duration::from_secs(90));
        assert_eq!(now(&clock), start + chrono::Duration::seconds(90));
    }

    #[test]
    fn the_earliest_deadline_wins() {
        let t = Utc.timestamp_opt(1_700_000_000, 0).unwrap();
        let later = t + chrono::Duration::seconds(1);
        assert_eq!(earliest(Some(later), Some(t)), Some(t));
        assert_eq!(earliest(None, Some(t)), Some(t));
        assert_eq!(earliest(None, None), None);
    }
}
