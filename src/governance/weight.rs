//! The effective weight of a provider, as Dubbo Java 3.3's `AbstractLoadBalance.getWeight`
//! computes it: the published weight, reduced during the provider's warm-up.

/// A provider's weight when it publishes none.
pub const DEFAULT_WEIGHT: i32 = 100;
/// A provider's warm-up period when it publishes none: 10 minutes.
pub const DEFAULT_WARMUP_MS: i32 = 600_000;

/// The weight calls give a provider of published `weight` and `warmup_ms`, started at
/// `timestamp_ms` (ms since the epoch; 0 when unknown), at `now_ms`.
///
/// As Java: a negative weight weighs 0; warm-up applies only while the weight is positive,
/// the start time known and `0 < uptime < warmup`, and then the weight is
/// `max(1, min(weight, uptime / (warmup / weight)))` (in `float`, as Java divides); a start
/// time in the future (clocks apart) weighs 1.
pub fn effective_weight(weight: i32, warmup_ms: i32, timestamp_ms: i64, now_ms: i64) -> u32 {
    if weight > 0 && timestamp_ms > 0 {
        let uptime = now_ms.saturating_sub(timestamp_ms);
        if uptime < 0 {
            return 1;
        }
        if uptime > 0 && uptime < i64::from(warmup_ms) {
            // Java casts the uptime to int here: it is below `warmup`, an int.
            let uptime = uptime as i32;
            return warmup_weight(uptime, warmup_ms, weight).unsigned_abs();
        }
    }
    weight.max(0).unsigned_abs()
}

/// Java's `calculateWarmupWeight`: `(int) (uptime / ((float) warmup / weight))`, at least 1
/// and at most `weight`.
fn warmup_weight(uptime: i32, warmup: i32, weight: i32) -> i32 {
    let ww = (uptime as f32 / (warmup as f32 / weight as f32)) as i32;
    if ww < 1 { 1 } else { ww.min(weight) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const START: i64 = 1_700_000_000_000;

    #[test]
    fn without_a_start_time_the_published_weight_is_the_weight() {
        assert_eq!(effective_weight(100, DEFAULT_WARMUP_MS, 0, START), 100);
        assert_eq!(effective_weight(300, DEFAULT_WARMUP_MS, 0, START), 300);
        assert_eq!(effective_weight(0, DEFAULT_WARMUP_MS, 0, START), 0);
        assert_eq!(
            effective_weight(-5, DEFAULT_WARMUP_MS, 0, START),
            0,
            "negative weighs 0"
        );
    }

    #[test]
    fn warm_up_grows_the_weight_linearly_to_the_published_one() {
        let at = |ms: i64| effective_weight(100, DEFAULT_WARMUP_MS, START, START + ms);
        assert_eq!(at(1), 1, "at least 1");
        assert_eq!(at(6_000), 1);
        assert_eq!(at(60_000), 10);
        assert_eq!(at(300_000), 50);
        assert_eq!(at(599_999), 99);
        assert_eq!(at(600_000), 100, "warm-up over");
        assert_eq!(at(3_600_000), 100);
        assert_eq!(at(0), 100, "an uptime of 0 is not in warm-up, as in Java");
    }

    #[test]
    fn a_start_time_ahead_of_the_clock_weighs_one() {
        assert_eq!(
            effective_weight(300, DEFAULT_WARMUP_MS, START, START - 1),
            1
        );
    }

    #[test]
    fn zero_or_negative_weights_never_warm_up() {
        assert_eq!(effective_weight(0, DEFAULT_WARMUP_MS, START, START + 10), 0);
        assert_eq!(
            effective_weight(-1, DEFAULT_WARMUP_MS, START, START - 10),
            0
        );
    }

    #[test]
    fn a_short_or_no_warm_up() {
        assert_eq!(effective_weight(300, 1_000, START, START + 500), 150);
        assert_eq!(effective_weight(300, 0, START, START + 500), 300);
        assert_eq!(effective_weight(300, -1, START, START + 500), 300);
    }
}
