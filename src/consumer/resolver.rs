//! The resolver: the consumer's facade. [`Resolver::resolve`] walks interface → apps →
//! instances → metadata once per revision → endpoints; [`Resolver::subscribe`] starts a
//! live subscription.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use futures::future::join_all;

use super::balance::ChannelParts;
use super::endpoints::{self, RevisionEndpoints, by_revision};
use super::explain::{AppFindings, Explanation};
use super::follow::AppFollow;
use super::interface_endpoints::{interface_key, interface_set};
use super::metadata::EarlyFetches;
use super::seen::ConsumerHandle;
use super::seen::table::Seen;
use super::stats::{Counters, ResolverStats};
use super::subscribe::{self, SubscribeOptions, SubscribeParts, SubscriptionHandle};
use super::subscription::Subscription;
use crate::backend::{Backend, ConsumerList, InstanceList, InstanceRead, Instances};
use crate::error::{Error, Result};
use crate::governance::migration::MigrationStep;
use crate::model::{Endpoint, MetadataInfo, ServiceInstance};
use crate::warnings::aggregated;

/// Resolves subscriptions to endpoints, fetching metadata once per distinct revision.
///
/// Cheap to clone; clones share the metadata cache, the views, health and the counters.
#[derive(Clone)]
pub struct Resolver {
    backend: Backend,
    parts: Arc<SubscribeParts>,
    channel_parts: ChannelParts,
    subscribe_options: Arc<SubscribeOptions>,
    /// The consumer record, when the resolver registers one.
    consumer: Option<Arc<ConsumerHandle>>,
}

impl Resolver {
    pub(super) fn assemble(
        backend: Backend,
        parts: SubscribeParts,
        channel_parts: ChannelParts,
        subscribe_options: SubscribeOptions,
        consumer: Option<Arc<ConsumerHandle>>,
    ) -> Self {
        Resolver {
            backend,
            parts: Arc::new(parts),
            channel_parts,
            subscribe_options: Arc::new(subscribe_options),
            consumer,
        }
    }

    /// The apps providing the subscription's interface: its `provided_by` list, else the
    /// mapping.
    pub async fn apps(&self, subscription: &Subscription) -> Result<BTreeSet<String>> {
        subscription.validate()?;
        if !subscription.provided_by.is_empty() {
            return Ok(subscription.provided_by.iter().cloned().collect());
        }
        self.backend
            .mapping()
            .get(&subscription.interface, &self.parts.limits)
            .await
    }

    /// The live endpoints of a subscription, in order, from the level its
    /// [`MigrationStep`] reads (the subscription's, else
    /// [`SubscribeOptions::migration_step`], whose default depends on the backend; a migration rule steers subscriptions, not this
    /// one-off read): the application level, the interface level, or at
    /// [`MigrationStep::ApplicationFirst`] the application level when it has an endpoint,
    /// else the interface level.
    ///
    /// A revision whose metadata cannot be had leaves its instances out; the call fails only
    /// when the registry cannot be read, or when nothing resolves and some fetch failed. A
    /// backend without an interface level fails `ForceInterface` with [`Error::Config`].
    #[tracing::instrument(
        level = "debug",
        skip_all,
        fields(interface = %subscription.interface, endpoints = tracing::field::Empty)
    )]
    pub async fn resolve(&self, subscription: &Subscription) -> Result<Vec<Endpoint>> {
        let step = subscription.migration.unwrap_or_else(|| {
            self.subscribe_options
                .step_on(self.backend.interface_level())
        });
        match step {
            MigrationStep::ForceApplication => self.resolve_application(subscription).await,
            MigrationStep::ForceInterface => self.resolve_interface(subscription).await,
            MigrationStep::ApplicationFirst => {
                let application = self.resolve_application(subscription).await;
                if application.as_ref().is_ok_and(|found| !found.is_empty()) {
                    return application;
                }
                match self.resolve_interface(subscription).await {
                    Ok(found) if !found.is_empty() => Ok(found),
                    // Neither level has an endpoint: what the application level said.
                    _ => application,
                }
            }
        }
    }

    /// The interface level of a subscription, read once: its provider URLs, each untrusted
    /// (a URL that does not read is skipped and counted, as a subscription counts it).
    async fn resolve_interface(&self, subscription: &Subscription) -> Result<Vec<Endpoint>> {
        subscription.validate()?;
        let key = interface_key(subscription);
        let urls = self
            .backend
            .interface_providers()
            .list(&key, &self.parts.limits)
            .await?;
        let counters = &self.parts.counters;
        Counters::add(&counters.skipped_provider_urls, urls.skipped.len() as u64);
        for (url, reason) in &urls.skipped {
            tracing::debug!(%url, %reason, "interface-level provider URL skipped");
        }
        // One line per interface per interval, however often it is read (the console reads
        // it each audit round): each URL's reason is at debug level.
        if let Some((_, reason)) = urls.skipped.first() {
            let interface = &subscription.interface;
            aggregated!(warn, self.parts.warnings, "interface-level provider URLs skipped",
                interface, %interface, skipped = urls.skipped.len(), first = %reason);
        }
        let set = interface_set(&urls.urls, subscription, &self.parts.hosts);
        Counters::add(&counters.uncallable_provider_urls, set.uncallable as u64);
        Ok(set.endpoints)
    }

    /// The application level of a subscription, read once: apps, instances, metadata.
    async fn resolve_application(&self, subscription: &Subscription) -> Result<Vec<Endpoint>> {
        let apps = self.apps(subscription).await?;
        let instances = self.backend.instances();
        let limits = &self.parts.limits;
        // Each revision's metadata is fetched while the rest of its app's list is read.
        let lists = join_all(apps.iter().map(|app| async move {
            let early = EarlyFetches::new(self.parts.metadata.clone(), app);
            let on_page = |page: &[&Arc<ServiceInstance>]| early.page(page);
            instances
                .list(app, InstanceRead::new(limits).with_early(&on_page))
                .await
        }))
        .await;
        let mut endpoints = Vec::new();
        let mut failure = None;
        for (app, list) in apps.iter().zip(lists) {
            let list = list?;
            for (address, reason) in &list.skipped {
                Counters::bump(&self.parts.counters.skipped_records);
                tracing::warn!(%app, %address, %reason, "instance record skipped");
            }
            let (found, failed) = self.endpoints_of(app, &list.instances, subscription).await;
            let records = list.instances.len();
            crate::drop_later::drop_later(list, records);
            if endpoints.is_empty() {
                endpoints = found;
            } else {
                endpoints.extend(found);
            }
            failure = failure.or(failed);
        }
        match failure {
            Some(error) if endpoints.is_empty() => Err(error),
            _ => {
                // Unstable: equal endpoints are indistinguishable, and it needs no scratch
                // buffer (a stable sort allocates a copy of up to the whole set, about
                // 1 MB for 10,000 endpoints).
                endpoints.sort_unstable();
                tracing::Span::current().record("endpoints", endpoints.len());
                tracing::debug!(apps = apps.len(), endpoints = endpoints.len(), "resolved");
                Ok(endpoints)
            }
        }
    }

    /// The endpoints of one app's instances for a subscription, fetching the metadata of
    /// every uncached revision in parallel. Returns them with the last fetch failure, if any.
    ///
    /// One walk over the instances, in list order, builds the endpoints of the revisions
    /// whose metadata is cached (on a cold resolve, most are: their fetches started while
    /// the list was read) and gathers the members of the others, which are fetched after it
    /// and assembled from their members.
    pub async fn endpoints_of(
        &self,
        app: &str,
        instances: &Instances,
        subscription: &Subscription,
    ) -> (Vec<Endpoint>, Option<Error>) {
        let source = &self.parts.metadata;
        let mut cached: HashMap<&str, RevisionEndpoints> = HashMap::new();
        let mut uncached: BTreeMap<&str, Vec<&Arc<ServiceInstance>>> = BTreeMap::new();
        let mut endpoints = Vec::new();
        let mut walk = instances.values().filter(endpoints::routed).peekable();
        // The walk stops at each revision not met before, to look it up in the cache: the
        // host table's lock is not held across the lookup.
        while let Some(new) = endpoints::walk_known(
            &mut walk,
            &cached,
            &mut uncached,
            &self.parts.hosts,
            &mut endpoints,
        ) {
            match source.get_cached(app, new).await {
                Some(info) => {
                    let shared = RevisionEndpoints::new(&info, subscription);
                    if endpoints.capacity() == 0 {
                        endpoints.reserve(shared.per_instance() * instances.len());
                    }
                    cached.insert(new, shared);
                }
                None => {
                    uncached.insert(new, Vec::new());
                }
            }
        }
        let fetches = uncached
            .iter()
            .map(|(revision, members)| self.metadata(app, revision, members));
        let metadata = join_all(fetches).await;
        let mut failure = None;
        let mut fetched = Vec::with_capacity(uncached.len());
        for (members, info) in uncached.values().zip(metadata) {
            match info {
                Ok(info) => fetched.push((members, RevisionEndpoints::new(&info, subscription))),
                Err(e) => {
                    tracing::warn!(%app, error = %e, "revision left out");
                    failure = Some(e);
                }
            }
        }
        let more = fetched
            .iter()
            .map(|(m, shared)| m.len() * shared.per_instance());
        endpoints.reserve_exact(more.sum());
        for (members, shared) in &fetched {
            endpoints::extend_members(members, shared, &self.parts.hosts, &mut endpoints);
        }
        // Room was made for every instance at the first cached revision's count of
        // endpoints: a resolver keeps what it returns, so what is left over is given back.
        if endpoints.capacity() - endpoints.len() > endpoints.len() / 8 {
            endpoints.shrink_to_fit();
        }
        (endpoints, failure)
    }

    /// Why `subscription` resolves to what it does, read afresh: the apps the mapping (or
    /// `provided_by`) names, how many instances each has, and what their revisions export.
    /// Its one-line [`Display`](std::fmt::Display) says what is missing when nothing
    /// matches (see [`Explanation`]). Fails only when the registry cannot be read.
    pub async fn explain(&self, subscription: &Subscription) -> Result<Explanation> {
        let interface_level = self.backend.interface_level();
        let step = subscription
            .migration
            .unwrap_or_else(|| self.subscribe_options.step_on(interface_level));
        let mut interface = None;
        if interface_level && step.reads_interface() {
            subscription.validate()?;
            let urls = self
                .backend
                .interface_providers()
                .list(&interface_key(subscription), &self.parts.limits)
                .await?;
            let set = interface_set(&urls.urls, subscription, &self.parts.hosts);
            interface = Some(set.findings(step, urls.skipped.len()));
        }
        let apps = if step.reads_application() {
            self.apps(subscription).await?
        } else {
            Default::default()
        };
        let instances = self.backend.instances();
        let limits = &self.parts.limits;
        let lists = join_all(apps.iter().map(|app| instances.list(app, limits.into()))).await;
        let mut found = Vec::with_capacity(apps.len());
        for (app, list) in apps.iter().zip(lists) {
            let list = list?;
            let enabled = list
                .instances
                .values()
                .filter(|i| i.accepts_calls())
                .count();
            let mut infos = Vec::new();
            let mut unknown = 0;
            for (revision, members) in by_revision(list.instances.values()) {
                match self.metadata(app, revision, &members).await {
                    Ok(info) => infos.push(info),
                    Err(_) => unknown += members.len(),
                }
            }
            found.push(AppFindings::new(
                app.clone(),
                enabled,
                unknown,
                infos.iter().map(|i| &**i),
            ));
        }
        Ok(Explanation {
            subscription: subscription.clone(),
            read: true,
            from_mapping: subscription.provided_by.is_empty(),
            apps: found,
            interface_level: interface,
            step: interface_level.then_some(step),
        })
    }

    /// The metadata of `app` at `revision`: from the cache, else loaded once (concurrent
    /// callers share the load) from the report or one of `members`.
    pub async fn metadata(
        &self,
        app: &str,
        revision: &str,
        members: &[&Arc<ServiceInstance>],
    ) -> Result<Arc<MetadataInfo>> {
        self.parts.metadata.get(app, revision, members).await
    }

    /// Subscribes: a live endpoint set, kept up to date through the resolver's shared
    /// views of the mapping and of each app's instances, with the protections set on the
    /// resolver ([`super::ResolverBuilder::protection`], [`super::ResolverBuilder::health`]); a
    /// subscription itself is only its filter. Returns once the first set is published, or
    /// once the start timeout passed (serving the snapshot, if any, while the registry is
    /// unreachable). The first set waits for the first metadata fetches only for a short
    /// bound ([`SubscribeOptions::first_fetch_wait`], well under the fetch timeout): a
    /// revision whose MetadataService hangs joins the set later, when its metadata arrives,
    /// and never delays the others. ([`Resolver::resolve`] instead waits for every fetch.)
    /// Fails on an invalid subscription, and with the permanent error (see
    /// [`Error::is_permanent`]) when the registry refuses the credentials or permissions
    /// before the first set; after it, such an error ends the subscription through
    /// [`SubscriptionHandle::changed`].
    pub async fn subscribe(&self, subscription: Subscription) -> Result<SubscriptionHandle> {
        if let Some(consumer) = &self.consumer {
            consumer.start();
        }
        let options = (*self.subscribe_options).clone();
        subscribe::start(self.parts.clone(), subscription, options).await
    }

    /// Every app with at least one instance record, with its instances, read afresh from
    /// the registry (not from the shared views), within the resolver's size limits. Records
    /// that cannot be used are skipped and reported in each list.
    pub async fn list_apps(&self) -> Result<BTreeMap<String, InstanceList>> {
        self.backend.instances().list_apps(&self.parts.limits).await
    }

    /// Follows one app as this resolver sees it: its shared view (the watch, the parsed
    /// instances and the protections its subscriptions share; started if none runs), as
    /// [`AppSnapshot`](super::AppSnapshot)s of every registered record and of the
    /// instances held though their records are gone, with when each hold ends; and, through
    /// [`AppFollow::is_set_aside`], which of them consumer-side health sets aside. Read-only:
    /// it changes nothing the subscriptions see. Fails on an invalid app name.
    pub fn follow_app(&self, app: &str) -> Result<AppFollow> {
        crate::model::names::validate_app(app)?;
        let id = self
            .parts
            .counters
            .next_subscription
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let observed = self.parts.views.observe(app, id);
        Ok(AppFollow::new(
            app.to_owned(),
            observed,
            self.parts.health.clone(),
        ))
    }

    /// Every consumer record in the registry (at most
    /// [`MAX_CONSUMER_RECORDS`](crate::backend::consumers::MAX_CONSUMER_RECORDS)), read
    /// afresh, within the resolver's size limits: who consumes what, with each live
    /// subscription's endpoint digest, endpoint count, registry position and timestamps.
    /// Records that cannot be used are skipped and reported in the list. A backend that
    /// keeps no consumer records lists none.
    pub async fn consumers(&self) -> Result<ConsumerList> {
        self.backend.consumers().list(&self.parts.limits).await
    }

    /// The app and id of this resolver's consumer record, when it registers one
    /// ([`super::ResolverBuilder::register_consumer`]).
    pub fn consumer_id(&self) -> Option<(&str, &str)> {
        self.consumer
            .as_ref()
            .map(|c| (c.app.as_str(), c.id.as_str()))
    }

    /// Deletes this resolver's consumer record, if it registers one, and waits until it is
    /// gone (bounded); it is not registered again. Dropping the last clone of the resolver
    /// deletes it too, in the background.
    pub async fn deregister_consumer(&self) {
        if let Some(consumer) = &self.consumer {
            consumer.deregister().await;
        }
    }

    /// The registry backend the resolver reads.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// What consumer-side health ejects now, over all of this resolver's subscriptions and
    /// channels: each address (or method at an address, when slow there alone), why, for
    /// how long, and when it is tried again. Sorted by address.
    pub fn ejections(&self) -> Vec<super::health::Ejection> {
        self.parts.health.ejections()
    }

    /// The parts balanced channels need: health, counters, the default TLS and the
    /// identity check.
    pub(super) fn channel_parts(&self) -> &ChannelParts {
        &self.channel_parts
    }

    /// What the subscriptions see, for the consumer record (when there is one).
    pub(super) fn seen(&self) -> Option<&Arc<Seen>> {
        self.parts.seen.as_ref()
    }

    /// A copy of the counters.
    pub async fn stats(&self) -> ResolverStats {
        let parts = &self.parts;
        let counters = &parts.counters;
        Counters::set(&counters.revisions_known, parts.metadata.cached().await);
        Counters::set(&counters.shared_views, parts.views.len() as u64);
        let aside = parts.health.set_aside_count() as u64;
        Counters::set(&counters.set_aside_addresses, aside);
        counters.snapshot()
    }

    /// Routable instances per app (enabled ones, and expired ones held by
    /// self-preservation), as the live subscriptions see them: for each app, the most any
    /// subscription sees. Apps no live subscription follows are not listed.
    pub fn instances_per_app(&self) -> BTreeMap<String, u64> {
        self.parts.counters.instances_per_app()
    }

    /// Servers the identity check refused, per app (see [`ResolverStats::identity_rejections`]
    /// for what counts; at most 10,000 apps are listed, the total counts them all).
    pub fn identity_rejections_per_app(&self) -> BTreeMap<String, u64> {
        self.parts.counters.rejections_per_app()
    }

    /// Forgets every cached revision.
    pub async fn clear_cache(&self) {
        self.parts.metadata.clear().await;
    }
}
