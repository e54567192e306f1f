//! The retry budget: retries may add at most a share of a channel's calls, plus a small
//! floor per second, over a sliding window (linkerd's budget; its defaults). When
//! providers fail together (an overload, a bad deploy), retries then cannot multiply the
//! load that made them fail.
//!
//! Every call deposits `ratio` of a token; a retry withdraws one. The balance is what the
//! last `ttl` deposited and withdrew, plus a reserve of `min_per_second × ttl` tokens, so
//! a quiet channel can still retry a few calls. Time is tokio's clock, read in
//! whole slots of a tenth of the window.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Slots the window is read in.
const SLOTS: usize = 10;
/// Fixed-point scale of tokens (a retry costs `SCALE`).
const SCALE: i64 = 1000;

/// How much retrying a channel may add: see the module docs. Every part has a default (read
/// it with the `get_` method of the setter's name).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryBudget {
    ratio: f64,
    min_per_second: u32,
    ttl: Duration,
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget {
            ratio: 0.2,
            min_per_second: 10,
            ttl: Duration::from_secs(10),
        }
    }
}

impl RetryBudget {
    /// Sets the share of calls retries may add (default 0.2, linkerd's; clamped to
    /// 0..=1000; 0 leaves only the floor).
    pub fn ratio(mut self, ratio: f64) -> Self {
        self.ratio = if ratio.is_finite() {
            ratio.clamp(0.0, 1000.0)
        } else {
            0.0
        };
        self
    }

    /// A budget that never allows a retry: retries are off.
    pub fn none() -> Self {
        RetryBudget::default().ratio(0.0).min_per_second(0)
    }

    /// The share of calls retries may add, in effect (see [`ratio`](Self::ratio)).
    pub fn get_ratio(&self) -> f64 {
        self.ratio
    }

    crate::setters::option_accessors! {
        /// Sets the retries allowed per second whatever the calls (default
        /// 10, linkerd's).
        min_per_second / get_min_per_second => min_per_second: u32;

        /// Sets the window (default 10 s, linkerd's; at least 1 s, at most 1 h).
        ttl / get_ttl => ttl: Duration,
            |ttl| ttl.clamp(Duration::from_secs(1), Duration::from_secs(3600));
    }
}

/// A channel's budget as calls and retries use it. Cheap enough for every call: one lock
/// held for a few additions.
#[derive(Debug)]
pub(crate) struct Budget {
    /// Tokens a call deposits.
    deposit: i64,
    /// Tokens always there.
    reserve: i64,
    slot: Duration,
    state: Mutex<Slots>,
}

#[derive(Debug)]
struct Slots {
    /// Net tokens per slot, the current one at `current`.
    net: [i64; SLOTS],
    current: usize,
    /// When the current slot began.
    since: Instant,
    /// Sum of `net`.
    sum: i64,
}

impl Budget {
    /// The budget `options` describe, starting now.
    pub fn new(options: RetryBudget) -> Self {
        let deposit = (SCALE as f64 * options.ratio).round() as i64;
        let reserve = i64::from(options.min_per_second)
            .saturating_mul(options.ttl.as_secs() as i64)
            .saturating_mul(SCALE);
        Budget {
            deposit,
            reserve,
            slot: options.ttl / SLOTS as u32,
            state: Mutex::new(Slots {
                net: [0; SLOTS],
                current: 0,
                since: Instant::now(),
                sum: 0,
            }),
        }
    }

    /// A call was made.
    pub fn deposit(&self) {
        let mut slots = self.slots();
        let current = slots.current;
        slots.net[current] += self.deposit;
        slots.sum += self.deposit;
    }

    /// Takes a retry's cost if the budget has it; whether it had.
    pub fn withdraw(&self) -> bool {
        let mut slots = self.slots();
        if slots.sum + self.reserve < SCALE {
            return false;
        }
        let current = slots.current;
        slots.net[current] -= SCALE;
        slots.sum -= SCALE;
        true
    }

    /// Retries the budget allows now.
    pub fn left(&self) -> u64 {
        let slots = self.slots();
        u64::try_from((slots.sum + self.reserve) / SCALE).unwrap_or(0)
    }

    /// The slots, those older than the window forgotten.
    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        let mut slots = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let mut passed =
            now.saturating_duration_since(slots.since).as_nanos() / self.slot.as_nanos().max(1);
        if passed >= SLOTS as u128 {
            slots.net = [0; SLOTS];
            slots.sum = 0;
            slots.since = now;
            return slots;
        }
        while passed > 0 {
            let current = (slots.current + 1) % SLOTS;
            slots.current = current;
            let forgotten = std::mem::take(&mut slots.net[current]);
            slots.sum -= forgotten;
            slots.since += self.slot;
            passed -= 1;
        }
        slots
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn retries_add_at_most_the_ratio_plus_the_floor() {
        let budget = Budget::new(RetryBudget::default());
        // The floor alone: 10 per second over 10 s.
        assert_eq!(budget.left(), 100);
        let mut retried = 0;
        // 200 calls per second for 30 s, each wanting a retry.
        for _ in 0..300 {
            for _ in 0..20 {
                budget.deposit();
                if budget.withdraw() {
                    retried += 1;
                }
            }
            tokio::time::advance(Duration::from_millis(100)).await;
        }
        // 20% of 6,000 calls plus 10 per second, plus the reserve's one start.
        assert!(retried <= 1_200 + 300 + 100, "{retried}");
        assert!(retried >= 1_200 + 300 - 50, "{retried}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_channel_keeps_its_floor_and_old_calls_are_forgotten() {
        let budget = Budget::new(RetryBudget::default().min_per_second(1));
        for _ in 0..1_000 {
            budget.deposit();
        }
        assert_eq!(budget.left(), 200 + 10);
        tokio::time::advance(Duration::from_secs(11)).await;
        assert_eq!(budget.left(), 10, "the deposits left the window");
        for _ in 0..10 {
            assert!(budget.withdraw());
        }
        assert!(!budget.withdraw(), "the floor is spent");
    }

    #[test]
    fn no_budget_never_retries() {
        let budget = Budget::new(RetryBudget::none());
        for _ in 0..10_000 {
            budget.deposit();
        }
        assert!(!budget.withdraw());
        assert_eq!(budget.left(), 0);
    }
}
