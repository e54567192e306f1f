//! One read of the rules the config centre holds for a channel, parsed as the channel's
//! rules watcher parses them: what [`Resolver::explain_route`] routes by, and what a
//! console compares a consumer's rules digest with ([`Resolver::rules_now`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::join_all;

use crate::backend::config::{ConfigCentre, DEFAULT_GROUP};
use crate::consumer::Resolver;
use crate::consumer::routing::{Rule, RuleKey, RuleProblem, RuleSet, rule_keys, service_key};
use crate::consumer::subscription::Subscription;
use crate::error::{Error, Result};

/// What one read found: the rules that parse, the keys refused (as the watcher refuses
/// them) and the keys that could not be read at all.
pub(crate) struct RulesRead {
    pub rules: Vec<(RuleKey, Rule)>,
    pub refused: Vec<RuleProblem>,
    pub unread: Vec<(String, Error)>,
}

/// Reads each of `keys` once, at the same time.
pub(crate) async fn read_rules(config: &Arc<dyn ConfigCentre>, keys: Vec<RuleKey>) -> RulesRead {
    let reads = join_all(keys.iter().map(|key| {
        let name = key.key();
        async move { config.get(&name, DEFAULT_GROUP).await }
    }))
    .await;
    let mut read = RulesRead {
        rules: Vec::new(),
        refused: Vec::new(),
        unread: Vec::new(),
    };
    for (key, got) in keys.into_iter().zip(reads) {
        let name = key.key();
        match got {
            Ok(None) => {}
            Ok(Some(item)) => match Rule::parse(&key, &item.content) {
                Ok(rule) => read.rules.push((key, rule)),
                Err(error) => read.refused.push(RuleProblem {
                    key: name,
                    reason: error.to_string(),
                }),
            },
            // Oversized or otherwise refused by the config part: no rule, as the watcher.
            Err(error @ Error::Rule { .. }) => read.refused.push(RuleProblem {
                key: name,
                reason: error.to_string(),
            }),
            Err(error) => read.unread.push((name, error)),
        }
    }
    read
}

impl Resolver {
    /// The rules the config centre holds now for a balanced channel of `subscription` in a
    /// consumer of `consumer_app` whose providers are of `provider_apps` (with the
    /// subscription's `provided_by`), read once and parsed as the channel's rules watcher
    /// would: its [`RuleSet::digest`] is what such a consumer's record says it routes by,
    /// once it follows the rules written now.
    ///
    /// A rule that does not parse is a problem of the set, and no rule (a consumer that
    /// read an earlier good one keeps it, and so routes by an older set). Fails when a key
    /// cannot be read at all, with that key's error: the set would not be the config
    /// centre's.
    pub async fn rules_now<'a>(
        &self,
        consumer_app: &str,
        subscription: &Subscription,
        provider_apps: impl IntoIterator<Item = &'a str>,
    ) -> Result<RuleSet> {
        subscription.validate()?;
        let service = service_key(
            &subscription.interface,
            subscription.version.as_deref(),
            subscription.group.as_deref(),
        );
        let mut apps: BTreeSet<&str> = provider_apps.into_iter().collect();
        apps.extend(subscription.provided_by.iter().map(String::as_str));
        let keys = rule_keys(consumer_app, &service, apps);
        let read = read_rules(self.backend().config(), keys).await;
        if let Some((_, error)) = read.unread.into_iter().next() {
            return Err(error);
        }
        Ok(RuleSet::new(read.rules, read.refused))
    }
}
