//! When a consumer record is rewritten: at most once per interval, and then only when
//! something it shows changed. Pure: the caller passes the time.

use std::time::Duration;

use tokio::time::Instant;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Pace {
    interval: Duration,
    last_write: Instant,
    pending: bool,
}

impl Pace {
    /// The record was (first) written at `now`.
    pub fn new(interval: Duration, now: Instant) -> Self {
        Pace {
            interval,
            last_write: now,
            pending: false,
        }
    }

    /// Something the record shows changed.
    pub fn changed(&mut self) {
        self.pending = true;
    }

    /// When the next write is due: none while nothing changed; else an interval after the
    /// last write (at once, when that is past).
    pub fn due(&self) -> Option<Instant> {
        self.pending.then_some(self.last_write + self.interval)
    }

    /// The record was written at `now` with everything known (a write or a registration).
    pub fn written(&mut self, now: Instant) {
        self.last_write = now;
        self.pending = false;
    }

    /// A write failed at `now`: it is tried again an interval later.
    pub fn failed(&mut self, now: Instant) {
        self.last_write = now;
        self.pending = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN: Duration = Duration::from_secs(10);

    #[test]
    fn many_changes_in_an_interval_make_one_write_at_its_end() {
        let start = Instant::now();
        let mut pace = Pace::new(TEN, start);
        assert_eq!(pace.due(), None);
        pace.changed();
        pace.changed();
        pace.changed();
        assert_eq!(pace.due(), Some(start + TEN));
        pace.written(start + TEN);
        assert_eq!(pace.due(), None);
        // A change long after the last write is due at once.
        pace.changed();
        assert!(pace.due().unwrap() <= start + TEN * 3);
        pace.failed(start + TEN * 3);
        assert_eq!(pace.due(), Some(start + TEN * 4));
    }
}
