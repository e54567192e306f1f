//! The provider: what a Rust RPC server embeds to be discovered.
//!
//! It registers one instance record for its app carrying the revision of its exports, serves
//! MetadataService (inside the user's tonic server or on a port of its own), links each
//! exported interface to its app in the mapping, keeps its lease alive and re-registers when
//! the lease is lost, and stops gracefully: disabled first, deregistered after a drain.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tonic::server::NamedService;
use tracing::Instrument as _;

use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::layout::Layout;
use crate::limits::Limits;
use crate::mapping::Mapping;
use crate::model::revision::REVISION_RULE_SHA256_V1;
use crate::model::{MetadataInfo, ServiceInfo, ServiceInstance, StorageType, keys, names};
use crate::registry::Registry;
use crate::report::MetadataReport;
use crate::rpc::{ExportedMetadata, MetadataServer, MetadataServiceV2Server};
use crate::store::{DeadlineStore, LeaseId, Store};

/// Default lease TTL: a crashed provider disappears this long after its last keep-alive.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);
/// Default time between marking an instance disabled and deregistering it.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(2);
/// Default time an earlier revision stays answerable after an export change.
pub const DEFAULT_REVISION_GRACE: Duration = Duration::from_secs(120);

/// Where the provider's MetadataService is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MetadataServing {
    /// The user adds [`Provider::metadata_service`] to their own tonic server.
    InUserServer,
    /// The provider serves it on its own listener at this address (port 0: any free port).
    OwnPort(SocketAddr),
}

/// Builds a [`Provider`]. Only the app name and the store are required.
pub struct ProviderBuilder {
    app: String,
    store: Arc<dyn Store>,
    host: String,
    port: u16,
    services: Vec<ServiceInfo>,
    extra_metadata: BTreeMap<String, String>,
    layout: Layout,
    limits: Limits,
    lease_ttl: Duration,
    drain: Duration,
    revision_grace: Duration,
    storage_type: StorageType,
    serving: MetadataServing,
    #[cfg(feature = "tls")]
    tls: Option<tonic::transport::ServerTlsConfig>,
    store_timeout: Duration,
    report_cleanup: Option<Duration>,
}

impl ProviderBuilder {
    /// Sets the host consumers reach the instance at (default `127.0.0.1`).
    pub fn host(mut self, host: impl Into<String>) -> Self {
        self.host = host.into();
        self
    }

    /// Sets the instance's RPC port. Required, unless MetadataService is served on a port of
    /// the provider's own: then port 0 registers the instance at that port.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
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

    /// Puts every key under a namespace such as `/staging` (default: none).
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Sets the size limits (default: [`Limits::default`]).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the lease TTL (default [`DEFAULT_LEASE_TTL`]); keep-alives go every third of it.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// Sets the drain period of a graceful shutdown (default [`DEFAULT_DRAIN`]).
    pub fn drain_period(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Sets how long an earlier revision stays answerable (default
    /// [`DEFAULT_REVISION_GRACE`]).
    pub fn revision_grace(mut self, grace: Duration) -> Self {
        self.revision_grace = grace;
        self
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

    /// Sets the deadline of each store call (default
    /// [`crate::store::DEFAULT_STORE_TIMEOUT`]): a hanging store costs a timeout, never a
    /// hung provider.
    pub fn store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }

    /// Validates the settings and builds the provider, without I/O.
    pub fn build(self) -> Result<Provider> {
        names::validate_host(&self.host)?;
        let port = match self.serving {
            MetadataServing::OwnPort(_) if self.port == 0 => 0,
            _ => names::validate_port(i64::from(self.port))?,
        };
        if self.lease_ttl < Duration::from_secs(1) {
            return Err(Error::Config(
                "lease TTL must be at least one second".into(),
            ));
        }
        let metadata = MetadataInfo::new(self.app.clone(), self.services)?;
        let exported = Arc::new(ExportedMetadata::new(metadata, self.revision_grace));
        let store: Arc<dyn Store> = Arc::new(DeadlineStore::new(self.store, self.store_timeout));
        let span = tracing::info_span!("provider", app = %self.app);
        Ok(Provider {
            span,
            shared: Arc::new(Shared {
                registry: Registry::new(store.clone(), self.layout.clone(), self.limits.clone()),
                mapping: Mapping::new(store.clone(), self.layout.clone(), self.limits.clone()),
                report: MetadataReport::new(store.clone(), self.layout, self.limits.clone()),
                store,
                exported,
                limits: self.limits,
                lease_ttl: self.lease_ttl,
                drain: self.drain,
                storage_type: self.storage_type,
                report_cleanup: self.report_cleanup,
                state: Mutex::new(State {
                    instance: ServiceInstance::new(self.app, self.host, port),
                    extra_metadata: self.extra_metadata,
                    lease: None,
                    metadata_port: port,
                }),
                cancel: CancellationToken::new(),
            }),
            serving: self.serving,
            #[cfg(feature = "tls")]
            tls: self.tls,
            tasks: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Builds the provider and starts it (see [`Provider::start`]).
    pub async fn start(self) -> Result<Provider> {
        let provider = self.build()?;
        provider.start().await?;
        Ok(provider)
    }
}

/// A running (or ready to run) provider instance. See the module docs.
pub struct Provider {
    /// The span of the provider's tasks and calls.
    span: tracing::Span,
    shared: Arc<Shared>,
    serving: MetadataServing,
    #[cfg(feature = "tls")]
    tls: Option<tonic::transport::ServerTlsConfig>,
    tasks: std::sync::Mutex<Vec<JoinHandle<()>>>,
}

struct Shared {
    store: Arc<dyn Store>,
    registry: Registry,
    mapping: Mapping,
    report: MetadataReport,
    exported: Arc<ExportedMetadata>,
    limits: Limits,
    lease_ttl: Duration,
    drain: Duration,
    storage_type: StorageType,
    report_cleanup: Option<Duration>,
    /// Serializes every write of the instance record (export changes, lease recovery, stop).
    state: Mutex<State>,
    cancel: CancellationToken,
}

struct State {
    instance: ServiceInstance,
    extra_metadata: BTreeMap<String, String>,
    lease: Option<LeaseId>,
    metadata_port: u16,
}

impl Provider {
    /// A builder for a provider of `app` registering in `store`.
    pub fn builder(app: impl Into<String>, store: Arc<dyn Store>) -> ProviderBuilder {
        ProviderBuilder {
            app: app.into(),
            store,
            host: "127.0.0.1".into(),
            port: 0,
            services: Vec::new(),
            extra_metadata: BTreeMap::new(),
            layout: Layout::default(),
            limits: Limits::default(),
            lease_ttl: DEFAULT_LEASE_TTL,
            drain: DEFAULT_DRAIN,
            revision_grace: DEFAULT_REVISION_GRACE,
            storage_type: StorageType::Local,
            report_cleanup: None,
            serving: MetadataServing::InUserServer,
            #[cfg(feature = "tls")]
            tls: None,
            store_timeout: crate::store::DEFAULT_STORE_TIMEOUT,
        }
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

    /// The current revision.
    pub fn revision(&self) -> String {
        self.shared.exported.current().revision.clone()
    }

    /// The instance record as last written.
    pub async fn instance(&self) -> ServiceInstance {
        self.shared.state.lock().await.instance.clone()
    }

    /// The lease the instance is bound to, once registered.
    pub async fn lease(&self) -> Option<LeaseId> {
        self.shared.state.lock().await.lease
    }

    /// Starts serving MetadataService (when on its own port), publishes the report (storage
    /// type `remote`), registers the instance under a fresh lease, links the exported
    /// interfaces to the app and keeps the lease alive. Returns once the instance is
    /// registered; mappings that could not be written yet are retried in the background.
    pub async fn start(&self) -> Result<()> {
        self.start_inner()
            .instrument(tracing::info_span!(parent: &self.span, "start"))
            .await
    }

    async fn start_inner(&self) -> Result<()> {
        if let MetadataServing::OwnPort(addr) = self.serving {
            let listener = tokio::net::TcpListener::bind(addr).await?;
            let port = listener.local_addr()?.port();
            let mut state = self.shared.state.lock().await;
            state.metadata_port = port;
            if state.instance.port == 0 {
                state.instance.port = port;
            }
            drop(state);
            let service = self.metadata_service();
            let cancel = self.shared.cancel.clone();
            // TCP_NODELAY on every accepted connection: tonic applies its own socket options
            // only to listeners it binds itself, and without it Nagle's algorithm holds part of
            // an answer back until the client's delayed ACK (~40 ms on Linux).
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            let server = tonic::transport::Server::builder();
            #[cfg(feature = "tls")]
            let server = match self.tls.clone() {
                Some(tls) => server
                    .tls_config(tls)
                    .map_err(|e| Error::Server(format!("TLS: {e}")))?,
                None => server,
            };
            let mut server = server;
            let router = server.add_service(service);
            #[cfg(feature = "reflection")]
            let router = router.add_service(crate::rpc::reflection_service()?);
            self.spawn(async move {
                let served = router
                    .serve_with_incoming_shutdown(incoming, cancel.cancelled_owned())
                    .await;
                if let Err(e) = served {
                    tracing::error!(error = %e, "metadata service stopped");
                }
            });
        }
        self.shared.register_with_new_lease().await?;
        let pending = self.shared.write_mappings().await;
        if !pending.is_empty() {
            let shared = self.shared.clone();
            self.spawn(async move { shared.retry_mappings(pending).await });
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
    /// period.
    pub async fn set_services(
        &self,
        services: impl IntoIterator<Item = ServiceInfo>,
    ) -> Result<()> {
        let metadata = MetadataInfo::new(self.shared.exported.current().app.clone(), services)?;
        if metadata.revision == self.revision() {
            return Ok(());
        }
        tracing::info!(app = %metadata.app, revision = %metadata.revision, "exports changed");
        if self.shared.storage_type == StorageType::Remote {
            self.shared.report.publish(&metadata).await?;
        }
        self.shared.exported.replace(metadata);
        {
            let mut state = self.shared.state.lock().await;
            self.shared.refresh_metadata(&mut state);
            if state.lease.is_some() {
                self.shared
                    .registry
                    .register(&state.instance, state.lease)
                    .await?;
            }
        }
        let pending = self.shared.write_mappings().await;
        if !pending.is_empty() {
            let shared = self.shared.clone();
            self.spawn(async move { shared.retry_mappings(pending).await });
        }
        Ok(())
    }

    /// Stops gracefully: marks the instance disabled (consumers stop routing to it at once),
    /// waits the drain period, deletes the record, revokes the lease and stops the tasks and
    /// the provider's own server.
    pub async fn shutdown(self) -> Result<()> {
        let result = self
            .shared
            .deregister_gracefully()
            .instrument(tracing::info_span!(parent: &self.span, "shutdown"))
            .await;
        self.shared.cancel.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for task in tasks {
            let _ = task.await;
        }
        result
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
            .field("serving", &self.serving)
            .finish_non_exhaustive()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.shared.cancel.cancel();
    }
}

impl Shared {
    /// Rewrites the well-known metadata entries from the current exports.
    fn refresh_metadata(&self, state: &mut State) {
        let current = self.exported.current();
        let mut metadata = state.extra_metadata.clone();
        metadata.insert(keys::REVISION.into(), current.revision.clone());
        metadata.insert(keys::STORAGE_TYPE.into(), self.storage_type.as_str().into());
        metadata.insert(keys::META_V.into(), keys::META_V_2.into());
        metadata.insert(keys::REVISION_RULE.into(), REVISION_RULE_SHA256_V1.into());
        let mut protocols: Vec<&str> = current
            .services
            .values()
            .map(|s| s.protocol.as_str())
            .collect();
        protocols.sort_unstable();
        protocols.dedup();
        let endpoints: Vec<serde_json::Value> = protocols
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| serde_json::json!({ "port": state.instance.port, "protocol": p }))
            .collect();
        metadata.insert(
            keys::ENDPOINTS.into(),
            serde_json::Value::from(endpoints).to_string(),
        );
        let url_params = serde_json::json!({
            "port": state.metadata_port.to_string(),
            "protocol": "tri",
            "version": keys::META_V_2,
        });
        metadata.insert(
            keys::METADATA_SERVICE_URL_PARAMS.into(),
            url_params.to_string(),
        );
        state.instance.metadata = metadata;
    }

    /// Grants a fresh lease and writes the instance record under it (and the report first,
    /// for storage type `remote`).
    async fn register_with_new_lease(&self) -> Result<()> {
        if self.storage_type == StorageType::Remote {
            self.report.publish(&self.exported.current()).await?;
        }
        let mut state = self.state.lock().await;
        self.refresh_metadata(&mut state);
        let lease = self.store.grant_lease(self.lease_ttl).await?;
        if let Err(e) = self.registry.register(&state.instance, Some(lease)).await {
            let _ = self.store.revoke_lease(lease).await;
            return Err(e);
        }
        state.lease = Some(lease);
        tracing::info!(
            app = %state.instance.service_name,
            address = %state.instance.address(),
            revision = %state.instance.revision(),
            lease,
            "instance registered"
        );
        Ok(())
    }

    /// Adds the app to each exported interface's mapping; returns the interfaces that failed.
    async fn write_mappings(&self) -> Vec<String> {
        let current = self.exported.current();
        let mut interfaces: Vec<&str> =
            current.services.values().map(|s| s.name.as_str()).collect();
        interfaces.sort_unstable();
        interfaces.dedup();
        let mut pending = Vec::new();
        for interface in interfaces {
            match self.mapping.add(interface, &current.app).await {
                Ok(_) => tracing::debug!(%interface, "interface mapped to the app"),
                Err(e) => {
                    tracing::warn!(%interface, error = %e, "mapping not written yet; will retry");
                    pending.push(interface.to_owned());
                }
            }
        }
        pending
    }

    /// Retries mappings with backoff until written or the provider stops.
    async fn retry_mappings(&self, mut pending: Vec<String>) {
        let app = self.exported.current().app.clone();
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(10));
        while !pending.is_empty() {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(backoff.next_delay()) => {}
            }
            let mut still = Vec::new();
            for interface in pending {
                if self.mapping.add(&interface, &app).await.is_err() {
                    still.push(interface);
                }
            }
            pending = still;
        }
    }

    /// Removes reported revisions that no registered instance has used for `grace`,
    /// checking every half grace period.
    async fn report_cleanup_loop(&self, grace: Duration) {
        let app = self.exported.current().app.clone();
        let mut unused_since = std::collections::HashMap::new();
        let period = (grace / 2).max(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            let (reported, list) = match (
                self.report.revisions(&app).await,
                self.registry.list(&app).await,
            ) {
                (Ok(reported), Ok(list)) if list.skipped.is_empty() => (reported, list),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::debug!(%app, error = %e, "report cleanup skipped this round");
                    continue;
                }
                // A record we cannot read may use any revision: remove nothing.
                _ => continue,
            };
            let mut used: std::collections::HashSet<String> = list
                .instances
                .values()
                .map(|i| i.revision().to_owned())
                .collect();
            used.insert(self.exported.current().revision.clone());
            let now = tokio::time::Instant::now();
            for revision in
                crate::report::unused_revisions(&mut unused_since, &reported, &used, now, grace)
            {
                match self.report.remove(&app, &revision).await {
                    Ok(_) => tracing::info!(%app, %revision, "unused reported revision removed"),
                    Err(e) => tracing::warn!(%app, %revision, error = %e, "report not removed"),
                }
            }
        }
    }

    /// Renews the lease every third of its TTL; when the lease is lost, or renewals have
    /// failed for longer than the TTL, registers again under a new lease.
    async fn keep_alive_loop(&self) {
        let period = self.lease_ttl / 3;
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(period) => {}
            }
            let Some(lease) = self.state.lock().await.lease else {
                continue;
            };
            let renewal = tokio::time::timeout(period, self.store.keep_alive(lease)).await;
            let lost = match renewal {
                Ok(Ok(_)) => {
                    tracing::debug!(lease, "lease renewed");
                    last_renewal = tokio::time::Instant::now();
                    false
                }
                Ok(Err(Error::LeaseNotFound(_))) => true,
                Ok(Err(e)) => {
                    tracing::warn!(lease, error = %e, "lease renewal failed");
                    last_renewal.elapsed() > self.lease_ttl
                }
                Err(_) => {
                    tracing::warn!(lease, "lease renewal timed out");
                    last_renewal.elapsed() > self.lease_ttl
                }
            };
            if lost {
                tracing::warn!(lease, "lease lost; registering again");
                self.recover().await;
                last_renewal = tokio::time::Instant::now();
            }
        }
    }

    /// Registers again under a new lease and rewrites the mappings, with backoff and jitter
    /// while the store is down.
    async fn recover(&self) {
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
        loop {
            match self.register_with_new_lease().await {
                Ok(()) => break,
                Err(e) => tracing::warn!(error = %e, "re-registration failed; retrying"),
            }
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(backoff.next_delay()) => {}
            }
        }
        let pending = self.write_mappings().await;
        if !pending.is_empty() {
            self.retry_mappings(pending).await;
        }
    }

    async fn deregister_gracefully(&self) -> Result<()> {
        let mut state = self.state.lock().await;
        let Some(lease) = state.lease.take() else {
            return Ok(());
        };
        state.instance.enabled = false;
        let disabled = self.registry.register(&state.instance, Some(lease)).await;
        match &disabled {
            Ok(_) => tracing::info!(
                address = %state.instance.address(),
                drain = ?self.drain,
                "instance disabled; draining"
            ),
            Err(e) => tracing::warn!(error = %e, "instance not disabled; deregistering at once"),
        }
        if disabled.is_ok() {
            tokio::time::sleep(self.drain).await;
        }
        let instance = &state.instance;
        let deleted = self
            .registry
            .deregister(&instance.service_name, &instance.host, instance.port)
            .await;
        let revoked = self.store.revoke_lease(lease).await;
        tracing::info!(app = %instance.service_name, address = %instance.address(), "instance deregistered");
        disabled?;
        deleted?;
        match revoked {
            Ok(()) | Err(Error::LeaseNotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}
