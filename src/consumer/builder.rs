//! [`ResolverBuilder`]: a resolver's settings, and how its parts are put together
//! ([`Resolver::builder`] and [`Resolver::new`] live here, so that the resolver itself
//! does not depend on how it is built).

use std::sync::Arc;
use std::time::Duration;

use super::balance::ChannelParts;
use super::health::{HealthOptions, HealthRegistry};
use super::hosts::HostNames;
use super::metadata::{CacheSettings, MetadataSource};
use super::rejections::Rejections;
use super::resolver::Resolver;
use super::seen::{ConsumerHandle, ConsumerSettings};
use super::stats::Counters;
use super::subscribe::migration_follow::MigrationFollow;
use super::subscribe::{SubscribeOptions, SubscribeParts};
use super::views::protection::ProtectionOptions;
use super::views::{ViewParts, Views};
use crate::backend::Backend;
use crate::backend::kv::layout::Layout;
use crate::governance::ConsumerIdentity;
use crate::limits::Limits;
use crate::rpc::MetadataClient;
use crate::warnings::Aggregator;

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
    identity: Option<crate::tls::IdentityCheck>,
    store_timeout: Duration,
    subscribe_options: SubscribeOptions,
    health: HealthOptions,
    protection: ProtectionOptions,
    consumer: Option<ConsumerSettings>,
    application: Option<String>,
    host: Option<String>,
    rules: bool,
}

impl Resolver {
    /// A builder for a resolver reading `backend` (a [`Backend`], or a store such as
    /// `Arc<dyn Store>`, which becomes the key-value backend over it).
    pub fn builder(backend: impl Into<Backend>) -> ResolverBuilder {
        ResolverBuilder::new(backend.into())
    }

    /// A resolver with default settings.
    pub fn new(backend: impl Into<Backend>) -> Self {
        Self::builder(backend).build()
    }
}

impl ResolverBuilder {
    /// Default deadline of one MetadataService call.
    pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(3);

    /// Default number of (app, revision) metadata entries cached.
    pub const DEFAULT_CACHE_CAPACITY: u64 = 10_000;

    /// Default time an unused cached revision is kept.
    pub const DEFAULT_CACHE_IDLE: Duration = Duration::from_secs(30 * 60);

    /// Default number of instances of one revision tried before a fetch gives up.
    pub const DEFAULT_FETCH_ATTEMPTS: usize = 5;

    /// Default liveness of a consumer record: as a provider's lease.
    pub const DEFAULT_CONSUMER_TTL: Duration = Duration::from_secs(10);

    /// Default shortest time between two rewrites of a consumer record: changes within it are
    /// written together at its end.
    pub const DEFAULT_CONSUMER_REFRESH: Duration = Duration::from_secs(10);

    fn new(backend: Backend) -> Self {
        ResolverBuilder {
            backend,
            layout: None,
            limits: Limits::default(),
            fetch_timeout: ResolverBuilder::DEFAULT_FETCH_TIMEOUT,
            fetch_attempts: ResolverBuilder::DEFAULT_FETCH_ATTEMPTS,
            cache_capacity: ResolverBuilder::DEFAULT_CACHE_CAPACITY,
            cache_idle: ResolverBuilder::DEFAULT_CACHE_IDLE,
            tls: None,
            identity: None,
            store_timeout: crate::store::DEFAULT_STORE_TIMEOUT,
            subscribe_options: SubscribeOptions::default(),
            health: HealthOptions::default(),
            protection: ProtectionOptions::default(),
            consumer: None,
            application: None,
            host: None,
            rules: true,
        }
    }

    /// Names the consumer's application (default: the app of
    /// [`register_consumer`](Self::register_consumer), else none), as a Dubbo consumer's
    /// `dubbo.application.name`: the config centre's rules keyed by it
    /// (`{app}.configurators`, `{app}.condition-router`) then route its calls, and rules
    /// matching `application` match it. Its migration rule (`{app}.migration`, see
    /// [`MigrationRule`](crate::governance::migration::MigrationRule)) is followed and steers
    /// each subscription's level; a resolver without an app name reads no migration rule.
    pub fn application(mut self, app: impl Into<String>) -> Self {
        self.application = Some(app.into());
        self
    }

    /// Whether balanced channels read governance rules from the config centre (default
    /// `true`, as every Dubbo Java consumer does): configurators, tag rules and condition
    /// rules of the service, its providers' apps and the consumer's app. Without them,
    /// calls are routed by what providers publish alone (static tags, `disabled`, weights).
    pub fn rules(mut self, read: bool) -> Self {
        self.rules = read;
        self
    }

    /// Sets how each subscription behaves: coalescing, the local snapshot, the start
    /// timeout and fetch retries (default [`SubscribeOptions::default`]).
    pub fn subscribe_options(mut self, options: SubscribeOptions) -> Self {
        self.subscribe_options = options;
        self
    }

    /// Sets consumer-side health, one for the whole resolver (default
    /// [`HealthOptions::default`]).
    pub fn health(mut self, health: HealthOptions) -> Self {
        self.health = health;
        self
    }

    /// Sets self-preservation and the recovery after a registry wipe, applied once per app
    /// for the whole resolver (default [`ProtectionOptions::default`]).
    pub fn protection(mut self, protection: ProtectionOptions) -> Self {
        self.protection = protection;
        self
    }

    /// Reads keys under a namespace such as `/staging` (default: none), on a key-value
    /// backend (memory, etcd); other backends take their root from their URL.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// Sets the size limits for everything read (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the deadline of one MetadataService call (default [`Self::DEFAULT_FETCH_TIMEOUT`]).
    pub fn fetch_timeout(mut self, timeout: Duration) -> Self {
        self.fetch_timeout = timeout;
        self
    }

    /// Sets how many instances of a revision one fetch tries (default
    /// [`Self::DEFAULT_FETCH_ATTEMPTS`], at least 1).
    pub fn fetch_attempts(mut self, attempts: usize) -> Self {
        self.fetch_attempts = attempts.max(1);
        self
    }

    /// Sets how many (app, revision) metadata entries are cached (default
    /// [`Self::DEFAULT_CACHE_CAPACITY`]).
    pub fn cache_capacity(mut self, capacity: u64) -> Self {
        self.cache_capacity = capacity;
        self
    }

    /// Sets how long an unused cached revision is kept (default [`Self::DEFAULT_CACHE_IDLE`]).
    pub fn cache_idle(mut self, idle: Duration) -> Self {
        self.cache_idle = idle;
        self
    }

    /// Calls MetadataServices over TLS with this configuration, and balanced channels too
    /// unless their [`ChannelOptions`](crate::consumer::ChannelOptions) say otherwise.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: crate::tls::ClientTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Checks, on every TLS connection to a provider (MetadataService calls and balanced
    /// channels), that its certificate names the app it was resolved for, by the check's
    /// rule and against the check's CAs (default: no check). Implies TLS: with no
    /// [`tls`](Self::tls) configuration, the default one; a configuration given there must
    /// then name no CA (tonic refuses a CA beside a verifier of its own), only what else it
    /// sets (a client certificate, the handshake timeout). A refused server takes no call;
    /// see [`crate::identity`].
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn identity(mut self, identity: crate::identity::IdentityCheck) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Registers a consumer record for `app` (default: none, and nothing is written): who
    /// this consumer is (`app`, a random id per resolver, its host, when it registered) and
    /// what each live subscription routes to (an
    /// [`endpoint_digest`](crate::model::endpoint_digest) of every endpoint it holds, their
    /// number, the registry position seen, when the digest last changed) and, for a
    /// subscription with a balanced channel, the
    /// [`rules_digest`](crate::governance::rules_digest()) and keys of the
    /// governance rules the channel routes by. Written apart
    /// from the instances (see [`crate::backend::consumers`]), alive like a provider's
    /// record, registered again when its liveness is lost, rewritten when what it shows
    /// changes (at most once per [`consumer_refresh`](Self::consumer_refresh)), and
    /// deleted when the last clone of the resolver is dropped or on
    /// [`Resolver::deregister_consumer`]. Registered from [`build`](Self::build) when that
    /// runs inside a Tokio runtime, else at the first [`Resolver::subscribe`]. An app name
    /// (or host) that is not valid leaves the record unwritten, with a warning.
    pub fn register_consumer(mut self, app: impl Into<String>) -> Self {
        self.consumer = Some(ConsumerSettings {
            app: app.into(),
            host: self.host.clone(),
            ttl: ResolverBuilder::DEFAULT_CONSUMER_TTL,
            refresh: ResolverBuilder::DEFAULT_CONSUMER_REFRESH,
        });
        self
    }

    /// Sets the consumer's own host (default: the IP of the interface that routes outward,
    /// else `127.0.0.1`), as a user would recognise it: what the consumer record names
    /// (with [`register_consumer`](Self::register_consumer)) and what the `addresses` of
    /// consumer-side rules match.
    pub fn consumer_host(mut self, host: impl Into<String>) -> Self {
        let host = host.into();
        if let Some(consumer) = &mut self.consumer {
            consumer.host = Some(host.clone());
        }
        self.host = Some(host);
        self
    }

    /// Sets the liveness of the consumer record (default
    /// [`Self::DEFAULT_CONSUMER_TTL`](ResolverBuilder::DEFAULT_CONSUMER_TTL)). Only with
    /// [`register_consumer`](Self::register_consumer).
    pub fn consumer_ttl(mut self, ttl: Duration) -> Self {
        if let Some(consumer) = &mut self.consumer {
            consumer.ttl = ttl.max(Duration::from_secs(1));
        }
        self
    }

    /// Sets the shortest time between two rewrites of the consumer record (default
    /// [`Self::DEFAULT_CONSUMER_REFRESH`](ResolverBuilder::DEFAULT_CONSUMER_REFRESH)). Only with
    /// [`register_consumer`](Self::register_consumer).
    pub fn consumer_refresh(mut self, refresh: Duration) -> Self {
        if let Some(consumer) = &mut self.consumer {
            consumer.refresh = refresh;
        }
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
        let mut backend = self.backend;
        if let Some(layout) = self.layout {
            backend = backend.with_layout(layout);
        }
        let backend = backend.with_deadline(self.store_timeout);
        let app = self
            .application
            .or_else(|| self.consumer.as_ref().map(|c| c.app.clone()));
        // The migration rule is the app's: a consumer without a name reads none.
        let migration = app
            .clone()
            .filter(|app| !app.is_empty())
            .map(|app| MigrationFollow::new(backend.config().clone(), app));
        let governed = Arc::new(ConsumerIdentity::new(app, self.host.clone()));
        let consumer = self.consumer.and_then(|settings| {
            let checked = crate::model::names::validate_app(&settings.app).and_then(|()| {
                settings
                    .host
                    .as_deref()
                    .map_or(Ok(()), crate::model::names::validate_host)
            });
            match checked {
                Ok(()) => Some(Arc::new(ConsumerHandle::new(
                    settings,
                    backend.clone(),
                    self.limits.clone(),
                ))),
                Err(error) => {
                    tracing::warn!(%error, "consumer record not registered");
                    None
                }
            }
        });
        let client = MetadataClient::new(self.fetch_timeout, self.limits.clone());
        #[cfg(feature = "tls")]
        let (client, tls) = {
            let tls = match (self.tls, &self.identity) {
                (None, Some(_)) => Some(crate::tls::ClientTlsConfig::new()),
                (tls, _) => tls,
            };
            let client = match &tls {
                Some(tls) => client.with_tls(tls.clone()),
                None => client,
            };
            let client = match &self.identity {
                Some(identity) => client.with_identity(identity.clone()),
                None => client,
            };
            (client, tls)
        };
        #[cfg(not(feature = "tls"))]
        let tls = self.tls;
        let counters = Arc::new(Counters::default());
        let rejections = Rejections::new(counters.clone());
        let warnings = Arc::new(Aggregator::default());
        let health = HealthRegistry::new(self.health, counters.clone(), tls.clone());
        let metadata = Arc::new(MetadataSource::new(
            backend.reports().clone(),
            self.limits.clone(),
            client,
            counters.clone(),
            rejections.clone(),
            CacheSettings {
                fetch_attempts: self.fetch_attempts,
                capacity: self.cache_capacity,
                idle: self.cache_idle,
            },
        ));
        let views = Views::new(ViewParts {
            backend: backend.clone(),
            limits: self.limits.clone(),
            protection: self.protection,
            health: health.clone(),
            counters: counters.clone(),
            warnings: warnings.clone(),
            metadata: metadata.clone(),
        });
        let channel_parts = ChannelParts {
            health: health.clone(),
            counters: counters.clone(),
            rejections,
            tls,
            identity: self.identity,
            consumer: governed,
            rules: self.rules,
            rule_follows: super::rules::shared_rules(backend.config().clone()),
        };
        let parts = SubscribeParts {
            backend: backend.clone(),
            views,
            metadata,
            health,
            counters,
            warnings,
            hosts: Arc::new(HostNames::default()),
            limits: self.limits,
            seen: consumer.as_ref().map(|c| c.seen.clone()),
            migration,
        };
        Resolver::assemble(
            backend,
            parts,
            channel_parts,
            self.subscribe_options,
            consumer,
        )
    }
}
