//! Java's `random`: an endpoint drawn in proportion to its weight, blind to load.
//!
//! The draw is also how `leastactive` and `shortestresponse` break their ties (over the
//! candidates [`among_least`] gathers), and what `consistenthash` falls back to when a call
//! has nothing to hash, so it is written once here over any subset of the candidates.
//!
//! As Java: uniform when every weight is equal (or all are 0), else an offset drawn in
//! `0..total` and walked over the weights, so a weight-0 endpoint is never drawn while
//! another weighs more.

use rand::Rng;

use super::Candidate;

/// The index of the endpoint `random` calls among `candidates` (non-empty).
pub(super) fn select(candidates: &[Candidate<'_>], rng: &mut impl Rng) -> usize {
    among(candidates, 0..candidates.len(), rng)
}

/// One of `indexes` (non-empty, into `candidates`), drawn by weight as Java draws: uniform
/// when their weights are all equal or sum to 0, else in proportion to the weights.
pub(super) fn among<I>(candidates: &[Candidate<'_>], indexes: I, rng: &mut impl Rng) -> usize
where
    I: ExactSizeIterator<Item = usize> + Clone,
{
    let count = indexes.len();
    let mut all = indexes.clone();
    let Some(first) = all.next() else {
        return 0;
    };
    if count == 1 {
        return first;
    }
    let first_weight = candidates[first].weight;
    let mut total = u64::from(first_weight);
    let mut same = true;
    for i in all {
        let weight = candidates[i].weight;
        total += u64::from(weight);
        same &= weight == first_weight;
    }
    if !same && total > 0 {
        let mut offset = rng.random_range(0..total);
        for i in indexes.clone() {
            let weight = u64::from(candidates[i].weight);
            if offset < weight {
                return i;
            }
            offset -= weight;
        }
    }
    indexes
        .clone()
        .nth(rng.random_range(0..count))
        .unwrap_or(first)
}

/// One of the candidates (non-empty) whose `key` is least, drawn by weight among them
/// ([`among`]): how `leastactive` and `shortestresponse` pick. `ties` is scratch space,
/// kept between calls so that none allocates.
pub(super) fn among_least<K: Ord + Copy>(
    candidates: &[Candidate<'_>],
    key: impl Fn(&Candidate<'_>) -> K,
    ties: &mut Vec<usize>,
    rng: &mut impl Rng,
) -> usize {
    ties.clear();
    let mut least = None;
    for (i, c) in candidates.iter().enumerate() {
        let k = key(c);
        if least.is_none_or(|least| k < least) {
            least = Some(k);
            ties.clear();
        }
        if least == Some(k) {
            ties.push(i);
        }
    }
    among(candidates, ties.iter().copied(), rng)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{idle, shares};
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn random_shares(weights: &[u32]) -> Vec<f64> {
        let candidates = idle(weights);
        let mut rng = StdRng::seed_from_u64(11);
        shares(weights.len(), 40_000, || select(&candidates, &mut rng))
    }

    #[test]
    fn shares_follow_the_weights() {
        let s = random_shares(&[300, 100]);
        assert!((s[0] - 0.75).abs() < 0.01, "{s:?}");
        let s = random_shares(&[10, 20, 70, 0, 0, 100]);
        assert!(
            (s[2] - 0.35).abs() < 0.01 && (s[5] - 0.5).abs() < 0.01,
            "{s:?}"
        );
        assert_eq!((s[3], s[4]), (0.0, 0.0), "weight 0 never drawn");
    }

    #[test]
    fn equal_or_zero_weights_draw_uniformly() {
        for weights in [[100; 4], [0; 4], [7; 4]] {
            let s = random_shares(&weights);
            assert!(
                s.iter().all(|x| (x - 0.25).abs() < 0.01),
                "{weights:?}: {s:?}"
            );
        }
    }

    #[test]
    fn among_draws_only_the_given_indexes() {
        let candidates = idle(&[100, 0, 300, 100]);
        let mut rng = StdRng::seed_from_u64(3);
        let ties = [1usize, 2];
        let s = shares(4, 10_000, || {
            among(&candidates, ties.iter().copied(), &mut rng)
        });
        assert_eq!(s, [0.0, 0.0, 1.0, 0.0], "weight 0 loses to weight 300");
        let ties = [0usize, 3];
        let s = shares(4, 20_000, || {
            among(&candidates, ties.iter().copied(), &mut rng)
        });
        assert!(
            s[1] == 0.0 && s[2] == 0.0 && (s[0] - 0.5).abs() < 0.015,
            "{s:?}"
        );
        assert_eq!(
            among(&candidates, [1usize].into_iter(), &mut rng),
            1,
            "one is taken"
        );
    }
}
