//! Against a real Dubbo Java 3.3 (`interop/java`) on etcd: a Rust consumer calls its
//! provider, its consumer calls a Rust provider, and what it writes into etcd matches the
//! golden records in `tests/it/data/etcd/`.
//!
//! Dubbo Java's etcd extension writes instance records only (no mapping, and no etcd
//! metadata report is released for Dubbo 3), so both sides name the provider app
//! (`provided_by`) instead of reading the mapping.

use std::sync::Arc;
use std::time::Duration;

use crate::support::etcd::EtcdServer;
use crate::support::greeter::start_greeter;
use crate::support::peer_cases::{
    CALLS, assert_all_answered, assert_peer_run, call_through, check_golden, dump,
    run_peer_consumer, subscription, wait_for_endpoints, wait_for_key, written_by_peer,
};
use crate::support::peers::{Peer, etcd_registry};
use introspect::rpc::MetadataClient;
use introspect::store::EtcdStore;
use introspect::{Limits, Resolver, Store};

const PROVIDER_APP: &str = "dubbo-java-greeter";
const RUST_APP: &str = "rust-greeter";

#[tokio::test]
async fn rust_consumer_calls_a_dubbo_java_provider() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let registry = etcd_registry(&etcd.endpoint());
    let provider = java.provider(&registry, PROVIDER_APP).await;
    let store: Arc<dyn Store> = Arc::new(EtcdStore::connect(etcd.options()).await.unwrap());
    wait_for_key(&store, &provider.instance_key(), "the Java instance record").await;

    let resolver = Resolver::builder(store.clone()).build();
    let live = resolver
        .subscribe(subscription(Some(PROVIDER_APP)))
        .await
        .unwrap();
    wait_for_endpoints(&live, "the Java provider's endpoint").await;
    let endpoints = live.current();
    assert_eq!(endpoints.len(), 1, "{endpoints:?}");
    assert_eq!(
        (endpoints[0].port, &*endpoints[0].protocol),
        (provider.port, "tri"),
        "the endpoint is the Triple port, from the service info"
    );
    let calls = call_through(&resolver, &live, CALLS).await;
    let stats = resolver.stats().await;
    assert_all_answered(&calls, Peer::Java.greeting_suffix(), &stats);
    // One fetch for the one revision, over Java's MetadataServiceV2, checked by Java's own
    // MD5 rule.
    assert_eq!(
        (stats.metadata_fetches, stats.fetch_failures),
        (1, 0),
        "{stats:?}"
    );
    assert_eq!(stats.revision_checks.java_md5.verified, 1, "{stats:?}");
    assert_eq!(stats.revision_checks.java_md5.unverifiable, 0, "{stats:?}");

    // Dubbo Java's MetadataServiceV2 answers with or without the group header, and a
    // revision it does not hold gets an answer naming no revision, which the client
    // refuses.
    let client = MetadataClient::new(Duration::from_secs(3), Limits::default());
    let revision = endpoints[0].revision.to_string();
    let plain = client
        .fetch("127.0.0.1", provider.metadata_port, &revision)
        .await
        .unwrap();
    let named = client
        .fetch_for_app(PROVIDER_APP, "127.0.0.1", provider.metadata_port, &revision)
        .await
        .unwrap();
    assert_eq!(plain, named);
    let unknown = client
        .fetch_for_app(
            PROVIDER_APP,
            "127.0.0.1",
            provider.metadata_port,
            "0123abcd",
        )
        .await;
    assert!(unknown.is_err(), "{unknown:?}");

    let written = dump(
        &store,
        &[
            (provider.port, "port"),
            (provider.metadata_port, "metadata_port"),
        ],
    )
    .await;
    check_golden("dubbo-java-provider.json", &written);
    drop(provider);
}

#[tokio::test]
async fn dubbo_java_consumer_calls_a_rust_provider() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let registry = etcd_registry(&etcd.endpoint());
    let store: Arc<dyn Store> = Arc::new(EtcdStore::connect(etcd.options()).await.unwrap());
    let greeter = start_greeter(&store, RUST_APP, Duration::from_millis(200)).await;

    let run = run_peer_consumer(&java, &registry, Some(RUST_APP)).await;
    assert_peer_run(&run, greeter.calls());

    // What Dubbo Java's consumer wrote: a key of its own where Rust apps are listed.
    let before_port = greeter.address.port();
    let written = dump(&store, &[(before_port, "port")]).await;
    let theirs = written_by_peer(written, RUST_APP, |key| key.starts_with("/dubbo/mapping/"));
    check_golden("dubbo-java-consumer.json", &theirs);
    greeter.shutdown().await;
}
