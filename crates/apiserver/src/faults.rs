//! Fault injection for tests, benchmarks and chaos runs: latency, a share of error
//! answers, writes applied but answered 500, dropped watch streams. (Forced compaction
//! is [`crate::store::Store::compact`].) Off by default; from outside the process only
//! through the debug endpoints ([`crate::debug`]), which are off unless asked for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::RwLock;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::status::ApiError;

/// The fault settings; all off by default. As JSON (the debug endpoint's body) the
/// names are camelCase and durations are milliseconds (`latencyMillis`,
/// `dropWatchAfterMillis`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct FaultConfig {
    /// Added to every resource request.
    #[serde(rename = "latencyMillis", with = "millis")]
    pub latency: Duration,
    /// Share (0.0..=1.0) of resource requests answered 409 Conflict.
    pub conflict_rate: f64,
    /// Share answered 429 TooManyRequests (with Retry-After).
    pub throttle_rate: f64,
    /// Share answered 500 InternalError.
    pub internal_error_rate: f64,
    /// Share answered 503 ServiceUnavailable (with Retry-After).
    pub unavailable_rate: f64,
    /// Share of the writes that no error above hit which are applied and then answered
    /// 500 InternalError, as when a server commits and the answer is lost: the client
    /// cannot tell it from a write that did not happen.
    pub applied_error_rate: f64,
    /// Close every watch stream after this many events (None: never).
    pub drop_watch_after_events: Option<u64>,
    /// Close every watch stream after this long (None: never).
    #[serde(rename = "dropWatchAfterMillis", with = "optional_millis")]
    pub drop_watch_after: Option<Duration>,
    /// Only inject errors into writes (create, update, patch, delete).
    pub writes_only: bool,
}

impl FaultConfig {
    /// Why these settings cannot be used: a rate outside 0..=1, or error rates that
    /// add up to more than every request.
    #[must_use]
    pub fn problem(&self) -> Option<String> {
        let rates = [
            ("conflictRate", self.conflict_rate),
            ("throttleRate", self.throttle_rate),
            ("internalErrorRate", self.internal_error_rate),
            ("unavailableRate", self.unavailable_rate),
            ("appliedErrorRate", self.applied_error_rate),
        ];
        if let Some((name, rate)) = rates.iter().find(|(_, rate)| !(0.0..=1.0).contains(rate)) {
            return Some(format!("{name} must be between 0 and 1, not {rate}"));
        }
        let errors: f64 = rates[..4].iter().map(|(_, rate)| rate).sum();
        (errors > 1.0).then(|| format!("the error rates add up to {errors}, more than 1"))
    }
}

/// How many faults were injected since the server started, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Injected {
    /// 409 Conflict answers.
    pub conflicts: u64,
    /// 429 TooManyRequests answers.
    pub throttled: u64,
    /// 500 InternalError answers to requests that did nothing.
    pub internal_errors: u64,
    /// 503 ServiceUnavailable answers.
    pub unavailable: u64,
    /// Writes applied and then answered 500.
    pub applied_errors: u64,
    /// Watch streams closed by a drop fault.
    pub watches_dropped: u64,
}

impl Injected {
    /// Every fault counted.
    #[must_use]
    pub fn total(&self) -> u64 {
        self.conflicts
            + self.throttled
            + self.internal_errors
            + self.unavailable
            + self.applied_errors
            + self.watches_dropped
    }
}

impl std::ops::Add for Injected {
    type Output = Self;

    fn add(self, other: Self) -> Self {
        Self {
            conflicts: self.conflicts + other.conflicts,
            throttled: self.throttled + other.throttled,
            internal_errors: self.internal_errors + other.internal_errors,
            unavailable: self.unavailable + other.unavailable,
            applied_errors: self.applied_errors + other.applied_errors,
            watches_dropped: self.watches_dropped + other.watches_dropped,
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    conflicts: AtomicU64,
    throttled: AtomicU64,
    internal_errors: AtomicU64,
    unavailable: AtomicU64,
    applied_errors: AtomicU64,
    watches_dropped: AtomicU64,
}

fn count(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Live fault settings and what they injected.
#[derive(Debug, Default)]
pub struct Faults {
    config: RwLock<FaultConfig>,
    counters: Counters,
}

impl Faults {
    /// Replaces the settings.
    pub fn set(&self, config: FaultConfig) {
        *self.config.write() = config;
    }

    /// The current settings.
    #[must_use]
    pub fn get(&self) -> FaultConfig {
        self.config.read().clone()
    }

    /// What was injected so far.
    #[must_use]
    pub fn injected(&self) -> Injected {
        let c = &self.counters;
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Injected {
            conflicts: read(&c.conflicts),
            throttled: read(&c.throttled),
            internal_errors: read(&c.internal_errors),
            unavailable: read(&c.unavailable),
            applied_errors: read(&c.applied_errors),
            watches_dropped: read(&c.watches_dropped),
        }
    }

    /// Counts a watch stream a drop fault closed.
    pub fn count_dropped_watch(&self) {
        count(&self.counters.watches_dropped);
    }

    /// Picks an injected error for a request, if any.
    #[must_use]
    pub fn pick_error(&self, is_write: bool) -> Option<ApiError> {
        let c = self.config.read().clone();
        if c.writes_only && !is_write {
            return None;
        }
        let roll: f64 = rand::rng().random();
        let mut edge = c.conflict_rate;
        if roll < edge {
            count(&self.counters.conflicts);
            return Some(ApiError::new(
                409,
                "Conflict",
                "Operation cannot be fulfilled: injected conflict; please apply your changes to the latest version and try again",
            ));
        }
        edge += c.throttle_rate;
        if roll < edge {
            count(&self.counters.throttled);
            let mut e = ApiError::new(
                429,
                "TooManyRequests",
                "injected throttling: too many requests, please try again later",
            );
            e.retry_after = Some(1);
            return Some(e);
        }
        edge += c.internal_error_rate;
        if roll < edge {
            count(&self.counters.internal_errors);
            return Some(ApiError::internal("injected failure"));
        }
        edge += c.unavailable_rate;
        if roll < edge {
            count(&self.counters.unavailable);
            let mut e = ApiError::new(
                503,
                "ServiceUnavailable",
                "injected unavailability: the server is currently unable to handle the request",
            );
            e.retry_after = Some(1);
            return Some(e);
        }
        None
    }

    /// Whether a write that [`Self::pick_error`] let through is to be answered 500
    /// once it is applied. Reads are never picked.
    #[must_use]
    pub fn pick_applied_error(&self, is_write: bool) -> bool {
        let rate = self.config.read().applied_error_rate;
        if !is_write || rate <= 0.0 || rand::rng().random::<f64>() >= rate {
            return false;
        }
        count(&self.counters.applied_errors);
        true
    }
}

/// The error an applied write is answered with under [`FaultConfig::applied_error_rate`].
#[must_use]
pub fn applied_error() -> ApiError {
    ApiError::internal("injected failure after the write was applied")
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    // Serde's `with` passes the field by reference.
    #[allow(clippy::trivially_copy_pass_by_ref)]
    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_millis)
    }
}

mod optional_millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    // Serde's `with` passes the field by reference.
    #[allow(clippy::ref_option)]
    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => serializer.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Option::<u64>::deserialize(deserializer).map(|ms| ms.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_json_form_names_durations_in_milliseconds() {
        let config: FaultConfig = serde_json::from_value(serde_json::json!({
            "latencyMillis": 5, "conflictRate": 0.02, "appliedErrorRate": 0.05,
            "dropWatchAfterMillis": 7000,
        }))
        .unwrap();
        assert_eq!(config.latency, Duration::from_millis(5));
        assert_eq!(config.drop_watch_after, Some(Duration::from_secs(7)));
        assert_eq!(config.applied_error_rate, 0.05);
        let back: FaultConfig =
            serde_json::from_value(serde_json::to_value(&config).unwrap()).unwrap();
        assert_eq!(back, config);
        assert!(serde_json::from_value::<FaultConfig>(serde_json::json!({"latency": 5})).is_err());
    }

    #[test]
    fn rates_outside_zero_to_one_or_adding_up_past_one_are_refused() {
        let ok = FaultConfig {
            conflict_rate: 0.5,
            internal_error_rate: 0.5,
            applied_error_rate: 1.0,
            ..FaultConfig::default()
        };
        assert_eq!(ok.problem(), None);
        let negative = FaultConfig {
            unavailable_rate: -0.1,
            ..FaultConfig::default()
        };
        assert!(negative.problem().unwrap().contains("unavailableRate"));
        let too_many = FaultConfig {
            conflict_rate: 0.6,
            throttle_rate: 0.6,
            ..FaultConfig::default()
        };
        assert!(too_many.problem().unwrap().contains("add up"));
    }

    #[test]
    fn every_injected_error_is_counted_and_reads_never_get_applied_errors() {
        let faults = Faults::default();
        faults.set(FaultConfig {
            internal_error_rate: 1.0,
            ..FaultConfig::default()
        });
        for _ in 0..5 {
            assert!(faults.pick_error(false).is_some());
        }
        faults.set(FaultConfig {
            applied_error_rate: 1.0,
            ..FaultConfig::default()
        });
        assert!(!faults.pick_applied_error(false));
        assert!(faults.pick_applied_error(true));
        faults.count_dropped_watch();
        let injected = faults.injected();
        assert_eq!(injected.internal_errors, 5);
        assert_eq!(injected.applied_errors, 1);
        assert_eq!(injected.watches_dropped, 1);
        assert_eq!(injected.total(), 7);
    }
}
