//! Condition rules (`{key}.condition-router` in the config centre) as Dubbo Java 3.3 reads
//! and applies them: a pure model, no I/O.
//!
//! A rule holds conditions applied in order, each to what the previous left. In v3.0 (and
//! without `configVersion`) a condition is `when => then`: a call matching `when` goes
//! only to the providers matching `then`. In v3.1 it is `from` and weighted `to`
//! destinations, of which each call takes one at random.
//!
//! * `rule`: the document ([`ConditionRule`]) and what a call's routing reads.
//! * `grammar`: the v3.0 `when => then` expressions and Java's tokeniser.
//! * `v31`: the multi-destination conditions.
//! * `term`: one `key=patterns` term and where its key reads (call, provider).
//! * `pattern`: globs, integer ranges and `$` references.
//! * `route`: the chain of conditions and its outcome ([`ConditionRoute`]).
//! * `item`: a condition as written, to show it ([`ConditionItem`]).

mod grammar;
mod item;
mod pattern;
mod route;
mod rule;
mod term;
mod v31;

#[cfg(test)]
mod forms_tests;
#[cfg(test)]
mod tests;

pub use item::ConditionItem;
pub use route::{ConditionRoute, MAX_DESTINATIONS};
pub use rule::{CallReads, ConditionRule, ConditionVersion};
