//! Java's `leastactive`: the endpoint with the fewest calls in flight.
//!
//! As Java: the candidates with the least in flight are gathered; one alone is taken (even
//! of weight 0); several are drawn among by weight, uniformly when their weights are equal
//! or all 0. Java counts in-flight calls per provider and method in its process; here they
//! are this channel's calls to the endpoint, all methods together.
//!
//! Java counts them only when the consumer sets `actives` (its `ActiveLimitFilter` does the
//! counting); without it Java's `leastactive` sees every provider idle and draws by weight.
//! Here they are always counted: the name promises the least loaded.

use rand::Rng;

use super::{Candidate, random};

/// The index of the endpoint `leastactive` calls among `candidates` (non-empty); `ties` is
/// scratch space, kept between calls so that none allocates.
pub(super) fn select(
    candidates: &[Candidate<'_>],
    ties: &mut Vec<usize>,
    rng: &mut impl Rng,
) -> usize {
    random::among_least(candidates, |c| c.active, ties, rng)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{loaded, shares};
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn only_the_least_loaded_are_picked() {
        let candidates = loaded(&[(100, 3), (100, 1), (100, 2), (100, 1)]);
        let (mut rng, mut ties) = (StdRng::seed_from_u64(5), Vec::new());
        let s = shares(4, 20_000, || select(&candidates, &mut ties, &mut rng));
        assert_eq!((s[0], s[2]), (0.0, 0.0), "{s:?}");
        assert!((s[1] - 0.5).abs() < 0.015, "equal weights: uniform, {s:?}");
    }

    #[test]
    fn ties_are_drawn_by_weight() {
        let candidates = loaded(&[(100, 0), (300, 0), (900, 4), (0, 0)]);
        let (mut rng, mut ties) = (StdRng::seed_from_u64(6), Vec::new());
        let s = shares(4, 40_000, || select(&candidates, &mut ties, &mut rng));
        assert!((s[1] - 0.75).abs() < 0.01, "{s:?}");
        assert_eq!(
            (s[2], s[3]),
            (0.0, 0.0),
            "busier, or weight 0 among ties: {s:?}"
        );
    }

    #[test]
    fn a_lone_least_loaded_is_taken_whatever_its_weight() {
        let candidates = loaded(&[(100, 2), (0, 1), (500, 9)]);
        let (mut rng, mut ties) = (StdRng::seed_from_u64(7), Vec::new());
        for _ in 0..100 {
            assert_eq!(select(&candidates, &mut ties, &mut rng), 1, "as Java");
        }
        let all_zero = loaded(&[(0, 1), (0, 1), (0, 4)]);
        let s = shares(3, 10_000, || select(&all_zero, &mut ties, &mut rng));
        assert!(s[2] == 0.0 && (s[0] - 0.5).abs() < 0.02, "{s:?}");
    }
}
