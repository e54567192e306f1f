//! One v3.1 condition: `from: {match: ...}` and several `to: [{match: ..., weight: N}]`
//! destinations (`MultiDestCondition`, `MultiDestConditionRouter.init` in Java 3.3).
//!
//! Unlike v3.0: `consumer.`/`provider.` are not removed; a blank or `false` destination
//! `match` keeps every provider (Java's empty map matches all); no `to` at all blacklists
//! the consumer. Java reads nothing else of a condition (no `trafficDisable`, `ratio`,
//! `priority` or `force` per condition in 3.3); those are ignored.

use serde_yaml_ng::{Mapping, Value};

use super::grammar::{is_blank, parse_terms};
use super::term::Term;
use crate::governance::rule_yaml::{field as get, int_value, scalar_text, short_kind as kind};

/// The weight of a destination that gives none, or one of 0 or less
/// (`DefaultRouteConditionSubSetWeight`).
pub(super) const DEFAULT_DESTINATION_WEIGHT: u32 = 100;

/// One destination: the providers it keeps and its weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Destination {
    /// Its `match`, as written.
    pub(super) text: String,
    /// The providers kept satisfy every term; no terms keeps every provider.
    pub(super) then: Vec<Term>,
    /// Its weight, at least 1.
    pub(super) weight: u32,
}

/// One v3.1 condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct MultiDest {
    /// Its `from.match`, as written (empty when absent).
    pub(super) text: String,
    /// The call must satisfy every term; none means every call.
    pub(super) when: Vec<Term>,
    /// The destinations, in order; none blacklists the consumer.
    pub(super) to: Vec<Destination>,
}

impl MultiDest {
    /// Parses one element of a v3.1 rule's `conditions`.
    pub(super) fn parse(value: &Value) -> Result<MultiDest, String> {
        let Value::Mapping(map) = value else {
            return Err(format!(
                "a v3.1 condition must be a map, not {}",
                kind(value)
            ));
        };
        let from = match get(map, "from") {
            None => None,
            Some(Value::Mapping(from)) => match_text(from, "from.match")?,
            Some(other) => return Err(format!("from must be a map, not {}", kind(other))),
        };
        let text = from.unwrap_or_default();
        let when = if is_blank(&text) || text == "true" {
            Vec::new()
        } else {
            parse_terms(&text)?
        };
        let to = match get(map, "to") {
            None => Vec::new(),
            Some(Value::Sequence(items)) => items
                .iter()
                .map(Destination::parse)
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(format!("to must be a list, not {}", kind(other))),
        };
        Ok(MultiDest { text, when, to })
    }
}

impl Destination {
    /// Parses one element of `to`. A weight that is not an int is an error (Java's
    /// `Integer.valueOf` throws and the rule does not apply); 0 or less is the default.
    fn parse(value: &Value) -> Result<Destination, String> {
        let Value::Mapping(map) = value else {
            return Err(format!("a destination must be a map, not {}", kind(value)));
        };
        let text = match_text(map, "to.match")?.unwrap_or_default();
        let then = if is_blank(&text) || text == "false" {
            Vec::new()
        } else {
            parse_terms(&text)?
        };
        let weight = match get(map, "weight") {
            None => DEFAULT_DESTINATION_WEIGHT,
            Some(w) => match int_value(w, "weight")? {
                w if w <= 0 => DEFAULT_DESTINATION_WEIGHT,
                w => w.unsigned_abs(),
            },
        };
        Ok(Destination { text, then, weight })
    }
}

/// The `match` of a `from` or `to` map, as Java's conversion to a map of strings gives it.
fn match_text(map: &Mapping, field: &str) -> Result<Option<String>, String> {
    match get(map, "match") {
        None => Ok(None),
        Some(v) => scalar_text(v)
            .map(Some)
            .ok_or_else(|| format!("{field} must be a string, not {}", kind(v))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<MultiDest, String> {
        MultiDest::parse(&serde_yaml_ng::from_str(text).expect("yaml"))
    }

    #[test]
    fn from_and_weighted_destinations() {
        let c = parse(
            "from: {match: method=a}\n\
             to:\n  - match: region=hz\n    weight: 20\n  - match: region=bj\n  - match: ''\n    weight: 0\n",
        )
        .expect("parses");
        assert_eq!(c.when.len(), 1);
        let weights: Vec<u32> = c.to.iter().map(|d| d.weight).collect();
        assert_eq!(weights, [20, 100, 100]);
        assert!(c.to[2].then.is_empty(), "blank match keeps every provider");
    }

    #[test]
    fn absent_parts_and_bad_types() {
        let c = parse("from:\n  match:\nto:\n  - match: env!=gray\n").expect("parses");
        assert!(c.when.is_empty());
        let c =
            parse("from: {match: env=gray}\ntrafficDisable: true\nratio: 20\n").expect("parses");
        assert!(c.to.is_empty());
        assert!(parse("'method=a => b=c'").is_err());
        assert!(parse("from: method=a").is_err());
        assert!(parse("to: {match: a=b}").is_err());
        assert!(parse("to: [{match: a=b, weight: heavy}]").is_err());
        assert!(parse("to: [{match: [a]}]").is_err());
        assert!(parse("to: [{match: 'a==b'}]").is_err());
    }
}
