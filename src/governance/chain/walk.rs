//! The choices of one call input as the steps of the chain narrow them, with the
//! explanation of each step and, per provider, the step that routed it out.

use super::routing::{Choice, Routing};

/// The most destinations one outcome keeps (v3.1 rules, one after another, multiply them);
/// past it the heaviest are kept.
const MAX_CHOICES: usize = 64;

/// What a router made of one subset of providers.
pub(super) enum Narrowed {
    /// It left the subset as it is.
    Same,
    /// It kept these providers (a subset of its input, possibly none).
    Kept(Vec<usize>),
    /// It split the subset into weighted destinations (v3.1).
    Split(Vec<(Vec<usize>, u32)>),
}

/// The chain's state between steps.
pub(super) struct Walk {
    choices: Vec<Choice>,
    /// The previous choices' buffer, reused by the next step.
    spare: Vec<Choice>,
    steps: Vec<String>,
    routed_out: Vec<Option<String>>,
}

impl Walk {
    /// The walk over `count` providers of which those with `enabled[i]` false are never
    /// candidates; the outcome at once (no choice) when every one is disabled.
    pub(super) fn new(count: usize, enabled: &[bool]) -> Result<Walk, Routing> {
        let enabled = |i: usize| enabled.get(i).copied().unwrap_or(true);
        let mut steps = Vec::new();
        let mut routed_out: Vec<Option<String>> = vec![None; count];
        let candidates: Vec<usize> = (0..count).filter(|&i| enabled(i)).collect();
        for (i, out) in routed_out.iter_mut().enumerate() {
            if !enabled(i) {
                *out = Some("disabled (its parameters, configurators applied)".to_owned());
            }
        }
        let disabled = count - candidates.len();
        if disabled > 0 {
            steps.push(format!("{disabled} of {count} provider(s) disabled"));
        }
        if candidates.is_empty() {
            steps.push(format!("every provider ({count}) is disabled"));
            return Err(Routing {
                choices: Vec::new(),
                steps,
                routed_out,
            });
        }
        Ok(Walk {
            choices: vec![Choice {
                indices: candidates,
                weight: 1,
            }],
            spare: Vec::new(),
            steps,
            routed_out,
        })
    }

    /// Narrows each non-empty choice by `router`, which pushes how it decided to the
    /// steps and says what it kept; a provider a choice loses is noted as routed out by
    /// `out` (given the steps so far), unless an earlier step routed it out.
    pub(super) fn narrow(
        &mut self,
        mut router: impl FnMut(&[usize], &mut Vec<String>) -> Narrowed,
        out: impl Fn(&[String]) -> String,
    ) {
        let mut current = std::mem::take(&mut self.choices);
        let mut next = std::mem::take(&mut self.spare);
        next.clear();
        next.reserve(current.len());
        for choice in current.drain(..) {
            if choice.indices.is_empty() {
                next.push(choice);
                continue;
            }
            match router(&choice.indices, &mut self.steps) {
                Narrowed::Same => next.push(choice),
                Narrowed::Kept(indices) => {
                    mark_out(&mut self.routed_out, &choice.indices, &[&indices], || {
                        out(&self.steps)
                    });
                    next.push(Choice {
                        indices,
                        weight: choice.weight,
                    });
                }
                Narrowed::Split(parts) => {
                    let subsets: Vec<&Vec<usize>> = parts.iter().map(|(s, _)| s).collect();
                    mark_out(&mut self.routed_out, &choice.indices, &subsets, || {
                        out(&self.steps)
                    });
                    next.extend(parts.into_iter().map(|(indices, weight)| Choice {
                        indices,
                        weight: choice.weight.saturating_mul(weight),
                    }));
                }
            }
        }
        if next.len() > MAX_CHOICES {
            next.sort_by_key(|c| std::cmp::Reverse(c.weight));
            next.truncate(MAX_CHOICES);
        }
        self.choices = next;
        self.spare = current;
    }

    /// The outcome: the non-empty choices of some weight, and why.
    pub(super) fn finish(self) -> Routing {
        let mut choices = self.choices;
        choices.retain(|c| !c.indices.is_empty() && c.weight > 0);
        Routing {
            choices,
            steps: self.steps,
            routed_out: self.routed_out,
        }
    }
}

/// Notes `why` for each of `before` in none of `after` (and not noted yet).
fn mark_out(
    routed_out: &mut [Option<String>],
    before: &[usize],
    after: &[&Vec<usize>],
    why: impl Fn() -> String,
) {
    let mut kept = vec![false; routed_out.len()];
    for &i in after.iter().flat_map(|subset| subset.iter()) {
        if let Some(k) = kept.get_mut(i) {
            *k = true;
        }
    }
    for &i in before {
        if kept.get(i).copied().unwrap_or(true) {
            continue;
        }
        if let Some(out @ None) = routed_out.get_mut(i) {
            *out = Some(why());
        }
    }
}
