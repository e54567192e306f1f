//! The choice of one endpoint among the routed, healthy ones: weighted as Dubbo Java 3.3's
//! default `RandomLoadBalance`, and aware of load as power of two choices.
//!
//! Two candidates are drawn at random in proportion to their effective weights (uniformly
//! when every weight is equal, or all are 0, as Java); the one with fewer calls in flight
//! per unit of weight is taken, the first drawn on a tie. While calls do not overlap every
//! load is 0, so each endpoint's share is exactly its weight's, as with Java; under load the
//! slower of two gets fewer calls. An endpoint of weight 0 is never drawn while another
//! weighs more; a single endpoint is always taken.

use rand::Rng;

/// The index of the endpoint to call among candidates of `weights` with `loads` calls in
/// flight (equal lengths, at least one).
pub(crate) fn pick(weights: &[u32], loads: &[usize], rng: &mut impl Rng) -> usize {
    let n = weights.len();
    if n <= 1 {
        return 0;
    }
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    let uniform = total == 0 || weights.iter().all(|&w| w == weights[0]);
    let a = draw(weights, total, uniform, None, rng).unwrap_or(0);
    let Some(b) = draw(weights, total, uniform, Some(a), rng) else {
        return a;
    };
    // Fewer in flight per unit of weight wins: loads[a] / wa <= loads[b] / wb.
    let (wa, wb) = (u128::from(weights[a].max(1)), u128::from(weights[b].max(1)));
    let (la, lb) = (loads[a] as u128, loads[b] as u128);
    if la * wb <= lb * wa { a } else { b }
}

/// One index drawn at random, leaving out `except`: uniformly when `uniform`, else in
/// proportion to the weights (never one of weight 0). `None` when nothing is left to draw.
fn draw(
    weights: &[u32],
    total: u64,
    uniform: bool,
    except: Option<usize>,
    rng: &mut impl Rng,
) -> Option<usize> {
    let n = weights.len();
    if uniform {
        return match except {
            None => Some(rng.random_range(0..n)),
            Some(e) => {
                let i = rng.random_range(0..n - 1);
                Some(if i >= e { i + 1 } else { i })
            }
        };
    }
    let total = total - except.map_or(0, |e| u64::from(weights[e]));
    if total == 0 {
        return None;
    }
    let mut offset = rng.random_range(0..total);
    for (i, &w) in weights.iter().enumerate() {
        if Some(i) == except {
            continue;
        }
        let w = u64::from(w);
        if offset < w {
            return Some(i);
        }
        offset -= w;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn shares(weights: &[u32], calls: usize) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(7);
        let loads = vec![0; weights.len()];
        let mut counts = vec![0usize; weights.len()];
        for _ in 0..calls {
            counts[pick(weights, &loads, &mut rng)] += 1;
        }
        counts.iter().map(|&c| c as f64 / calls as f64).collect()
    }

    #[test]
    fn idle_shares_follow_the_weights() {
        let s = shares(&[300, 100], 40_000);
        assert!((s[0] - 0.75).abs() < 0.01, "{s:?}");
        let s = shares(&[100, 100, 100, 100], 40_000);
        assert!(s.iter().all(|x| (x - 0.25).abs() < 0.01), "{s:?}");
        let s = shares(&[10, 20, 70], 40_000);
        assert!(
            (s[2] - 0.7).abs() < 0.01 && (s[0] - 0.1).abs() < 0.01,
            "{s:?}"
        );
    }

    #[test]
    fn weight_zero_is_never_picked_unless_all_are_zero() {
        let s = shares(&[0, 100, 0], 10_000);
        assert_eq!(s, [0.0, 1.0, 0.0]);
        let s = shares(&[0, 0], 20_000);
        assert!((s[0] - 0.5).abs() < 0.02, "all zero: uniform, {s:?}");
        assert_eq!(shares(&[0], 10), [1.0], "one is always taken");
    }

    #[test]
    fn the_less_loaded_per_weight_of_two_wins() {
        let mut rng = StdRng::seed_from_u64(1);
        // Equal weights, the first busy: two distinct candidates, so the idle one wins.
        for _ in 0..1_000 {
            assert_eq!(pick(&[100, 100], &[5, 0], &mut rng), 1);
        }
        // A busy endpoint beside one of weight 0: the weightless one is never drawn.
        for _ in 0..1_000 {
            assert_eq!(pick(&[100, 0], &[50, 0], &mut rng), 0);
        }
        // Three times the weight carrying three times the load is balance: a tie each
        // time, so the weighted first draw decides and the shares stay the weights'.
        let mut heavy = 0usize;
        for _ in 0..20_000 {
            heavy += usize::from(pick(&[300, 100], &[3, 1], &mut rng) == 0);
        }
        assert!((heavy as f64 / 20_000.0 - 0.75).abs() < 0.015, "{heavy}");
    }
}
