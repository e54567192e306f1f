//! One condition of a rule as written, to show an operator how a rule reads
//! (`introspect rule check`): which calls it applies to and where they go.

use super::grammar::{Condition, java_trim};
use super::v31::MultiDest;

/// One condition as written: its `when` and its destinations.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConditionItem<'a> {
    /// Which calls it applies to: the v3.0 text before `=>`, or the v3.1 `from.match`;
    /// empty (or `true`) is every call.
    pub when: &'a str,
    /// Where those calls go: each destination's text (the v3.0 `then`, or a v3.1 `to`'s
    /// `match`) and, in v3.1, its weight. None at all sends the calls to no provider.
    pub then: Vec<(&'a str, Option<u32>)>,
}

impl<'a> ConditionItem<'a> {
    /// A v3.0 `when => then`, split where Java splits it.
    pub(super) fn v30(condition: &'a Condition) -> ConditionItem<'a> {
        let text = condition.text.as_str();
        let (when, then) = match text.find("=>") {
            Some(i) => (java_trim(&text[..i]), java_trim(&text[i + 2..])),
            None => ("", java_trim(text)),
        };
        let then = match condition.then {
            Some(_) => vec![(then, None)],
            None => Vec::new(),
        };
        ConditionItem { when, then }
    }

    /// A v3.1 `from` and its weighted `to` destinations.
    pub(super) fn v31(condition: &'a MultiDest) -> ConditionItem<'a> {
        ConditionItem {
            when: &condition.text,
            then: condition
                .to
                .iter()
                .map(|d| (d.text.as_str(), Some(d.weight)))
                .collect(),
        }
    }
}
