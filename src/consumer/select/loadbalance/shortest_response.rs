//! Java's `shortestresponse`: the endpoint expected to answer soonest.
//!
//! As Java: an endpoint's expected response is the average time of its successful calls in
//! the current window (see `response_time`), in whole milliseconds, times its calls in
//! flight plus one; the shortest are gathered and drawn among by weight (uniformly when
//! their weights are equal). An endpoint without a success in the window reads as 0, so it
//! is among the shortest: Java tries the unmeasured first, and so does this.
//!
//! Whole milliseconds are Java's unit: endpoints within a millisecond of each other tie and
//! share the calls rather than all going to the one measured a few microseconds faster.
//!
//! Java records response times and calls in flight per provider and method, and only when
//! the consumer sets `actives` (its `ActiveLimitFilter` records them; without it every
//! provider reads as unmeasured and idle, so Java draws by weight). Here they are this
//! channel's calls to the endpoint, all methods together, always recorded.

use rand::Rng;
use tokio::time::Instant;

use super::{Candidate, random};

/// The index of the endpoint `shortestresponse` calls among `candidates` (non-empty) at
/// `now`; `ties` is scratch space, kept between calls so that none allocates.
pub(super) fn select(
    candidates: &[Candidate<'_>],
    now: Instant,
    ties: &mut Vec<usize>,
    rng: &mut impl Rng,
) -> usize {
    random::among_least(candidates, |c| estimate(c, now), ties, rng)
}

/// The expected response of `c` at `now` in milliseconds, as Java estimates it.
fn estimate(c: &Candidate<'_>, now: Instant) -> u64 {
    let average_ms = c
        .stats
        .average(now)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let in_flight_and_this = u64::try_from(c.active)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    average_ms.saturating_mul(in_flight_and_this)
}

#[cfg(test)]
mod tests {
    use super::super::ResponseTimes;
    use super::super::tests::{shares, with_stats};
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    /// Statistics from `t0` with one success of `average` recorded (none if `None`).
    fn measured(t0: Instant, average: Option<Duration>) -> ResponseTimes {
        let stats = ResponseTimes::new(t0);
        if let Some(average) = average {
            stats.record(average, true, t0);
        }
        stats
    }

    #[test]
    fn the_faster_is_preferred() {
        let t0 = Instant::now();
        let stats = [measured(t0, Some(250 * MS)), measured(t0, Some(5 * MS))];
        let candidates = with_stats(&[(100, 0), (100, 0)], &stats);
        let (mut rng, mut ties) = (StdRng::seed_from_u64(1), Vec::new());
        for _ in 0..100 {
            assert_eq!(select(&candidates, t0 + MS, &mut ties, &mut rng), 1);
        }
    }

    #[test]
    fn calls_in_flight_multiply_the_average() {
        let t0 = Instant::now();
        let stats = [measured(t0, Some(10 * MS)), measured(t0, Some(4 * MS))];
        let (mut rng, mut ties) = (StdRng::seed_from_u64(2), Vec::new());
        // 10 ms × 1 against 4 ms × 3: the slower but idle one is expected sooner.
        let candidates = with_stats(&[(100, 0), (100, 2)], &stats);
        assert_eq!(select(&candidates, t0, &mut ties, &mut rng), 0);
        // 10 ms × 2 against 4 ms × 5: equal, so both share (uniformly, equal weights).
        let candidates = with_stats(&[(100, 1), (100, 4)], &stats);
        let s = shares(2, 10_000, || select(&candidates, t0, &mut ties, &mut rng));
        assert!((s[0] - 0.5).abs() < 0.02, "{s:?}");
    }

    #[test]
    fn the_unmeasured_are_tried_first() {
        let t0 = Instant::now();
        let stats = [
            measured(t0, Some(3 * MS)),
            measured(t0, None),
            measured(t0, None),
        ];
        let candidates = with_stats(&[(100, 0), (100, 0), (300, 0)], &stats);
        let (mut rng, mut ties) = (StdRng::seed_from_u64(3), Vec::new());
        let s = shares(3, 20_000, || select(&candidates, t0, &mut ties, &mut rng));
        assert_eq!(s[0], 0.0, "{s:?}");
        assert!((s[2] - 0.75).abs() < 0.015, "ties drawn by weight: {s:?}");
    }

    #[test]
    fn within_a_millisecond_is_a_tie() {
        let t0 = Instant::now();
        let us = Duration::from_micros;
        let stats = [measured(t0, Some(us(300))), measured(t0, Some(us(900)))];
        let candidates = with_stats(&[(100, 0), (100, 0)], &stats);
        let (mut rng, mut ties) = (StdRng::seed_from_u64(4), Vec::new());
        let s = shares(2, 10_000, || select(&candidates, t0, &mut ties, &mut rng));
        assert!((s[0] - 0.5).abs() < 0.02, "{s:?}");
    }

    #[test]
    fn a_turned_window_forgets_the_slow() {
        let t0 = Instant::now();
        let stats = [measured(t0, Some(900 * MS)), measured(t0, Some(2 * MS))];
        let candidates = with_stats(&[(100, 0), (100, 0)], &stats);
        let (mut rng, mut ties) = (StdRng::seed_from_u64(5), Vec::new());
        assert_eq!(select(&candidates, t0, &mut ties, &mut rng), 1);
        // Thirty seconds on, neither has data in the new window: both are tried again.
        let later = t0 + ResponseTimes::DEFAULT_SLIDE_PERIOD;
        let s = shares(2, 10_000, || {
            select(&candidates, later, &mut ties, &mut rng)
        });
        assert!((s[0] - 0.5).abs() < 0.02, "{s:?}");
        // The slow one answers fast in the new window: it is now the preferred one.
        stats[0].record(MS, true, later);
        stats[1].record(3 * MS, true, later);
        assert_eq!(select(&candidates, later, &mut ties, &mut rng), 0);
    }
}
