//! A balanced tonic channel over a live subscription: the subscription's [`Discovery`]
//! stream fed to the data plane (`balance/`), with the resolver's health and TLS.
//!
//! The channel follows what the subscription publishes, so it inherits its protections:
//! an instance marked `enabled: false` (or stopping) by a graceful stop leaves at once (its
//! server keeps answering during the provider's drain period, so no call fails), removals
//! held by self-preservation stay (set aside until their instance answers a probe), and a
//! failed registry read never empties it.
//!
//! With a consumer record ([`super::ResolverBuilder::register_consumer`]), the channel
//! reports the [`rules_digest`](crate::governance::rules_digest()) of the rules it routes by
//! into its subscription's entry (the empty set's digest when it reads no rules), for as
//! long as it routes.
//!
//! The feeder stops when every clone of the channel has been dropped (the balancer is
//! gone), when the subscription ends, or on [`ChannelHandle::stop`]; the channel then keeps
//! the endpoints it has. Dropping the [`ChannelHandle`] alone does not stop it: the channel
//! keeps following the subscription.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::balance::{self, BalancedChannel, ChannelOptions, Discovery, Feed};
use super::resolver::Resolver;
use super::rules::RulesReport;
use super::rules::{RulesScope, watch_rules};
use super::subscribe::SubscriptionHandle;
use crate::error::{Error, Result};
use crate::governance::RuleSet;
use crate::model::Authority;

/// Follows and controls the task feeding a balanced channel. See the module docs.
#[derive(Debug)]
pub struct ChannelHandle {
    subscription: SubscriptionHandle,
    feed: Feed,
}

impl ChannelHandle {
    /// The subscription the channel follows (for its endpoint set, health reports and
    /// flags).
    pub fn subscription(&self) -> &SubscriptionHandle {
        &self.subscription
    }

    /// The addresses handed to the balancer, sorted. The balancer applies them when it
    /// next routes a call.
    pub fn addresses(&self) -> Arc<BTreeSet<Authority>> {
        self.feed.addresses.borrow().clone()
    }

    /// Waits until the addresses handed to the balancer change and returns them. Fails
    /// with [`Error::Shutdown`] once the task has stopped.
    pub async fn changed(&mut self) -> Result<Arc<BTreeSet<Authority>>> {
        self.feed
            .addresses
            .changed()
            .await
            .map_err(|_| Error::Shutdown)?;
        Ok(self.feed.addresses.borrow_and_update().clone())
    }

    /// The addresses the identity check refused, with why (empty without a check). They
    /// take no call until a recheck passes (see [`crate::consumer::BalancedChannel`]).
    pub fn refused(&self) -> Arc<BTreeMap<Authority, Arc<str>>> {
        self.feed.refused.borrow().clone()
    }

    /// Whether the task still follows the subscription.
    pub fn is_running(&self) -> bool {
        self.feed.addresses.has_changed().is_ok()
    }

    /// Stops following the subscription: the channel keeps the endpoints it has.
    pub fn stop(&self) {
        self.feed.cancel.cancel();
    }

    /// Retries the channel's [retry budget](ChannelOptions::retry_budget) allows now.
    pub fn retry_budget_left(&self) -> u64 {
        self.feed.budget.left()
    }
}

impl Resolver {
    /// A channel balancing calls over the live endpoints of `subscription`, with default
    /// [`ChannelOptions`]; see [`Resolver::balanced_channel_with`].
    pub fn balanced_channel(
        &self,
        subscription: &SubscriptionHandle,
    ) -> Result<(BalancedChannel, ChannelHandle)> {
        self.balanced_channel_with(subscription, ChannelOptions::default())
    }

    /// A channel balancing calls over the live endpoints of `subscription`: each distinct
    /// dialable address of its endpoint set is one balancer endpoint, added and removed as
    /// the subscription publishes changes. Endpoints are dialled lazily with the options'
    /// connect timeout and TLS (by default the resolver's); with the resolver's identity
    /// check, each is dialled and checked before it joins.
    ///
    /// Its calls are routed by the rules of the config centre for a consumer whose URL is
    /// the resolver's consumer as a reference of the subscription's interface, version
    /// and group, with the options' tag and consumer parameters (see
    /// [`ResolverBuilder::consumer_param`](super::ResolverBuilder::consumer_param)).
    ///
    /// Must be called within a Tokio runtime. Fails on a TLS configuration tonic rejects,
    /// and on a consumer parameter of the options that is not valid.
    pub fn balanced_channel_with(
        &self,
        subscription: &SubscriptionHandle,
        options: ChannelOptions,
    ) -> Result<(BalancedChannel, ChannelHandle)> {
        let parts = self.channel_parts().clone();
        let wanted = subscription.subscription();
        let consumer = Arc::new(options.consumer_of(
            &parts.consumer,
            &wanted.interface,
            wanted.version.as_deref(),
            wanted.group.as_deref(),
        )?);
        let span = tracing::debug_span!(
            "balanced_channel",
            interface = %subscription.subscription().interface
        );
        let discovery: Discovery = subscription.discover();
        // Stopping the handle stops the feeder and the rules watcher: the channel keeps its
        // endpoints and rules as they are.
        let cancel = CancellationToken::new();
        // The consumer record's entry of the subscription says what the channel routes by.
        let report = self
            .seen()
            .map(|seen| RulesReport::new(seen.clone(), subscription.id()));
        let rules = if parts.rules {
            watch_rules(
                parts.rule_follows.clone(),
                RulesScope::of(&parts.consumer.app, wanted),
                subscription.watch(),
                report.clone(),
                cancel.clone(),
            )
        } else {
            // No rules read: the channel routes by none, and says so.
            let none = Arc::new(RuleSet::none());
            if let Some(report) = &report {
                report.report(&none);
            }
            tokio::sync::watch::channel(none).1
        };
        let governance = balance::Governance {
            consumer,
            rules,
            report,
        };
        let (channel, feed) = balance::balanced_channel(
            discovery,
            parts,
            options,
            subscription.why_empty_watch(),
            governance,
            cancel,
            span,
        )?;
        let handle = ChannelHandle {
            subscription: subscription.clone(),
            feed,
        };
        Ok((channel, handle))
    }
}
