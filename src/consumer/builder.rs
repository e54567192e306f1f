//! [`ResolverBuilder`]: a resolver's settings, and how its parts are put together
//! ([`Resolver::builder`] and [`Resolver::new`] live here, so that the resolver itself
//! does not depend on how it is built).

use std::sync::Arc;
use std::time::Duration;

use super::balance::ChannelParts;
use super::health::{HealthOptions, HealthRegistry};
use super::hosts::HostNames;
use super::metadata::{CacheSettings, MetadataSource, Rejections};
use super::options::ResolverOptions;
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
    options: ResolverOptions,
    tls: Option<crate::tls::ClientTlsConfig>,
    identity: Option<crate::tls::IdentityCheck>,
    subscribe_options: SubscribeOptions,
    health: HealthOptions,
    protection: ProtectionOptions,
    /// The app of the consumer record, when one is registered.
    consumer: Option<String>,
    application: Option<String>,
    host: Option<String>,
    /// The embedder's own consumer parameters (only those), checked as they were set.
    consumer_params: ConsumerIdentity,
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
    fn new(backend: Backend) -> Self {
        ResolverBuilder {
            backend,
            layout: None,
            limits: Limits::default(),
            options: ResolverOptions::default(),
            tls: None,
            identity: None,
            subscribe_options: SubscribeOptions::default(),
            health: HealthOptions::default(),
            protection: ProtectionOptions::default(),
            consumer: None,
            application: None,
            host: None,
            consumer_params: ConsumerIdentity::default(),
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

    /// Sets the metadata fetches, the metadata cache, the registry calls and the consumer
    /// record at once (default [`ResolverOptions::default`]); the setters below change one
    /// part each.
    pub fn options(mut self, options: ResolverOptions) -> Self {
        self.options = options;
        self
    }

    crate::setters::forward_options! {
        options {
            /// Sets the deadline of one MetadataService call (see
            /// [`ResolverOptions::fetch_timeout`]).
            fetch_timeout: Duration;

            /// Sets how many instances of a revision one fetch tries (see
            /// [`ResolverOptions::fetch_attempts`]).
            fetch_attempts: usize;

            /// Sets how many (app, revision) metadata entries are cached (see
            /// [`ResolverOptions::cache_capacity`]).
            cache_capacity: u64;

            /// Sets how long an unused cached revision is kept (see
            /// [`ResolverOptions::cache_idle`]).
            cache_idle: Duration;

            /// Sets the deadline of each registry call (see [`ResolverOptions::store_timeout`]).
            store_timeout: Duration;
        }
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
        self.consumer = Some(app.into());
        self
    }

    /// Sets the consumer's own host (default: the IP of the interface that routes outward,
    /// else `127.0.0.1`), as a user would recognise it: what the consumer record names
    /// (with [`register_consumer`](Self::register_consumer)) and what the `addresses` of
    /// consumer-side rules match.
    pub fn consumer_host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// Adds a parameter of the consumer's own URL (default: none), as a Dubbo reference's
    /// `parameters`, for every balanced channel of the resolver and its route explanations:
    /// condition rules' `when` side (`region = hz => ...`) and `then` side's `$region`
    /// read it beside what the library sets itself, from the resolver (`side=consumer`,
    /// `application`, `register.ip`, `pid`, `dubbo`, `release`) and from each channel's
    /// subscription and options (`interface`, `path`, `version`, `group`,
    /// `protocol=tri`, `dubbo.tag`, `dubbo.force.tag`). Those keys, and `host`,
    /// `address`, `port`, `method`, `methods`, are reserved; set the tag with
    /// [`ChannelOptions::tag`](crate::consumer::ChannelOptions::tag). A key set twice
    /// keeps its last value.
    ///
    /// Fails with [`Error::Config`](crate::Error::Config) on a reserved key, an empty key,
    /// a key of more than 128 bytes or holding whitespace, a control character, `&` or
    /// `=`, a key starting `attachments` or `arguments` (rules read those from the call), a
    /// value of more than 1024 bytes or holding a control character, or a 65th parameter.
    pub fn consumer_param(
        mut self,
        key: impl AsRef<str>,
        value: impl AsRef<str>,
    ) -> crate::error::Result<Self> {
        self.consumer_params
            .set_param(key.as_ref(), value.as_ref())?;
        Ok(self)
    }

    /// Sets the liveness of the consumer record (see [`ResolverOptions::consumer_ttl`]).
    /// Only after [`register_consumer`](Self::register_consumer): before it, ignored.
    pub fn consumer_ttl(self, ttl: Duration) -> Self {
        self.consumer_option(|options| options.consumer_ttl(ttl))
    }

    /// Sets the shortest time between two rewrites of the consumer record (see
    /// [`ResolverOptions::consumer_refresh`]). Only after
    /// [`register_consumer`](Self::register_consumer): before it, ignored.
    pub fn consumer_refresh(self, refresh: Duration) -> Self {
        self.consumer_option(|options| options.consumer_refresh(refresh))
    }

    /// Changes the options of the consumer record with `set`, once there is a record
    /// ([`register_consumer`](Self::register_consumer)): before it, leaves them.
    fn consumer_option(mut self, set: impl FnOnce(ResolverOptions) -> ResolverOptions) -> Self {
        if self.consumer.is_some() {
            self.options = set(self.options);
        }
        self
    }

    /// Builds the resolver.
    pub fn build(self) -> Resolver {
        let mut backend = self.backend;
        if let Some(layout) = self.layout {
            backend = backend.with_layout(layout);
        }
        let options = self.options;
        let backend = backend.with_deadline(options.store_timeout);
        let app = self.application.or_else(|| self.consumer.clone());
        // The migration rule is the app's: a consumer without a name reads none.
        let migration = app
            .clone()
            .filter(|app| !app.is_empty())
            .map(|app| MigrationFollow::new(backend.config().clone(), app));
        let mut governed = ConsumerIdentity::new(app, self.host.clone());
        governed.params.extend(self.consumer_params.params);
        let governed = Arc::new(governed);
        let consumer = self.consumer.map(|app| ConsumerSettings {
            app,
            host: self.host.clone(),
            ttl: options.consumer_ttl,
            refresh: options.consumer_refresh,
        });
        let consumer = consumer.and_then(|settings| {
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
        let client = MetadataClient::new(options.fetch_timeout, self.limits.clone());
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
                fetch_attempts: options.fetch_attempts,
                capacity: options.cache_capacity,
                idle: options.cache_idle,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_params_are_checked_as_they_are_set() {
        let builder = Resolver::builder(Backend::memory())
            .consumer_param("region", "hz")
            .unwrap();
        let error = match builder.consumer_param("side", "provider") {
            Ok(_) => panic!("side is the library's"),
            Err(error) => error.to_string(),
        };
        assert!(
            error.contains("consumer parameter \"side\"") && error.contains("set by the library"),
            "{error}"
        );
        let error = Resolver::builder(Backend::memory())
            .consumer_param("", "x")
            .err()
            .map(|e| e.to_string());
        assert!(error.is_some_and(|e| e.contains("the key is empty")));
    }
}
