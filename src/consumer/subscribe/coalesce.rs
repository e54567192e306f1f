//! Coalescing against notification storms.
//!
//! The first change after a quiet period goes out at once; changes that follow within the
//! window are merged and go out together when the window ends (latest wins: the set is
//! computed at push time). Whether the merged change is really pushed (the set may be equal
//! to what subscribers have) is the caller's decision; it reports it with
//! [`Coalescer::handled`]. Pure: no I/O, no clock reads.

use std::time::Duration;

use tokio::time::Instant;

/// How updates of one subscription are coalesced. Set with the methods, read with their
/// `get_` twins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoalesceOptions {
    window: Duration,
}

impl Default for CoalesceOptions {
    fn default() -> Self {
        CoalesceOptions {
            window: Duration::from_millis(100),
        }
    }
}

impl CoalesceOptions {
    crate::setters::option_accessors! {
        /// Sets the coalescing window: the minimum time between two pushes, and so the longest
        /// a change waits (default 100 ms: short enough that a single change is seen at once, long
        /// enough to merge the burst of a rolling deploy, a partition heal or a store re-list
        /// into one push). Zero pushes every change.
        window / get_window => window: Duration;
    }
}

/// Decides when a change is pushed. See the module docs.
#[derive(Clone, Debug)]
pub(crate) struct Coalescer {
    window: Duration,
    last_push: Option<Instant>,
    due: Option<Instant>,
}

impl Coalescer {
    /// A coalescer that has pushed nothing yet.
    pub fn new(options: &CoalesceOptions) -> Self {
        Coalescer {
            window: options.window,
            last_push: None,
            due: None,
        }
    }

    /// Records a change seen at `now`; returns when the merged change is due: `now` after a
    /// quiet period, else the end of the window that started with the last push.
    pub fn changed(&mut self, now: Instant) -> Instant {
        let due = match self.last_push {
            Some(last) => (last + self.window).max(now),
            None => now,
        };
        let due = self.due.map_or(due, |pending| pending.min(due));
        self.due = Some(due);
        due
    }

    /// Makes the pending change, if one is pending, due at `now`.
    pub fn hurry(&mut self, now: Instant) {
        if let Some(due) = &mut self.due {
            *due = (*due).min(now);
        }
    }

    /// When the pending change is due, if one is pending.
    pub fn due(&self) -> Option<Instant> {
        self.due
    }

    /// Whether a pending change is due at `now`.
    pub fn is_due(&self, now: Instant) -> bool {
        self.due.is_some_and(|due| due <= now)
    }

    /// Records that the pending change was handled at `now`: pushed, or dropped because
    /// the set was unchanged (which does not start a new window).
    pub fn handled(&mut self, now: Instant, pushed: bool) {
        self.due = None;
        if pushed {
            self.last_push = Some(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Duration = Duration::from_millis(100);

    #[test]
    fn first_change_is_due_at_once_and_a_burst_waits_for_the_window() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(&CoalesceOptions::default().window(W));
        assert_eq!(c.changed(t0), t0);
        assert!(c.is_due(t0));
        c.handled(t0, true);
        assert_eq!(c.due(), None);
        // A burst right after the push: all due together at the end of the window.
        for i in 1..1000u64 {
            let at = t0 + Duration::from_micros(i * 50);
            assert_eq!(c.changed(at), t0 + W);
        }
        assert!(!c.is_due(t0 + W / 2));
        assert!(c.is_due(t0 + W));
        c.handled(t0 + W, true);
        // After a quiet period the next change is due at once again.
        let later = t0 + W * 5;
        assert_eq!(c.changed(later), later);
    }

    #[test]
    fn an_unchanged_set_does_not_start_a_window() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(&CoalesceOptions::default().window(W));
        c.changed(t0);
        c.handled(t0, false);
        let t1 = t0 + Duration::from_millis(1);
        assert_eq!(c.changed(t1), t1, "nothing was pushed, so no window runs");
    }

    #[test]
    fn a_hurried_change_is_due_at_once_and_nothing_pending_stays_so() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(&CoalesceOptions::default().window(W));
        c.hurry(t0);
        assert_eq!(c.due(), None, "hurrying starts no change");
        c.changed(t0);
        c.handled(t0, true);
        let t1 = t0 + Duration::from_millis(1);
        assert_eq!(c.changed(t1), t0 + W);
        c.hurry(t1);
        assert!(c.is_due(t1));
    }

    #[test]
    fn zero_window_pushes_every_change() {
        let t0 = Instant::now();
        let mut c = Coalescer::new(&CoalesceOptions::default().window(Duration::ZERO));
        c.changed(t0);
        c.handled(t0, true);
        assert_eq!(c.changed(t0), t0);
    }
}
