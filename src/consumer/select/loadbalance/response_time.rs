//! How fast an endpoint has answered lately: what `shortestresponse` reads.
//!
//! Dubbo Java keeps running totals per provider and, every slide period (30 s by default),
//! moves a per-provider offset up to them, so that its balancer sees only the successful
//! calls since the last turn. Here each endpoint keeps its own totals for the window it is
//! in, on a grid of periods from an origin the channel gives every endpoint (so all its
//! endpoints' windows turn together, as Java's do); a window whose time has passed reads as
//! empty. Failed calls count for nothing, as in Java.
//!
//! It is a few atomics so it can sit in an `Arc` shared by the call futures (which record)
//! and the balancer (which reads) without a lock. A sample that races the turn of a window
//! may be lost, as one racing Java's reset may; that only thins a window a little.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::time::Instant;

/// Bits of [`ResponseTimes::sums`] holding the count of successes; the rest hold their
/// summed elapsed microseconds. One word, so a reader never sees a count of one window
/// with the time of another.
const COUNT_BITS: u32 = 24;
/// The largest count of successes a window holds (16.7 M; more are not counted).
const MAX_COUNT: u64 = (1 << COUNT_BITS) - 1;
/// The largest summed elapsed time a window holds, in microseconds (about 12 days).
const MAX_ELAPSED_US: u64 = (1 << (64 - COUNT_BITS)) - 1;

/// One endpoint's successful calls and their summed response time in the current window.
#[derive(Debug)]
pub(crate) struct ResponseTimes {
    /// Where the grid of windows starts: the same for every endpoint of a channel.
    origin: Instant,
    /// The length of a window, in microseconds (at least 1).
    period_us: u64,
    /// The number (from `origin`) of the window `sums` belongs to.
    window: AtomicU64,
    /// The window's count of successes (low [`COUNT_BITS`]) and their summed elapsed
    /// microseconds (the high bits).
    sums: AtomicU64,
}

impl ResponseTimes {
    /// Java's default slide period (`dubbo.shortestresponse.slide.period`, 30 s).
    pub const DEFAULT_SLIDE_PERIOD: Duration = Duration::from_secs(30);

    /// Empty statistics with Java's 30 s windows counted from `origin` (give every endpoint
    /// of a channel the same origin so their windows turn together).
    pub fn new(origin: Instant) -> Self {
        Self::with_period(origin, Self::DEFAULT_SLIDE_PERIOD)
    }

    /// Empty statistics with windows of `period` (at least 1 µs) counted from `origin`.
    pub fn with_period(origin: Instant, period: Duration) -> Self {
        ResponseTimes {
            origin,
            period_us: micros(period).max(1),
            window: AtomicU64::new(0),
            sums: AtomicU64::new(0),
        }
    }

    /// Records a call that ended at `now` after `elapsed`: a success adds to the window's
    /// average; a failure only turns the window if its time has come (as in Java, failures
    /// do not make an endpoint look slow or fast).
    pub fn record(&self, elapsed: Duration, succeeded: bool, now: Instant) {
        let window = self.window_at(now);
        let mut seen = self.window.load(Relaxed);
        while seen < window {
            match self
                .window
                .compare_exchange_weak(seen, window, Relaxed, Relaxed)
            {
                Ok(_) => {
                    self.sums.store(0, Relaxed);
                    break;
                }
                Err(actual) => seen = actual,
            }
        }
        if !succeeded {
            return;
        }
        let elapsed_us = micros(elapsed);
        // A full window keeps what it has: plenty of samples for an average.
        let _ = self.sums.fetch_update(Relaxed, Relaxed, |sums| {
            let (count, total) = (sums & MAX_COUNT, sums >> COUNT_BITS);
            let total = total
                .checked_add(elapsed_us)
                .filter(|&t| t <= MAX_ELAPSED_US)?;
            (count < MAX_COUNT).then(|| (total << COUNT_BITS) | (count + 1))
        });
    }

    /// The average response time of the successful calls of the window `now` is in, or
    /// `None` when it has none yet (Java reads that as 0, see `shortest_response`).
    pub fn average(&self, now: Instant) -> Option<Duration> {
        if self.window.load(Relaxed) < self.window_at(now) {
            return None;
        }
        let sums = self.sums.load(Relaxed);
        let (count, total) = (sums & MAX_COUNT, sums >> COUNT_BITS);
        (count > 0).then(|| Duration::from_micros(total / count))
    }

    /// The number of the window `now` falls in (0 before the origin).
    fn window_at(&self, now: Instant) -> u64 {
        micros(now.saturating_duration_since(self.origin)) / self.period_us
    }
}

/// `d` in whole microseconds, saturating.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_average_is_of_successes_only() {
        let t0 = Instant::now();
        let stats = ResponseTimes::new(t0);
        assert_eq!(stats.average(t0), None, "no data yet");
        stats.record(10 * MS, true, t0);
        stats.record(30 * MS, true, t0 + MS);
        stats.record(500 * MS, false, t0 + 2 * MS);
        assert_eq!(stats.average(t0 + 3 * MS), Some(20 * MS));
        stats.record(Duration::from_micros(1_500), true, t0 + 4 * MS);
        assert_eq!(
            stats.average(t0 + 5 * MS),
            Some(Duration::from_micros(13_833)),
            "microseconds kept"
        );
    }

    #[test]
    fn the_window_turns_every_thirty_seconds() {
        let t0 = Instant::now();
        let stats = ResponseTimes::new(t0);
        stats.record(40 * MS, true, t0 + Duration::from_secs(5));
        let end = t0 + ResponseTimes::DEFAULT_SLIDE_PERIOD;
        assert_eq!(stats.average(end - MS), Some(40 * MS), "same window");
        assert_eq!(stats.average(end), None, "the next window starts empty");
        // A failure in the next window turns it: the old data is gone for good.
        stats.record(MS, false, end + MS);
        assert_eq!(stats.average(end + MS), None);
        stats.record(8 * MS, true, end + 2 * MS);
        assert_eq!(stats.average(end + 3 * MS), Some(8 * MS));
        // Long idle: several windows later, still empty until a success.
        assert_eq!(stats.average(end + Duration::from_secs(300)), None);
    }

    #[test]
    fn endpoints_of_one_origin_turn_together() {
        let t0 = Instant::now();
        let period = Duration::from_secs(10);
        let (a, b) = (
            ResponseTimes::with_period(t0, period),
            ResponseTimes::with_period(t0, period),
        );
        a.record(5 * MS, true, t0 + Duration::from_secs(1));
        b.record(7 * MS, true, t0 + Duration::from_secs(9));
        let next = t0 + period;
        assert_eq!(
            (a.average(next - MS), b.average(next - MS)),
            (Some(5 * MS), Some(7 * MS))
        );
        assert_eq!((a.average(next), b.average(next)), (None, None));
    }

    #[test]
    fn a_stale_clock_reads_the_current_window() {
        let t0 = Instant::now();
        let stats = ResponseTimes::new(t0);
        let later = t0 + Duration::from_secs(31);
        stats.record(3 * MS, true, later);
        // A reader whose `now` was taken a little before the turn still sees the data.
        assert_eq!(stats.average(later - Duration::from_secs(2)), Some(3 * MS));
        // Before the origin counts as the first window.
        let early = ResponseTimes::new(later);
        early.record(2 * MS, true, t0);
        assert_eq!(early.average(later), Some(2 * MS));
    }

    #[test]
    fn a_full_window_keeps_what_it_has() {
        let t0 = Instant::now();
        let stats = ResponseTimes::new(t0);
        stats.record(Duration::from_secs(86_400 * 12), true, t0);
        stats.record(Duration::from_secs(86_400), true, t0);
        assert_eq!(
            stats.average(t0),
            Some(Duration::from_secs(86_400 * 12)),
            "the sample that would overflow is dropped"
        );
        stats.record(Duration::MAX, true, t0);
        assert_eq!(stats.average(t0), Some(Duration::from_secs(86_400 * 12)));
    }
}
