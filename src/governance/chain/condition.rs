//! The condition steps: the condition rules of the service (Java's `ServiceStateRouter`,
//! order 140), of the providers' app (`ProviderAppStateRouter`, 145) and of the consumer's
//! app (`AppStateRouter`, 150), each rule routing every choice the previous left.

use super::walk::{Narrowed, Walk};
use super::{Input, Step};
use crate::governance::condition::ConditionRoute;
use crate::governance::keys::RuleKey;

/// Whose condition rules a step applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scope {
    /// The service's (`{interface}:{version}:{group}.condition-router`).
    Service,
    /// The providers' apps' (`{providerApp}.condition-router`).
    ProviderApp,
    /// The consumer's app's (`{consumerApp}.condition-router`).
    ConsumerApp,
}

impl Scope {
    /// Whether a rule under `key` is of this scope.
    fn holds(self, key: &RuleKey) -> bool {
        matches!(
            (self, key),
            (Scope::Service, RuleKey::ServiceConditions(_))
                | (Scope::ProviderApp, RuleKey::ProviderAppConditions(_))
                | (Scope::ConsumerApp, RuleKey::ConsumerAppConditions(_))
        )
    }
}

/// The condition rules of one scope, in the order they are in force.
pub(super) struct ConditionStep(pub(super) Scope);

impl Step for ConditionStep {
    fn route(&self, input: &Input<'_>, walk: &mut Walk) {
        let rules = input
            .rules
            .conditions()
            .filter(|(key, _)| self.0.holds(key));
        for (key, rule) in rules {
            let key = key.key();
            walk.narrow(
                |subset, steps| match rule.route(input.call, input.providers, subset) {
                    ConditionRoute::Unchanged { why } => {
                        steps.push(format!("{key}: {why}"));
                        Narrowed::Same
                    }
                    ConditionRoute::Kept { indices, why } => {
                        steps.push(format!("{key}: {why}"));
                        Narrowed::Kept(indices)
                    }
                    ConditionRoute::Destinations { choices, why } => {
                        steps.push(format!("{key}: {why}"));
                        Narrowed::Split(choices)
                    }
                    ConditionRoute::NotApplicable { reason } => {
                        steps.push(format!("{key}: not applied: {reason}"));
                        Narrowed::Same
                    }
                },
                |_| format!("condition rule {key}"),
            );
        }
    }
}
