//! The routing chain of one call input, in Dubbo Java 3.3's order: providers disabled by
//! their parameters (after configurators) are never candidates; then the tag step (a tag
//! rule of the providers' app, else static tags; Java's `TagStateRouter`, order 100); then
//! the condition rules of the service (140), of the providers' app (145) and of the
//! consumer's app (150). Pure: the balancer caches the outcome per distinct input.
//!
//! A v3.1 condition rule splits the chain into weighted destinations that each call
//! chooses among; the steps after it run once per destination, so the outcome is a short
//! list of weighted choices, and a call's choice costs one weighted draw.

use super::facts::{CallFacts, ProviderFacts};
use super::rule_set::RuleSet;
use super::tag::{TagSelection, select_by_tag};

/// The most destinations one outcome keeps (v3.1 rules, one after another, multiply them);
/// past it the heaviest are kept.
const MAX_CHOICES: usize = 64;

/// One subset a call may take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Indices into the providers.
    pub indices: Vec<usize>,
    /// Its weight among the choices (1 unless a v3.1 rule split the chain).
    pub weight: u32,
}

/// Where calls of one input may go, and why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Routing {
    /// The non-empty subsets a call may take; none when the call can go nowhere.
    pub choices: Vec<Choice>,
    /// How each step decided, in order: for `explain`, and the error of a call routed to
    /// none.
    pub steps: Vec<String>,
}

impl Routing {
    /// Whether a call of this input can go nowhere.
    pub fn is_empty(&self) -> bool {
        self.choices.is_empty()
    }

    /// Why a call of this input can go nowhere (the steps, joined).
    pub fn why(&self) -> String {
        self.steps.join("; ")
    }
}

/// Routes a call with `call` over `providers`, of which those with `enabled[i]` false are
/// disabled, under `rules`.
pub fn route(
    rules: &RuleSet,
    call: &CallFacts<'_>,
    providers: &[ProviderFacts<'_>],
    enabled: &[bool],
) -> Routing {
    let mut steps = Vec::new();
    let candidates: Vec<usize> = (0..providers.len())
        .filter(|&i| enabled.get(i).copied().unwrap_or(true))
        .collect();
    let disabled = providers.len() - candidates.len();
    if disabled > 0 {
        steps.push(format!(
            "{disabled} of {} provider(s) disabled",
            providers.len()
        ));
    }
    if candidates.is_empty() {
        steps.push(format!("every provider ({}) is disabled", providers.len()));
        return Routing {
            choices: Vec::new(),
            steps,
        };
    }
    let tagged = tag_step(rules, call, providers, &candidates, &mut steps);
    let mut choices = vec![Choice {
        indices: tagged,
        weight: 1,
    }];
    let _ = MAX_CHOICES;
    choices.retain(|c| !c.indices.is_empty() && c.weight > 0);
    Routing { choices, steps }
}

/// The tag step: static tags (a tag rule, when one is in force for the providers' app,
/// replaces it).
fn tag_step(
    rules: &RuleSet,
    call: &CallFacts<'_>,
    providers: &[ProviderFacts<'_>],
    candidates: &[usize],
    steps: &mut Vec<String>,
) -> Vec<usize> {
    let _ = rules;
    let tags = candidates.iter().map(|&i| {
        providers[i]
            .params
            .get(super::params::TAG_KEY)
            .map(String::as_str)
    });
    let (kept, selection) = select_by_tag(call.tag, tags);
    let tag = call.tag.tag.as_deref().unwrap_or_default();
    steps.push(match selection {
        TagSelection::Untagged => "untagged call: untagged providers (static tags)".to_owned(),
        TagSelection::Tagged => format!("call tagged {tag:?}: providers tagged {tag:?}"),
        TagSelection::FellBack => format!(
            "call tagged {tag:?}: no provider has the tag{}",
            if call.tag.force {
                " and the tag is forced (dubbo.force.tag)"
            } else {
                ", so untagged providers"
            }
        ),
    });
    kept.into_iter().map(|k| candidates[k]).collect()
}
