//! etcd authentication: credentials reach etcd, wrong ones fail clearly, and a read-only
//! user cannot register.

mod support;

use std::sync::Arc;
use std::time::Duration;

use introspect::store::EtcdStore;
use introspect::{Error, Provider, Resolver, ServiceInfo, Store, Subscription};
use support::etcd::EtcdServer;

async fn connect(etcd: &EtcdServer, user: &str, password: &str) -> Result<Arc<dyn Store>, Error> {
    let store = EtcdStore::connect(etcd.options().with_user(user, password)).await?;
    Ok(Arc::new(store))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_checked_and_permissions_enforced() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    etcd.enable_auth();

    // Wrong password: a clear error at connect time, not a hang and not a panic.
    let err = connect(&etcd, "provider", "wrong")
        .await
        .err()
        .expect("wrong password refused");
    assert!(err.to_string().contains("authentication failed"), "{err}");
    assert!(
        !err.is_transient(),
        "retrying a wrong password cannot help: {err}"
    );

    // No credentials at all: the store answers, but every request is refused.
    if let Ok(anonymous) = EtcdStore::connect(etcd.options()).await {
        let err = anonymous.get_prefix("/services/").await.unwrap_err();
        assert!(!err.is_transient(), "{err}");
    }

    // The provider user registers; the reader user resolves.
    let writer = connect(&etcd, "provider", "provider-pw").await.unwrap();
    let provider = Provider::builder("shop-orders", writer)
        .serve_metadata_on("127.0.0.1:0".parse().unwrap())
        .export(ServiceInfo::new("shop.OrderService"))
        .lease_ttl(Duration::from_secs(5))
        .start()
        .await
        .unwrap();
    let reader = connect(&etcd, "reader", "reader-pw").await.unwrap();
    let endpoints = Resolver::new(reader.clone())
        .resolve(&Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    assert_eq!(endpoints.len(), 1);

    // The read-only user cannot register.
    let err = Provider::builder("intruder", reader)
        .serve_metadata_on("127.0.0.1:0".parse().unwrap())
        .export(ServiceInfo::new("shop.OrderService"))
        .start()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("permission denied"), "{err}");
    provider.shutdown().await.unwrap();
}
