//! How often an object's status is written when only its progress moved (a
//! Requester's contract count, an Infra's contract phases, a Cluster's node
//! count): at most once per [`WRITE_EVERY`] per object, so a scale-up of n
//! contracts writes each of those objects a few times, not n times. Any other
//! change is written at once (plan 0012 S6).
//!
//! Time comes from the reconcilers' [`crate::Clock`], passed in, so a test
//! steps it instead of sleeping.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// The shortest time between two status writes of an object whose only
/// change is its progress.
pub const WRITE_EVERY: Duration = Duration::from_secs(2);

/// When each object's status was last written, by uid.
#[derive(Debug, Default)]
pub struct StatusPace {
    last: Mutex<HashMap<String, SystemTime>>,
}

impl StatusPace {
    /// Whether to write an object's status at `now`. `None`: write (the
    /// write is counted from `now`); `Some(wait)`: only its progress changed
    /// and the last write was less than [`WRITE_EVERY`] ago, look again
    /// after `wait`. A clock that stepped back counts as time passed: progress
    /// is never held back by a clock correction.
    pub fn wait_before_writing(
        &self,
        uid: &str,
        only_progress: bool,
        now: SystemTime,
    ) -> Option<Duration> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if only_progress
            && let Some(written) = last.get(uid)
            && let Ok(since) = now.duration_since(*written)
            && since < WRITE_EVERY
        {
            return Some(WRITE_EVERY - since);
        }
        last.insert(uid.to_owned(), now);
        None
    }

    /// Forgets an object that is gone.
    pub fn forget(&self, uid: &str) {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Clock, ManualClock};

    #[test]
    fn progress_alone_is_written_at_most_every_two_seconds() {
        let clock = ManualClock::default();
        let pace = StatusPace::default();
        assert_eq!(
            pace.wait_before_writing("r", true, clock.now()),
            None,
            "the first write"
        );
        clock.advance(Duration::from_millis(500));
        assert_eq!(
            pace.wait_before_writing("r", true, clock.now()),
            Some(Duration::from_millis(1_500))
        );
        assert_eq!(
            pace.wait_before_writing("r", false, clock.now()),
            None,
            "any other change is written at once"
        );
        assert_eq!(
            pace.wait_before_writing("other", true, clock.now()),
            None,
            "each object has its own pace"
        );
        clock.advance(WRITE_EVERY);
        assert_eq!(pace.wait_before_writing("r", true, clock.now()), None);
        pace.forget("r");
        assert_eq!(pace.wait_before_writing("r", true, clock.now()), None);
    }

    #[test]
    fn a_clock_that_steps_back_does_not_hold_progress() {
        let pace = StatusPace::default();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(pace.wait_before_writing("r", true, now), None);
        assert_eq!(
            pace.wait_before_writing("r", true, now - Duration::from_secs(60)),
            None
        );
    }
}
