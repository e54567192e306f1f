//! The rules the config centre holds for a consumer's channel: read once
//! ([`Resolver::rules_now`]), what a console compares a consumer record's rules digest
//! with, to tell who routes by an older rule set; or followed live
//! ([`Resolver::rules_watch`]), what an xDS server translates for its clients.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::resolver::Resolver;
use super::rules::{RulesScope, watch_rules};
use super::subscribe::SubscriptionHandle;
use super::subscription::Subscription;
use crate::error::Result;
use crate::governance::watch::read_rules;
use crate::governance::{CallTag, ConsumerIdentity, RuleSet, rule_keys, service_key};

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

    /// The rules a balanced channel of `subscription` routes by, followed live through the
    /// resolver's shared rule follows (each key followed once for every channel and
    /// watch): [`RuleSet::pending`] until the config centre first answers (or half a
    /// second passed), then a new set whenever a rule of the service, of its providers'
    /// apps (as they come and go) or of the resolver's consumer app changes. Followed until
    /// every receiver is dropped. [`RuleSet::none`] when the resolver reads no rules.
    ///
    /// Must be called within a Tokio runtime.
    pub fn rules_watch(&self, subscription: &SubscriptionHandle) -> watch::Receiver<Arc<RuleSet>> {
        self.rules_watch_as(subscription, &self.channel_parts().consumer.app)
    }

    /// [`rules_watch`](Self::rules_watch) for a consumer of `consumer_app` rather than the
    /// resolver's own: the rules keyed by that app (`{app}.configurators`,
    /// `{app}.condition-router`) in place of the resolver's app's. What an xDS server
    /// routes a client of another app by.
    pub fn rules_watch_as(
        &self,
        subscription: &SubscriptionHandle,
        consumer_app: &str,
    ) -> watch::Receiver<Arc<RuleSet>> {
        let parts = self.channel_parts();
        if !parts.rules {
            return watch::channel(Arc::new(RuleSet::none())).1;
        }
        watch_rules(
            parts.rule_follows.clone(),
            RulesScope::of(consumer_app, subscription.subscription()),
            subscription.watch(),
            None,
            CancellationToken::new(),
        )
    }

    /// The consumer a balanced channel of `subscription` with no tag of its own routes as:
    /// the resolver's consumer URL as a reference of the subscription's interface,
    /// version and group (what rules match the consumer side against).
    pub fn consumer_for(&self, subscription: &SubscriptionHandle) -> ConsumerIdentity {
        let wanted = subscription.subscription();
        self.channel_parts().consumer.for_channel(
            &wanted.interface,
            wanted.version.as_deref(),
            wanted.group.as_deref(),
            &CallTag::none(),
        )
    }
}
