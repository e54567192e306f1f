//! The detectors of outliers, pure: a failure rate over the last calls, and a method's
//! recent latency beside the other endpoints' (Envoy and gRPC eject by failure rate; neither by
//! latency, which is what leaves a slow provider taking its share of calls).
//!
//! Each keeps a few numbers per endpoint and is fed one call at a time; judging is cheap
//! and done by the tracker when a call is recorded.

use std::time::Duration;

use tokio::time::Instant;

/// The outcomes of one endpoint's last [`RECENT_CALLS`] calls, as long as they came
/// within a window of one another: a call after a silence of a window starts afresh.
///
/// A count, not a time: at a thousand calls a second, a window of time would hold so many
/// calls from before a fault that the rate would take as many again to cross; the last 64
/// calls are a fault's own within 64 calls, whatever the rate.
#[derive(Clone, Debug, Default)]
pub(super) struct FailureWindow {
    /// One bit per call, the newest lowest: set when it failed.
    failed: u64,
    /// How many of the bits are calls (at most [`RECENT_CALLS`]).
    calls: u32,
    last: Option<Instant>,
}

/// The calls a failure rate is read over.
pub(super) const RECENT_CALLS: u32 = 64;

/// Calls and failures in the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Counts {
    pub calls: u32,
    pub failures: u32,
}

impl FailureWindow {
    /// Records one call at `now`; a silence of `window` before it forgets the others.
    pub fn record(&mut self, failed: bool, window: Duration, now: Instant) {
        self.expire(window, now);
        self.failed = (self.failed << 1) | u64::from(failed);
        self.calls = (self.calls + 1).min(RECENT_CALLS);
        self.last = Some(now);
    }

    /// The calls and failures of the window at `now`.
    pub fn counts(&mut self, window: Duration, now: Instant) -> Counts {
        self.expire(window, now);
        let mask = if self.calls >= RECENT_CALLS {
            u64::MAX
        } else {
            (1u64 << self.calls) - 1
        };
        Counts {
            calls: self.calls,
            failures: (self.failed & mask).count_ones(),
        }
    }

    /// Starts afresh (an endpoint back from an ejection is judged on new calls).
    pub fn clear(&mut self) {
        *self = FailureWindow::default();
    }

    fn expire(&mut self, window: Duration, now: Instant) {
        if self
            .last
            .is_some_and(|last| now.saturating_duration_since(last) > window)
        {
            self.clear();
        }
    }
}

/// Whether `counts` is a failure rate that ejects: at least `min_calls` calls, and failures
/// at or over `threshold` of them.
pub(super) fn rate_ejects(counts: Counts, threshold: f64, min_calls: u32) -> bool {
    counts.calls >= min_calls.max(1)
        && f64::from(counts.failures) >= threshold * f64::from(counts.calls)
}

/// How fast one endpoint has answered one method lately: the median of its last
/// [`RECENT`] answered calls' time to their answer (a median, so that one stall of a busy
/// machine does not make an endpoint slow), and how many there were since it was last
/// cleared.
#[derive(Clone, Debug)]
pub(super) struct Latency {
    /// The method's path, `/pkg.Service/Method`.
    pub path: Box<str>,
    /// The last answered calls' latencies in microseconds, a ring.
    recent: [u32; RECENT],
    /// Where the next one goes in the ring.
    next: usize,
    /// Answered calls since the last clear.
    pub samples: u32,
    /// When the last one was recorded.
    pub last: Instant,
    /// Since when, and until when, the endpoint is ejected for this method, and the
    /// latencies that ejected it.
    pub ejected: Option<SlowEjection>,
}

/// A method an endpoint is ejected for, being slow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct SlowEjection {
    pub since: Instant,
    pub until: Instant,
    /// Its recent latency then, and the median of the endpoints it was compared with.
    pub latency: Duration,
    pub median: Duration,
}

/// How many of an endpoint's last answered calls of a method its latency is the median of.
pub(super) const RECENT: usize = 8;

impl Latency {
    /// No sample of `path` yet.
    pub fn new(path: &str, now: Instant) -> Self {
        Latency {
            path: path.into(),
            recent: [0; RECENT],
            next: 0,
            samples: 0,
            last: now,
            ejected: None,
        }
    }

    /// Records one answered call that took `elapsed`.
    pub fn record(&mut self, elapsed: Duration, now: Instant) {
        let us = u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX);
        self.recent[self.next] = us;
        self.next = (self.next + 1) % RECENT;
        self.samples = self.samples.saturating_add(1);
        self.last = now;
    }

    /// Forgets the samples (back from an ejection: judged on new calls).
    pub fn clear(&mut self) {
        self.samples = 0;
        self.next = 0;
    }

    /// Whether it has enough recent samples to be judged or to judge by at `now`.
    pub fn judgeable(&self, min_samples: u32, window: Duration, now: Instant) -> bool {
        self.ejected.is_none()
            && self.samples >= min_samples.max(1)
            && now.saturating_duration_since(self.last) <= window
    }

    /// Its recent latency, in microseconds: the median of the calls in the ring (the lower
    /// one of an even count); 0 with none.
    pub fn recent_us(&self) -> f64 {
        let filled = (self.samples as usize).min(RECENT);
        let mut values = [0u32; RECENT];
        // The ring's last `filled` entries, wherever it stands.
        for (i, value) in values.iter_mut().take(filled).enumerate() {
            *value = self.recent[(self.next + RECENT - 1 - i) % RECENT];
        }
        let values = &mut values[..filled];
        if values.is_empty() {
            return 0.0;
        }
        values.sort_unstable();
        f64::from(values[(values.len() - 1) / 2])
    }

    /// Its recent latency as a duration.
    pub fn recent(&self) -> Duration {
        Duration::from_micros(self.recent_us() as u64)
    }
}

/// The fewest endpoints a method's latency is judged among: two, the slower judged against
/// the faster (a fleet down to a good and a slow provider should not keep sending half its
/// calls to the slow one; the median of the last calls keeps one stall from counting).
pub(super) const MIN_PEERS: usize = 2;

/// The lower median of `values`, or `None` when there are fewer than [`MIN_PEERS`]: an
/// endpoint is only ever slow beside others. Reorders `values`.
pub(super) fn lower_median(values: &mut [f64]) -> Option<f64> {
    if values.len() < MIN_PEERS {
        return None;
    }
    let middle = (values.len() - 1) / 2;
    let (_, median, _) = values.select_nth_unstable_by(middle, f64::total_cmp);
    Some(*median)
}

/// Whether a recent latency of `recent_us` is slow beside a median of `median_us`: over
/// `multiple` times it, and over `floor`.
pub(super) fn is_slow(recent_us: f64, median_us: f64, multiple: f64, floor: Duration) -> bool {
    recent_us > multiple * median_us && recent_us > floor.as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(10);

    #[test]
    fn the_window_counts_the_last_calls_and_forgets_them_after_a_silence() {
        let start = Instant::now();
        let mut w = FailureWindow::default();
        for i in 0..10 {
            w.record(i % 2 == 0, WINDOW, start);
        }
        let counts = |calls, failures| Counts { calls, failures };
        assert_eq!(w.counts(WINDOW, start), counts(10, 5));
        // A thousand successes before a fault do not dilute it past the last 64 calls.
        for _ in 0..1000 {
            w.record(false, WINDOW, start);
        }
        assert_eq!(w.counts(WINDOW, start), counts(64, 0));
        for i in 0..64 {
            w.record(i % 10 < 3, WINDOW, start);
        }
        assert_eq!(w.counts(WINDOW, start), counts(64, 21));
        // Calls keep it alive; a silence of a window forgets it.
        let later = start + WINDOW;
        assert_eq!(w.counts(WINDOW, later), counts(64, 21));
        assert_eq!(
            w.counts(WINDOW, later + Duration::from_millis(1)),
            Counts::default()
        );
    }

    #[test]
    fn a_rate_ejects_only_over_its_threshold_and_minimum() {
        let counts = |calls, failures| Counts { calls, failures };
        assert!(!rate_ejects(counts(19, 19), 0.2, 20), "too few calls");
        assert!(rate_ejects(counts(20, 4), 0.2, 20));
        assert!(!rate_ejects(counts(20, 3), 0.2, 20));
        assert!(!rate_ejects(counts(0, 0), 0.0, 0), "no call judges nothing");
    }

    #[test]
    fn the_recent_latency_follows_recent_calls_and_shrugs_off_a_stall() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        let mut l = Latency::new("/s/M", now);
        assert_eq!(l.recent(), Duration::ZERO);
        l.record(ms(5), now);
        assert_eq!(l.recent(), ms(5));
        // One stall among quick answers: still quick.
        for _ in 0..6 {
            l.record(ms(5), now);
        }
        l.record(ms(900), now);
        assert_eq!(l.recent(), ms(5));
        // Slow from now on: slow once most of the ring is.
        for _ in 0..RECENT {
            l.record(ms(250), now);
        }
        assert_eq!(l.recent(), ms(250));
        assert!(l.judgeable(5, WINDOW, now));
        assert!(!l.judgeable(5, WINDOW, now + WINDOW * 2), "stale");
        l.clear();
        assert!(!l.judgeable(1, WINDOW, now));
        l.record(ms(7), now);
        assert_eq!(l.recent(), ms(7), "cleared samples are not read");
    }

    #[test]
    fn the_lower_median_needs_two_peers_and_prefers_the_faster() {
        assert_eq!(lower_median(&mut []), None);
        assert_eq!(
            lower_median(&mut [7.0]),
            None,
            "alone: nobody to compare with"
        );
        assert_eq!(lower_median(&mut [250.0, 5.0]), Some(5.0));
        assert_eq!(lower_median(&mut [250.0, 5.0, 6.0, 4.0]), Some(5.0));
        assert_eq!(lower_median(&mut [3.0, 1.0, 2.0]), Some(2.0));
    }

    #[test]
    fn slow_is_a_multiple_of_the_median_and_over_the_floor() {
        let floor = Duration::from_millis(100);
        assert!(is_slow(250_000.0, 5_000.0, 3.0, floor));
        assert!(!is_slow(14_000.0, 5_000.0, 3.0, floor), "under the floor");
        assert!(!is_slow(250_000.0, 100_000.0, 3.0, floor), "not 3x");
    }
}
