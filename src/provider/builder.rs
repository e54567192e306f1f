//! The provider's settings: [`ProviderBuilder`], validated without I/O by
//! [`ProviderBuilder::build`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tonic::server::NamedService;

use super::options::ServiceDefaults;
use super::timing::ProviderOptions;
use super::{
    MetadataServing, Provider, RegisterMode, Settings, Shared, State, address, interfaces,
};
use crate::backend::Backend;
use crate::backend::kv::layout::Layout;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{MetadataInfo, ServiceInfo, ServiceInstance, StorageType, names};
use crate::rpc::ExportedMetadata;

/// Builds a [`Provider`]. Only the app name and the registry backend are required.
pub struct ProviderBuilder {
    app: String,
    backend: Backend,
    host: Option<String>,
    port: Option<u16>,
    services: Vec<ServiceInfo>,
    extra_metadata: BTreeMap<String, String>,
    layout: Option<Layout>,
    limits: Limits,
    options: ProviderOptions,
    storage_type: StorageType,
    serving: MetadataServing,
    #[cfg(feature = "tls")]
    tls: Option<tonic::transport::ServerTlsConfig>,
    #[cfg(feature = "tls")]
    identity: Option<crate::identity::ServerIdentity>,
    report_cleanup: Option<Duration>,
    check_metadata_service: bool,
    reflection: bool,
    defaults: ServiceDefaults,
    rules: bool,
    register_mode: RegisterMode,
}

impl ProviderBuilder {
    /// The defaults, for a provider of `app` registering in `backend`.
    pub(super) fn new(app: String, backend: Backend) -> Self {
        ProviderBuilder {
            app,
            backend,
            host: None,
            port: None,
            services: Vec::new(),
            extra_metadata: BTreeMap::new(),
            layout: None,
            limits: Limits::default(),
            options: ProviderOptions::default(),
            storage_type: StorageType::Local,
            report_cleanup: None,
            serving: MetadataServing::InUserServer,
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "tls")]
            identity: None,
            check_metadata_service: true,
            reflection: true,
            defaults: ServiceDefaults::default(),
            rules: true,
            register_mode: RegisterMode::Instance,
        }
    }

    /// Sets the host consumers reach the instance at: a name or IP address, never an
    /// unspecified one (`0.0.0.0`, `::`), which nobody can connect to.
    ///
    /// When none is given: with [`Provider::serve`] or [`Self::serve_metadata_on`], the
    /// listener's IP, or for a listener on all interfaces (`0.0.0.0`, `::`) the IP of the
    /// interface that routes outward (loopback when there is none); with
    /// [`Provider::start`] inside your own server, `127.0.0.1`, which only this machine
    /// reaches.
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// Sets the instance's RPC port: the port consumers dial. Required with
    /// [`Provider::start`] inside your own tonic server; [`Provider::serve`] and
    /// [`Self::serve_metadata_on`] learn it from their listener (set it only when consumers
    /// reach the instance at another port, as behind a port mapping).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Exports a service.
    pub fn export(mut self, service: ServiceInfo) -> Self {
        self.services.push(service);
        self
    }

    /// Exports a tonic service by its `NamedService::NAME`, with the default protocol.
    pub fn export_service<S: NamedService>(self) -> Self {
        self.export(ServiceInfo::new(S::NAME))
    }

    /// Adds an entry to the instance's metadata map (well-known keys are set by the provider
    /// and cannot be overridden).
    pub fn metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_metadata.insert(key.into(), value.into());
        self
    }

    /// Puts every key under a namespace such as `/staging` (default: none). Only for a
    /// key-value backend (memory, etcd); other backends take their root from their URL
    /// (`zookeeper://…?group=staging`).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = Some(layout);
        self
    }

    /// Sets the size limits (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the lease TTL, the drain period, the revision grace, the rules' publish delay
    /// and the registry calls' deadline at once (default [`ProviderOptions::default`]); the
    /// setters of the same names change one each.
    pub fn options(mut self, options: ProviderOptions) -> Self {
        self.options = options;
        self
    }

    crate::setters::forward_options! {
        options {
            /// Sets the lease TTL (see [`ProviderOptions::lease_ttl`]).
            lease_ttl: Duration;

            /// Sets the drain period of a graceful shutdown (see
            /// [`ProviderOptions::drain_period`]).
            drain_period: Duration;

            /// Sets how long an earlier revision stays answerable (see
            /// [`ProviderOptions::revision_grace`]).
            revision_grace: Duration;

            /// Sets how long after a rule change the provider republishes (see
            /// [`ProviderOptions::rules_publish_delay`]).
            rules_publish_delay: Duration;

            /// Sets the deadline of each registry call (see [`ProviderOptions::store_timeout`]).
            store_timeout: Duration;
        }
    }

    /// Sets the storage type (default `local`); `remote` also writes the metadata report.
    pub fn storage_type(mut self, storage_type: StorageType) -> Self {
        self.storage_type = storage_type;
        self
    }

    /// With storage type `remote`: removes reported revisions of the app that no registered
    /// instance uses once they have been unused for `grace` (default: never removed). Every
    /// provider of the app may run it; removals are idempotent. A consumer that still needs
    /// a removed revision falls back to the MetadataService call.
    pub fn report_cleanup(mut self, grace: Duration) -> Self {
        self.report_cleanup = Some(grace);
        self
    }

    /// Serves MetadataService on a listener of the provider's own at `addr` (port 0: any
    /// free port) instead of inside the user's tonic server.
    pub fn serve_metadata_on(mut self, addr: SocketAddr) -> Self {
        self.serving = MetadataServing::OwnPort(addr);
        self
    }

    /// Serves the provider's own MetadataService listener over TLS (see
    /// [`Self::serve_metadata_on`]). Inside the user's server, TLS is the user's setting.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn tls(mut self, tls: tonic::transport::ServerTlsConfig) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Declares the certificate the app's servers present: `start()` and `serve()` first
    /// check that it names the app under its rule, and fail with
    /// [`Error::IdentityMismatch`] when it does not (consumers checking identity would refuse
    /// it). With [`Self::serve_metadata_on`] and no [`Self::tls`], the provider's own
    /// listener serves TLS with it; your own servers take
    /// [`ServerIdentity::tls_config`](crate::identity::ServerIdentity::tls_config).
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    pub fn identity(mut self, identity: crate::identity::ServerIdentity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Whether [`Provider::start`] first calls the provider's own MetadataService at the
    /// registered host and port, and fails with [`Error::MetadataServiceMissing`] when it
    /// does not answer for the provider's revision (default: on). It catches a router
    /// without [`Provider::metadata_service`], which would register an instance no consumer
    /// can use. Only inside your own server with storage type `local`:
    /// [`Provider::serve`] and [`Self::serve_metadata_on`] serve it themselves, and `remote`
    /// storage answers from the report. Turn it off when the registered address is not
    /// reachable from the process itself, or your server speaks TLS.
    pub fn check_metadata_service(mut self, check: bool) -> Self {
        self.check_metadata_service = check;
        self
    }

    /// Whether [`Provider::serve`] and [`Self::serve_metadata_on`] add gRPC server
    /// reflection (`v1` and `v1alpha`) describing MetadataService (default: on). Turn it off
    /// when your router serves reflection of its own.
    pub fn reflection(mut self, reflection: bool) -> Self {
        self.reflection = reflection;
        self
    }

    /// Sets a static tag on every exported service (`dubbo.tag`, as a Java provider's `tag`):
    /// a call tagged the same goes to the app's providers of that tag, an untagged call
    /// never reaches them. 1 to 128 bytes without spaces or commas; a service's own
    /// `dubbo.tag` parameter wins.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.defaults.tag = Some(tag.into());
        self
    }

    /// Sets the weight of every exported service (`weight`, default 100 when unset): the
    /// share of calls it gets beside the app's other providers. 0 to `i32::MAX` (a Java
    /// `int`; a negative one fails [`Self::build`]); a service's own `weight` wins.
    pub fn weight(mut self, weight: i64) -> Self {
        self.defaults.weight = Some(weight);
        self
    }

    /// Sets the warm-up of every exported service (`warmup`, default 10 minutes when
    /// unset): consumers ramp its weight up over this long after the instance's start
    /// (its record's `timestamp`). At most `i32::MAX` ms; a service's own `warmup` wins.
    pub fn warmup(mut self, warmup: Duration) -> Self {
        self.defaults.warmup = Some(warmup);
        self
    }

    /// Whether the provider applies its own rules from the config centre (default: on), as
    /// Dubbo Java's providers do: the `side: provider` items of `{app}.configurators` and of
    /// each service's `{interface}:{version}:{group}.configurators` that name this
    /// instance's address (or `0.0.0.0`), such as dubbo-admin's "disable" or "weight".
    /// What they set goes into the exported services' parameters, republished as a new
    /// revision; see [`Provider::rules`].
    pub fn rules(mut self, rules: bool) -> Self {
        self.rules = rules;
        self
    }

    /// Sets which levels the provider registers at (default [`RegisterMode::Instance`], the
    /// application-level instance record only), as Dubbo's `register-mode`:
    /// [`RegisterMode::Interface`] writes one interface-level URL per exported service
    /// instead, [`RegisterMode::All`] both, so that consumers that read only the interface
    /// level (Dubbo 2.7, Dubbo 3 at `migration.step=FORCE_INTERFACE`) call it too.
    ///
    /// The URL is the one a Dubbo Java 3.3 provider writes for a Triple service (see
    /// [`ProviderUrl`](crate::model::ProviderUrl)), ephemeral, bound to the instance's
    /// session or connection: on ZooKeeper the node
    /// `/dubbo/{interface}/providers/{URL}` (root: the registry URL's `group`), on Nacos an
    /// instance of service `providers:{interface}:{version}:{group}`. It follows the exports
    /// and the provider's rules (`disabled`, `weight`), and is removed first on a graceful
    /// stop. Only ZooKeeper and Nacos have the layout: on another backend [`Self::build`]
    /// fails with [`Error::Config`]; so does a service parameter that cannot be written in a
    /// URL (a value with `&`).
    pub fn register_mode(mut self, mode: RegisterMode) -> Self {
        self.register_mode = mode;
        self
    }

    /// Validates the settings and builds the provider, without I/O.
    pub fn build(self) -> Result<Provider> {
        self.defaults.validate()?;
        if let Some(host) = &self.host {
            address::check_host(host)?;
        }
        let port = match (self.port, self.serving) {
            (Some(0), MetadataServing::OwnPort(_)) | (None, _) => 0,
            (Some(port), _) => names::validate_port(i64::from(port))?,
        };
        let options = self.options;
        if options.lease_ttl < Duration::from_secs(1) {
            return Err(Error::config("lease TTL must be at least one second"));
        }
        let mut declared = self.services;
        for service in &mut declared {
            self.defaults.apply(service);
        }
        let metadata = MetadataInfo::new_with_rule(
            self.app.clone(),
            declared.clone(),
            crate::model::PROVIDER_REVISION_RULE,
        )?;
        if self.register_mode.writes_interface() {
            if !self.backend.interface_level() {
                return Err(Error::config(format!(
                    "register mode {} asks for interface-level URLs, which the {} backend \
                     does not write (ZooKeeper and Nacos do); use register mode instance",
                    self.register_mode,
                    self.backend.name()
                )));
            }
            // Refused now rather than at the first write: parameters no URL can carry.
            let host = self.host.as_deref().unwrap_or(address::LOOPBACK);
            interfaces::urls(&metadata, host, port.max(1), 1)?;
        }
        let exported = Arc::new(ExportedMetadata::new(metadata, options.revision_grace));
        let backend = match self.layout {
            Some(layout) => self.backend.with_layout(layout),
            None => self.backend,
        };
        let backend = backend.with_deadline(options.store_timeout);
        let span = tracing::info_span!("provider", app = %self.app, registry = backend.name());
        Ok(Provider {
            span,
            shared: Arc::new(Shared {
                backend,
                exported,
                limits: self.limits,
                lease_ttl: options.lease_ttl,
                drain: options.drain,
                storage_type: self.storage_type,
                report_cleanup: self.report_cleanup,
                state: Mutex::new(State {
                    instance: ServiceInstance::new(
                        self.app,
                        self.host
                            .clone()
                            .unwrap_or_else(|| address::LOOPBACK.into()),
                        port,
                    ),
                    extra_metadata: self.extra_metadata,
                    registration: None,
                    metadata_port: port,
                    started_at_ms: 0,
                    stopping: false,
                    stopped: false,
                    interfaces: BTreeMap::new(),
                    interfaces_pending: false,
                }),
                cancel: CancellationToken::new(),
                warnings: crate::warnings::Aggregator::default(),
                defaults: self.defaults,
                declared: std::sync::Mutex::new(declared),
                rules: std::sync::Mutex::default(),
                rules_delay: self.rules.then_some(options.publish_delay),
                exports_changed: tokio::sync::Notify::new(),
                publishing: Mutex::new(()),
                register_mode: self.register_mode,
            }),
            settings: Settings {
                serving: self.serving,
                #[cfg(feature = "tls")]
                tls: self.tls,
                #[cfg(feature = "tls")]
                identity: self.identity,
                host_given: self.host.is_some(),
                check_metadata_service: self.check_metadata_service,
                reflection: self.reflection,
            },
            tasks: std::sync::Mutex::new(Vec::new()),
            rules_started: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Builds the provider and starts it (see [`Provider::start`]).
    pub async fn start(self) -> Result<Provider> {
        let provider = self.build()?;
        provider.start().await?;
        Ok(provider)
    }
}
