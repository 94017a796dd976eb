//! How often a Requester's status is written when only its contract count
//! moved: at most once per [`COUNT_WRITE_EVERY`], so a scale-up of n
//! contracts writes the Requester a few times, not n times.
//!
//! Time comes from the reconcilers' [`crate::Clock`], passed in, so a test
//! steps it instead of sleeping.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// The shortest time between two status writes of a Requester whose only
/// change is its contract count.
pub const COUNT_WRITE_EVERY: Duration = Duration::from_secs(2);

/// When each Requester's status was last written, by uid.
#[derive(Debug, Default)]
pub(crate) struct CountPace {
    last: Mutex<HashMap<String, SystemTime>>,
}

impl CountPace {
    /// Whether to write a Requester's status at `now`. `None`: write (the
    /// write is counted from `now`); `Some(wait)`: only the count changed and
    /// the last write was less than [`COUNT_WRITE_EVERY`] ago, look again
    /// after `wait`. A clock that stepped back counts as time passed: a count
    /// is never held back by a clock correction.
    pub(crate) fn wait_before_writing(
        &self,
        uid: &str,
        only_count: bool,
        now: SystemTime,
    ) -> Option<Duration> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if only_count
            && let Some(written) = last.get(uid)
            && let Ok(since) = now.duration_since(*written)
            && since < COUNT_WRITE_EVERY
        {
            return Some(COUNT_WRITE_EVERY - since);
        }
        last.insert(uid.to_owned(), now);
        None
    }

    /// Forgets a Requester that is gone.
    pub(crate) fn forget(&self, uid: &str) {
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
    fn a_count_alone_is_written_at_most_every_two_seconds() {
        let clock = ManualClock::default();
        let pace = CountPace::default();
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
            "each Requester has its own pace"
        );
        clock.advance(COUNT_WRITE_EVERY);
        assert_eq!(pace.wait_before_writing("r", true, clock.now()), None);
        pace.forget("r");
        assert_eq!(pace.wait_before_writing("r", true, clock.now()), None);
    }

    #[test]
    fn a_clock_that_steps_back_does_not_hold_a_count() {
        let pace = CountPace::default();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        assert_eq!(pace.wait_before_writing("r", true, now), None);
        assert_eq!(
            pace.wait_before_writing("r", true, now - Duration::from_secs(60)),
            None
        );
    }
}
