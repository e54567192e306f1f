//! Against a real dubbo-go 3.3 (`interop/go`) on etcd: a Rust consumer calls its provider,
//! its consumer calls a Rust provider, and what it writes into etcd matches the golden
//! records in `tests/it/data/etcd/`.
//!
//! dubbo-go writes the mapping (its registry doubles as the metadata report), so both sides
//! find the provider through it.

use std::sync::Arc;
use std::time::Duration;

use crate::support::etcd::EtcdServer;
use crate::support::greeter::start_greeter;
use crate::support::peer_cases::{
    CALLS, assert_all_answered, assert_peer_run, call_through, check_golden, dump,
    run_peer_consumer, subscription, wait_for_endpoints, wait_for_key, wait_for_mapping,
    written_by_peer,
};
use crate::support::peers::{Peer, etcd_registry};
use introspect::rpc::MetadataClient;
use introspect::store::EtcdStore;
use introspect::{Error, Limits, Resolver, Store};

const PROVIDER_APP: &str = "dubbo-go-greeter";
const RUST_APP: &str = "rust-greeter";

#[tokio::test]
async fn rust_consumer_calls_a_dubbo_go_provider() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let Some(go) = Peer::Go.find() else { return };
    let registry = etcd_registry(&etcd.endpoint());
    let provider = go.provider(&registry, PROVIDER_APP).await;
    let store: Arc<dyn Store> = Arc::new(EtcdStore::connect(etcd.options()).await.unwrap());
    wait_for_key(&store, &provider.instance_key(), "the Go instance record").await;
    wait_for_mapping(&store, PROVIDER_APP).await;

    let resolver = Resolver::builder(store.clone()).build();
    let live = resolver.subscribe(subscription(None)).await.unwrap();
    wait_for_endpoints(&live, "the Go provider's endpoint").await;
    let endpoints = live.current();
    assert_eq!(endpoints.len(), 1, "{endpoints:?}");
    // dubbo-go answers every ServiceInfoV2 with port 0: the port comes from the record's
    // `dubbo.endpoints`.
    assert_eq!(endpoints[0].service.port, 0, "{endpoints:?}");
    assert_eq!(
        (endpoints[0].port, &*endpoints[0].protocol),
        (provider.port, "tri"),
        "{endpoints:?}"
    );
    let calls = call_through(&resolver, &live, CALLS).await;
    let stats = resolver.stats().await;
    assert_all_answered(&calls, Peer::Go.greeting_suffix(), &stats);
    // One fetch for the one revision, over dubbo-go's MetadataServiceV2 (found by its group
    // and version headers); dubbo-go's revisions follow no rule a consumer can recompute.
    assert_eq!(
        (stats.metadata_fetches, stats.fetch_failures),
        (1, 0),
        "{stats:?}"
    );
    assert_eq!(stats.revision_checks.java_md5.unverifiable, 1, "{stats:?}");
    assert_eq!(stats.revision_checks.java_md5.verified, 0, "{stats:?}");

    // dubbo-go's MetadataServiceV2 is found by the Triple group and version headers only:
    // without them it answers UNIMPLEMENTED.
    let client = MetadataClient::new(Duration::from_secs(3), Limits::default());
    let revision = endpoints[0].revision.to_string();
    match client
        .fetch("127.0.0.1", provider.metadata_port, &revision)
        .await
    {
        Err(Error::Rpc { status, .. }) => {
            assert_eq!(status.code(), tonic::Code::Unimplemented, "{status:?}")
        }
        other => panic!("a call without the group header: {other:?}"),
    }
    let info = client
        .fetch_for_app(PROVIDER_APP, "127.0.0.1", provider.metadata_port, &revision)
        .await
        .unwrap();
    assert_eq!(info.app, PROVIDER_APP);
    assert!(info.services.values().all(|s| s.port == 0), "{info:?}");

    let written = dump(
        &store,
        &[
            (provider.port, "port"),
            (provider.metadata_port, "metadata_port"),
        ],
    )
    .await;
    check_golden("dubbo-go-provider.json", &written);
    drop(provider);
}

#[tokio::test]
async fn dubbo_go_consumer_calls_a_rust_provider() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let Some(go) = Peer::Go.find() else { return };
    let registry = etcd_registry(&etcd.endpoint());
    let store: Arc<dyn Store> = Arc::new(EtcdStore::connect(etcd.options()).await.unwrap());
    let greeter = start_greeter(&store, RUST_APP, Duration::from_millis(200)).await;
    // dubbo-go reads the mapping once, when it subscribes.
    wait_for_mapping(&store, RUST_APP).await;

    let run = run_peer_consumer(&go, &registry, None).await;
    assert_peer_run(&run, greeter.calls());

    let written = dump(&store, &[(greeter.address.port(), "port")]).await;
    let theirs = written_by_peer(written, RUST_APP, |key| {
        key == "/dubbo/mapping/helloworld.Greeter"
    });
    check_golden("dubbo-go-consumer.json", &theirs);
    greeter.shutdown().await;
}
