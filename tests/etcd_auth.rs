//! etcd authentication: credentials reach etcd, and each way of being refused arrives as its
//! own error variant (never a password in it), permanent rather than transient.

mod support;

use std::sync::Arc;
use std::time::Duration;

use introspect::store::EtcdStore;
use introspect::{Error, Provider, Resolver, ServiceInfo, Store, Subscription};
use support::etcd::EtcdServer;

/// A password that must never show up in an error.
const WRONG_PASSWORD: &str = "no-such-pw-41d7";

async fn connect(etcd: &EtcdServer, user: &str, password: &str) -> Result<Arc<dyn Store>, Error> {
    let store = EtcdStore::connect(etcd.options().with_user(user, password)).await?;
    Ok(Arc::new(store))
}

/// Asserts that `error` is permanent, not transient, and holds no password.
fn assert_permanent(error: &Error) {
    assert!(error.is_permanent(), "not permanent: {error}");
    assert!(!error.is_transient(), "transient: {error}");
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(WRONG_PASSWORD), "{shown}");
    assert!(!shown.contains("-pw"), "a password in an error: {shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_checked_and_permissions_enforced() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    etcd.enable_auth();

    // Wrong password: refused at connect time, by variant, not a hang and not a panic.
    let err = connect(&etcd, "provider", WRONG_PASSWORD)
        .await
        .err()
        .expect("wrong password refused");
    assert!(matches!(err, Error::Unauthenticated(_)), "{err}");
    assert_permanent(&err);

    // An unknown user: the same.
    let err = connect(&etcd, "nobody", WRONG_PASSWORD)
        .await
        .err()
        .expect("unknown user refused");
    assert!(matches!(err, Error::Unauthenticated(_)), "{err}");
    assert_permanent(&err);

    // No credentials at all: the first request (or the connect) is refused.
    let err = match EtcdStore::connect(etcd.options()).await {
        Err(err) => err,
        Ok(anonymous) => anonymous.get_prefix("/services/").await.unwrap_err(),
    };
    assert!(matches!(err, Error::Unauthenticated(_)), "{err}");
    assert_permanent(&err);

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

    // The read-only user cannot write: permission denied, directly and through a provider.
    let err = reader
        .put("/services/intruder/x", b"{}".to_vec(), None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PermissionDenied(_)), "{err}");
    assert_permanent(&err);
    let err = Provider::builder("intruder", reader)
        .serve_metadata_on("127.0.0.1:0".parse().unwrap())
        .export(ServiceInfo::new("shop.OrderService"))
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PermissionDenied(_)), "{err}");
    assert_permanent(&err);
    provider.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_watches_outside_a_users_range_are_denied() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    etcd.enable_auth();
    // A user that may read only under `/elsewhere/`.
    etcd.etcdctl(&[
        "--user=root:root-pw",
        "user",
        "add",
        "outsider",
        "--interactive=false",
        "--new-user-password=outsider-pw",
    ]);
    etcd.etcdctl(&["--user=root:root-pw", "role", "add", "fenced"]);
    etcd.etcdctl(&[
        "--user=root:root-pw",
        "role",
        "grant-permission",
        "fenced",
        "--prefix=true",
        "read",
        "/elsewhere/",
    ]);
    etcd.etcdctl(&[
        "--user=root:root-pw",
        "user",
        "grant-role",
        "outsider",
        "fenced",
    ]);

    let outsider = connect(&etcd, "outsider", "outsider-pw").await.unwrap();
    // Inside its range it reads.
    assert!(
        outsider
            .get_prefix("/elsewhere/")
            .await
            .unwrap()
            .kvs
            .is_empty()
    );
    // Outside it, reads and watches are refused by variant.
    let err = outsider.get_prefix("/services/").await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied(_)), "{err}");
    assert_permanent(&err);
    let err = outsider.get("/services/a").await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied(_)), "{err}");
    let err = outsider.watch_prefix("/services/", 0).await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied(_)), "{err}");
    assert_permanent(&err);
}
