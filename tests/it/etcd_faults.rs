//! Faults of a real etcd: killed and restarted, wiped, crashed providers, racing writers,
//! foreign garbage. Each test starts its own etcd; see `crate::support::etcd`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::support::etcd::EtcdServer;
use crate::support::fleet::start_provider_with;
use crate::support::wait::eventually;
use introspect::backend::kv::mapping::Mapping;
use introspect::backend::kv::registry::Registry;
use introspect::{Layout, Limits, Provider, Resolver, ServiceInfo, Store, Subscription};

const TTL: Duration = Duration::from_secs(2);

async fn start_providers(store: &Arc<dyn Store>, app: &str, count: usize) -> Vec<Provider> {
    let mut providers = Vec::new();
    for _ in 0..count {
        let services = vec![ServiceInfo::new("shop.OrderService")];
        providers.push(
            start_provider_with(store, app, services, |b| {
                b.lease_ttl(TTL).store_timeout(Duration::from_secs(1))
            })
            .await,
        );
    }
    providers
}

async fn registered(store: &Arc<dyn Store>, app: &str) -> BTreeSet<String> {
    let registry = Registry::new(store.clone(), Layout::default(), Limits::default());
    match registry.list(app).await {
        Ok(list) => list.instances.keys().cloned().collect(),
        Err(_) => BTreeSet::new(),
    }
}

async fn addresses(providers: &[Provider]) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for p in providers {
        set.insert(p.instance().await.key_address());
    }
    set
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_are_registered_again_after_etcd_is_killed_and_restarted() {
    let Some(mut etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let providers = start_providers(&store, "shop-orders", 3).await;
    let expected = addresses(&providers).await;
    assert_eq!(registered(&store, "shop-orders").await, expected);

    etcd.kill();
    tokio::time::sleep(TTL).await;
    etcd.restart().await;
    eventually(
        TTL + Duration::from_secs(8),
        "every provider registered again",
        || {
            let store = store.clone();
            let expected = expected.clone();
            async move { registered(&store, "shop-orders").await == expected }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn providers_recreate_instances_and_mappings_after_etcd_loses_all_data() {
    let Some(mut etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let providers = start_providers(&store, "shop-orders", 3).await;
    let expected = addresses(&providers).await;

    etcd.kill();
    etcd.restart_empty().await;
    let mapping = Mapping::new(store.clone(), Layout::default(), Limits::default());
    eventually(
        TTL + Duration::from_secs(8),
        "instances and mapping re-created",
        || {
            let (store, mapping, expected) = (store.clone(), mapping.clone(), expected.clone());
            async move {
                let mapped = mapping
                    .get("shop.OrderService")
                    .await
                    .map(|m| m.apps.contains("shop-orders"));
                registered(&store, "shop-orders").await == expected && mapped.unwrap_or(false)
            }
        },
    )
    .await;
    let endpoints = Resolver::new(store)
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    assert_eq!(endpoints.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_provider_disappears_after_its_ttl() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let providers = start_providers(&store, "shop-orders", 2).await;
    let survivor = providers[1].instance().await.key_address();
    providers[0].abort();
    eventually(
        TTL + Duration::from_secs(4),
        "the crashed instance's lease to expire",
        || {
            let (store, survivor) = (store.clone(), survivor.clone());
            async move { registered(&store, "shop-orders").await == BTreeSet::from([survivor]) }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_apps_both_end_up_in_the_mapping() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    for round in 0..5 {
        let interface = format!("shop.Service{round}");
        let mapping = Mapping::new(store.clone(), Layout::default(), Limits::default());
        let (a, b) = tokio::join!(
            mapping.add(&interface, "app-a"),
            mapping.add(&interface, "app-b")
        );
        a.unwrap();
        b.unwrap();
        let apps = mapping.get(&interface).await.unwrap().apps;
        assert_eq!(
            apps,
            BTreeSet::from(["app-a".to_owned(), "app-b".to_owned()]),
            "round {round}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_records_written_by_others_are_skipped_and_counted() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let _providers = start_providers(&store, "shop-orders", 2).await;
    // What someone with etcdctl might leave behind.
    store
        .put(
            "/services/shop-orders/10.9.9.9:1",
            b"{\"serviceName\": oops".to_vec(),
            None,
        )
        .await
        .unwrap();
    store
        .put(
            "/services/shop-orders/10.9.9.9:2",
            vec![0xff, 0x00, 0xfe],
            None,
        )
        .await
        .unwrap();
    let resolver = Resolver::new(store);
    let endpoints = resolver
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    assert_eq!(endpoints.len(), 2, "every other instance still resolves");
    assert_eq!(resolver.stats().await.skipped_records, 2);
}
