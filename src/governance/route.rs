//! The routing chain of one call input, in Dubbo Java 3.3's order: providers disabled by
//! their parameters (after configurators) are never candidates; then the tag step (a tag
//! rule of the providers' app, else static tags; Java's `TagStateRouter`, order 100); then
//! the condition rules of the service (140), of the providers' app (145) and of the
//! consumer's app (150). Pure: the balancer caches the outcome per distinct input.
//!
//! A v3.1 condition rule splits the chain into weighted destinations that each call
//! chooses among; the steps after it run once per destination, so the outcome is a short
//! list of weighted choices, and a call's choice costs one weighted draw.

use super::condition::ConditionRoute;
use super::facts::{CallFacts, ProviderFacts};
use super::rule_set::RuleSet;
use super::tag_rule::route_by_tag;

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
    /// Per provider, the step that routed it out (`None`: it may be called).
    pub routed_out: Vec<Option<String>>,
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

    /// Whether provider `i` may be called (it is in some choice).
    pub fn reaches(&self, i: usize) -> bool {
        self.choices.iter().any(|c| c.indices.contains(&i))
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
    let mut routed_out: Vec<Option<String>> = vec![None; providers.len()];
    let candidates: Vec<usize> = (0..providers.len())
        .filter(|&i| enabled.get(i).copied().unwrap_or(true))
        .collect();
    for (i, out) in routed_out.iter_mut().enumerate() {
        if !enabled.get(i).copied().unwrap_or(true) {
            *out = Some("disabled (its parameters, configurators applied)".to_owned());
        }
    }
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
            routed_out,
        };
    }
    let tagged = tag_step(rules, call, providers, &candidates, &mut steps);
    mark_out(&mut routed_out, &candidates, &[&tagged], || {
        format!("tag: {}", steps.last().map_or("", String::as_str))
    });
    let mut choices = vec![Choice {
        indices: tagged,
        weight: 1,
    }];
    for (key, rule) in rules.conditions() {
        let key = key.key();
        let mut next = Vec::with_capacity(choices.len());
        for choice in choices {
            if choice.indices.is_empty() {
                next.push(choice);
                continue;
            }
            let kept: Vec<Choice> = match rule.route(call, providers, &choice.indices) {
                ConditionRoute::Unchanged { why } => {
                    steps.push(format!("{key}: {why}"));
                    vec![choice.clone()]
                }
                ConditionRoute::Kept { indices, why } => {
                    steps.push(format!("{key}: {why}"));
                    vec![Choice {
                        indices,
                        weight: choice.weight,
                    }]
                }
                ConditionRoute::Destinations { choices, why } => {
                    steps.push(format!("{key}: {why}"));
                    choices
                        .into_iter()
                        .map(|(indices, weight)| Choice {
                            indices,
                            weight: choice.weight.saturating_mul(weight),
                        })
                        .collect()
                }
                ConditionRoute::NotApplicable { reason } => {
                    steps.push(format!("{key}: not applied: {reason}"));
                    vec![choice.clone()]
                }
            };
            let subsets: Vec<&Vec<usize>> = kept.iter().map(|c| &c.indices).collect();
            mark_out(&mut routed_out, &choice.indices, &subsets, || {
                format!("condition rule {key}")
            });
            next.extend(kept);
        }
        choices = next;
        if choices.len() > MAX_CHOICES {
            choices.sort_by_key(|c| std::cmp::Reverse(c.weight));
            choices.truncate(MAX_CHOICES);
        }
    }
    choices.retain(|c| !c.indices.is_empty() && c.weight > 0);
    Routing {
        choices,
        steps,
        routed_out,
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

/// The tag step, per provider app: the app's tag rule when one is in force, else static
/// tags (Java reads the tag rule of its providers' app; a channel over several apps applies
/// each app's to its own providers).
fn tag_step(
    rules: &RuleSet,
    call: &CallFacts<'_>,
    providers: &[ProviderFacts<'_>],
    candidates: &[usize],
    steps: &mut Vec<String>,
) -> Vec<usize> {
    let mut apps: Vec<&str> = candidates.iter().map(|&i| providers[i].app).collect();
    apps.sort_unstable();
    apps.dedup();
    if let [app] = apps.as_slice() {
        let routed = route_by_tag(rules.tag_rule(app), call, providers, candidates);
        steps.push(routed.why);
        return routed.indices;
    }
    let mut kept = Vec::new();
    for app in apps {
        let of_app: Vec<usize> = candidates
            .iter()
            .copied()
            .filter(|&i| providers[i].app == app)
            .collect();
        let routed = route_by_tag(rules.tag_rule(app), call, providers, &of_app);
        steps.push(format!("{app}: {}", routed.why));
        kept.extend(routed.indices);
    }
    kept.sort_unstable();
    kept
}
