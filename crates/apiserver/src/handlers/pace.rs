//! When a watch holds its next chunk: while its live lines come fast.
//!
//! Every chunk costs a socket write, a TLS record and a wakeup on both ends, whatever it
//! holds; with a hundred watchers a change sent on its own costs a hundred of them. So
//! while a watch's recent line rate is that of a burst (at least [`BURST_RATE`]), its
//! next chunk waits [`HOLD`] for the lines that come meanwhile. Below that rate a line
//! goes out at once: a change after a quiet spell, a trickle, and a client that reads its
//! own write back before it writes again (its steps take milliseconds) wait for nothing.
//!
//! Neither the count of writes under way nor a fixed hold tells these apart: a fixed hold
//! after every chunk slowed the manager's tests (its controllers read their own writes
//! back through watches), and with its clients busy a burst's writes seldom overlap in
//! the server.

use std::time::Duration;

use tokio::time::Instant;

/// The line rate (lines a second) from which a watch holds its chunks.
pub const BURST_RATE: f64 = 250.0;
/// How long a chunk is held, from when its first line was ready.
pub const HOLD: Duration = Duration::from_millis(20);
/// How fast the rate forgets: a burst's rate halves about 70 ms after it stops.
const DECAY: Duration = Duration::from_millis(100);

/// A watch's recent line rate: lines sent, decayed exponentially over [`DECAY`].
#[derive(Debug, Default)]
pub struct Pace {
    /// Lines a second as of `at`.
    rate: f64,
    /// When the last chunk went out.
    at: Option<Instant>,
}

impl Pace {
    /// The rate at `now`.
    fn rate_at(&self, now: Instant) -> f64 {
        self.at.map_or(0.0, |at| {
            let quiet = now.saturating_duration_since(at);
            self.rate * (-quiet.as_secs_f64() / DECAY.as_secs_f64()).exp()
        })
    }

    /// Records a chunk of `lines` live lines sent at `now`.
    pub fn sent(&mut self, now: Instant, lines: u32) {
        self.rate = self.rate_at(now) + f64::from(lines) / DECAY.as_secs_f64();
        self.at = Some(now);
    }

    /// Whether a chunk whose first line is ready at `now` waits for more.
    #[must_use]
    pub fn holds(&self, now: Instant) -> bool {
        self.rate_at(now) >= BURST_RATE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends a chunk of `lines` every `every`, `times` times, from `start`; returns the
    /// time of the last one.
    fn send(pace: &mut Pace, start: Instant, every: Duration, lines: u32, times: u32) -> Instant {
        let mut now = start;
        for _ in 0..times {
            now += every;
            pace.sent(now, lines);
        }
        now
    }

    #[test]
    fn a_trickle_or_a_client_reading_its_own_writes_back_is_never_held() {
        let mut pace = Pace::default();
        let start = Instant::now();
        assert!(!pace.holds(start), "the first line goes at once");
        // A step every 5 ms (200 a second), for a second.
        let last = send(&mut pace, start, Duration::from_millis(5), 1, 200);
        assert!(!pace.holds(last + Duration::from_millis(5)));
    }

    #[test]
    fn a_burst_is_held_and_a_line_after_it_quiets_down_is_not() {
        let mut pace = Pace::default();
        let start = Instant::now();
        // 2,000 lines a second, as chunks of 20 every 10 ms.
        let last = send(&mut pace, start, HOLD, 20, 20);
        assert!(pace.holds(last + Duration::from_millis(1)));
        assert!(
            !pace.holds(last + Duration::from_millis(500)),
            "half a second later the burst is over"
        );
    }
}
