//! Connecting to etcd while it is down: by default a clear error; with
//! `with_connect_in_background`, a store that starts at once and follows etcd once it comes
//! up. Refused credentials still fail at connect.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::etcd::EtcdServer;
use crate::support::fleet::start_provider;
use crate::support::wait::eventually;
use introspect::{Error, EtcdStore, Resolver, ServiceInfo, Store, Subscription};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_made_while_etcd_is_down_follows_it_once_it_is_up() {
    let Some(mut etcd) = EtcdServer::start().await else {
        return;
    };
    etcd.kill();

    // Without the option: a clear, transient error naming the endpoint plainly.
    let error = EtcdStore::connect(etcd.options()).await.unwrap_err();
    assert!(matches!(error, Error::StoreUnavailable { .. }), "{error}");
    let shown = error.to_string();
    assert!(
        shown.contains(&etcd.endpoint()) && !shown.contains("[\""),
        "{shown}"
    );

    // With it: the store is there within a connect timeout (1 s here).
    let started = Instant::now();
    let store: Arc<dyn Store> = Arc::new(
        EtcdStore::connect(etcd.options().with_connect_in_background(true))
            .await
            .unwrap(),
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let error = store.get_prefix("/services/").await.unwrap_err();
    assert!(error.is_transient(), "{error}");

    // etcd comes up after the store was made: requests, providers and resolvers work.
    etcd.restart().await;
    eventually(Duration::from_secs(10), "the store to reach etcd", || {
        let store = store.clone();
        async move { store.get_prefix("/services/").await.is_ok() }
    })
    .await;
    let provider = start_provider(
        &store,
        "shop-orders",
        vec![ServiceInfo::new("shop.OrderService")],
    )
    .await;
    let endpoints = Resolver::new(store.clone())
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    assert_eq!(endpoints.len(), 1);
    provider.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_are_not_unreachability() {
    let Some(mut etcd) = EtcdServer::start().await else {
        return;
    };
    etcd.enable_auth();
    let wrong = |etcd: &EtcdServer| {
        etcd.options()
            .with_user("provider", "no-such-pw-93a1")
            .with_connect_in_background(true)
    };

    // etcd up: a wrong password fails at connect, in the background mode too.
    let error = EtcdStore::connect(wrong(&etcd)).await.unwrap_err();
    assert!(matches!(error, Error::Unauthenticated { .. }), "{error}");

    // etcd down at connect: the store is made; once etcd is up, the first request says
    // the credentials are refused (permanent), not that etcd is unreachable.
    etcd.kill();
    let store = EtcdStore::connect(wrong(&etcd)).await.unwrap();
    etcd.restart().await;
    let error = store.get_prefix("/services/").await.unwrap_err();
    assert!(matches!(error, Error::Unauthenticated { .. }), "{error}");
    assert!(error.is_permanent());
    assert!(!error.to_string().contains("no-such-pw"), "{error}");
}
