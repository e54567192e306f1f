//! Starts real providers on loopback: each serves MetadataService on its own tonic server at
//! `127.0.0.1:0` and registers in the given store.

use std::sync::Arc;
use std::time::Duration;

use introspect::{Provider, ServiceInfo, Store};

/// Starts one provider of `app` exporting `services`, registered at its metadata port.
pub async fn start_provider(
    store: &Arc<dyn Store>,
    app: &str,
    services: Vec<ServiceInfo>,
) -> Provider {
    start_provider_with(store, app, services, |b| b).await
}

/// Like [`start_provider`], with a hook to adjust the builder.
pub async fn start_provider_with(
    store: &Arc<dyn Store>,
    app: &str,
    services: Vec<ServiceInfo>,
    adjust: impl FnOnce(introspect::provider::ProviderBuilder) -> introspect::provider::ProviderBuilder,
) -> Provider {
    let mut builder = Provider::builder(app, store.clone())
        .serve_metadata_on("127.0.0.1:0".parse().unwrap())
        .lease_ttl(Duration::from_secs(10))
        .drain_period(Duration::from_millis(50));
    for s in services {
        builder = builder.export(s);
    }
    adjust(builder).start().await.expect("provider starts")
}

/// Starts `count` providers of `app`, all exporting `services`.
pub async fn start_fleet(
    store: &Arc<dyn Store>,
    app: &str,
    count: usize,
    services: &[ServiceInfo],
) -> Vec<Provider> {
    let mut fleet = Vec::with_capacity(count);
    for _ in 0..count {
        fleet.push(start_provider(store, app, services.to_vec()).await);
    }
    fleet
}

/// Total MetadataService requests answered by a fleet.
pub fn served(fleet: &[Provider]) -> u64 {
    fleet.iter().map(|p| p.exported().served()).sum()
}
