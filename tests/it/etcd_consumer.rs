//! A consumer subscribed through etcd faults: never an empty set, converging afterwards.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::etcd::EtcdServer;
use crate::support::fleet::start_provider_with;
use crate::support::wait::eventually;
use introspect::{Provider, Resolver, ServiceInfo, Store, Subscription};

const TTL: Duration = Duration::from_secs(2);
const FLEET: usize = 6;

async fn fleet(store: &Arc<dyn Store>) -> Vec<Provider> {
    let mut providers = Vec::new();
    for _ in 0..FLEET {
        let services = vec![ServiceInfo::new("shop.OrderService")];
        let adjust = |b: introspect::provider::ProviderBuilder| {
            b.lease_ttl(TTL).store_timeout(Duration::from_secs(1))
        };
        providers.push(start_provider_with(store, "shop-orders", services, adjust).await);
    }
    providers
}

/// Subscribes and records the size of every pushed set.
async fn subscribe(
    store: Arc<dyn Store>,
) -> (introspect::SubscriptionHandle, Arc<Mutex<Vec<usize>>>) {
    let resolver = Resolver::builder(store)
        .store_timeout(Duration::from_secs(1))
        .build();
    let handle = resolver
        .subscribe(Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), FLEET);
    let sizes = Arc::new(Mutex::new(vec![FLEET]));
    let mut follower = handle.clone();
    let record = sizes.clone();
    tokio::spawn(async move {
        while let Ok(set) = follower.changed().await {
            record.lock().unwrap().push(set.len());
        }
    });
    (handle, sizes)
}

async fn survive(wipe: bool) {
    let Some(mut etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let _providers = fleet(&store).await;
    let (handle, sizes) = subscribe(store.clone()).await;

    etcd.kill();
    tokio::time::sleep(TTL + Duration::from_millis(500)).await;
    assert_eq!(
        handle.current().len(),
        FLEET,
        "the last good set is served while etcd is down"
    );
    if wipe {
        etcd.restart_empty().await;
    } else {
        etcd.restart().await;
    }
    eventually(
        TTL + Duration::from_secs(15),
        "the consumer to converge on the full set",
        || {
            let handle = handle.clone();
            async move { handle.current().len() == FLEET && !handle.protection_active() }
        },
    )
    .await;
    // The watches were re-established: a newcomer is seen.
    let mut newcomer = fleet_of_one(&store).await;
    eventually(Duration::from_secs(10), "the newcomer to be seen", || {
        let handle = handle.clone();
        async move { handle.current().len() == FLEET + 1 }
    })
    .await;
    newcomer.remove(0).abort();
    let sizes = sizes.lock().unwrap().clone();
    assert!(
        sizes.iter().all(|&n| n > 0),
        "an empty set was published: {sizes:?}"
    );
}

async fn fleet_of_one(store: &Arc<dyn Store>) -> Vec<Provider> {
    let services = vec![ServiceInfo::new("shop.OrderService")];
    vec![start_provider_with(store, "shop-orders", services, |b| b.lease_ttl(TTL)).await]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_survives_etcd_kill_and_restart() {
    survive(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriber_survives_etcd_losing_all_data() {
    survive(true).await;
}
