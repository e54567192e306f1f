//! The tag step (Java's `TagStateRouter`, order 100), per provider app: the app's tag rule
//! when one is in force, else static tags. Java reads the tag rule of its providers' app;
//! a channel over several apps applies each app's to its own providers.

use super::walk::{Narrowed, Walk};
use super::{Input, Step};
use crate::governance::facts::{CallFacts, ProviderFacts};
use crate::governance::rule_set::RuleSet;
use crate::governance::tag_rule::route_by_tag;

/// The tag step. See the module docs.
pub(super) struct TagStep;

impl Step for TagStep {
    fn route(&self, input: &Input<'_>, walk: &mut Walk) {
        walk.narrow(
            |candidates, steps| {
                Narrowed::Kept(by_tag(
                    input.rules,
                    input.call,
                    input.providers,
                    candidates,
                    steps,
                ))
            },
            |steps| format!("tag: {}", steps.last().map_or("", String::as_str)),
        );
    }
}

/// The providers of `candidates` the tag step keeps, each app's by its own rule; how each
/// decided is pushed to `steps` (prefixed by the app when there are several).
fn by_tag(
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
