//! Aggregated warnings: at most one line per cause per interval, with a count of what was
//! suppressed in between, so that a long outage or a hostile value does not flood the logs.
//!
//! A cause is what went wrong (a fixed text, such as `"cannot list instances"`) and what
//! it concerns (the app, interface or revision). [`aggregated!`] writes the line when
//! [`Aggregator::allow`] says so, with the `suppressed` count as a field. Pure apart from a
//! lock: the time is passed in.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Causes remembered before the stale ones are forgotten.
const MAX_CAUSES: usize = 10_000;

#[derive(Debug)]
struct Cause {
    last_line: Instant,
    suppressed: u64,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Aggregator {
    interval: Duration,
    causes: Mutex<HashMap<(&'static str, String), Cause>>,
}

impl Default for Aggregator {
    fn default() -> Self {
        // At most one line per cause per 10 s.
        Aggregator::new(Duration::from_secs(10))
    }
}

impl Aggregator {
    /// At most one line per cause per `interval`.
    pub fn new(interval: Duration) -> Self {
        Aggregator {
            interval,
            causes: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a line for the cause `what` about `subject` is written at `now`: `Some(n)`
    /// with the number of occurrences suppressed since the last line, or `None` (this one
    /// is counted as suppressed).
    pub fn allow(&self, what: &'static str, subject: &str, now: Instant) -> Option<u64> {
        let mut causes = self.causes.lock().unwrap_or_else(|p| p.into_inner());
        let key = (what, subject.to_owned());
        if let Some(known) = causes.get_mut(&key) {
            if now < known.last_line + self.interval {
                known.suppressed += 1;
                return None;
            }
            let suppressed = std::mem::take(&mut known.suppressed);
            known.last_line = now;
            return Some(suppressed);
        }
        if causes.len() >= MAX_CAUSES {
            let interval = self.interval;
            causes.retain(|_, c| now < c.last_line + interval || c.suppressed > 0);
        }
        causes.insert(
            key,
            Cause {
                last_line: now,
                suppressed: 0,
            },
        );
        Some(0)
    }
}

/// Logs at `$level` (`warn`, `info`) at most once per cause per interval of `$aggregator`:
/// the cause is `$what` (a fixed text, also the message) about `$subject`, and the line
/// carries the given fields plus `suppressed`, the occurrences not logged since the last
/// line.
///
/// `aggregated!(warn, warnings, "cannot list instances; retrying", &app, %app, %error)`
macro_rules! aggregated {
    ($level:ident, $aggregator:expr, $what:expr, $subject:expr $(, $($field:tt)+)?) => {
        if let Some(suppressed) =
            $aggregator.allow($what, $subject, ::tokio::time::Instant::now())
        {
            ::tracing::$level!($($($field)+,)? suppressed, "{}", $what);
        }
    };
}
pub(crate) use aggregated;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_cause_per_interval_with_the_suppressed_count() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let a = Aggregator::new(10 * s);
        assert_eq!(a.allow("mapping", "shop", t0), Some(0));
        for i in 1..=500 {
            assert_eq!(a.allow("mapping", "shop", t0 + s * i / 100), None);
        }
        assert_eq!(
            a.allow("mapping", "other", t0 + s),
            Some(0),
            "causes are apart"
        );
        assert_eq!(a.allow("mapping", "shop", t0 + 10 * s), Some(500));
        assert_eq!(a.allow("mapping", "shop", t0 + 11 * s), None);
        assert_eq!(a.allow("mapping", "shop", t0 + 25 * s), Some(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_retry_loop_on_the_clock_writes_one_line_per_interval() {
        let a = Aggregator::default();
        let (mut lines, mut suppressed) = (0u64, 0u64);
        // A cause that recurs every 300 ms for two minutes.
        for _ in 0..400 {
            if let Some(n) = a.allow("instances", "shop", Instant::now()) {
                lines += 1;
                suppressed += n;
            }
            tokio::time::advance(Duration::from_millis(300)).await;
        }
        assert_eq!(lines, 12, "one line per 10 s in 120 s");
        // Every occurrence is either a line or counted in a later line, but for the ones
        // since the last line.
        let pending = 400 - lines - suppressed;
        assert!(pending < 34, "{pending}");
    }
}
