//! The resolver: interface → apps → instances → metadata once per revision → endpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use rand::seq::SliceRandom;
use tracing::Instrument;

use super::stats::{Counters, ResolverStats};
use super::subscribe::{self, SubscribeOptions, SubscriptionHandle};
use super::subscription::Subscription;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::limits::Limits;
use crate::mapping::Mapping;
use crate::model::{EMPTY_REVISION, Endpoint, MetadataInfo, ServiceInstance, StorageType};
use crate::registry::{Instances, Registry};
use crate::report::MetadataReport;
use crate::rpc::MetadataClient;
use crate::store::{DeadlineStore, Store};

/// Default deadline of one MetadataService call.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(3);
/// Default number of (app, revision) metadata entries cached.
pub const DEFAULT_CACHE_CAPACITY: u64 = 10_000;
/// Default time an unused cached revision is kept.
pub const DEFAULT_CACHE_IDLE: Duration = Duration::from_secs(30 * 60);
/// Default number of instances of one revision tried before a fetch gives up.
pub const DEFAULT_FETCH_ATTEMPTS: usize = 5;

type CacheKey = (String, String);

/// Builds a [`Resolver`]. Only the store is required.
pub struct ResolverBuilder {
    store: Arc<dyn Store>,
    layout: Layout,
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
    /// Sets the options of subscriptions made with [`Resolver::subscribe`] (default
    /// [`SubscribeOptions::default`]).
    pub fn subscribe_options(mut self, options: SubscribeOptions) -> Self {
        self.subscribe_options = options;
        self
    }

    /// Reads keys under a namespace such as `/staging` (default: none).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
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
    pub fn tls(mut self, tls: tonic::transport::ClientTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Sets the deadline of each store call (default
    /// [`crate::store::DEFAULT_STORE_TIMEOUT`]).
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }

    /// Builds the resolver.
    pub fn build(self) -> Resolver {
        let store: Arc<dyn Store> = Arc::new(DeadlineStore::new(self.store, self.store_timeout));
        let client = MetadataClient::new(self.fetch_timeout, self.limits.clone());
        #[cfg(feature = "tls")]
        let client = match &self.tls {
            Some(tls) => client.with_tls(tls.clone()),
            None => client,
        };
        Resolver {
            inner: Arc::new(Inner {
                registry: Registry::new(store.clone(), self.layout.clone(), self.limits.clone()),
                mapping: Mapping::new(store.clone(), self.layout.clone(), self.limits.clone()),
                report: MetadataReport::new(store, self.layout, self.limits.clone()),
                limits: self.limits,
                subscribe_options: self.subscribe_options,
                client,
                tls: self.tls,
                fetch_attempts: self.fetch_attempts,
                cache: moka::future::Cache::builder()
                    .max_capacity(self.cache_capacity)
                    .time_to_idle(self.cache_idle)
                    .build(),
                counters: Counters::default(),
            }),
        }
    }
}

/// Resolves subscriptions to endpoints, fetching metadata once per distinct revision.
///
/// Cheap to clone; clones share the metadata cache and the counters.
#[derive(Clone)]
pub struct Resolver {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    mapping: Mapping,
    report: MetadataReport,
    client: MetadataClient,
    tls: Option<crate::tls::ClientTlsConfig>,
    fetch_attempts: usize,
    cache: moka::future::Cache<CacheKey, Arc<MetadataInfo>>,
    counters: Counters,
    limits: Limits,
    subscribe_options: SubscribeOptions,
}

impl Resolver {
    /// A builder for a resolver reading `store`.
    pub fn builder(store: Arc<dyn Store>) -> ResolverBuilder {
        ResolverBuilder {
            store,
            layout: Layout::default(),
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
    pub fn new(store: Arc<dyn Store>) -> Self {
        Self::builder(store).build()
    }

    /// The apps providing the subscription's interface: its `provided_by` list, else the
    /// mapping.
    pub async fn apps(&self, subscription: &Subscription) -> Result<BTreeSet<String>> {
        subscription.validate()?;
        if !subscription.provided_by.is_empty() {
            return Ok(subscription.provided_by.iter().cloned().collect());
        }
        Ok(self.inner.mapping.get(&subscription.interface).await?.apps)
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
        let lists = join_all(apps.iter().map(|app| self.inner.registry.list(app))).await;
        let mut endpoints = Vec::new();
        let mut failure = None;
        for (app, list) in apps.iter().zip(lists) {
            let list = list?;
            for (address, reason) in &list.skipped {
                Counters::bump(&self.inner.counters.skipped_records);
                tracing::warn!(%app, %address, %reason, "instance record skipped");
            }
            let (found, failed) = self.endpoints_of(app, &list.instances, subscription).await;
            endpoints.extend(found);
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
        let mut by_revision: BTreeMap<&str, Vec<&Arc<ServiceInstance>>> = BTreeMap::new();
        for instance in instances
            .values()
            .filter(|i| i.enabled && i.revision() != EMPTY_REVISION)
        {
            by_revision
                .entry(instance.revision())
                .or_default()
                .push(instance);
        }
        let fetches = by_revision
            .iter()
            .map(|(revision, members)| self.metadata(app, revision, members));
        let metadata = join_all(fetches).await;
        let mut endpoints = Vec::new();
        let mut failure = None;
        for ((_, members), info) in by_revision.iter().zip(metadata) {
            match info {
                Ok(info) => endpoints.extend(build_endpoints(&info, members, subscription)),
                Err(e) => {
                    tracing::warn!(%app, error = %e, "revision left out");
                    failure = Some(e);
                }
            }
        }
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
        let key = (app.to_owned(), revision.to_owned());
        if let Some(info) = self.inner.cache.get(&key).await {
            Counters::bump(&self.inner.counters.cache_hits);
            return Ok(info);
        }
        let candidates: Vec<Arc<ServiceInstance>> = members.iter().map(|i| Arc::clone(i)).collect();
        let span = tracing::debug_span!("metadata_load", %app, %revision);
        let load = async {
            Counters::bump(&self.inner.counters.cache_misses);
            let loaded = self.load(app, revision, candidates).await;
            if let Ok(info) = &loaded {
                tracing::debug!(services = info.services.len(), "metadata loaded");
            }
            loaded.map(Arc::new)
        }
        .instrument(span);
        self.inner
            .cache
            .try_get_with(key, load)
            .await
            .map_err(|e: Arc<Error>| Error::MetadataUnavailable {
                app: app.to_owned(),
                revision: revision.to_owned(),
                reason: e.to_string(),
            })
    }

    /// Subscribes with the resolver's subscribe options: a live endpoint set, kept up to
    /// date by watches on the mapping and on each app's instances, with the protections of
    /// [`SubscribeOptions`]. Returns once the first set is published, or once the start
    /// timeout passed (serving the snapshot, if any, while the store is unreachable). Fails
    /// only on an invalid subscription.
    pub async fn subscribe(&self, subscription: Subscription) -> Result<SubscriptionHandle> {
        let options = self.inner.subscribe_options.clone();
        self.subscribe_with(subscription, options).await
    }

    /// Like [`Resolver::subscribe`], with options for this subscription.
    pub async fn subscribe_with(
        &self,
        subscription: Subscription,
        options: SubscribeOptions,
    ) -> Result<SubscriptionHandle> {
        subscribe::start(self.clone(), subscription, options).await
    }

    pub(super) fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    pub(super) fn mapping(&self) -> &Mapping {
        &self.inner.mapping
    }

    pub(super) fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    pub(super) fn tls(&self) -> Option<&crate::tls::ClientTlsConfig> {
        self.inner.tls.as_ref()
    }

    pub(super) fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    /// A copy of the counters.
    pub async fn stats(&self) -> ResolverStats {
        self.inner.cache.run_pending_tasks().await;
        self.inner.counters.snapshot(self.inner.cache.entry_count())
    }

    /// Routable instances per app (enabled ones, and expired ones held by
    /// self-preservation), as the live subscriptions see them: for each app, the most any
    /// subscription sees. Apps no live subscription follows are not listed.
    pub fn instances_per_app(&self) -> BTreeMap<String, u64> {
        self.inner.counters.instances_per_app()
    }

    /// Forgets every cached revision.
    pub async fn clear_cache(&self) {
        self.inner.cache.invalidate_all();
        self.inner.cache.run_pending_tasks().await;
    }

    /// Loads metadata: the report first when an instance says `remote`, then the
    /// MetadataService of a random instance of the revision, then the others, up to the
    /// attempt limit. Answers that are not the revision asked for are rejected.
    async fn load(
        &self,
        app: &str,
        revision: &str,
        mut candidates: Vec<Arc<ServiceInstance>>,
    ) -> Result<MetadataInfo> {
        let counters = &self.inner.counters;
        let mut last_error = Error::MetadataUnavailable {
            app: app.to_owned(),
            revision: revision.to_owned(),
            reason: "no instance to ask".into(),
        };
        if candidates
            .iter()
            .any(|i| i.storage_type() == StorageType::Remote)
        {
            Counters::bump(&counters.report_reads);
            match self.inner.report.get(app, revision).await {
                Ok(Some(info)) => match check_answer(
                    &info,
                    app,
                    revision,
                    candidates.iter().any(|i| i.declares_sha256_v1()),
                ) {
                    Ok(()) => return Ok(info),
                    Err(e) => {
                        Counters::bump(&counters.revision_mismatches);
                        last_error = e;
                    }
                },
                Ok(None) => {}
                Err(e) => {
                    Counters::bump(&counters.fetch_failures);
                    last_error = e;
                }
            }
        }
        candidates.shuffle(&mut rand::rng());
        for instance in candidates.iter().take(self.inner.fetch_attempts) {
            Counters::bump(&counters.metadata_fetches);
            let port = instance.metadata_service_port();
            let span = tracing::debug_span!("metadata_fetch", %app, %revision, host = %instance.host, port);
            let answer = self
                .inner
                .client
                .fetch(&instance.host, port, revision)
                .instrument(span)
                .await;
            match answer.and_then(|info| {
                check_answer(&info, app, revision, instance.declares_sha256_v1()).map(|()| info)
            }) {
                Ok(info) => return Ok(info),
                Err(e) => {
                    if matches!(e, Error::RevisionMismatch { .. }) {
                        Counters::bump(&counters.revision_mismatches);
                    } else {
                        Counters::bump(&counters.fetch_failures);
                    }
                    tracing::warn!(error = %e, "metadata fetch failed; trying another instance");
                    last_error = e;
                }
            }
        }
        Err(last_error)
    }
}

/// Checks that an answer belongs to `app` at `revision` and, when the provider declares the
/// `sha256-v1` rule, that its content hashes to that revision.
fn check_answer(info: &MetadataInfo, app: &str, revision: &str, verify: bool) -> Result<()> {
    if info.app != app || info.revision != revision {
        return Err(Error::Malformed {
            what: "metadata answer",
            reason: format!(
                "asked for {app}/{revision}, got {}/{}",
                Error::shorten(&info.app),
                Error::shorten(&info.revision)
            ),
        });
    }
    if verify {
        info.verify_revision()
    } else {
        Ok(())
    }
}

/// The endpoints of instances sharing one revision's metadata.
pub(super) fn build_endpoints(
    info: &MetadataInfo,
    members: &[&Arc<ServiceInstance>],
    subscription: &Subscription,
) -> Vec<Endpoint> {
    let services: Vec<_> = info
        .matching(
            &subscription.interface,
            subscription.group.as_deref(),
            subscription.version.as_deref(),
            subscription.protocol.as_deref(),
        )
        .collect();
    let mut endpoints = Vec::with_capacity(services.len() * members.len());
    for instance in members {
        for service in &services {
            let port = if service.port > 0 {
                service.port
            } else {
                instance.port_for_protocol(&service.protocol)
            };
            endpoints.push(Endpoint {
                app: info.app.clone(),
                host: instance.host.clone(),
                port,
                protocol: service.protocol.clone(),
                revision: info.revision.clone(),
                service: Arc::clone(service),
            });
        }
    }
    endpoints
}
