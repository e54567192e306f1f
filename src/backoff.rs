//! Exponential backoff with jitter, for every retry loop in the crate.

use std::time::Duration;

use rand::Rng;

/// Exponential backoff: each delay doubles up to `max`, and a random share of it (up to
/// half) is taken off so that many processes retrying together spread out.
#[derive(Clone, Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    attempt: u32,
}

impl Backoff {
    /// Backoff starting at `base`, never waiting longer than `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max: max.max(base),
            attempt: 0,
        }
    }

    /// The next delay to wait.
    pub fn next_delay(&mut self) -> Duration {
        let exp = self.base.saturating_mul(1u32 << self.attempt.min(20));
        self.attempt = self.attempt.saturating_add(1);
        let ceiling = exp.min(self.max);
        let jitter = rand::rng().random_range(0.0..=0.5);
        ceiling.mul_f64(1.0 - jitter)
    }

    /// How many delays were handed out since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// Starts again from `base` (after a success).
    pub fn reset(&mut self) {
        self.attempt = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_stays_bounded() {
        let base = Duration::from_millis(100);
        let max = Duration::from_secs(2);
        let mut b = Backoff::new(base, max);
        for n in 0..40u32 {
            let ceiling = base.saturating_mul(1 << n.min(20)).min(max);
            let d = b.next_delay();
            assert!(
                d <= ceiling && d >= ceiling / 2,
                "delay {n} was {d:?}, ceiling {ceiling:?}"
            );
        }
        b.reset();
        assert!(b.next_delay() <= base);
    }
}
