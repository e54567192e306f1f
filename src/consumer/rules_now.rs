//! The rules the config centre holds now for a consumer's channel, read once
//! ([`Resolver::rules_now`]): what a console compares a consumer record's rules digest
//! with, to tell who routes by an older rule set.

use std::collections::BTreeSet;

use super::resolver::Resolver;
use super::subscription::Subscription;
use crate::error::Result;
use crate::governance::watch::read_rules;
use crate::governance::{RuleSet, rule_keys, service_key};

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
