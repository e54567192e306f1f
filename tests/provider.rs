//! The provider's lifecycle: the graceful stop keeps its lease renewed, the instance record
//! names every protocol's real port, and newcomers' mistakes fail with words.

mod support;

use std::sync::Arc;
use std::time::Duration;

use introspect::{Limits, MemoryStore, Provider, ServiceInfo, ServiceInstance, Store};

const ORDERS: &str = "shop.OrderService";

fn memory() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

/// The record under `key` and the lease it is bound to, if present.
async fn record(store: &Arc<dyn Store>, key: &str) -> Option<(ServiceInstance, i64)> {
    let kv = store.get(key).await.unwrap()?;
    let instance = ServiceInstance::from_json(&kv.value, &Limits::default()).unwrap();
    Some((instance, kv.lease))
}

#[tokio::test(start_paused = true)]
async fn the_lease_stays_renewed_through_a_drain_longer_than_its_ttl() {
    let store = memory();
    let ttl = Duration::from_secs(3);
    let provider = Provider::builder("shop-orders", store.clone())
        .port(50051)
        .lease_ttl(ttl)
        .drain_period(ttl * 3)
        .export(ServiceInfo::new(ORDERS))
        .start()
        .await
        .unwrap();
    let lease = provider.lease().await.expect("registered");
    let key = "/services/shop-orders/127.0.0.1:50051";
    let stopping = tokio::spawn(provider.shutdown());

    // Every half TTL through the drain (three TTLs long): the record is still there,
    // disabled, under the lease it was registered with (renewed, never lost and replaced).
    for step in 1..=5 {
        tokio::time::sleep(ttl / 2).await;
        let (instance, bound) = record(&store, key)
            .await
            .unwrap_or_else(|| panic!("record lost {step} half-TTLs into the drain"));
        assert!(!instance.enabled, "disabled while draining");
        assert_eq!(bound, lease, "still under its first lease");
    }

    stopping.await.unwrap().expect("graceful stop");
    assert!(
        record(&store, key).await.is_none(),
        "deleted after the drain"
    );
    assert!(
        matches!(
            store.keep_alive(lease).await,
            Err(introspect::Error::LeaseNotFound(_))
        ),
        "the lease was revoked"
    );
}
