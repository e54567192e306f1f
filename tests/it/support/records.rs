//! Writes instance records, reports and mappings straight into a store, without providers:
//! instances of storage type `remote` whose metadata the consumer reads from the report, so
//! tests need no network and can run on the paused clock.

use std::sync::Arc;
use std::time::Duration;

use introspect::backend::kv::mapping::Mapping;
use introspect::backend::kv::registry::Registry;
use introspect::backend::kv::report::MetadataReport;
use introspect::model::{MetadataInfo, keys, revision::REVISION_RULE_SHA256_V1};
use introspect::store::LeaseId;
use introspect::{Layout, Limits, ServiceInfo, ServiceInstance, Store};

/// Typed access to one store.
#[derive(Clone)]
pub struct Records {
    pub store: Arc<dyn Store>,
    pub registry: Registry,
    pub report: MetadataReport,
    pub mapping: Mapping,
}

impl Records {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Records {
            registry: Registry::new(store.clone(), Layout::default(), Limits::default()),
            report: MetadataReport::new(store.clone(), Layout::default(), Limits::default()),
            mapping: Mapping::new(store.clone(), Layout::default(), Limits::default()),
            store,
        }
    }

    /// The metadata of `app` exporting `services`.
    pub fn metadata(app: &str, services: &[ServiceInfo]) -> MetadataInfo {
        MetadataInfo::new(app, services.to_vec()).expect("valid metadata")
    }

    /// An instance record of `app` at `127.0.0.1:{port}` with `info`'s revision, storage
    /// type `remote`, declaring the `sha256-v1` rule.
    pub fn instance(info: &MetadataInfo, port: u16) -> ServiceInstance {
        let mut instance = ServiceInstance::new(info.app.clone(), "127.0.0.1", port);
        instance
            .metadata
            .insert(keys::REVISION.into(), info.revision.clone());
        instance
            .metadata
            .insert(keys::STORAGE_TYPE.into(), "remote".into());
        instance
            .metadata
            .insert(keys::REVISION_RULE.into(), REVISION_RULE_SHA256_V1.into());
        instance
    }

    /// Publishes the report of `info` and maps its interfaces to its app.
    pub async fn publish(&self, info: &MetadataInfo) {
        self.report.publish(info).await.expect("report published");
        for service in info.services.values() {
            self.mapping
                .add(&service.name, &info.app)
                .await
                .expect("mapping written");
        }
    }

    /// Registers `instance` under `lease`.
    pub async fn register(&self, instance: &ServiceInstance, lease: Option<LeaseId>) {
        self.registry
            .register(instance, lease)
            .await
            .expect("instance registered");
    }

    /// Publishes `info` and registers `count` instances of it at ports `first_port..`, each
    /// under a lease of its own with `ttl`; returns the leases.
    pub async fn fleet(
        &self,
        info: &MetadataInfo,
        first_port: u16,
        count: u16,
        ttl: Duration,
    ) -> Vec<LeaseId> {
        self.publish(info).await;
        let mut leases = Vec::new();
        for port in first_port..first_port + count {
            let lease = self.store.grant_lease(ttl).await.expect("lease");
            self.register(&Self::instance(info, port), Some(lease))
                .await;
            leases.push(lease);
        }
        leases
    }

    /// Stops the instance at `port` gracefully: disabled first, then deleted.
    pub async fn graceful_stop(&self, info: &MetadataInfo, port: u16, lease: Option<LeaseId>) {
        let mut instance = Self::instance(info, port);
        instance.enabled = false;
        self.register(&instance, lease).await;
        self.registry
            .deregister(&info.app, "127.0.0.1", port)
            .await
            .expect("deregistered");
    }
}

/// The ports of a set of endpoints, sorted.
pub fn ports(endpoints: &[introspect::Endpoint]) -> Vec<u16> {
    let mut ports: Vec<u16> = endpoints.iter().map(|e| e.port).collect();
    ports.sort_unstable();
    ports
}

/// The interface most subscription tests follow.
pub const ORDERS: &str = "shop.OrderService";
/// A lease TTL no test outlives.
pub const HOUR: Duration = Duration::from_secs(3600);

/// The metadata of `app` exporting [`ORDERS`] alone.
pub fn orders(app: &str) -> MetadataInfo {
    Records::metadata(app, &[ServiceInfo::new(ORDERS)])
}

/// A fresh memory store (kept typed, for its watch count) and records over it.
pub fn memory() -> (Arc<introspect::MemoryStore>, Records) {
    let memory = Arc::new(introspect::MemoryStore::new());
    let records = Records::new(memory.clone() as Arc<dyn Store>);
    (memory, records)
}
