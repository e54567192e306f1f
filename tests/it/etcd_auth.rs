//! etcd authentication: credentials reach etcd, and each way of being refused arrives as its
//! own error variant (never a password in it), permanent rather than transient.

use std::sync::Arc;
use std::time::Duration;

use crate::support::etcd::EtcdServer;
use crate::support::records::{ORDERS, Records, orders};
use introspect::store::EtcdStore;
use introspect::{Error, Provider, Resolver, ServiceInfo, Store, Subscription};

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
    assert!(matches!(err, Error::Unauthenticated { .. }), "{err}");
    assert_permanent(&err);

    // An unknown user: the same.
    let err = connect(&etcd, "nobody", WRONG_PASSWORD)
        .await
        .err()
        .expect("unknown user refused");
    assert!(matches!(err, Error::Unauthenticated { .. }), "{err}");
    assert_permanent(&err);

    // No credentials at all: the first request (or the connect) is refused.
    let err = match EtcdStore::connect(etcd.options()).await {
        Err(err) => err,
        Ok(anonymous) => anonymous.get_prefix("/services/").await.unwrap_err(),
    };
    assert!(matches!(err, Error::Unauthenticated { .. }), "{err}");
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
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    assert_permanent(&err);
    let err = Provider::builder("intruder", reader)
        .serve_metadata_on("127.0.0.1:0".parse().unwrap())
        .export(ServiceInfo::new("shop.OrderService"))
        .start()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
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
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    assert_permanent(&err);
    let err = outsider.get("/services/a").await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    let err = outsider.watch_prefix("/services/", 0).await.unwrap_err();
    assert!(matches!(err, Error::PermissionDenied { .. }), "{err}");
    assert_permanent(&err);
}

/// How soon a refused subscription must end: the refusal is the store's first answer.
const REFUSAL_BOUND: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_without_credentials_ends_with_an_authentication_error() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    etcd.enable_auth();
    // Without credentials the connect passes (etcd answers a status without them); the
    // reads do not, and the subscription is where that shows.
    let anonymous = EtcdStore::connect(etcd.options())
        .await
        .expect("etcd answers a status without credentials");
    let resolver = Resolver::new(Arc::new(anonymous));
    let started = std::time::Instant::now();
    let err = resolver
        .subscribe(Subscription::new(ORDERS))
        .await
        .expect_err("a refused subscription does not start");
    assert!(matches!(err, Error::Unauthenticated { .. }), "{err}");
    assert_permanent(&err);
    // The refusal ends it at once: no retry until the start timeout, and no empty set.
    assert!(started.elapsed() < REFUSAL_BOUND, "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_refused_after_the_start_end_the_subscription_and_keep_its_set() {
    let Some(mut etcd) = EtcdServer::start().await else {
        return;
    };
    let anonymous: Arc<dyn Store> = etcd.store().await;
    let records = Records::new(anonymous.clone());
    let info = orders("shop-orders");
    records.publish(&info).await;
    for port in [7001, 7002] {
        records
            .register(&Records::instance(&info, port), None)
            .await;
    }
    let resolver = Resolver::builder(anonymous)
        .store_timeout(Duration::from_secs(1))
        .build();
    let mut handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(handle.current().len(), 2);
    assert!(handle.ended().is_none());

    // Auth turns on, and a restart breaks the watches: every read of ours is refused now.
    etcd.enable_auth();
    etcd.restart().await;
    let err = tokio::time::timeout(REFUSAL_BOUND + Duration::from_secs(10), async {
        loop {
            if let Err(err) = handle.changed().await {
                break err;
            }
        }
    })
    .await
    .expect("the refusal reaches changed() within its bound");
    assert_permanent(&err);
    assert!(
        matches!(
            err,
            Error::Unauthenticated { .. } | Error::PermissionDenied { .. }
        ),
        "{err}"
    );
    // The last set stays; the reason is there for select! loops; later waits fail alike.
    assert_eq!(handle.current().len(), 2);
    assert!(handle.ended().is_some_and(|e| e.is_permanent()));
    assert!(handle.changed().await.is_err_and(|e| e.is_permanent()));
}
