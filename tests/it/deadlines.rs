//! Deadlines everywhere: a peer or a store that hangs costs one timeout, never a hung process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::faulty::FaultyStore;
use crate::support::fleet::start_provider;
use crate::support::hostile::{register_raw, serve_silence};
use introspect::rpc::MetadataClient;
use introspect::{
    Error, Limits, MemoryStore, Provider, Resolver, ServiceInfo, Store, Subscription,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_metadata_service_costs_one_timeout_then_another_instance_answers() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let honest = start_provider(
        &store,
        "shop-orders",
        vec![ServiceInfo::new("shop.OrderService")],
    )
    .await;
    let revision = honest.revision();
    // Three instances of the same revision whose MetadataService accepts and never answers.
    for _ in 0..3 {
        register_raw(
            &store,
            "shop-orders",
            serve_silence().await,
            &revision,
            true,
        )
        .await;
    }
    let timeout = Duration::from_millis(300);
    let resolver = Resolver::builder(store).fetch_timeout(timeout).build();
    let started = Instant::now();
    let endpoints = resolver
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(
        endpoints.len(),
        4,
        "the silent instances share the honest one's revision"
    );
    let stats = resolver.stats().await;
    assert_eq!(honest.exported().served(), 1);
    assert_eq!(
        stats.fetch_failures,
        stats.metadata_fetches - 1,
        "{stats:?}"
    );
    // Each silent instance costs at most one deadline (connect + call are both bounded).
    let bound = timeout * 2 * u32::try_from(stats.fetch_failures).unwrap() + Duration::from_secs(2);
    assert!(
        elapsed < bound,
        "took {elapsed:?} for {} failures",
        stats.fetch_failures
    );
}

#[tokio::test]
async fn client_gives_up_on_a_trickling_peer() {
    let port = serve_silence().await;
    let client = MetadataClient::new(Duration::from_millis(300), Limits::default());
    let started = Instant::now();
    let err = client.fetch("127.0.0.1", port, "").await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            err,
            Error::Timeout { .. } | Error::Connect { .. } | Error::Rpc { .. }
        ),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn provider_start_on_a_hanging_store_times_out() {
    let store: Arc<dyn Store> = Arc::new(FaultyStore::hanging());
    let err = Provider::builder("shop-orders", store)
        .port(50051)
        .check_metadata_service(false)
        .export(ServiceInfo::new("shop.OrderService"))
        .store_timeout(Duration::from_secs(2))
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
}

#[tokio::test(start_paused = true)]
async fn resolve_on_a_hanging_store_times_out() {
    let store: Arc<dyn Store> = Arc::new(FaultyStore::hanging());
    let resolver = Resolver::builder(store)
        .store_timeout(Duration::from_secs(2))
        .build();
    let err = resolver
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_service_keeps_answering_while_the_store_hangs() {
    let hanging = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let store: Arc<dyn Store> = hanging.clone();
    let provider = start_provider(
        &store,
        "shop-orders",
        vec![ServiceInfo::new("shop.OrderService")],
    )
    .await;
    let port = provider.instance().await.metadata_service_port();
    hanging.hang();
    let client = MetadataClient::new(Duration::from_secs(2), Limits::default());
    for _ in 0..3 {
        let info = client
            .fetch("127.0.0.1", port, &provider.revision())
            .await
            .unwrap();
        assert_eq!(info.app, "shop-orders");
    }
}

/// A subscription whose registry does not answer waits for its start timeout asleep. Past
/// the snapshot's deadline with no snapshot to serve, that deadline once stayed due, and the
/// task woke without pause until the registry answered: on the paused clock the runtime
/// then never idles and time never reaches the start timeout, so the run is watched in
/// real time from another thread.
#[test]
fn a_subscription_waiting_for_a_hanging_store_sleeps_until_its_start_timeout() {
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        let waited = runtime.block_on(async {
            let store: Arc<dyn Store> = Arc::new(FaultyStore::hanging());
            let resolver = Resolver::builder(store)
                .store_timeout(Duration::from_secs(60))
                .build();
            let started = tokio::time::Instant::now();
            let handle = resolver
                .subscribe(Subscription::new("shop.OrderService"))
                .await;
            (started.elapsed(), handle.map(|h| h.current().len()))
        });
        let _ = done.send(waited);
    });
    let (waited, endpoints) = outcome
        .recv_timeout(Duration::from_secs(60))
        .expect("the paused clock never reached the start timeout: the subscription task spun");
    assert_eq!(
        waited,
        introspect::SubscribeOptions::default().get_start_timeout(),
        "subscribe() returns at its start timeout"
    );
    assert_eq!(endpoints.expect("the subscription starts empty"), 0);
}

/// A consumer whose own resolvers keep its runtime busy for several fetch timeouts while
/// its one metadata call is under way makes that one call, and it succeeds: the time the
/// call waited behind the process's own work is not the provider's delay. (A wall-clock
/// deadline gave up on it, and every resolver that came after started the load again.)
///
/// The provider runs in a runtime of its own, as another process would; the consumer runs
/// on one thread, shared by the call and by resolvers that each work for 20 ms at a time.
#[test]
fn a_consumer_busy_with_its_own_resolvers_makes_one_metadata_call() {
    let provider_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("provider runtime");
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let provider = provider_runtime.block_on(start_provider(
        &store,
        "shop-orders",
        vec![ServiceInfo::new("shop.OrderService")],
    ));
    let consumer_runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("consumer runtime");
    let timeout = Duration::from_millis(200);
    let busy_for = timeout * 6;
    let resolvers = 20;
    let (results, stats) = consumer_runtime.block_on(async {
        let resolver = Resolver::builder(store).fetch_timeout(timeout).build();
        let subscription = Subscription::new("shop.OrderService");
        // The first resolver starts the call; the others then take the thread in turns.
        let mut tasks = vec![tokio::spawn({
            let (resolver, subscription) = (resolver.clone(), subscription.clone());
            async move { resolver.resolve(&subscription).await }
        })];
        let busy_until = Instant::now() + busy_for;
        for _ in 1..resolvers {
            let (resolver, subscription) = (resolver.clone(), subscription.clone());
            tasks.push(tokio::spawn(async move {
                while Instant::now() < busy_until {
                    std::thread::sleep(Duration::from_millis(20));
                    tokio::task::yield_now().await;
                }
                resolver.resolve(&subscription).await
            }));
        }
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.expect("resolver task"));
        }
        (results, resolver.stats().await)
    });
    for result in results {
        assert_eq!(result.expect("resolved").len(), 1);
    }
    assert_eq!(stats.metadata_fetches, 1, "{stats:?}");
    assert_eq!(stats.fetch_failures, 0, "{stats:?}");
    assert_eq!(provider.exported().served(), 1);
    provider_runtime
        .block_on(provider.shutdown())
        .expect("provider stops");
}
