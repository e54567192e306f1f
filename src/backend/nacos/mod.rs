//! The Nacos backend (feature `nacos`), writing exactly what Dubbo Java 3.3
//! (`dubbo-registry-nacos`, `NacosMetadataReport`) and dubbo-go 3.3 (`registry/nacos`,
//! `metadata/report/nacos`) write to Nacos 2.x, through the official Rust SDK
//! (`nacos-sdk`, gRPC).
//!
//! * Instances: ephemeral naming instances of service `{app}` (`$` written as `___`) in the
//!   configured group (default `DEFAULT_GROUP`) and namespace, weight 1.0, healthy,
//!   enabled, cluster `DEFAULT`, with the same metadata keys as the etcd and ZooKeeper
//!   records ([`record`]); each registration on a connection of its own (see
//!   `registration`). Consumers read healthy, enabled instances; dubbo-go's `id` metadata
//!   key is dropped.
//! * Following an app: a subscription; the server's whole-list pushes become the seam's
//!   changes (`diff`, `follow`).
//! * Mapping: config `dataId={interface}`, group `mapping`, apps joined by `,`, written by
//!   `publishConfigCas` ([`mapping`]); followed with a config listener.
//! * Metadata reports: config `dataId={app}`, group `{revision}`; read also `{app}:{revision}`
//!   in `DEFAULT_GROUP` (`reports`).
//! * The epoch: config `introspect.epoch` in group `introspect` (`epoch`).
//! * Config centre: config `dataId={key}`, group `{group}` (rules: `dubbo`) in the
//!   registry's namespace, compare-and-set by content MD5 (see `config`).
//! * Interface-level provider URLs (a provider's `register_mode` `interface` or `all`):
//!   ephemeral instances of service `providers:{interface}:{version}:{group}` in the
//!   configured group, on the connection of the instance's registration (`interfaces`);
//!   consumers list and follow the enabled ones (`interface_reads`).
//! * Consumer records (optional): ephemeral naming instances of service `{app}` in group
//!   `INTROSPECT_CONSUMERS`, cluster `{id}`, the record in their metadata ([`consumers`]).
//!
//! # What a consumer can and cannot tell after a Nacos restart
//!
//! A server restarted on an empty data dir (or replaced) forgets the epoch: the next list,
//! and the next push that drops instances, carry the change, and the resolver keeps what the
//! server forgot until it re-registers. A server restarted on the same data keeps its
//! configs (the epoch stays) but forgets every ephemeral instance; providers' SDK clients
//! register again within seconds of reconnecting. The SDK does not tell its user when its
//! connection was lost and made again, so the pushes a consumer receives meanwhile (fewer
//! instances, or none) carry no sign of the restart at this seam: they are removals like
//! any other. Above the seam, self-preservation holds mass removals of larger apps, and the
//! resolver never lets removals other than graceful stops empty an app before its recovery
//! bound (see [`crate::consumer::ProtectionOptions::wipe_recovery`]), which covers small
//! apps.
//!
//! One concept per file: `options`, `names`, `record`, `diff` (pure), `client` (the SDK's
//! clients and errors), `http` (lists over the HTTP open API, for apps whose gRPC answer is
//! over the SDK's 4 MiB limit), `registration`, `reads`, `follow`, `mapping`, `reports`,
//! `epoch`, `config`.

mod client;
mod config;
pub mod consumers;
mod diff;
mod epoch;
mod follow;
mod http;
mod interface_reads;
mod interfaces;
pub mod mapping;
pub mod names;
mod naming_instance;
mod options;
mod reads;
pub mod record;
mod registration;
mod reports;
mod subscription;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

pub use epoch::{DATA_ID as EPOCH_DATA_ID, GROUP as EPOCH_GROUP};
pub use options::NacosOptions;

use super::consumers::{ConsumerList, ConsumerRegistry};
use super::interfaces::{InterfaceKey, InterfaceProviders, ProviderUrlFollow, ProviderUrls};
use super::{
    Backend, InstanceFollow, InstanceList, InstanceRead, InstanceRegistry, MappingFollow,
    MappingRegistry, MetadataReports, RegisterOptions, Registration,
};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{
    ConsumerRecord, MetadataInfo, ReportKey, ServiceInstance, names as model_names,
};
use client::{Connector, Reader, map_error};
use registration::NacosRegistration;

/// The three parts of the seam on one Nacos cluster. Cheap to clone.
#[derive(Clone)]
pub struct NacosBackend {
    inner: Arc<Inner>,
}

struct Inner {
    connector: Connector,
    reader: Arc<Reader>,
    /// Revisions this backend reported, by app (the SDK cannot list a report's groups).
    reported: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl NacosBackend {
    /// Connects the reading clients (unless the options say to connect in the background)
    /// and returns the backend. Fails with [`Error::StoreUnavailable`] when no server
    /// answers in time, [`Error::Unauthenticated`] when the server refuses the credentials.
    pub async fn connect(options: NacosOptions) -> Result<Self> {
        if options.servers.is_empty() {
            return Err(Error::config("no Nacos server given"));
        }
        let connector = Connector::new(options);
        let reader = Arc::new(Reader::new(connector.clone()));
        if !connector.options().connect_in_background {
            reader.naming().await?;
            // A read checks the connection and the credentials (the SDK logs in lazily).
            epoch::read(reader.config().await?).await?;
        }
        Ok(NacosBackend {
            inner: Arc::new(Inner {
                connector,
                reader,
                reported: Mutex::default(),
            }),
        })
    }

    /// The backend as the builders take it.
    pub fn into_backend(self) -> Backend {
        Backend::whole("nacos", Arc::new(self))
    }

    /// The options it was connected with.
    pub fn options(&self) -> &NacosOptions {
        self.inner.connector.options()
    }

    fn group(&self) -> &str {
        self.options().group()
    }

    async fn config(&self) -> Result<&nacos_sdk::api::config::ConfigService> {
        self.inner.reader.config().await
    }
}

impl From<NacosBackend> for Backend {
    fn from(backend: NacosBackend) -> Self {
        backend.into_backend()
    }
}

#[async_trait]
impl InstanceRegistry for NacosBackend {
    async fn register(
        &self,
        instance: &ServiceInstance,
        options: &RegisterOptions,
    ) -> Result<Arc<dyn Registration>> {
        instance.validate()?;
        let naming = self.inner.connector.naming(&instance.service_name).await?;
        let reader = self.inner.reader.clone();
        let registration =
            NacosRegistration::register(naming, reader, self.group(), instance, options).await?;
        Ok(Arc::new(registration))
    }

    fn interface_level(&self) -> bool {
        true
    }

    async fn list(&self, app: &str, read: InstanceRead<'_>) -> Result<InstanceList> {
        reads::list(&self.inner.reader, self.group(), app, read.limits).await
    }

    async fn list_apps(&self, limits: &Limits) -> Result<BTreeMap<String, InstanceList>> {
        reads::list_apps(&self.inner.reader, self.group(), limits).await
    }

    async fn follow(&self, app: &str, read: InstanceRead<'_>) -> Result<InstanceFollow> {
        model_names::validate_app(app)?;
        follow::instances(
            self.inner.reader.clone(),
            self.group().to_owned(),
            app.to_owned(),
            read.limits.clone(),
        )
        .await
    }
}

#[async_trait]
impl InterfaceProviders for NacosBackend {
    async fn list(&self, key: &InterfaceKey, _: &Limits) -> Result<ProviderUrls> {
        interface_reads::list(&self.inner.reader, self.group(), key).await
    }

    async fn follow(&self, key: &InterfaceKey, _: &Limits) -> Result<ProviderUrlFollow> {
        interface_reads::follow(
            self.inner.reader.clone(),
            self.group().to_owned(),
            key.clone(),
        )
        .await
    }
}

#[async_trait]
impl MappingRegistry for NacosBackend {
    async fn get(&self, interface: &str, limits: &Limits) -> Result<BTreeSet<String>> {
        model_names::validate_interface(interface)?;
        Ok(mapping::read(self.config().await?, interface, limits)
            .await?
            .apps)
    }

    async fn add(&self, interface: &str, app: &str, limits: &Limits) -> Result<()> {
        model_names::validate_interface(interface)?;
        model_names::validate_app(app)?;
        mapping::add(self.config().await?, interface, app, limits).await
    }

    async fn follow(&self, interface: &str, limits: &Limits) -> Result<MappingFollow> {
        model_names::validate_interface(interface)?;
        follow::mapping(
            self.inner.reader.clone(),
            interface.to_owned(),
            limits.clone(),
        )
        .await
    }
}

#[async_trait]
impl MetadataReports for NacosBackend {
    async fn get(&self, key: &ReportKey, limits: &Limits) -> Result<Option<MetadataInfo>> {
        reports::get(self.config().await?, key, limits).await
    }

    async fn put_if_absent(&self, info: &MetadataInfo, limits: &Limits) -> Result<bool> {
        let wrote = reports::put_if_absent(self.config().await?, info, limits).await?;
        if wrote {
            self.inner
                .reported
                .lock()
                .expect("reported lock")
                .entry(info.app.clone())
                .or_default()
                .insert(info.revision.clone());
        }
        Ok(wrote)
    }

    async fn revisions(&self, app: &str) -> Result<Vec<String>> {
        model_names::validate_app(app)?;
        let reported = self.inner.reported.lock().expect("reported lock");
        Ok(reported
            .get(app)
            .map(|revisions| revisions.iter().cloned().collect())
            .unwrap_or_default())
    }

    async fn remove(&self, key: &ReportKey) -> Result<bool> {
        let config = self.config().await?;
        let data_id = names::config_key(key.app());
        let group = names::config_key(key.revision());
        let existed = mapping::ConfigStore::get(config, &data_id, &group)
            .await?
            .is_some();
        if existed {
            config
                .remove_config(data_id.clone(), group.clone())
                .await
                .map_err(|e| map_error(e, &format!("remove config {group}/{data_id}")))?;
        }
        if let Some(revisions) = self
            .inner
            .reported
            .lock()
            .expect("reported lock")
            .get_mut(key.app())
        {
            revisions.remove(key.revision());
        }
        Ok(existed)
    }
}

#[async_trait]
impl ConsumerRegistry for NacosBackend {
    async fn register(
        &self,
        record: &ConsumerRecord,
        options: &RegisterOptions,
    ) -> Result<Arc<dyn Registration<ConsumerRecord>>> {
        record.validate()?;
        let naming = self.inner.connector.naming(&record.app).await?;
        let registered = consumers::NacosConsumer::register(naming, record, options).await?;
        Ok(Arc::new(registered))
    }

    async fn list(&self, limits: &Limits) -> Result<ConsumerList> {
        consumers::list(&self.inner.reader, limits).await
    }
}
