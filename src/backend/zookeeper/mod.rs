//! The ZooKeeper backend (feature `zookeeper`), writing exactly what Dubbo Java 3.3 (with
//! Curator 5) and dubbo-go 3.3 write, so that Rust, Java and Go providers and consumers
//! share one registry.
//!
//! * Instances: EPHEMERAL nodes `/services/{app}/{host}:{port}` holding Curator's
//!   `ServiceInstance` JSON with Dubbo's `ZookeeperInstance` payload ([`record`]); parents
//!   are CONTAINER nodes. A registration lives under a session asking for the provider's
//!   TTL as its timeout: the session is the lease ([`Registration::ttl`] is what the server
//!   negotiated). Registrations of one backend with one TTL share a session, as Dubbo Java
//!   shares one per process (ZooKeeper allows 60 connections per client address by
//!   default).
//! * Mapping: persistent `/dubbo/mapping/{interface}`, apps joined by `,`, compare-and-set on
//!   the node's version.
//! * Metadata reports: persistent `/dubbo/metadata/{app}/{revision}` (read also at
//!   `/dubbo/{app}/{revision}`, dubbo-go's).
//! * The epoch: `/introspect/epoch` (see `epoch`).
//! * Consumer records (optional): EPHEMERAL nodes `/introspect/consumers/{app}/{id}` in
//!   the session of the record's TTL (see `consumers`).
//! * Config centre: persistent `/dubbo/config/{group}/{key}` holding a governance rule's
//!   text, compare-and-set on the node's version (see `config`).
//! * Interface-level provider URLs (a provider's `register_mode` `interface` or `all`):
//!   EPHEMERAL nodes `/dubbo/{interface}/providers/{url}` in the session of the instance's
//!   registration, parents persistent as Dubbo's `ZookeeperRegistry` makes them (see
//!   `interfaces`); consumers list and follow the children of `…/providers`
//!   (`interface_reads`).
//!
//! With a group, everything moves under `/{group}` ([`paths`]). Consumers write only
//! their optional record:
//! reads, lists and follows share one reading session. One concept per file: `options`,
//! `paths` and `record` (pure), `session` (connecting, errors), `registration`, `reads`,
//! `follow`, `mapping`, `reports`, `epoch`, `config`.
//!
//! [`Registration::ttl`]: crate::backend::Registration::ttl

mod config;
mod consumers;
mod epoch;
mod follow;
mod interface_reads;
mod interfaces;
mod mapping;
mod node;
mod options;
pub mod paths;
mod reads;
pub mod record;
mod registration;
mod reports;
mod session;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;

pub use options::ZooKeeperOptions;
pub use paths::Paths;

use super::consumers::{ConsumerList, ConsumerRegistry};
use super::interfaces::{InterfaceKey, InterfaceProviders, ProviderUrlFollow, ProviderUrls};
use super::{
    Backend, InstanceFollow, InstanceList, InstanceRead, InstanceRegistry, MappingFollow,
    MappingRegistry, MetadataReports, RegisterOptions, Registration,
};
use crate::error::Result;
use crate::limits::Limits;
use crate::model::{ConsumerRecord, MetadataInfo, ReportKey, ServiceInstance, names};
use registration::ZkRegistration;
use session::{Reader, Sessions};

/// The three parts of the seam on one ZooKeeper ensemble. Cheap to clone.
#[derive(Clone)]
pub struct ZooKeeperBackend {
    inner: Arc<Inner>,
}

struct Inner {
    options: ZooKeeperOptions,
    reader: Reader,
    sessions: Sessions,
}

impl ZooKeeperBackend {
    /// Connects the reading session (unless the options say to connect in the background)
    /// and returns the backend. Fails with [`crate::error::Error::StoreUnavailable`] when no server
    /// answers in time.
    pub async fn connect(options: ZooKeeperOptions) -> Result<Self> {
        if options.servers.is_empty() {
            return Err(crate::error::Error::config("no ZooKeeper server given"));
        }
        let client = if options.connect_in_background {
            None
        } else {
            Some(session::connect(&options, options.session_timeout).await?)
        };
        Ok(ZooKeeperBackend {
            inner: Arc::new(Inner {
                reader: Reader::new(options.clone(), client),
                sessions: Sessions::new(options.clone()),
                options,
            }),
        })
    }

    /// The backend as the builders take it.
    pub fn into_backend(self) -> Backend {
        Backend::whole("zookeeper", Arc::new(self))
    }

    /// The znode layout.
    pub fn paths(&self) -> &Paths {
        &self.inner.options.paths
    }

    async fn reader(&self) -> Result<zookeeper_client::Client> {
        self.inner.reader.client().await
    }

    fn acls(&self) -> zookeeper_client::Acls<'static> {
        session::acls(&self.inner.options)
    }
}

impl From<ZooKeeperBackend> for Backend {
    fn from(backend: ZooKeeperBackend) -> Self {
        backend.into_backend()
    }
}

#[async_trait]
impl InstanceRegistry for ZooKeeperBackend {
    async fn register(
        &self,
        instance: &ServiceInstance,
        options: &RegisterOptions,
    ) -> Result<Arc<dyn Registration>> {
        let client = self.inner.sessions.for_ttl(options.ttl).await?;
        let registration =
            ZkRegistration::register(client, &self.inner.options, self.paths(), instance, options)
                .await?;
        Ok(Arc::new(registration))
    }

    fn interface_level(&self) -> bool {
        true
    }

    async fn list(&self, app: &str, read: InstanceRead<'_>) -> Result<InstanceList> {
        names::validate_app(app)?;
        reads::list(&self.reader().await?, self.paths(), app, read.limits).await
    }

    async fn list_apps(&self, limits: &Limits) -> Result<BTreeMap<String, InstanceList>> {
        reads::list_apps(&self.reader().await?, self.paths(), limits).await
    }

    async fn follow(&self, app: &str, read: InstanceRead<'_>) -> Result<InstanceFollow> {
        names::validate_app(app)?;
        let client = self.reader().await?;
        let limits = read.limits.clone();
        follow::instances(client, self.paths().clone(), app.to_owned(), limits).await
    }
}

#[async_trait]
impl InterfaceProviders for ZooKeeperBackend {
    async fn list(&self, key: &InterfaceKey, _: &Limits) -> Result<ProviderUrls> {
        names::validate_interface(&key.interface)?;
        let path = interface_reads::providers_path(self.paths(), &key.interface);
        interface_reads::list(&self.reader().await?, &path).await
    }

    async fn follow(&self, key: &InterfaceKey, _: &Limits) -> Result<ProviderUrlFollow> {
        interface_reads::follow(self.reader().await?, self.paths(), key).await
    }
}

#[async_trait]
impl MappingRegistry for ZooKeeperBackend {
    async fn get(&self, interface: &str, limits: &Limits) -> Result<BTreeSet<String>> {
        names::validate_interface(interface)?;
        let path = self.paths().mapping(interface);
        Ok(mapping::read(&self.reader().await?, &path, limits)
            .await?
            .apps)
    }

    async fn add(&self, interface: &str, app: &str, limits: &Limits) -> Result<()> {
        names::validate_interface(interface)?;
        names::validate_app(app)?;
        let path = self.paths().mapping(interface);
        mapping::add(&self.reader().await?, self.acls(), &path, app, limits).await
    }

    async fn follow(&self, interface: &str, limits: &Limits) -> Result<MappingFollow> {
        names::validate_interface(interface)?;
        let path = self.paths().mapping(interface);
        follow::mapping(self.reader().await?, path, limits.clone()).await
    }
}

#[async_trait]
impl MetadataReports for ZooKeeperBackend {
    async fn get(&self, key: &ReportKey, limits: &Limits) -> Result<Option<MetadataInfo>> {
        reports::get(&self.reader().await?, self.paths(), key, limits).await
    }

    async fn put_if_absent(&self, info: &MetadataInfo, limits: &Limits) -> Result<bool> {
        let client = self.reader().await?;
        reports::put_if_absent(&client, self.paths(), self.acls(), info, limits).await
    }

    async fn revisions(&self, app: &str) -> Result<Vec<String>> {
        reports::revisions(&self.reader().await?, self.paths(), app).await
    }

    async fn remove(&self, key: &ReportKey) -> Result<bool> {
        reports::remove(&self.reader().await?, self.paths(), key).await
    }
}

#[async_trait]
impl ConsumerRegistry for ZooKeeperBackend {
    async fn register(
        &self,
        record: &ConsumerRecord,
        options: &RegisterOptions,
    ) -> Result<Arc<dyn Registration<ConsumerRecord>>> {
        let client = self.inner.sessions.for_ttl(options.ttl).await?;
        let (acls, paths, limits) = (self.acls(), self.paths(), &options.limits);
        let registered =
            consumers::ZkConsumer::register(client, acls, paths, record, limits).await?;
        Ok(Arc::new(registered))
    }

    async fn list(&self, limits: &Limits) -> Result<ConsumerList> {
        consumers::list(&self.reader().await?, self.paths(), limits).await
    }
}
