//! Exponential backoff with jitter, for every retry loop in the crate, and the one loop
//! that follows something again after a backoff ([`retry_with_backoff`]): the registry
//! views and the config centre's rules alike.

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

/// How one attempt of a [`retry_with_backoff`] loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// It delivered something before it failed (or its follow ended): it is tried again
    /// after the first, shortest delay.
    Delivered,
    /// It failed before delivering anything: it is tried again after a longer delay.
    Failed,
    /// Stop: the failure was permanent (no retry can help), or nobody listens any more.
    Stop,
}

/// Runs `attempt` (one follow: opened, then read until it fails) again and again, waiting
/// `backoff`'s delays between failures, until an attempt says [`Attempt::Stop`]. An attempt
/// that delivered something starts the delays again from the shortest.
pub(crate) async fn retry_with_backoff<F>(mut backoff: Backoff, mut attempt: impl FnMut() -> F)
where
    F: Future<Output = Attempt>,
{
    loop {
        match attempt().await {
            Attempt::Stop => return,
            Attempt::Delivered => backoff.reset(),
            Attempt::Failed => {}
        }
        tokio::time::sleep(backoff.next_delay()).await;
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

    #[tokio::test(start_paused = true)]
    async fn failures_wait_longer_each_time_a_delivery_starts_again_and_stop_ends() {
        let base = Duration::from_millis(100);
        let mut outcomes = vec![
            Attempt::Failed,
            Attempt::Failed,
            Attempt::Delivered,
            Attempt::Stop,
        ]
        .into_iter();
        let mut at = Vec::new();
        let start = tokio::time::Instant::now();
        retry_with_backoff(Backoff::new(base, Duration::from_secs(10)), || {
            at.push(start.elapsed());
            std::future::ready(outcomes.next().unwrap_or(Attempt::Stop))
        })
        .await;
        assert_eq!(at.len(), 4, "{at:?}");
        let waits: Vec<Duration> = at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(waits[0] <= base && waits[0] >= base / 2, "{waits:?}");
        assert!(waits[1] <= base * 2 && waits[1] >= base, "{waits:?}");
        assert!(
            waits[2] <= base && waits[2] >= base / 2,
            "after a delivery: {waits:?}"
        );
    }
}
