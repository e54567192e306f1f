//! Bounded label values: at most N distinct values of a label taken from store data, the
//! rest folded into one [`OTHER`] value.

use std::collections::{BTreeMap, BTreeSet};

/// The label value that stands for every value past the bound.
pub const OTHER: &str = "other";

/// Admits label values first come, first served, up to a bound; a value once admitted keeps
/// its own series for the life of the publisher, so series never change meaning.
#[derive(Debug, Clone)]
pub(crate) struct BoundedLabels {
    max: usize,
    admitted: BTreeSet<String>,
}

impl BoundedLabels {
    /// Admits at most `max` distinct values (`0`: every value is [`OTHER`]).
    pub(crate) fn new(max: usize) -> Self {
        BoundedLabels {
            max,
            admitted: BTreeSet::new(),
        }
    }

    /// The label value to use for `value`: itself when admitted (now or before), else
    /// [`OTHER`]. The value `other` itself is admitted like any other name but shares the
    /// [`OTHER`] series.
    pub(crate) fn label<'a>(&mut self, value: &'a str) -> &'a str {
        if self.admitted.contains(value) {
            return value;
        }
        if self.admitted.len() < self.max {
            self.admitted.insert(value.to_owned());
            return value;
        }
        OTHER
    }

    /// Folds `per_value` into label values: admitted values keep their count, the others
    /// are summed under [`OTHER`]. Every value admitted before and absent now is listed with
    /// 0, so a gauge that went away reads 0 rather than its last value.
    pub(crate) fn fold(&mut self, per_value: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        for (value, &n) in per_value {
            let label = self.label(value).to_owned();
            *out.entry(label).or_default() += n;
        }
        for value in &self.admitted {
            out.entry(value.clone()).or_default();
        }
        if self.admitted.len() >= self.max {
            out.entry(OTHER.to_owned()).or_default();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn values_past_the_bound_fold_into_other() {
        let mut labels = BoundedLabels::new(2);
        let folded = labels.fold(&counts(&[("a", 1), ("b", 2), ("c", 3), ("d", 4)]));
        assert_eq!(folded, counts(&[("a", 1), ("b", 2), ("other", 7)]));
    }

    #[test]
    fn admitted_values_keep_their_series_and_read_zero_when_gone() {
        let mut labels = BoundedLabels::new(2);
        labels.fold(&counts(&[("a", 1), ("b", 2)]));
        let folded = labels.fold(&counts(&[("c", 5), ("b", 1)]));
        assert_eq!(folded, counts(&[("a", 0), ("b", 1), ("other", 5)]));
    }

    #[test]
    fn below_the_bound_there_is_no_other_series() {
        let mut labels = BoundedLabels::new(100);
        let folded = labels.fold(&counts(&[("a", 1)]));
        assert_eq!(folded, counts(&[("a", 1)]));
    }

    #[test]
    fn a_bound_of_zero_folds_everything() {
        let mut labels = BoundedLabels::new(0);
        assert_eq!(labels.label("a"), OTHER);
        assert_eq!(
            labels.fold(&counts(&[("a", 1), ("b", 1)])),
            counts(&[("other", 2)])
        );
    }
}
