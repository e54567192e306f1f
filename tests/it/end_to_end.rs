//! End to end on the embedded store over real tonic servers on loopback.

use std::sync::Arc;
use std::time::Duration;

use crate::support::fleet::{served, start_fleet, start_provider};
use introspect::consumer::Resolver;
use introspect::rpc::MetadataClient;
use introspect::{Error, Limits, MemoryStore, ServiceInfo, Store, Subscription};

fn store() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

fn blue() -> Vec<ServiceInfo> {
    vec![
        ServiceInfo::new("shop.OrderService"),
        ServiceInfo::new("shop.CartService"),
    ]
}

fn green() -> Vec<ServiceInfo> {
    vec![
        ServiceInfo::new("shop.OrderService").with_param("weight", "200"),
        ServiceInfo::new("shop.CartService"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_instances_two_revisions_two_fetches() {
    let store = store();
    let mut fleet = start_fleet(&store, "shop-orders", 50, &blue()).await;
    fleet.extend(start_fleet(&store, "shop-orders", 50, &green()).await);
    assert_ne!(fleet[0].revision(), fleet[99].revision());

    let resolver = Resolver::new(store.clone());
    let subscription = Subscription::new("shop.OrderService");
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let resolver = resolver.clone();
            let subscription = subscription.clone();
            tokio::spawn(async move { resolver.resolve(&subscription).await })
        })
        .collect();
    for task in tasks {
        let endpoints = task.await.unwrap().unwrap();
        assert_eq!(
            endpoints.len(),
            100,
            "every instance has one OrderService endpoint"
        );
    }
    let stats = resolver.stats().await;
    assert_eq!(stats.metadata_fetches, 2, "{stats:?}");
    assert_eq!(served(&fleet), 2, "the providers saw two calls in total");
    assert_eq!(stats.revisions_known, 2);

    // Each endpoint is a distinct instance address with the revision's own service info.
    let endpoints = resolver.resolve(&subscription).await.unwrap();
    let mut addresses: Vec<String> = endpoints.iter().map(|e| e.address()).collect();
    addresses.dedup();
    assert_eq!(addresses.len(), 100);
    let weighted = endpoints
        .iter()
        .filter(|e| e.params().get("weight").is_some())
        .count();
    assert_eq!(weighted, 50);
    let mut expected: Vec<String> = Vec::new();
    for p in &fleet {
        expected.push(p.instance().await.authority().as_str().to_owned());
    }
    expected.sort();
    let mut got = addresses.clone();
    got.sort();
    assert_eq!(got, expected);
    assert_eq!(
        resolver.stats().await.metadata_fetches,
        2,
        "a later resolve hits the cache"
    );
}

#[tokio::test]
async fn group_version_and_protocol_filter_endpoints() {
    let store = store();
    let services = vec![
        ServiceInfo::new("shop.OrderService")
            .with_group("blue")
            .with_version("1.0"),
        ServiceInfo::new("shop.OrderService")
            .with_group("green")
            .with_version("2.0")
            .with_protocol("grpc")
            .with_port(7000),
    ];
    let _p = start_provider(&store, "shop-orders", services).await;
    let resolver = Resolver::new(store);
    let all = resolver
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    assert_eq!(all.len(), 2);
    let green = resolver
        .resolve(&Subscription::new("shop.OrderService").group("green"))
        .await
        .unwrap();
    assert_eq!(green.len(), 1);
    assert_eq!(green[0].port, 7000, "a service port of its own wins");
    assert_eq!(&*green[0].protocol, "grpc");
    let v1 = resolver
        .resolve(
            &Subscription::new("shop.OrderService")
                .version("1.0")
                .protocol("tri"),
        )
        .await
        .unwrap();
    assert_eq!(v1.len(), 1);
    assert_eq!(v1[0].service.group, "blue");
    assert!(
        resolver
            .resolve(&Subscription::new("shop.OrderService").group("red"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn provided_by_skips_the_mapping() {
    let store = store();
    let _p = start_provider(&store, "shop-orders", blue()).await;
    // Remove the mapping: only provided_by can find the app now.
    store
        .delete("/dubbo/mapping/shop.OrderService")
        .await
        .unwrap();
    let resolver = Resolver::new(store);
    assert!(
        resolver
            .resolve(&Subscription::new("shop.OrderService"))
            .await
            .unwrap()
            .is_empty()
    );
    let found = resolver
        .resolve(&Subscription::new("shop.OrderService").provided_by(["shop-orders"]))
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_fails_over_to_another_instance_of_the_revision() {
    let store = store();
    let fleet = start_fleet(&store, "shop-orders", 5, &blue()).await;
    // Crash all but the last: their records stay (leases live on) but nobody answers.
    for p in &fleet[..4] {
        p.abort();
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let resolver = Resolver::new(store);
    let endpoints = resolver
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    assert_eq!(
        endpoints.len(),
        5,
        "every registered instance of the known revision is an endpoint"
    );
    let stats = resolver.stats().await;
    assert_eq!(
        fleet[4].exported().served(),
        1,
        "the live instance answered"
    );
    assert_eq!(
        stats.fetch_failures,
        stats.metadata_fetches - 1,
        "{stats:?}"
    );
}

#[tokio::test]
async fn a_revision_nobody_answers_is_an_error_not_a_panic() {
    let store = store();
    let fleet = start_fleet(&store, "shop-orders", 2, &blue()).await;
    for p in &fleet {
        p.abort();
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let resolver = Resolver::builder(store)
        .fetch_timeout(Duration::from_millis(500))
        .build();
    let err = resolver
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::MetadataUnavailable { .. }), "{err}");
    assert_eq!(
        resolver.stats().await.revisions_known,
        0,
        "failures are not cached"
    );
}

#[tokio::test]
async fn unknown_revision_is_not_found_and_empty_is_current() {
    let store = store();
    let p = start_provider(&store, "shop-orders", blue()).await;
    let port = p.instance().await.metadata_service_port();
    let client = MetadataClient::new(Duration::from_secs(2), Limits::default());
    let current = client.fetch("127.0.0.1", port, "").await.unwrap();
    assert_eq!(current.revision, p.revision());
    assert_eq!(current.services.len(), 2);
    match client
        .fetch("127.0.0.1", port, "deadbeef")
        .await
        .unwrap_err()
    {
        Error::Rpc { status, .. } => assert_eq!(status.code(), tonic::Code::NotFound),
        other => panic!("expected NOT_FOUND, got {other}"),
    }
}

#[tokio::test]
async fn export_change_publishes_a_new_revision_and_keeps_the_old_answerable() {
    let store = store();
    let p = start_provider(&store, "shop-orders", blue()).await;
    let registration = p.registration_id().await;
    let old = p.revision();
    p.set_services(green()).await.unwrap();
    let new = p.revision();
    assert_ne!(old, new);
    assert_eq!(
        p.registration_id().await,
        registration,
        "same lease after an export change"
    );
    let record = store
        .get(&format!(
            "/services/shop-orders/{}",
            p.instance().await.key_address()
        ))
        .await
        .unwrap()
        .unwrap();
    let instance =
        introspect::ServiceInstance::from_json(&record.value, &Limits::default()).unwrap();
    assert_eq!(instance.revision(), new);
    let port = instance.metadata_service_port();
    let client = MetadataClient::new(Duration::from_secs(2), Limits::default());
    assert_eq!(
        client
            .fetch("127.0.0.1", port, &old)
            .await
            .unwrap()
            .revision,
        old,
        "old revision in its grace period"
    );
    assert_eq!(
        client
            .fetch("127.0.0.1", port, &new)
            .await
            .unwrap()
            .revision,
        new
    );
}

#[tokio::test]
async fn graceful_shutdown_disables_then_deregisters() {
    let store = store();
    let p = start_provider(&store, "shop-orders", blue()).await;
    let key = format!("/services/shop-orders/{}", p.instance().await.key_address());
    let mut watch = store
        .watch_prefix("/services/shop-orders/", 0)
        .await
        .unwrap();
    p.shutdown().await.unwrap();
    let first = watch.next().await.unwrap();
    let introspect::store::WatchEvent::Put(kv) = &first[0] else {
        panic!("expected the disabled record first: {first:?}")
    };
    let instance = introspect::ServiceInstance::from_json(&kv.value, &Limits::default()).unwrap();
    assert!(!instance.enabled);
    let second = watch.next().await.unwrap();
    assert!(
        matches!(&second[0], introspect::store::WatchEvent::Delete { key: k, .. } if *k == key)
    );
    assert!(store.get(&key).await.unwrap().is_none());
}

#[tokio::test]
async fn invalid_names_are_errors_never_panics() {
    let store = store();
    let long = "x".repeat(10_000);
    for bad in ["", "a/b", "../etc", "a\nb", "a\0b", long.as_str()] {
        let built = introspect::Provider::builder(bad, store.clone())
            .port(50051)
            .export(ServiceInfo::new("a.B"))
            .build();
        assert!(
            matches!(built, Err(Error::InvalidName { .. })),
            "app {bad:?}"
        );
        let built = introspect::Provider::builder("ok", store.clone())
            .port(50051)
            .export(ServiceInfo::new(bad))
            .build();
        assert!(
            matches!(built, Err(Error::InvalidName { .. })),
            "interface {bad:?}"
        );
        let built = introspect::Provider::builder("ok", store.clone())
            .host(bad)
            .port(1)
            .build();
        assert!(built.is_err(), "host {bad:?}");
        let resolver = Resolver::new(store.clone());
        assert!(
            resolver.resolve(&Subscription::new(bad)).await.is_err(),
            "subscription {bad:?}"
        );
        assert!(
            resolver
                .resolve(&Subscription::new("a.B").provided_by([bad]))
                .await
                .is_err()
        );
    }
    assert!(
        introspect::Provider::builder("ok", store)
            .port(0)
            .build()
            .is_err(),
        "port 0 without own server"
    );
}
