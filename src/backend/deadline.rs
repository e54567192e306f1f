//! A deadline on every call of a backend's parts, so that a registry that hangs costs
//! a timeout, never a hung provider or resolver. Following streams are bounded while they
//! are set up, not while they wait for changes (they wait by design).
//!
//! The key-value backend is bounded one level lower, on each store call
//! ([`crate::store::DeadlineStore`]): one list of a large app is several paged reads, each
//! bounded on its own.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::config::{
    ConfigCentre, ConfigFollow, ConfigItem, ConfigKey, ConfigVersion, ConfigWrite,
};
use super::consumers::{ConsumerList, ConsumerRegistry};
use super::interfaces::{
    InterfaceKey, InterfaceProviders, InterfaceRegistration, ProviderUrlFollow, ProviderUrls,
};
use super::registration::{Record, RegisterOptions, Registration};
use super::{
    InstanceFollow, InstanceList, InstanceRead, InstanceRegistry, MappingFollow, MappingRegistry,
    MetadataReports,
};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{ConsumerRecord, MetadataInfo, ProviderUrl, ReportKey, ServiceInstance};

/// Runs `call` under `deadline`; a call that takes longer fails with [`Error::Timeout`]
/// naming `backend` and `what`.
async fn bounded<T>(
    backend: &str,
    deadline: Duration,
    what: &str,
    call: impl Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(deadline, call).await {
        Ok(result) => result,
        Err(_) => Err(Error::Timeout {
            what: format!("{backend} {what}"),
            after: deadline,
        }),
    }
}

/// `inner`, a part of the backend called `backend`, with `deadline` on each call.
pub(super) fn bound<T: ?Sized>(
    inner: Arc<T>,
    deadline: Duration,
    backend: &'static str,
) -> Arc<Deadline<T>> {
    Arc::new(Deadline {
        inner,
        deadline,
        backend,
    })
}

/// One part of a backend with a deadline on each call.
pub(super) struct Deadline<T: ?Sized> {
    pub(super) inner: Arc<T>,
    pub(super) deadline: Duration,
    pub(super) backend: &'static str,
}

impl<T: ?Sized> Deadline<T> {
    async fn run<R>(&self, what: &str, call: impl Future<Output = Result<R>>) -> Result<R> {
        bounded(self.backend, self.deadline, what, call).await
    }

    /// `inner`, which this part handed out, under the same deadline.
    fn around<U: ?Sized>(&self, inner: Arc<U>) -> Arc<Deadline<U>> {
        bound(inner, self.deadline, self.backend)
    }
}

#[async_trait]
impl InstanceRegistry for Deadline<dyn InstanceRegistry> {
    async fn register(
        &self,
        instance: &ServiceInstance,
        options: &RegisterOptions,
    ) -> Result<Arc<dyn Registration>> {
        let registration = self
            .run("register", self.inner.register(instance, options))
            .await?;
        Ok(self.around(registration))
    }

    fn interface_level(&self) -> bool {
        self.inner.interface_level()
    }

    async fn list(&self, app: &str, read: InstanceRead<'_>) -> Result<InstanceList> {
        self.run("list", self.inner.list(app, read)).await
    }

    async fn list_apps(&self, limits: &Limits) -> Result<BTreeMap<String, InstanceList>> {
        self.run("list of apps", self.inner.list_apps(limits)).await
    }

    async fn follow(&self, app: &str, read: InstanceRead<'_>) -> Result<InstanceFollow> {
        self.run("follow", self.inner.follow(app, read)).await
    }
}

#[async_trait]
impl<R: Record> Registration<R> for Deadline<dyn Registration<R>> {
    async fn update(&self, record: &R) -> Result<()> {
        self.run("record update", self.inner.update(record)).await
    }

    async fn keep_alive(&self) -> Result<()> {
        self.run("keep-alive", self.inner.keep_alive()).await
    }

    async fn deregister(&self) -> Result<()> {
        self.run("deregister", self.inner.deregister()).await
    }

    fn id(&self) -> String {
        self.inner.id()
    }

    fn ttl(&self) -> Duration {
        self.inner.ttl()
    }

    async fn register_interface(
        &self,
        url: &ProviderUrl,
        limits: &Limits,
    ) -> Result<Arc<dyn InterfaceRegistration>> {
        let registration = self
            .run(
                "interface-level register",
                self.inner.register_interface(url, limits),
            )
            .await?;
        Ok(self.around(registration))
    }
}

#[async_trait]
impl InterfaceRegistration for Deadline<dyn InterfaceRegistration> {
    async fn update(&self, url: &ProviderUrl) -> Result<()> {
        self.run("interface-level update", self.inner.update(url))
            .await
    }

    async fn deregister(&self) -> Result<()> {
        self.run("interface-level deregister", self.inner.deregister())
            .await
    }

    fn id(&self) -> String {
        self.inner.id()
    }
}

#[async_trait]
impl InterfaceProviders for Deadline<dyn InterfaceProviders> {
    async fn list(&self, key: &InterfaceKey, limits: &Limits) -> Result<ProviderUrls> {
        self.run(
            "list interface-level providers",
            self.inner.list(key, limits),
        )
        .await
    }

    async fn follow(&self, key: &InterfaceKey, limits: &Limits) -> Result<ProviderUrlFollow> {
        self.run(
            "follow interface-level providers",
            self.inner.follow(key, limits),
        )
        .await
    }
}

#[async_trait]
impl MappingRegistry for Deadline<dyn MappingRegistry> {
    async fn get(&self, interface: &str, limits: &Limits) -> Result<BTreeSet<String>> {
        self.run("mapping read", self.inner.get(interface, limits))
            .await
    }

    async fn add(&self, interface: &str, app: &str, limits: &Limits) -> Result<()> {
        // Several compare-and-set rounds: a deadline of their own for each would be the
        // backend's; the whole is bounded by a few of them.
        bounded(
            self.backend,
            self.deadline * 3,
            "mapping write",
            self.inner.add(interface, app, limits),
        )
        .await
    }

    async fn follow(&self, interface: &str, limits: &Limits) -> Result<MappingFollow> {
        self.run("mapping follow", self.inner.follow(interface, limits))
            .await
    }
}

#[async_trait]
impl MetadataReports for Deadline<dyn MetadataReports> {
    async fn get(&self, key: &ReportKey, limits: &Limits) -> Result<Option<MetadataInfo>> {
        self.run("report read", self.inner.get(key, limits)).await
    }

    async fn put_if_absent(&self, info: &MetadataInfo, limits: &Limits) -> Result<bool> {
        self.run("report write", self.inner.put_if_absent(info, limits))
            .await
    }

    async fn revisions(&self, app: &str) -> Result<Vec<String>> {
        self.run("report list", self.inner.revisions(app)).await
    }

    async fn remove(&self, key: &ReportKey) -> Result<bool> {
        self.run("report removal", self.inner.remove(key)).await
    }
}

#[async_trait]
impl ConsumerRegistry for Deadline<dyn ConsumerRegistry> {
    async fn register(
        &self,
        record: &ConsumerRecord,
        options: &RegisterOptions,
    ) -> Result<Arc<dyn Registration<ConsumerRecord>>> {
        let registration = self
            .run("consumer register", self.inner.register(record, options))
            .await?;
        Ok(self.around(registration))
    }

    async fn list(&self, limits: &Limits) -> Result<ConsumerList> {
        self.run("list of consumers", self.inner.list(limits)).await
    }
}

#[async_trait]
impl ConfigCentre for Deadline<dyn ConfigCentre> {
    async fn get(&self, key: &ConfigKey) -> Result<Option<ConfigItem>> {
        self.run("config read", self.inner.get(key)).await
    }

    async fn follow(&self, key: &ConfigKey) -> Result<ConfigFollow> {
        self.run("config follow", self.inner.follow(key)).await
    }

    async fn put(&self, key: &ConfigKey, write: ConfigWrite<'_>) -> Result<ConfigVersion> {
        self.run("config write", self.inner.put(key, write)).await
    }

    async fn delete(&self, key: &ConfigKey, expected: &ConfigVersion) -> Result<()> {
        self.run("config delete", self.inner.delete(key, expected))
            .await
    }

    async fn list(&self, group: &str) -> Result<Vec<String>> {
        self.run("config list", self.inner.list(group)).await
    }

    async fn misplaced(&self, key: &str) -> Result<Option<ConfigItem>> {
        self.run("config read", self.inner.misplaced(key)).await
    }
}
