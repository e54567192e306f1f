//! Routing one call through a rule's conditions, as Java chains them: each condition is a
//! router of its own, applied in order to what the previous one left
//! (`ListenableStateRouter.doRoute`), and a v3.1 condition with several matching
//! destinations takes one of them at random per call (`DestinationSet.randDestination`).

use std::collections::BTreeMap;

use super::grammar::Condition;
use super::term::{Eval, Term};
use super::v31::MultiDest;
use crate::governance::{CallFacts, ProviderFacts};

/// The most destination subsets one call may end in (several v3.1 conditions each taking
/// a destination at random multiply them); past it the rule is not applied.
pub const MAX_DESTINATIONS: usize = 256;

/// What a condition rule does with one call's providers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConditionRoute {
    /// The rule leaves the input as it is: disabled, no provider to route, no condition's
    /// `when` matched, or no provider matched a `then` and the rule is not forced (Java
    /// then returns every provider, with a warning). `why` says which.
    Unchanged {
        /// Why the input stays as it is.
        why: String,
    },
    /// The rule keeps these providers (indices into the providers, a subset of the input,
    /// in its order); none when a `then` is empty (the consumer is blacklisted) or the rule
    /// is forced and nothing matched. `why` names the conditions that decided.
    Kept {
        /// The providers kept.
        indices: Vec<usize>,
        /// The conditions that decided, and how.
        why: String,
    },
    /// v3.1: several subsets, of which each call takes one at random in proportion to its
    /// weight, as Java draws per call. The weights are the chances Java's draw gives in
    /// effect, reduced to lowest terms: Java's draw favours the first destination by one
    /// and disfavours the last by one (weights 100 and 100 draw as 101 to 99; a last
    /// destination of weight 1 is never taken and is left out). Only subsets Java can
    /// reach are listed; one is empty only when a later forced condition left nothing.
    Destinations {
        /// Each subset (indices into the providers, in input order) and its weight.
        choices: Vec<(Vec<usize>, u32)>,
        /// The conditions that decided, and how.
        why: String,
    },
    /// The rule cannot be evaluated here: a `when` that decides reads a call argument
    /// (`arguments[i]`), which this crate cannot see in an opaque request body. The rule
    /// is not applied; it is never guessed.
    NotApplicable {
        /// Which condition and term, and why.
        reason: String,
    },
}

/// One condition of a rule, v3.0 or v3.1, with the label its reasons use.
pub(super) enum Step<'r> {
    /// A `when => then` condition.
    V30(&'r Condition),
    /// A `from`/`to` condition.
    V31(&'r MultiDest),
}

impl Step<'_> {
    fn when(&self) -> &[Term] {
        match self {
            Step::V30(c) => &c.when,
            Step::V31(c) => &c.when,
        }
    }

    fn label(&self, n: usize) -> String {
        match self {
            Step::V30(c) => format!("condition {n} {:?}", crate::error::Error::shorten(&c.text)),
            Step::V31(c) => format!(
                "condition {n} (from {:?})",
                crate::error::Error::shorten(&c.text)
            ),
        }
    }
}

/// What one condition does with one subset.
enum Outcome {
    /// It keeps these (possibly none).
    Keep(Vec<usize>, String),
    /// It leaves the subset as it is (nothing matched, not forced).
    Same(String),
    /// It splits the subset among destinations with their effective weights.
    Split(Vec<(Vec<usize>, u128)>, String),
}

/// One subset a call may be routed to, with its weight among all of them.
struct Branch {
    subset: Vec<usize>,
    weight: u128,
}

/// What one step made of one branch: its parts, their weights' sum, and the branch's
/// weight before the step.
struct Parts {
    parts: Vec<(Vec<usize>, u128)>,
    total: u128,
    weight: u128,
}

/// Routes `input` through `steps` in order, `force` being the rule's.
pub(super) fn run(
    steps: &[Step<'_>],
    force: bool,
    call: &CallFacts<'_>,
    providers: &[ProviderFacts<'_>],
    input: &[usize],
) -> ConditionRoute {
    if input.is_empty() {
        return ConditionRoute::Unchanged {
            why: "no providers to route".to_owned(),
        };
    }
    let mut branches = vec![Branch {
        subset: input.to_vec(),
        weight: 1,
    }];
    let mut decided: Vec<String> = Vec::new();
    let mut left: Vec<String> = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        if branches.iter().all(|b| b.subset.is_empty()) {
            break;
        }
        let label = step.label(i + 1);
        match eval_when(step.when(), call) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(key) => {
                return ConditionRoute::NotApplicable {
                    reason: format!(
                        "{label}: its when reads the call argument {key:?}, which is not \
                         known here (the request body is opaque)"
                    ),
                };
            }
        }
        let mut next: Vec<Parts> = Vec::new();
        let mut note: Option<(bool, String)> = None;
        for branch in branches {
            if branch.subset.is_empty() {
                next.push(Parts {
                    parts: vec![(branch.subset, 1)],
                    total: 1,
                    weight: branch.weight,
                });
                continue;
            }
            let outcome = apply(step, force, &branch.subset, call, providers);
            let (parts, total, changed, what) = match outcome {
                Outcome::Keep(kept, what) => (vec![(kept, 1)], 1, true, what),
                Outcome::Same(what) => (vec![(branch.subset, 1)], 1, false, what),
                Outcome::Split(parts, what) => {
                    let total = parts.iter().map(|(_, w)| w).sum();
                    (parts, total, true, what)
                }
            };
            if note.is_none() {
                note = Some((changed, format!("{label} {what}")));
            }
            next.push(Parts {
                parts,
                total,
                weight: branch.weight,
            });
        }
        match note {
            Some((true, n)) => decided.push(n),
            Some((false, n)) => left.push(n),
            None => {}
        }
        branches = match combine(next) {
            Some(b) => b,
            None => {
                return ConditionRoute::NotApplicable {
                    reason: format!(
                        "{label}: more than {MAX_DESTINATIONS} destination subsets to draw from"
                    ),
                };
            }
        };
    }
    if decided.is_empty() {
        let why = if left.is_empty() {
            "no condition's when matched the call".to_owned()
        } else {
            left.join("; ")
        };
        return ConditionRoute::Unchanged { why };
    }
    let why = decided.join("; ");
    if branches.len() == 1 {
        let indices = branches.pop().map(|b| b.subset).unwrap_or_default();
        return ConditionRoute::Kept { indices, why };
    }
    ConditionRoute::Destinations {
        choices: to_u32_weights(branches),
        why,
    }
}

/// Whether the call satisfies every `when` term; `Err(key)` when that turns on a call
/// argument (a term that is false whatever the argument decides first).
fn eval_when<'t>(when: &'t [Term], call: &CallFacts<'_>) -> Result<bool, &'t str> {
    let mut unknown: Option<&str> = None;
    for term in when {
        match term.eval_when(call) {
            Eval::True => {}
            Eval::False => return Ok(false),
            Eval::Unknown => unknown = unknown.or(Some(&term.key)),
        }
    }
    match unknown {
        Some(key) => Err(key),
        None => Ok(true),
    }
}

/// The providers of `subset` that satisfy every term of `then` (all of them for no terms
/// when `empty_keeps_all`, none otherwise, as Java's v3.1 and v3.0 differ there).
fn filter(
    subset: &[usize],
    then: &[Term],
    empty_keeps_all: bool,
    call: &CallFacts<'_>,
    providers: &[ProviderFacts<'_>],
) -> Vec<usize> {
    if then.is_empty() && !empty_keeps_all {
        return Vec::new();
    }
    subset
        .iter()
        .copied()
        .filter(|&i| {
            providers
                .get(i)
                .is_some_and(|p| then.iter().all(|t| t.holds_then(p, call)))
        })
        .collect()
}

/// What `step` (whose `when` matched) does with a non-empty `subset`.
fn apply(
    step: &Step<'_>,
    force: bool,
    subset: &[usize],
    call: &CallFacts<'_>,
    providers: &[ProviderFacts<'_>],
) -> Outcome {
    let nothing = |force: bool| {
        if force {
            Outcome::Keep(
                Vec::new(),
                "matched no provider and the rule is forced: none kept".to_owned(),
            )
        } else {
            Outcome::Same(
                "matched no provider and the rule is not forced: all kept, as Java does".to_owned(),
            )
        }
    };
    match step {
        Step::V30(c) => {
            let Some(then) = &c.then else {
                return Outcome::Keep(
                    Vec::new(),
                    "has an empty then: the consumer is blacklisted".to_owned(),
                );
            };
            let kept = filter(subset, then, false, call, providers);
            if kept.is_empty() {
                return nothing(force);
            }
            let what = format!("kept {} of {}", kept.len(), subset.len());
            Outcome::Keep(kept, what)
        }
        Step::V31(c) => {
            if c.to.is_empty() {
                return Outcome::Keep(
                    Vec::new(),
                    "has no destination: the consumer is blacklisted".to_owned(),
                );
            }
            let mut found: Vec<(Vec<usize>, u128, &str)> = Vec::new();
            for d in &c.to {
                let kept = filter(subset, &d.then, true, call, providers);
                if !kept.is_empty() {
                    found.push((kept, u128::from(d.weight), &d.text));
                }
            }
            match found.len() {
                0 => nothing(force),
                1 => {
                    let (kept, _, text) = found.remove(0);
                    let what = format!(
                        "kept {} of {} by destination {:?}",
                        kept.len(),
                        subset.len(),
                        crate::error::Error::shorten(text)
                    );
                    Outcome::Keep(kept, what)
                }
                n => {
                    let what = format!("draws among {n} destinations by weight");
                    Outcome::Split(java_draw_weights(found), what)
                }
            }
        }
    }
}

/// The chances Java's draw gives each of several destinations: `nextLong(sum)` minus each
/// weight in turn until at most 0, so the first wins one more value and the last one less.
fn java_draw_weights(found: Vec<(Vec<usize>, u128, &str)>) -> Vec<(Vec<usize>, u128)> {
    let last = found.len().saturating_sub(1);
    found
        .into_iter()
        .enumerate()
        .map(|(i, (kept, w, _))| {
            let w = match i {
                0 => w + 1,
                i if i == last => w - 1,
                _ => w,
            };
            (kept, w)
        })
        .filter(|(_, w)| *w > 0)
        .collect()
}

/// The branches after one step: each old branch (weight `w`) split into parts of weights
/// summing to `total`. The weights are brought to a common denominator, equal subsets
/// merged, and reduced; `None` past [`MAX_DESTINATIONS`]. Should the exact weights ever
/// overflow (many draws of huge weights in a row), they are approximated to 52 bits.
fn combine(next: Vec<Parts>) -> Option<Vec<Branch>> {
    let totals: Vec<u128> = next.iter().map(|p| p.total).collect();
    let sum: f64 = next.iter().map(|p| p.weight as f64).sum();
    let mut exact = true;
    // Per subset: the exact weight (over the product of every total) and the chance.
    let mut merged: BTreeMap<Vec<usize>, (u128, f64)> = BTreeMap::new();
    let mut order: Vec<Vec<usize>> = Vec::new();
    for (j, p) in next.into_iter().enumerate() {
        let others = totals
            .iter()
            .enumerate()
            .filter(|&(k, _)| k != j)
            .try_fold(1u128, |acc, (_, t)| acc.checked_mul(*t));
        for (subset, part) in p.parts {
            let weight = others
                .and_then(|o| o.checked_mul(part))
                .and_then(|x| x.checked_mul(p.weight));
            let chance = p.weight as f64 / sum * (part as f64 / p.total as f64);
            if !merged.contains_key(&subset) {
                order.push(subset.clone());
            }
            let slot = merged.entry(subset).or_insert((0, 0.0));
            match weight.and_then(|w| slot.0.checked_add(w)) {
                Some(w) => slot.0 = w,
                None => exact = false,
            }
            slot.1 += chance;
        }
    }
    if order.len() > MAX_DESTINATIONS {
        return None;
    }
    if !exact {
        let top = merged.values().map(|v| v.1).fold(0.0, f64::max);
        for slot in merged.values_mut() {
            slot.0 = ((slot.1 / top * (1u64 << 52) as f64) as u128).max(1);
        }
    }
    let divisor = merged.values().map(|v| v.0).fold(0, gcd).max(1);
    Some(
        order
            .into_iter()
            .map(|subset| {
                let weight = merged.get(&subset).map_or(0, |v| v.0) / divisor;
                Branch { subset, weight }
            })
            .filter(|b| b.weight > 0)
            .collect(),
    )
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The choices with weights that fit a `u32`: exact when they do (they are in lowest
/// terms), else scaled down in proportion, each at least 1.
fn to_u32_weights(branches: Vec<Branch>) -> Vec<(Vec<usize>, u32)> {
    let max = branches.iter().map(|b| b.weight).max().unwrap_or(1).max(1);
    let limit = u128::from(u32::MAX);
    branches
        .into_iter()
        .map(|b| {
            let w = if max <= limit {
                b.weight
            } else {
                (b.weight / (max / limit + 1)).max(1)
            };
            (b.subset, u32::try_from(w).unwrap_or(u32::MAX))
        })
        .collect()
}
