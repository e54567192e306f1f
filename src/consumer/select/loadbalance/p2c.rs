//! Introspect's default (`p2c`): weighted as Dubbo Java's default `random`, and aware of
//! load as power of two choices.
//!
//! Two candidates are drawn at random in proportion to their effective weights (uniformly
//! when every weight is equal, or all are 0, as Java); the one with fewer calls in flight
//! per unit of weight is taken, the first drawn on a tie. While calls do not overlap every
//! load is 0, so each endpoint's share is exactly its weight's, as with Java; under load the
//! slower of two gets fewer calls. An endpoint of weight 0 is never drawn while another
//! weighs more; a single endpoint is always taken.

use rand::Rng;

use super::Candidate;

/// The index of the endpoint to call among `candidates` (non-empty).
pub(super) fn select(candidates: &[Candidate<'_>], rng: &mut impl Rng) -> usize {
    let n = candidates.len();
    if n <= 1 {
        return 0;
    }
    let first_weight = candidates[0].weight;
    let mut total = 0u64;
    let mut uniform = true;
    for c in candidates {
        total += u64::from(c.weight);
        uniform &= c.weight == first_weight;
    }
    let uniform = uniform || total == 0;
    let a = draw(candidates, total, uniform, None, rng).unwrap_or(0);
    let Some(b) = draw(candidates, total, uniform, Some(a), rng) else {
        return a;
    };
    // Fewer in flight per unit of weight wins: active[a] / wa <= active[b] / wb.
    let (ca, cb) = (&candidates[a], &candidates[b]);
    let (wa, wb) = (u128::from(ca.weight.max(1)), u128::from(cb.weight.max(1)));
    let (la, lb) = (ca.active as u128, cb.active as u128);
    if la * wb <= lb * wa { a } else { b }
}

/// One index drawn at random, leaving out `except`: uniformly when `uniform`, else in
/// proportion to the weights (never one of weight 0). `None` when nothing is left to draw.
fn draw(
    candidates: &[Candidate<'_>],
    total: u64,
    uniform: bool,
    except: Option<usize>,
    rng: &mut impl Rng,
) -> Option<usize> {
    let n = candidates.len();
    if uniform {
        return match except {
            None => Some(rng.random_range(0..n)),
            Some(e) => {
                let i = rng.random_range(0..n - 1);
                Some(if i >= e { i + 1 } else { i })
            }
        };
    }
    let total = total - except.map_or(0, |e| u64::from(candidates[e].weight));
    if total == 0 {
        return None;
    }
    let mut offset = rng.random_range(0..total);
    for (i, c) in candidates.iter().enumerate() {
        if Some(i) == except {
            continue;
        }
        let w = u64::from(c.weight);
        if offset < w {
            return Some(i);
        }
        offset -= w;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::tests::{idle, loaded, shares};
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn idle_shares(weights: &[u32], calls: usize) -> Vec<f64> {
        let candidates = idle(weights);
        let mut rng = StdRng::seed_from_u64(7);
        shares(weights.len(), calls, || select(&candidates, &mut rng))
    }

    #[test]
    fn idle_shares_follow_the_weights() {
        let s = idle_shares(&[300, 100], 40_000);
        assert!((s[0] - 0.75).abs() < 0.01, "{s:?}");
        let s = idle_shares(&[100, 100, 100, 100], 40_000);
        assert!(s.iter().all(|x| (x - 0.25).abs() < 0.01), "{s:?}");
        let s = idle_shares(&[10, 20, 70], 40_000);
        assert!(
            (s[2] - 0.7).abs() < 0.01 && (s[0] - 0.1).abs() < 0.01,
            "{s:?}"
        );
    }

    #[test]
    fn weight_zero_is_never_picked_unless_all_are_zero() {
        let s = idle_shares(&[0, 100, 0], 10_000);
        assert_eq!(s, [0.0, 1.0, 0.0]);
        let s = idle_shares(&[0, 0], 20_000);
        assert!((s[0] - 0.5).abs() < 0.02, "all zero: uniform, {s:?}");
        assert_eq!(idle_shares(&[0], 10), [1.0], "one is always taken");
    }

    #[test]
    fn the_less_loaded_per_weight_of_two_wins() {
        let mut rng = StdRng::seed_from_u64(1);
        // Equal weights, the first busy: two distinct candidates, so the idle one wins.
        let busy_first = loaded(&[(100, 5), (100, 0)]);
        for _ in 0..1_000 {
            assert_eq!(select(&busy_first, &mut rng), 1);
        }
        // A busy endpoint beside one of weight 0: the weightless one is never drawn.
        let beside_zero = loaded(&[(100, 50), (0, 0)]);
        for _ in 0..1_000 {
            assert_eq!(select(&beside_zero, &mut rng), 0);
        }
        // Three times the weight carrying three times the load is balance: a tie each
        // time, so the weighted first draw decides and the shares stay the weights'.
        let balanced = loaded(&[(300, 3), (100, 1)]);
        let s = shares(2, 20_000, || select(&balanced, &mut rng));
        assert!((s[0] - 0.75).abs() < 0.015, "{s:?}");
    }
}
