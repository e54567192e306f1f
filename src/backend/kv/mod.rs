//! The registry backend over an etcd-shaped key-value [`Store`]: the embedded memory store
//! and etcd. The three parts are the typed layers over the store that alone know the key
//! layout ([`Layout`]) and the JSON formats: [`Registry`] (instances), [`Mapping`] and
//! [`MetadataReport`].
//!
//! The consumers part (`consumers`) keeps consumer records under `/introspect/consumers/`;
//! the config centre (`config`) keeps config items under `/dubbo/config/{group}/{key}`.
//!
//! Liveness is a lease per registration, renewed by the provider. The epoch is the key
//! `/introspect/epoch` (under the namespace), read at the revision of each list.

mod config;
mod consumers;
mod follow;
pub(crate) mod interfaces;
pub mod layout;
pub mod mapping;
mod registration;
pub mod registry;
pub mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    EarlyInstances, InstanceFollow, InstanceList, InstanceRead, InstanceRegistry, MappingFollow,
    MappingRegistry, MetadataReports, RegisterOptions, Registration, Writes,
};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{MetadataInfo, ReportKey, ServiceInstance};
use crate::store::{CasOutcome, Store};
use layout::Layout;
use mapping::Mapping;
use registration::KvRegistration;
use registry::Registry;
use report::MetadataReport;

/// The three parts of the seam over one store and layout. See the module docs.
#[derive(Clone)]
pub struct KvBackend {
    store: Arc<dyn Store>,
    layout: Layout,
}

impl KvBackend {
    /// The backend over `store`, with keys under `layout`'s namespace.
    pub fn new(store: Arc<dyn Store>, layout: Layout) -> Self {
        KvBackend { store, layout }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The key layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    fn registry(&self, limits: &Limits) -> Registry {
        Registry::new(self.store.clone(), self.layout.clone(), limits.clone())
    }

    fn mapping(&self, limits: &Limits) -> Mapping {
        Mapping::new(self.store.clone(), self.layout.clone(), limits.clone())
    }

    fn report(&self, limits: &Limits) -> MetadataReport {
        MetadataReport::new(self.store.clone(), self.layout.clone(), limits.clone())
    }

    /// The epoch as of store revision `revision` (`0`: now), if any.
    async fn epoch_at(&self, revision: i64) -> Result<Option<String>> {
        let key = self.layout.epoch_key();
        let page = self.store.get_prefix_page(&key, None, revision).await?;
        Ok(page
            .kvs
            .into_iter()
            .find(|kv| kv.key == key)
            .map(|kv| String::from_utf8_lossy(&kv.value).into_owned()))
    }

    /// Creates the epoch when it is absent (a random id), leaving one that exists alone.
    async fn ensure_epoch(&self) -> Result<()> {
        let id = hex::encode(rand::random::<[u8; 16]>());
        let key = self.layout.epoch_key();
        match self
            .store
            .compare_and_swap(&key, 0, id.into_bytes(), None)
            .await?
        {
            CasOutcome::Written { .. } | CasOutcome::Conflict { .. } => Ok(()),
        }
    }

    /// An app's instances with the epoch read at the same store revision (while the rest of
    /// the list is read).
    async fn list_with_epoch(
        &self,
        app: &str,
        limits: &Limits,
        early: Option<EarlyInstances<'_>>,
    ) -> Result<InstanceList> {
        let registry = self.registry(limits);
        let epoch_at = |revision| self.epoch_at(revision);
        let (mut list, epoch) = registry.list_beside(app, early, epoch_at).await?;
        list.epoch = epoch;
        Ok(list)
    }
}

#[async_trait]
impl InstanceRegistry for KvBackend {
    async fn register(
        &self,
        instance: &ServiceInstance,
        options: &RegisterOptions,
    ) -> Result<Arc<dyn Registration>> {
        if options.writes == Writes::LivenessOnly {
            return Err(Error::config(format!(
                "the {} backend has no interface-level layout (asked for {})",
                self.store.backend(),
                instance.service_name
            )));
        }
        instance.validate()?;
        self.ensure_epoch().await?;
        let registration =
            KvRegistration::register(self.store.clone(), &self.layout, instance, options).await?;
        Ok(Arc::new(registration))
    }

    async fn list(&self, app: &str, read: InstanceRead<'_>) -> Result<InstanceList> {
        self.list_with_epoch(app, read.limits, read.early).await
    }

    async fn list_apps(&self, limits: &Limits) -> Result<BTreeMap<String, InstanceList>> {
        let apps = self.registry(limits).list_apps().await?;
        Ok(apps
            .into_iter()
            .map(|(app, instances)| {
                let list = InstanceList {
                    instances,
                    ..InstanceList::default()
                };
                (app, list)
            })
            .collect())
    }

    async fn follow(&self, app: &str, read: InstanceRead<'_>) -> Result<InstanceFollow> {
        follow::instances(self, app, read.limits, read.early).await
    }
}

#[async_trait]
impl MappingRegistry for KvBackend {
    async fn get(&self, interface: &str, limits: &Limits) -> Result<BTreeSet<String>> {
        Ok(self.mapping(limits).get(interface).await?.apps)
    }

    async fn add(&self, interface: &str, app: &str, limits: &Limits) -> Result<()> {
        self.mapping(limits).add(interface, app).await
    }

    async fn follow(&self, interface: &str, limits: &Limits) -> Result<MappingFollow> {
        follow::mapping(self.mapping(limits), interface.to_owned()).await
    }
}

#[async_trait]
impl MetadataReports for KvBackend {
    async fn get(&self, key: &ReportKey, limits: &Limits) -> Result<Option<MetadataInfo>> {
        self.report(limits).get(key).await
    }

    async fn put_if_absent(&self, info: &MetadataInfo, limits: &Limits) -> Result<bool> {
        self.report(limits).publish(info).await
    }

    async fn revisions(&self, app: &str) -> Result<Vec<String>> {
        self.report(&Limits::default()).revisions(app).await
    }

    async fn remove(&self, key: &ReportKey) -> Result<bool> {
        self.report(&Limits::default()).remove(key).await
    }
}
