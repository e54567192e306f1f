//! A balanced channel's report of the rules it routes by, into its subscription's entry of
//! the consumer record: the rules watcher reports each new set in force, the balancer
//! keeps the report alive while it routes, and the report leaves the record once both are
//! gone (a channel dropped no longer routes by anything).

use std::sync::Arc;

use crate::consumer::seen::table::{RulesSeen, Seen};
use crate::governance::RuleSet;
use crate::model::consumer_record::MAX_RULE_KEYS;
use crate::model::names::validate_rule_key;

/// See the module docs. Removed from the record when dropped.
pub(crate) struct RulesReport {
    seen: Arc<Seen>,
    subscription: u64,
    channel: u64,
}

impl std::fmt::Debug for RulesReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RulesReport")
            .field("subscription", &self.subscription)
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

impl RulesReport {
    /// The report of a new channel over `subscription` (its id in `seen`).
    pub fn new(seen: Arc<Seen>, subscription: u64) -> Arc<RulesReport> {
        let channel = seen.new_channel();
        Arc::new(RulesReport {
            seen,
            subscription,
            channel,
        })
    }

    /// The channel now routes by `rules`: their digest and keys (the first
    /// [`MAX_RULE_KEYS`] a record may list). A set still waiting for the config centre's
    /// first answers is not reported.
    pub fn report(&self, rules: &RuleSet) {
        if !rules.is_loaded() {
            return;
        }
        let keys = rules
            .in_force()
            .filter(|key| validate_rule_key(key).is_ok())
            .take(MAX_RULE_KEYS)
            .collect();
        let seen = RulesSeen {
            digest: rules.digest(),
            keys,
        };
        self.seen
            .report_rules(self.subscription, self.channel, Some(seen));
    }
}

impl Drop for RulesReport {
    fn drop(&mut self) {
        self.seen
            .report_rules(self.subscription, self.channel, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumer::subscription::Subscription;
    use crate::governance::{Rule, RuleKey};

    #[test]
    fn a_loaded_set_is_reported_until_the_report_is_dropped() {
        let seen = Arc::new(Seen::default());
        seen.update(3, &Subscription::new("S"), "aa".into(), 1, 0, 1);
        let report = RulesReport::new(seen.clone(), 3);
        report.report(&RuleSet::pending());
        assert_eq!(seen.services()[0].rules_digest, None, "not loaded yet");
        report.report(&RuleSet::none());
        assert_eq!(
            seen.services()[0].rules_digest,
            Some(RuleSet::none().digest())
        );
        let key = RuleKey::ServiceConditions("S::".into());
        let rule = Rule::parse(&key, "conditions:\n  - '=> port != 1'\n").unwrap();
        let set = RuleSet::new([(key, rule)], Vec::new());
        report.report(&set);
        let shown = &seen.services()[0];
        assert_eq!(shown.rules_digest, Some(set.digest()));
        assert_eq!(shown.rules, ["S::.condition-router"]);
        drop(report);
        assert_eq!(seen.services()[0].rules_digest, None);
    }
}
