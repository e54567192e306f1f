//! Processes that start while etcd is down, through the real `EtcdStore` connected in the
//! background: a consumer serves its snapshot and follows etcd once it answers; a provider
//! serves at once and registers once etcd answers.

use std::sync::Arc;
use std::time::Duration;

use crate::support::etcd::EtcdServer;
use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::greeter::pb::greeter_server::GreeterServer;
use crate::support::greeter::{CountingGreeter, greeter_router, is_registered};
use crate::support::records::{ORDERS, Records, orders, ports};
use crate::support::wait::eventually;
use introspect::consumer::SnapshotOptions;
use introspect::{Error, EtcdStore};
use introspect::{Provider, Resolver, Store, SubscribeOptions, Subscription};

/// How long a subscription waits for the store before it serves its snapshot.
const START_TIMEOUT: Duration = Duration::from_secs(1);
/// Bound on each wait of these tests.
const LIMIT: Duration = Duration::from_secs(20);

/// A store for `etcd`, connected in the background.
async fn background(etcd: &EtcdServer) -> Arc<dyn Store> {
    let options = etcd.options().with_connect_in_background(true);
    Arc::new(
        EtcdStore::connect(options)
            .await
            .expect("returned while etcd is down"),
    )
}

fn resolver(store: Arc<dyn Store>, dir: &std::path::Path) -> Resolver {
    let options = SubscribeOptions::default()
        .snapshot(SnapshotOptions::new(dir))
        .start_timeout(START_TIMEOUT);
    Resolver::builder(store)
        .store_timeout(Duration::from_secs(1))
        .subscribe_options(options)
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_started_while_etcd_is_down_serves_its_snapshot_then_follows_etcd() {
    let Some(mut etcd) = EtcdServer::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let info = orders("shop-orders");
    // A first run, with etcd up, leaves a snapshot of two instances.
    {
        let store: Arc<dyn Store> = etcd.store().await;
        let records = Records::new(store.clone());
        records.publish(&info).await;
        for port in [7001, 7002] {
            records
                .register(&Records::instance(&info, port), None)
                .await;
        }
        let resolver = resolver(store, dir.path());
        let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
        assert_eq!(ports(&handle.current()), [7001, 7002]);
        eventually(LIMIT, "the snapshot written", || async {
            resolver.stats().await.snapshot_writes > 0
        })
        .await;
    }

    // etcd is down when the next run starts: the default connect fails, the background one
    // returns, and the subscription serves the snapshot.
    etcd.kill();
    let err = EtcdStore::connect(etcd.options())
        .await
        .expect_err("etcd is down");
    assert!(matches!(err, Error::StoreUnavailable { .. }), "{err}");
    let store = background(&etcd).await;
    let resolver = resolver(store.clone(), dir.path());
    // One-shot reads still fail, clearly, after their deadline.
    let err = resolver
        .resolve(&Subscription::new(ORDERS))
        .await
        .unwrap_err();
    assert!(err.is_transient(), "{err}");
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(ports(&handle.current()), [7001, 7002]);
    assert!(handle.serving_snapshot());

    // etcd comes back, where one more instance registers: the subscription follows it.
    etcd.restart().await;
    Records::new(store)
        .register(&Records::instance(&info, 7003), None)
        .await;
    eventually(LIMIT, "the live set", || {
        let handle = handle.clone();
        async move { ports(&handle.current()) == [7001, 7002, 7003] && !handle.serving_snapshot() }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_started_while_etcd_is_down_serves_and_registers_once_etcd_answers() {
    let Some(mut etcd) = EtcdServer::start().await else {
        return;
    };
    etcd.kill();
    let store = background(&etcd).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let provider = Provider::builder("greeter", store.clone())
        .lease_ttl(Duration::from_secs(2))
        .store_timeout(Duration::from_secs(1))
        .export_service::<GreeterServer<CountingGreeter>>()
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(provider.serve(
        greeter_router(CountingGreeter::new(address)),
        listener,
        async {
            let _ = stopped.await;
        },
    ));

    // It serves while etcd is down (serve neither failed nor waits for the store).
    let mut client = GreeterClient::connect(format!("http://{address}"))
        .await
        .unwrap();
    let hello = || tonic::Request::new(HelloRequest { name: "x".into() });
    client
        .say_hello(hello())
        .await
        .expect("served with etcd down");
    assert!(!serving.is_finished());

    // etcd comes back: the provider registers its record and its mapping (two writes, the
    // mapping a moment after the record), and consumers find it.
    etcd.restart().await;
    eventually(LIMIT, "the provider to register", || {
        is_registered(&store, "greeter", address)
    })
    .await;
    let resolver = Resolver::new(store.clone());
    eventually(LIMIT, "a consumer to resolve the provider", || {
        let resolver = resolver.clone();
        async move {
            resolver
                .resolve(&Subscription::new("helloworld.Greeter"))
                .await
                .is_ok_and(|endpoints| endpoints.len() == 1 && endpoints[0].port == address.port())
        }
    })
    .await;

    let _ = stop.send(());
    tokio::time::timeout(LIMIT, serving)
        .await
        .expect("serve returns")
        .unwrap()
        .expect("graceful stop");
    assert!(!is_registered(&store, "greeter", address).await);
}

/// The README's consumer options: a snapshot directory that does not exist yet, the
/// default start timeout and snapshot wait.
fn readme_resolver(store: Arc<dyn Store>, dir: &std::path::Path) -> Resolver {
    let options = SubscribeOptions::default().snapshot(SnapshotOptions::new(dir));
    Resolver::builder(store).subscribe_options(options).build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_with_the_readme_options_and_etcd_down_serves_its_snapshot_within_a_second() {
    let Some(mut etcd) = EtcdServer::start().await else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("app").join("snapshots");
    let info = orders("shop-orders");
    {
        let store: Arc<dyn Store> = etcd.store().await;
        let records = Records::new(store.clone());
        records.publish(&info).await;
        records
            .register(&Records::instance(&info, 7001), None)
            .await;
        let resolver = readme_resolver(store, &dir);
        let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
        assert_eq!(ports(&handle.current()), [7001]);
        eventually(
            LIMIT,
            "the snapshot written in the directory made for it",
            || async { resolver.stats().await.snapshot_writes > 0 },
        )
        .await;
    }
    etcd.kill();
    let resolver = readme_resolver(background(&etcd).await, &dir);
    let started = std::time::Instant::now();
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    let took = started.elapsed();
    assert_eq!(ports(&handle.current()), [7001], "the snapshot is served");
    assert!(handle.serving_snapshot());
    assert!(
        took < Duration::from_secs(2),
        "served after the 1 s snapshot wait, not the 5 s start timeout: {took:?}"
    );
}

#[tokio::test]
async fn a_snapshot_directory_that_cannot_be_made_fails_the_subscription_saying_so() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let dir = file.path().join("snapshots");
    let store: Arc<dyn Store> = Arc::new(introspect::MemoryStore::new());
    let err = readme_resolver(store, &dir)
        .subscribe(Subscription::new(ORDERS))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("snapshot directory") && text.contains("cannot be created"),
        "{text}"
    );
}
