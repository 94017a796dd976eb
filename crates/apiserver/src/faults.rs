//! Fault injection for tests and benchmarks: latency, a share of error answers, dropped
//! watch streams. (Forced compaction is [`crate::ApiServerHandle::compact`].)

use std::time::Duration;

use parking_lot::RwLock;
use rand::Rng;

use crate::status::ApiError;

/// The fault settings; all off by default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultConfig {
    /// Added to every resource request.
    pub latency: Duration,
    /// Share (0.0..=1.0) of resource requests answered 409 Conflict.
    pub conflict_rate: f64,
    /// Share answered 429 TooManyRequests (with Retry-After).
    pub throttle_rate: f64,
    /// Share answered 500 InternalError.
    pub internal_error_rate: f64,
    /// Share answered 503 ServiceUnavailable (with Retry-After).
    pub unavailable_rate: f64,
    /// Close every watch stream after this many events (None: never).
    pub drop_watch_after_events: Option<u64>,
    /// Close every watch stream after this long (None: never).
    pub drop_watch_after: Option<Duration>,
    /// Only inject errors into writes (create, update, patch, delete).
    pub writes_only: bool,
}

/// Live fault settings.
#[derive(Debug, Default)]
pub struct Faults {
    config: RwLock<FaultConfig>,
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
            return Some(ApiError::new(
                409,
                "Conflict",
                "Operation cannot be fulfilled: injected conflict; please apply your changes to the latest version and try again",
            ));
        }
        edge += c.throttle_rate;
        if roll < edge {
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
            return Some(ApiError::internal("injected failure"));
        }
        edge += c.unavailable_rate;
        if roll < edge {
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
}
