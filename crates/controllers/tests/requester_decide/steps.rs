//! One decision of a case, written on one line: at `t0()` plus some seconds,
//! on the ready market of the fixtures.

use super::decide::{Observation, Step};
use super::test_fixtures::{apply, ready, secs, step, t0};

/// The decision on `c` at `t0() + seconds`, the market ready.
pub fn at(
    c: &controllers::requester::WholeContract,
    seconds: i64,
    observation: Observation,
) -> Step {
    step(c, &ready(), t0() + secs(seconds), observation)
}

/// `c` once [`at`]'s decision is applied.
pub fn after(
    c: &controllers::requester::WholeContract,
    seconds: i64,
    observation: Observation,
) -> controllers::requester::WholeContract {
    apply(c, &at(c, seconds, observation))
}
