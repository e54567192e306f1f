//! Consumer records on real registries: a consumer that asks to be seen is listed with the
//! digest of what it routes to, follows a provider joining within the refresh bound, comes
//! back after its liveness is lost and goes with its resolver; one that does not ask writes
//! nothing.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use introspect::backend::Backend;
use introspect::consumer::endpoint_digest;
use introspect::model::ConsumerRecord;
use introspect::{Provider, Resolver, ServiceInfo, Store, Subscription};

use crate::support::etcd::EtcdServer;
use crate::support::wait::eventually;

const INTERFACE: &str = "shop.OrderService";
/// The record's refresh bound in these tests.
const REFRESH: Duration = Duration::from_secs(1);
const LIMIT: Duration = Duration::from_secs(30);

async fn provider(backend: &Backend) -> Provider {
    Provider::builder("shop-orders", backend.clone())
        .serve_metadata_on("127.0.0.1:0".parse().unwrap())
        .lease_ttl(Duration::from_secs(4))
        .drain_period(Duration::from_millis(50))
        .export(ServiceInfo::new(INTERFACE).with_version("1.0"))
        .start()
        .await
        .expect("provider starts")
}

/// The record of consumer `id` of `shop-web`, as a reader lists it.
async fn record_of(reader: &Resolver, id: &str) -> Option<ConsumerRecord> {
    let list = reader.consumers().await.expect("consumers listed");
    assert!(list.skipped.is_empty(), "{:?}", list.skipped);
    list.records
        .into_iter()
        .find(|r| r.app == "shop-web" && r.id == id)
}

/// Waits until consumer `id`'s record shows `endpoints` endpoints under the digest a reader
/// computes itself from what it resolves.
async fn wait_for_digest(reader: &Resolver, id: &str, endpoints: usize, limit: Duration) {
    let subscription = Subscription::new(INTERFACE);
    eventually(limit, "the record's digest to be the reader's", || async {
        let resolved = reader.resolve(&subscription).await.unwrap_or_default();
        let Some(record) = record_of(reader, id).await else {
            return false;
        };
        let Some(seen) = record
            .subscriptions
            .iter()
            .find(|s| s.interface == INTERFACE)
        else {
            return false;
        };
        resolved.len() == endpoints
            && seen.endpoints == endpoints as u64
            && seen.digest == endpoint_digest(&resolved)
    })
    .await;
}

/// The whole life of a consumer record on `backend`; `lose` ends its liveness on the
/// server's side.
async fn a_consumer_record_lives_and_goes<F, Fut>(backend: Backend, lose: F)
where
    F: FnOnce(Backend, ConsumerRecord) -> Fut,
    Fut: Future<Output = ()>,
{
    let reader = Resolver::new(backend.clone());
    let first = provider(&backend).await;
    let resolver = Resolver::builder(backend.clone())
        .register_consumer("shop-web")
        .consumer_host("web-7.example")
        .consumer_refresh(REFRESH)
        .consumer_ttl(Duration::from_secs(3))
        .build();
    let (app, id) = resolver.consumer_id().expect("registers a record");
    assert_eq!(app, "shop-web");
    let id = id.to_owned();
    let handle = resolver
        .subscribe(Subscription::new(INTERFACE))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), 1);
    wait_for_digest(&reader, &id, 1, LIMIT).await;
    let record = record_of(&reader, &id).await.unwrap();
    assert_eq!(record.host, "web-7.example");
    assert!(record.registered_ms > 0);
    let seen = &record.subscriptions[0];
    assert_eq!(seen.digest, endpoint_digest(&handle.current()));
    assert!(seen.changed_ms >= record.registered_ms);

    // A provider joins: the record follows within the refresh bound (and the watch's delay).
    let second = provider(&backend).await;
    eventually(LIMIT, "the consumer to see the second provider", || async {
        handle.current().len() == 2
    })
    .await;
    wait_for_digest(&reader, &id, 2, REFRESH + Duration::from_secs(3)).await;

    // Its liveness is lost: it registers again, with what it sees.
    lose(backend.clone(), record_of(&reader, &id).await.unwrap()).await;
    wait_for_digest(&reader, &id, 2, LIMIT).await;

    // The resolver goes: so does its record.
    drop(handle);
    drop(resolver);
    eventually(LIMIT, "the record to be deleted", || async {
        record_of(&reader, &id).await.is_none()
    })
    .await;
    first.shutdown().await.unwrap();
    second.shutdown().await.unwrap();
}

/// A consumer that does not ask for a record writes none.
async fn a_consumer_that_does_not_ask_writes_nothing(backend: Backend) {
    let first = provider(&backend).await;
    let resolver = Resolver::new(backend.clone());
    assert!(resolver.consumer_id().is_none());
    let handle = resolver
        .subscribe(Subscription::new(INTERFACE))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), 1);
    tokio::time::sleep(REFRESH * 2).await;
    let list = resolver.consumers().await.unwrap();
    assert!(
        list.records.is_empty() && list.skipped.is_empty(),
        "{list:?}"
    );
    first.shutdown().await.unwrap();
}

/// Revokes the lease of the record's key, through the store.
async fn revoke_kv(store: Arc<dyn Store>, layout_key: String) {
    let kv = store
        .get(&layout_key)
        .await
        .unwrap()
        .expect("the record's key");
    assert_ne!(kv.lease, 0, "bound to a lease");
    store.revoke_lease(kv.lease).await.unwrap();
    assert!(store.get(&layout_key).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_memory() {
    let store: Arc<dyn Store> = Arc::new(introspect::MemoryStore::new());
    let backend = Backend::from(store.clone());
    a_consumer_that_does_not_ask_writes_nothing(backend.clone()).await;
    a_consumer_record_lives_and_goes(backend, |_, record| async move {
        let key = format!("/introspect/consumers/shop-web/{}", record.id);
        revoke_kv(store, key).await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_etcd_under_a_namespace() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let layout = introspect::Layout::new("/staging").unwrap();
    let backend = Backend::kv(store.clone(), layout);
    a_consumer_that_does_not_ask_writes_nothing(backend.clone()).await;
    let keys = etcd.etcdctl(&["get", "--prefix", "--keys-only", "/"]);
    assert!(!keys.contains("consumers"), "{keys}");
    a_consumer_record_lives_and_goes(backend, |_, record| async move {
        let key = format!("/staging/introspect/consumers/shop-web/{}", record.id);
        let services = store.get_prefix("/staging/services/").await.unwrap();
        assert!(services.kvs.iter().all(|kv| !kv.key.contains("shop-web")));
        revoke_kv(store, key).await;
    })
    .await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_zookeeper() {
    use crate::support::zookeeper::{ZooKeeperServer, raw_client};
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let backend = server.backend().await;
    a_consumer_that_does_not_ask_writes_nothing(backend.clone()).await;
    let raw = raw_client(&server).await;
    assert!(
        raw.check_stat("/introspect/consumers")
            .await
            .unwrap()
            .is_none()
    );
    a_consumer_record_lives_and_goes(backend, |_, record| async move {
        let path = format!("/introspect/consumers/shop-web/{}", record.id);
        let (_, stat) = raw.get_data(&path).await.unwrap();
        assert_ne!(stat.ephemeral_owner, 0, "an EPHEMERAL node");
        // Its node deleted under its session: registered again.
        raw.delete(&path, None).await.unwrap();
    })
    .await;
}

#[cfg(feature = "nacos")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_nacos() {
    use crate::support::nacos::NacosServer;
    let Some(mut server) = NacosServer::start().await else {
        return;
    };
    let backend = server.backend().await;
    a_consumer_that_does_not_ask_writes_nothing(backend.clone()).await;
    assert!(
        server
            .services_http("INTROSPECT_CONSUMERS")
            .await
            .is_empty()
    );
    let server = &mut server;
    a_consumer_record_lives_and_goes(backend, |_, record| async move {
        // In a group of its own, one instance per consumer, keyed by its id.
        let hosts = server
            .instances_http("INTROSPECT_CONSUMERS", "shop-web")
            .await;
        let hosts = hosts["hosts"].as_array().cloned().unwrap_or_default();
        assert_eq!(hosts.len(), 1, "{hosts:?}");
        assert_eq!(hosts[0]["clusterName"], record.id.as_str(), "{hosts:?}");
        assert!(
            server
                .services_http("DEFAULT_GROUP")
                .await
                .iter()
                .all(|s| s != "shop-web")
        );
        // The server restarts and forgets every ephemeral instance: the SDK registers the
        // record again once it reconnects.
        server.restart().await;
    })
    .await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_zookeeper_a_record_whose_session_expired_comes_back() {
    use crate::support::proxy::{Fault, FaultProxy};
    use crate::support::zookeeper::{ZooKeeperServer, connect, raw_client};
    use introspect::backend::zookeeper::ZooKeeperOptions;
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let ttl = Duration::from_secs(2);
    let proxy = FaultProxy::start(server.address().parse().unwrap()).await;
    let options = ZooKeeperOptions::new([proxy.address.to_string()])
        .with_session_timeout(ttl)
        .with_connect_timeout(Duration::from_secs(2));
    let reader = Resolver::new(server.backend().await);
    let resolver = Resolver::builder(connect(options).await)
        .register_consumer("shop-web")
        .consumer_ttl(ttl)
        .consumer_refresh(REFRESH)
        .build();
    let id = resolver.consumer_id().unwrap().1.to_owned();
    eventually(LIMIT, "the record to be registered", || async {
        record_of(&reader, &id).await.is_some()
    })
    .await;
    let raw = raw_client(&server).await;
    let path = format!("/introspect/consumers/shop-web/{id}");
    let (_, before) = raw.get_data(&path).await.unwrap();

    // Cut off from ZooKeeper for longer than its session: the server expires it.
    proxy.set(Fault::Cut);
    eventually(LIMIT, "the session expired and its node went", || async {
        raw.check_stat(&path).await.is_ok_and(|s| s.is_none())
    })
    .await;
    proxy.set(Fault::Pass);
    eventually(
        LIMIT,
        "the record created again by a new session",
        || async {
            raw.check_stat(&path)
                .await
                .is_ok_and(|s| s.is_some_and(|s| s.ephemeral_owner != before.ephemeral_owner))
        },
    )
    .await;
    resolver.deregister_consumer().await;
    assert!(record_of(&reader, &id).await.is_none());
}
