//! The provider: what a Rust RPC server embeds to be discovered.
//!
//! It registers one instance record for its app carrying the revision of its exports, serves
//! MetadataService (inside the user's tonic server or on a port of its own), links each
//! exported interface to its app in the mapping, keeps its lease alive and re-registers when
//! the lease is lost, and stops gracefully: disabled first, deregistered after a drain.
//!
//! Three ways to run one, from the most to the least managed:
//!
//! * [`Provider::serve`] runs your tonic router with MetadataService added, registers once
//!   it runs and stops gracefully on a signal before the server stops;
//! * [`ProviderBuilder::serve_metadata_on`] then [`Provider::start`]: MetadataService on a
//!   listener of the provider's own, beside whatever serves your RPCs;
//! * [`Provider::start`] inside your own tonic server, to which you add
//!   [`Provider::metadata_service`]; `start` checks that it answers
//!   ([`ProviderBuilder::check_metadata_service`]), and you call [`Provider::shutdown`]
//!   before stopping the server.
//!
//! Dropping a started provider without [`Provider::shutdown`] (or dropping a
//! [`Provider::serve`] future before it completes) acts like a crash: its tasks stop and the
//! record stays until the lease expires ([`ProviderBuilder::lease_ttl`]), so consumers keep
//! calling a gone instance for up to a TTL. Stop it gracefully instead, on
//! [`shutdown_signal`]: deploys (systemd, Kubernetes, Docker) send SIGTERM, and wait (30 s
//! in Kubernetes, 90 s in systemd) before they kill; the stop takes the drain period
//! ([`ProviderOptions::drain_period`], 2 s) plus one registry write (and, under [`Provider::serve`], half a
//! second more of answering after the record is deleted, for Dubbo consumers).
//!
//! One concept per file:
//!
//! * `builder`: the settings, validated without I/O; `address`: the registered host;
//!   `options`: the typed service defaults (tag, weight, warm-up); `timing`: the lease,
//!   drain and delays ([`ProviderOptions`]);
//! * `record`: the instance record's well-known metadata (pure);
//! * `overrides`: the exports as the provider's own configurators override them (pure);
//!   `rules`: those configurators followed live, and the exports republished;
//! * `lease`: registration under a lease, keep-alive, re-registration;
//! * `register_mode`: which levels are registered ([`RegisterMode`]); `interfaces`: the
//!   interface-level URLs, kept in step with the exports;
//! * `mappings`: interface -> app links, retried in the background;
//! * `report_cleanup`: removing reported revisions no instance uses;
//! * `serve`: the user's router served with MetadataService; `own_server`: MetadataService
//!   on a listener of the provider's own; `reflection`: gRPC reflection for both;
//!   `routes`: adding a service to the user's router;
//! * `check`: the start-up check that MetadataService answers;
//! * `stop`: the graceful stop; `signal`: [`shutdown_signal`], SIGINT or SIGTERM.

pub(crate) mod address;
mod builder;
mod check;
mod interfaces;
mod lease;
mod mappings;
mod options;
mod overrides;
mod own_server;
mod record;
mod reflection;
mod register_mode;
mod report_cleanup;
mod routes;
mod rules;
mod serve;
mod signal;
mod stop;
mod timing;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

pub use builder::ProviderBuilder;
pub use register_mode::RegisterMode;
pub use rules::ProviderRules;
pub use signal::shutdown_signal;
pub use timing::ProviderOptions;

use crate::backend::{Backend, InterfaceRegistration, Registration};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{MetadataInfo, ProviderUrl, ServiceInfo, ServiceInstance, StorageType, keys};
use crate::rpc::{ExportedMetadata, MetadataServer, MetadataServiceV2Server};

/// Where the provider's MetadataService is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MetadataServing {
    /// The user adds [`Provider::metadata_service`] to their own tonic server.
    InUserServer,
    /// The provider serves it on its own listener at this address (port 0: any free port).
    OwnPort(SocketAddr),
}

/// A running (or ready to run) provider instance. See the module docs.
///
/// Dropping a started provider without [`Provider::shutdown`] acts like a crash: the record
/// stays registered until its lease expires.
pub struct Provider {
    /// The span of the provider's tasks and calls.
    span: tracing::Span,
    shared: Arc<Shared>,
    settings: Settings,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
    /// Whether the rules watcher was started (once, whichever way the provider starts).
    rules_started: std::sync::atomic::AtomicBool,
}

/// How the provider serves MetadataService and finds its address.
struct Settings {
    serving: MetadataServing,
    #[cfg(feature = "tls")]
    tls: Option<tonic::transport::ServerTlsConfig>,
    /// The certificate the app's servers present, checked at start.
    #[cfg(feature = "tls")]
    identity: Option<crate::identity::ServerIdentity>,
    /// Whether the user gave the host (else it is learned from the listener).
    host_given: bool,
    check_metadata_service: bool,
    reflection: bool,
}

/// What the provider's tasks share.
struct Shared {
    /// The registry backend, each call under the store deadline.
    backend: Backend,
    exported: Arc<ExportedMetadata>,
    limits: Limits,
    lease_ttl: Duration,
    drain: Duration,
    storage_type: StorageType,
    report_cleanup: Option<Duration>,
    /// Serializes every write of the instance record (export changes, lease recovery, stop).
    state: Mutex<State>,
    cancel: CancellationToken,
    /// Repeated warnings (renewals, registrations, mappings while the store is down).
    warnings: crate::warnings::Aggregator,
    /// The typed service defaults, applied to every declared service.
    defaults: options::ServiceDefaults,
    /// The services as declared (typed options applied), before the provider's rules.
    declared: std::sync::Mutex<Vec<ServiceInfo>>,
    /// The provider's own rules, last good per key.
    rules: std::sync::Mutex<rules::OwnRules>,
    /// The delay between a rule change and its revision; `None`: rules not followed.
    rules_delay: Option<Duration>,
    /// Told when the declared services change, so the rules followed follow them.
    exports_changed: tokio::sync::Notify,
    /// Serializes publishing new exports (declared changes, rule changes).
    publishing: Mutex<()>,
    /// Which levels are registered.
    register_mode: RegisterMode,
}

/// The instance record as last written, and the registration (lease, session) that keeps
/// it alive.
struct State {
    instance: ServiceInstance,
    extra_metadata: BTreeMap<String, String>,
    registration: Option<Arc<dyn Registration>>,
    metadata_port: u16,
    /// When the provider started, in ms since the epoch (the record's `timestamp`, which
    /// consumers warm up from); 0 until it starts.
    started_at_ms: u64,
    /// Set once the graceful stop began: the record is written marked as stopping.
    stopping: bool,
    /// Set once the record is being deleted: nothing may register it again.
    stopped: bool,
    /// The interface-level URLs as last written, by [`ProviderUrl::key`], and their
    /// registrations (empty unless the register mode writes them).
    interfaces: BTreeMap<String, (ProviderUrl, Arc<dyn InterfaceRegistration>)>,
    /// Whether the interface-level URLs may differ from the exports' (a write failed): the
    /// keep-alive loop tries again.
    interfaces_pending: bool,
}

impl Provider {
    /// A builder for a provider of `app` registering in `backend`: a [`Backend`] (from
    /// [`crate::backend::connect`], say), or a store (`Arc<dyn Store>`, `Arc<MemoryStore>`,
    /// `Arc<EtcdStore>`), which becomes the key-value backend over it.
    pub fn builder(app: impl Into<String>, backend: impl Into<Backend>) -> ProviderBuilder {
        ProviderBuilder::new(app.into(), backend.into())
    }

    /// The MetadataService to add to the user's tonic server (when not served on a port of
    /// the provider's own).
    pub fn metadata_service(&self) -> MetadataServiceV2Server<MetadataServer> {
        MetadataServer::new(self.shared.exported.clone()).into_service(&self.shared.limits)
    }

    /// What this provider answers MetadataService calls with.
    pub fn exported(&self) -> &Arc<ExportedMetadata> {
        &self.shared.exported
    }

    /// The interface-level URLs as last written (none unless the register mode writes them,
    /// see [`ProviderBuilder::register_mode`]).
    pub async fn interface_urls(&self) -> Vec<ProviderUrl> {
        let state = self.shared.state.lock().await;
        state
            .interfaces
            .values()
            .map(|(url, _)| url.clone())
            .collect()
    }

    /// The current revision.
    pub fn revision(&self) -> String {
        self.shared.exported.current().revision.clone()
    }

    /// The instance record as last written. Before [`Self::start`] or [`Self::serve`], a
    /// host or port still to be learned from the listener reads `127.0.0.1` or `0`.
    pub async fn instance(&self) -> ServiceInstance {
        self.shared.state.lock().await.instance.clone()
    }

    /// What keeps the instance's record alive, once registered: its registration's id,
    /// such as `lease 7587…` (etcd, memory) or `session 0x…` (ZooKeeper). It changes when the
    /// provider registers again after losing it.
    pub async fn registration_id(&self) -> Option<String> {
        let state = self.shared.state.lock().await;
        state.registration.as_ref().map(|r| r.id())
    }

    /// Starts serving MetadataService (when on its own port), publishes the report (storage
    /// type `remote`), registers the instance under a fresh lease, links the exported
    /// interfaces to the app and keeps the lease alive. Returns once the instance is
    /// registered; mappings that could not be written yet are retried in the background.
    ///
    /// Inside your own tonic server, start the server (with [`Self::metadata_service`]
    /// added) first: `start` fails with [`Error::MetadataServiceMissing`] when it does not
    /// answer (see [`ProviderBuilder::check_metadata_service`]), and with
    /// [`Error::Config`] when the port was never set. [`Self::serve`] does all of it.
    pub async fn start(&self) -> Result<()> {
        self.start_inner()
            .instrument(tracing::info_span!(parent: &self.span, "start"))
            .await
    }

    async fn start_inner(&self) -> Result<()> {
        self.check_identity()?;
        match self.settings.serving {
            MetadataServing::OwnPort(addr) => self.serve_own_port(addr).await?,
            MetadataServing::InUserServer => {
                if self.shared.state.lock().await.instance.port == 0 {
                    return Err(Error::config(
                        "the instance port was never set: call `.port(..)` on the builder \
                         with the port your tonic server listens on, or let `Provider::serve` \
                         learn it from the listener",
                    ));
                }
                if self.settings.check_metadata_service
                    && self.shared.storage_type == StorageType::Local
                {
                    self.check_metadata_service().await?;
                }
            }
        }
        self.register_and_spawn(false).await
    }

    /// Checks that the declared certificate names the app (see
    /// [`ProviderBuilder::identity`]).
    fn check_identity(&self) -> Result<()> {
        #[cfg(feature = "tls")]
        if let Some(identity) = &self.settings.identity {
            identity.check(&self.shared.exported.current().app)?;
        }
        Ok(())
    }

    /// Registers the instance, writes the mappings and starts the background tasks. With
    /// `later`, a store that cannot be reached now (a transient error) does not fail it:
    /// the registration is retried in the background, with backoff and aggregated
    /// warnings, until the store answers.
    async fn register_and_spawn(&self, later: bool) -> Result<()> {
        self.shared.state.lock().await.started_at_ms = now_ms();
        self.start_rules().await;
        match self.shared.register_with_new_lease().await {
            Ok(()) => {
                let pending = self.shared.write_mappings().await;
                if !pending.is_empty() {
                    let shared = self.shared.clone();
                    self.spawn(async move { shared.retry_mappings(pending).await });
                }
            }
            Err(e) if later && e.is_transient() => {
                tracing::warn!(
                    error = %e,
                    "store unavailable at start; serving, and registering once it answers"
                );
                let shared = self.shared.clone();
                self.spawn(async move { shared.recover().await });
            }
            Err(e) => return Err(e),
        }
        let shared = self.shared.clone();
        self.spawn(async move { shared.keep_alive_loop().await });
        if let (StorageType::Remote, Some(grace)) =
            (self.shared.storage_type, self.shared.report_cleanup)
        {
            let shared = self.shared.clone();
            self.spawn(async move { shared.report_cleanup_loop(grace).await });
        }
        Ok(())
    }

    /// Changes the exported services: a new revision, the instance record updated under the
    /// same lease, new interfaces mapped. The old revision stays answerable for the grace
    /// period. The typed options ([`ProviderBuilder::tag`], [`ProviderBuilder::weight`],
    /// [`ProviderBuilder::warmup`]) and the provider's rules in force apply to the new
    /// services too.
    pub async fn set_services(
        &self,
        services: impl IntoIterator<Item = ServiceInfo>,
    ) -> Result<()> {
        let app = self.shared.exported.current().app.clone();
        let mut services: Vec<ServiceInfo> = services.into_iter().collect();
        for service in &mut services {
            self.shared.defaults.apply(service);
        }
        // Refused before anything changes: the same checks as the revision's.
        MetadataInfo::new_with_rule(app, services.clone(), crate::model::PROVIDER_REVISION_RULE)?;
        *rules::lock(&self.shared.declared) = services;
        self.shared.exports_changed.notify_one();
        self.shared.publish_exports().await?;
        let pending = self.shared.write_mappings().await;
        if !pending.is_empty() {
            let shared = self.shared.clone();
            self.spawn(async move { shared.retry_mappings(pending).await });
        }
        Ok(())
    }

    /// The provider's own rules: the configurator keys in force on it and those refused,
    /// with the reason (see [`ProviderBuilder::rules`]).
    pub fn rules(&self) -> ProviderRules {
        rules::lock(&self.shared.rules).report()
    }

    /// Starts following the provider's own rules (unless turned off) and waits, briefly,
    /// for the exports they make, so the first record written already obeys them.
    async fn start_rules(&self) {
        let Some(delay) = self.shared.rules_delay else {
            return;
        };
        if self
            .rules_started
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let (loaded, first) = tokio::sync::oneshot::channel();
        let shared = self.shared.clone();
        self.spawn(async move { shared.rules_loop(delay, loaded).await });
        let _ = first.await;
    }

    /// Stops gracefully: marks the instance as stopping (`enabled: false` and
    /// `introspect.stopping=true`, so consumers stop routing to it at once), waits the drain
    /// period, deletes the record, ends the lease or session and stops the tasks and the
    /// provider's own server.
    pub async fn shutdown(self) -> Result<()> {
        let result = self
            .shared
            .deregister_gracefully(self.shared.drain)
            .instrument(tracing::info_span!(parent: &self.span, "shutdown"))
            .await;
        self.stop_tasks().await;
        result
    }

    /// Stops the background tasks (and the provider's own server) and waits for them.
    async fn stop_tasks(&self) {
        self.shared.cancel.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for task in tasks {
            let _ = task.await;
        }
    }

    /// Stops every task at once without deregistering, as a crash would: the record stays
    /// until the lease expires. Meant for tests and fault drills.
    pub fn abort(&self) {
        self.shared.cancel.cancel();
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }

    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        self.tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(tokio::spawn(task.instrument(self.span.clone())));
    }
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let current = self.shared.exported.current();
        f.debug_struct("Provider")
            .field("app", &current.app)
            .field("revision", &current.revision)
            .field("serving", &self.settings.serving)
            .finish_non_exhaustive()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.shared.cancel.cancel();
    }
}

impl Shared {
    /// Publishes the exports the declared services and the rules in force make, when their
    /// revision differs from the current one: the report (storage type `remote`), the
    /// answers of MetadataService, and the instance record under its lease.
    async fn publish_exports(&self) -> Result<()> {
        let _publishing = self.publishing.lock().await;
        let (host, port) = {
            let state = self.state.lock().await;
            (state.instance.host.clone(), state.instance.port)
        };
        let app = self.exported.current().app.clone();
        let services = {
            let declared = rules::lock(&self.declared);
            let rules = rules::lock(&self.rules);
            overrides::overridden(&declared, &rules.documents(), &app, &host, port)
        };
        let metadata =
            MetadataInfo::new_with_rule(app, services, crate::model::PROVIDER_REVISION_RULE)?;
        if metadata.revision == self.exported.current().revision {
            return Ok(());
        }
        tracing::info!(app = %metadata.app, revision = %metadata.revision, "exports changed");
        if self.storage_type == StorageType::Remote {
            self.backend
                .reports()
                .put_if_absent(&metadata, &self.limits)
                .await?;
        }
        self.exported.replace(metadata);
        let mut state = self.state.lock().await;
        if state.stopped {
            return Ok(());
        }
        self.refresh_metadata(&mut state);
        if let Some(registration) = &state.registration {
            registration.update(&state.instance).await?;
        }
        self.sync_interfaces(&mut state).await
    }

    /// Rewrites the well-known metadata entries from the current exports (and the stopping
    /// marker while the graceful stop drains).
    fn refresh_metadata(&self, state: &mut State) {
        state.instance.metadata = record::instance_metadata(
            &state.extra_metadata,
            &self.exported.current(),
            self.storage_type,
            state.instance.port,
            state.metadata_port,
            state.started_at_ms,
        )
        .into();
        state.instance.metadata.remove(keys::STOPPING);
        if state.stopping {
            state.instance.mark_stopping();
        }
    }
}

/// The wall clock in ms since the epoch (0 before it, which no clock reads).
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
