//! The resolver: the consumer's facade. [`Resolver::resolve`] walks interface → apps →
//! instances → metadata once per revision → endpoints; [`Resolver::subscribe`] starts a
//! live subscription. Both work on the shared [`Context`].

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;

use super::context::Context;
use super::endpoints::{RevisionEndpoints, assemble, by_revision};
use super::hosts::HostNames;
use super::metadata::MetadataSource;
use super::probes::HealthRegistry;
use super::stats::{Counters, ResolverStats};
use super::subscribe::{self, SubscribeOptions, SubscriptionHandle};
use super::subscription::Subscription;
use super::views::Views;
use crate::backend::{Backend, Instances};
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::limits::Limits;
use crate::model::{Endpoint, MetadataInfo, ServiceInstance};
use crate::rpc::MetadataClient;
use crate::warnings::Aggregator;

/// Default deadline of one MetadataService call.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(3);
/// Default number of (app, revision) metadata entries cached.
pub const DEFAULT_CACHE_CAPACITY: u64 = 10_000;
/// Default time an unused cached revision is kept.
pub const DEFAULT_CACHE_IDLE: Duration = Duration::from_secs(30 * 60);
/// Default number of instances of one revision tried before a fetch gives up.
pub const DEFAULT_FETCH_ATTEMPTS: usize = 5;

/// Builds a [`Resolver`]. Only the registry backend is required.
pub struct ResolverBuilder {
    backend: Backend,
    layout: Option<Layout>,
    limits: Limits,
    fetch_timeout: Duration,
    fetch_attempts: usize,
    cache_capacity: u64,
    cache_idle: Duration,
    tls: Option<crate::tls::ClientTlsConfig>,
    store_timeout: Duration,
    subscribe_options: SubscribeOptions,
}

impl ResolverBuilder {
    /// Sets how every subscription of this resolver behaves: coalescing, self-preservation,
    /// consumer-side health, the local snapshot, start timeout and fetch retries (default
    /// [`SubscribeOptions::default`]).
    pub fn subscribe_options(mut self, options: SubscribeOptions) -> Self {
        self.subscribe_options = options;
        self
    }

    /// Reads keys under a namespace such as `/staging` (default: none). Only for a
    /// key-value backend (memory, etcd); other backends take their root from their URL.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// Sets the size limits for everything read (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the deadline of one MetadataService call (default [`DEFAULT_FETCH_TIMEOUT`]).
    pub fn fetch_timeout(mut self, timeout: Duration) -> Self {
        self.fetch_timeout = timeout;
        self
    }

    /// Sets how many instances of a revision one fetch tries (default
    /// [`DEFAULT_FETCH_ATTEMPTS`], at least 1).
    pub fn fetch_attempts(mut self, attempts: usize) -> Self {
        self.fetch_attempts = attempts.max(1);
        self
    }

    /// Sets how many (app, revision) metadata entries are cached (default
    /// [`DEFAULT_CACHE_CAPACITY`]).
    pub fn cache_capacity(mut self, capacity: u64) -> Self {
        self.cache_capacity = capacity;
        self
    }

    /// Sets how long an unused cached revision is kept (default [`DEFAULT_CACHE_IDLE`]).
    pub fn cache_idle(mut self, idle: Duration) -> Self {
        self.cache_idle = idle;
        self
    }

    /// Calls MetadataServices over TLS with this configuration.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: crate::tls::ClientTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Sets the deadline of each registry call (default
    /// [`crate::store::DEFAULT_STORE_TIMEOUT`]).
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }

    /// Builds the resolver.
    pub fn build(self) -> Resolver {
        let backend = match self.layout {
            Some(layout) => self.backend.with_layout(layout),
            None => self.backend,
        };
        let backend = backend.with_deadline(self.store_timeout);
        let client = MetadataClient::new(self.fetch_timeout, self.limits.clone());
        #[cfg(feature = "tls")]
        let client = match &self.tls {
            Some(tls) => client.with_tls(tls.clone()),
            None => client,
        };
        Resolver {
            context: Arc::new(Context {
                metadata: MetadataSource::new(
                    backend.reports().clone(),
                    self.limits.clone(),
                    client,
                    self.fetch_attempts,
                    self.cache_capacity,
                    self.cache_idle,
                ),
                backend,
                limits: self.limits,
                counters: Counters::default(),
                tls: self.tls,
                views: Views::default(),
                warnings: Aggregator::default(),
                health: HealthRegistry::new(self.subscribe_options.health.clone()),
                protection: self.subscribe_options.protection.clone(),
                hosts: HostNames::default(),
            }),
            subscribe_options: Arc::new(self.subscribe_options),
        }
    }
}

/// Resolves subscriptions to endpoints, fetching metadata once per distinct revision.
///
/// Cheap to clone; clones share the metadata cache and the counters.
#[derive(Clone)]
pub struct Resolver {
    context: Arc<Context>,
    subscribe_options: Arc<SubscribeOptions>,
}

impl Resolver {
    /// A builder for a resolver reading `backend`: a [`Backend`] (from
    /// [`crate::backend::connect`], say), or a store (`Arc<dyn Store>`, `Arc<MemoryStore>`,
    /// `Arc<EtcdStore>`), which becomes the key-value backend over it.
    pub fn builder(backend: impl Into<Backend>) -> ResolverBuilder {
        ResolverBuilder {
            backend: backend.into(),
            layout: None,
            limits: Limits::default(),
            fetch_timeout: DEFAULT_FETCH_TIMEOUT,
            fetch_attempts: DEFAULT_FETCH_ATTEMPTS,
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            cache_idle: DEFAULT_CACHE_IDLE,
            tls: None,
            store_timeout: crate::store::DEFAULT_STORE_TIMEOUT,
            subscribe_options: SubscribeOptions::default(),
        }
    }

    /// A resolver with default settings.
    pub fn new(backend: impl Into<Backend>) -> Self {
        Self::builder(backend).build()
    }

    /// The apps providing the subscription's interface: its `provided_by` list, else the
    /// mapping.
    pub async fn apps(&self, subscription: &Subscription) -> Result<BTreeSet<String>> {
        subscription.validate()?;
        if !subscription.provided_by.is_empty() {
            return Ok(subscription.provided_by.iter().cloned().collect());
        }
        let context = &self.context;
        context
            .backend
            .mapping()
            .get(&subscription.interface, &context.limits)
            .await
    }

    /// The live endpoints of a subscription, in order.
    ///
    /// A revision whose metadata cannot be had leaves its instances out; the call fails only
    /// when the store cannot be read, or when nothing resolves and some fetch failed.
    #[tracing::instrument(
        level = "debug",
        skip_all,
        fields(interface = %subscription.interface, endpoints = tracing::field::Empty)
    )]
    pub async fn resolve(&self, subscription: &Subscription) -> Result<Vec<Endpoint>> {
        let apps = self.apps(subscription).await?;
        let instances = self.context.backend.instances();
        let lists = join_all(
            apps.iter()
                .map(|app| instances.list(app, &self.context.limits)),
        )
        .await;
        let mut endpoints = Vec::new();
        let mut failure = None;
        for (app, list) in apps.iter().zip(lists) {
            let list = list?;
            for (address, reason) in &list.skipped {
                Counters::bump(&self.context.counters.skipped_records);
                tracing::warn!(%app, %address, %reason, "instance record skipped");
            }
            let (found, failed) = self.endpoints_of(app, &list.instances, subscription).await;
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
    pub async fn endpoints_of(
        &self,
        app: &str,
        instances: &Instances,
        subscription: &Subscription,
    ) -> (Vec<Endpoint>, Option<Error>) {
        let by_revision = by_revision(instances.values());
        let fetches = by_revision
            .iter()
            .map(|(revision, members)| self.metadata(app, revision, members));
        let metadata = join_all(fetches).await;
        let mut shared = Vec::with_capacity(by_revision.len());
        let mut failure = None;
        for ((_, members), info) in by_revision.iter().zip(metadata) {
            match info {
                Ok(info) => shared.push((
                    RevisionEndpoints::new(&info, subscription),
                    members.as_slice(),
                )),
                Err(e) => {
                    tracing::warn!(%app, error = %e, "revision left out");
                    failure = Some(e);
                }
            }
        }
        let endpoints = assemble(&shared, &self.context.hosts);
        (endpoints, failure)
    }

    /// The metadata of `app` at `revision`: from the cache, else loaded once (concurrent
    /// callers share the load) from the report or one of `members`.
    pub async fn metadata(
        &self,
        app: &str,
        revision: &str,
        members: &[&Arc<ServiceInstance>],
    ) -> Result<Arc<MetadataInfo>> {
        self.context
            .metadata
            .get(&self.context.counters, app, revision, members)
            .await
    }

    /// Subscribes: a live endpoint set, kept up to date through the resolver's shared
    /// views of the mapping and of each app's instances, with the protections set on the
    /// resolver ([`ResolverBuilder::subscribe_options`]); a subscription itself is only its
    /// filter. Returns once the first set is published, or once the start timeout passed
    /// (serving the snapshot, if any, while the store is unreachable). The first set waits
    /// for the first metadata fetches only for a short bound
    /// ([`SubscribeOptions::first_fetch_wait`], well under the fetch timeout): a revision
    /// whose MetadataService hangs joins the set later, when its metadata arrives, and
    /// never delays the others. ([`Resolver::resolve`] instead waits for every fetch.) Fails on an
    /// invalid subscription, and with the permanent error (see [`Error::is_permanent`])
    /// when the store refuses the credentials or permissions before the first set; after
    /// it, such an error ends the subscription through
    /// [`SubscriptionHandle::changed`].
    pub async fn subscribe(&self, subscription: Subscription) -> Result<SubscriptionHandle> {
        let options = (*self.subscribe_options).clone();
        subscribe::start(self.context.clone(), subscription, options).await
    }

    /// The registry backend the resolver reads (with its store deadline).
    pub fn backend(&self) -> &Backend {
        &self.context.backend
    }

    /// The shared context, for the channel built over a subscription.
    pub(super) fn context(&self) -> &Arc<Context> {
        &self.context
    }

    /// A copy of the counters.
    pub async fn stats(&self) -> ResolverStats {
        let cached = self.context.metadata.cached().await;
        let mut stats = self.context.counters.snapshot(cached);
        stats.shared_views = self.context.views.len() as u64;
        stats
    }

    /// Routable instances per app (enabled ones, and expired ones held by
    /// self-preservation), as the live subscriptions see them: for each app, the most any
    /// subscription sees. Apps no live subscription follows are not listed.
    pub fn instances_per_app(&self) -> BTreeMap<String, u64> {
        self.context.counters.instances_per_app()
    }

    /// Forgets every cached revision.
    pub async fn clear_cache(&self) {
        self.context.metadata.clear().await;
    }
}
