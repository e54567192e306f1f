//! The registry backend: the one seam to the outside, in three typed parts that every
//! backend implements.
//!
//! * [`InstanceRegistry`]: register an instance with liveness (a lease, a session, a
//!   connection: a [`Registration`] the provider keeps alive, updates and ends), list one
//!   app or every app, and follow one app as a stream of resets, upserts and removals;
//! * [`MappingRegistry`]: read an interface's apps, add an app by compare-and-set
//!   (retried), follow one interface;
//! * [`MetadataReports`]: get, put if absent, list an app's revisions, remove.
//! * [`InterfaceRegistration`]: a provider's interface-level URL, written under its
//!   [`Registration`]'s liveness where the backend has the layout (ZooKeeper, Nacos); see
//!   [`mod@interfaces`].
//! * [`InterfaceProviders`]: the interface-level provider URLs a consumer reads and follows
//!   (ZooKeeper, Nacos; memory and etcd refuse).
//!
//! * [`ConsumerRegistry`] (optional): records of who consumes what, in a place of their own,
//!   with liveness like an instance's; see [`mod@consumers`].
//! * [`ConfigCentre`]: the governance rules' config items where Dubbo Java reads them when
//!   its registry is its config centre: get, follow, compare-and-set, delete; see
//!   [`mod@config`].
//!
//! A [`Backend`] holds them; [`connect`] gives one for a Dubbo registry URL
//! (`zookeeper://h:p?backup=h2:p2`, `nacos://h:p?namespace=ns`, `etcd://h:p`, `memory://`,
//! see [`url`]). The embedded
//! memory store and etcd implement them over the etcd-shaped [`Store`] and its key layout
//! ([`kv`]); ZooKeeper (feature `zookeeper`) and Nacos (feature `nacos`) natively, as Dubbo
//! Java 3.3 and dubbo-go write them (`zookeeper`, `nacos`). Everything above the seam
//! (provider, resolver, views, protections, balanced channel, xDS, tool) works the same on
//! every backend and knows none of them. The signals the protections need are
//! backend-neutral: each list carries where it was read ([`InstanceList::revision`], where
//! a backend has one) and the registry's epoch ([`InstanceList::epoch`]), whose change means
//! the registry was wiped or replaced.
//!
//! Retries, backoff and timers stay above the seam: a follow stream ends on the first
//! failure and whoever follows decides when to follow again (on tokio's clock, which tests
//! pause).

pub mod config;
mod config_key;
mod connect;
pub mod consumers;
mod deadline;
mod follow;
mod instances;
pub mod interfaces;
pub mod kv;
pub mod mapping;
#[cfg(feature = "nacos")]
#[cfg_attr(docsrs, doc(cfg(feature = "nacos")))]
pub mod nacos;
mod registration;
mod reports;
pub mod url;
#[cfg(feature = "zookeeper")]
#[cfg_attr(docsrs, doc(cfg(feature = "zookeeper")))]
pub mod zookeeper;

use std::sync::Arc;
use std::time::Duration;

pub use config::{ConfigCentre, ConfigFollow, ConfigItem, ConfigKey, ConfigVersion, ConfigWrite};
pub use connect::{ConnectOptions, connect, connect_with};
pub use consumers::{ConsumerList, ConsumerRegistry};
pub use follow::{Follow, Followed};
pub use instances::{
    EarlyInstances, InstanceChange, InstanceEvent, InstanceFollow, InstanceList, InstanceRead,
    InstanceRegistry, Instances,
};
pub use interfaces::{
    InterfaceKey, InterfaceProviders, InterfaceRegistration, ProviderUrlFollow, ProviderUrls,
};
pub use mapping::{MappingFollow, MappingRegistry};
pub use registration::{Record, RegisterOptions, Registration, Writes, check_identity};
pub use reports::MetadataReports;

use crate::backend::kv::layout::Layout;
use crate::store::{DeadlineStore, MemoryStore, Store};
use kv::KvBackend;

/// A registry backend: its parts. Cheap to clone; clones share the connection.
///
/// Builders take anything that converts into one: a `Backend`, or a store
/// (`Arc<dyn Store>`, `Arc<MemoryStore>`, `Arc<EtcdStore>`), which becomes the key-value
/// backend over that store with the default layout.
#[derive(Clone)]
pub struct Backend {
    name: &'static str,
    instances: Arc<dyn InstanceRegistry>,
    mapping: Arc<dyn MappingRegistry>,
    reports: Arc<dyn MetadataReports>,
    consumers: Arc<dyn ConsumerRegistry>,
    config: Arc<dyn ConfigCentre>,
    interface_providers: Arc<dyn InterfaceProviders>,
    /// The key-value backend, when this is one (for the builders' `layout`).
    kv: Option<KvBackend>,
}

/// The interface-level part of a key-value backend: on etcd, where dubbo-go writes
/// interface-level URLs; the embedded store, which no Dubbo process writes, has none.
fn interface_providers_of(backend: &KvBackend) -> Arc<dyn InterfaceProviders> {
    let name = backend.store().backend();
    if name == "etcd" {
        Arc::new(kv::interfaces::KvInterfaceProviders::new(
            backend.store().clone(),
            backend.layout().clone(),
        ))
    } else {
        Arc::new(interfaces::NoInterfaceProviders { backend: name })
    }
}

impl Backend {
    /// A backend of three parts; `name` (`zookeeper`, say) is for logs. It keeps no
    /// consumer records until [`with_consumers`](Self::with_consumers) gives it the part,
    /// and no config centre until [`with_config`](Self::with_config) does.
    pub fn new(
        name: &'static str,
        instances: Arc<dyn InstanceRegistry>,
        mapping: Arc<dyn MappingRegistry>,
        reports: Arc<dyn MetadataReports>,
    ) -> Self {
        Backend {
            name,
            instances,
            mapping,
            reports,
            consumers: Arc::new(consumers::NoConsumers { backend: name }),
            config: Arc::new(config::NoConfig { backend: name }),
            interface_providers: Arc::new(interfaces::NoInterfaceProviders { backend: name }),
            kv: None,
        }
    }

    /// A backend whose every part is `whole` (ZooKeeper's and Nacos's are one value each).
    pub fn whole<T>(name: &'static str, whole: Arc<T>) -> Self
    where
        T: InstanceRegistry
            + MappingRegistry
            + MetadataReports
            + ConsumerRegistry
            + ConfigCentre
            + InterfaceProviders,
    {
        Backend::new(name, whole.clone(), whole.clone(), whole.clone())
            .with_consumers(whole.clone())
            .with_interface_providers(whole.clone())
            .with_config(whole)
    }

    /// The same backend with `consumers` as its consumers part.
    pub fn with_consumers(mut self, consumers: Arc<dyn ConsumerRegistry>) -> Self {
        self.consumers = consumers;
        self
    }

    /// The same backend with `config` as its config-centre part.
    pub fn with_config(mut self, config: Arc<dyn ConfigCentre>) -> Self {
        self.config = config;
        self
    }

    /// The same backend with `providers` as its interface-level providers part.
    pub fn with_interface_providers(mut self, providers: Arc<dyn InterfaceProviders>) -> Self {
        self.interface_providers = providers;
        self
    }

    /// The key-value backend over `store`, with keys under `layout`'s namespace.
    pub fn kv(store: Arc<dyn Store>, layout: Layout) -> Self {
        let backend = KvBackend::new(store, layout);
        let shared = Arc::new(backend.clone());
        Backend {
            name: backend.store().backend(),
            instances: shared.clone(),
            mapping: shared.clone(),
            reports: shared.clone(),
            consumers: shared.clone(),
            config: shared,
            interface_providers: interface_providers_of(&backend),
            kv: Some(backend),
        }
    }

    /// A fresh embedded memory store.
    pub fn memory() -> Self {
        Backend::kv(Arc::new(MemoryStore::new()), Layout::default())
    }

    /// The backend's name, for logs: `memory`, `etcd`, `zookeeper`, `nacos`.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The instances part.
    pub fn instances(&self) -> &Arc<dyn InstanceRegistry> {
        &self.instances
    }

    /// Whether this backend writes interface-level provider URLs (see [`mod@interfaces`]):
    /// ZooKeeper and Nacos.
    pub fn interface_level(&self) -> bool {
        self.instances.interface_level()
    }

    /// The mapping part.
    pub fn mapping(&self) -> &Arc<dyn MappingRegistry> {
        &self.mapping
    }

    /// The metadata report part.
    pub fn reports(&self) -> &Arc<dyn MetadataReports> {
        &self.reports
    }

    /// The consumers part.
    pub fn consumers(&self) -> &Arc<dyn ConsumerRegistry> {
        &self.consumers
    }

    /// The config-centre part: governance rules where Dubbo Java reads them.
    pub fn config(&self) -> &Arc<dyn ConfigCentre> {
        &self.config
    }

    /// The interface-level providers part: what consumers read of providers registered at
    /// the interface level (see [`mod@interfaces`]).
    pub fn interface_providers(&self) -> &Arc<dyn InterfaceProviders> {
        &self.interface_providers
    }

    /// The same backend with `deadline` on every call: a key-value backend on each store
    /// call, any other on each call of its parts (following streams are bounded while
    /// they start, not while they wait for changes).
    pub fn with_deadline(self, deadline: Duration) -> Self {
        if let Some(kv) = &self.kv {
            let store: Arc<dyn Store> = Arc::new(DeadlineStore::new(kv.store().clone(), deadline));
            return Backend::kv(store, kv.layout().clone());
        }
        let name = self.name;
        Backend {
            name,
            instances: deadline::bound(self.instances, deadline, name),
            mapping: deadline::bound(self.mapping, deadline, name),
            reports: deadline::bound(self.reports, deadline, name),
            consumers: deadline::bound(self.consumers, deadline, name),
            config: deadline::bound(self.config, deadline, name),
            interface_providers: deadline::bound(self.interface_providers, deadline, name),
            kv: None,
        }
    }

    /// The same store under another key layout, when this is a key-value backend (other
    /// backends take their root from their URL): what the builders' `layout` does.
    pub fn with_layout(self, layout: Layout) -> Self {
        match &self.kv {
            Some(kv) => Backend::kv(kv.store().clone(), layout),
            None => self,
        }
    }
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl From<Arc<dyn Store>> for Backend {
    fn from(store: Arc<dyn Store>) -> Self {
        Backend::kv(store, Layout::default())
    }
}

impl<S: Store> From<Arc<S>> for Backend {
    fn from(store: Arc<S>) -> Self {
        Backend::kv(store, Layout::default())
    }
}
