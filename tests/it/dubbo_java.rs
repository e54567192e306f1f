//! Against a real Dubbo Java 3.3 (`interop/java`) on etcd, ZooKeeper and Nacos: a Rust
//! consumer calls its provider, its consumer calls a Rust provider, and what it writes into
//! the registry matches the golden records in `tests/it/data/{etcd,zookeeper,nacos}/`.
//!
//! Dubbo Java's etcd extension writes instance records only (no mapping, and no etcd
//! metadata report is released for Dubbo 3), so on etcd both sides name the provider app
//! (`provided_by`) instead of reading the mapping. On ZooKeeper and Nacos the registry
//! doubles as the metadata report: the mapping is written and read there.

use std::time::Duration;

use crate::support::peer_cases::{
    PeerRegistry, peer_consumer_calls_rust_provider,
    peer_provider_killed_while_rust_consumer_calls,
    peer_provider_stopped_while_rust_consumer_calls, rust_consumer_calls_peer_provider,
    rust_provider_killed_while_peer_consumer_calls,
    rust_provider_stopped_while_peer_consumer_calls,
};
use crate::support::peers::Peer;
use introspect::Limits;
use introspect::rpc::MetadataClient;

const PROVIDER_APP: &str = "dubbo-java-greeter";
const RUST_APP: &str = "rust-greeter";

async fn rust_consumer_calls_a_provider(registry: Option<PeerRegistry>, via_mapping: bool) {
    let Some(registry) = registry else { return };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let case = rust_consumer_calls_peer_provider(&registry, &java, PROVIDER_APP, via_mapping).await;

    // Dubbo Java's MetadataServiceV2 answers with or without the group header, and a
    // revision it does not hold gets an answer naming no revision, which the client
    // refuses.
    let provider = &case.provider;
    let client = MetadataClient::new(Duration::from_secs(3), Limits::default());
    let revision = case.endpoints[0].revision.to_string();
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
}

#[tokio::test]
async fn rust_consumer_calls_a_dubbo_java_provider() {
    rust_consumer_calls_a_provider(PeerRegistry::etcd().await, false).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn rust_consumer_calls_a_dubbo_java_provider_on_zookeeper() {
    rust_consumer_calls_a_provider(PeerRegistry::zookeeper().await, true).await;
}

#[cfg(feature = "nacos")]
#[tokio::test]
async fn rust_consumer_calls_a_dubbo_java_provider_on_nacos() {
    rust_consumer_calls_a_provider(PeerRegistry::nacos().await, true).await;
}

#[tokio::test]
async fn dubbo_java_consumer_calls_a_rust_provider() {
    let Some(registry) = PeerRegistry::etcd().await else {
        return;
    };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let theirs =
        peer_consumer_calls_rust_provider(&registry, &java, RUST_APP, Some(RUST_APP)).await;
    // A key of its own where Rust apps are listed.
    assert_eq!(
        theirs.keys().collect::<Vec<_>>(),
        ["/services/rust-greeter"]
    );
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn dubbo_java_consumer_calls_a_rust_provider_on_zookeeper() {
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    peer_consumer_calls_rust_provider(&registry, &java, RUST_APP, None).await;
}

#[cfg(feature = "nacos")]
#[tokio::test]
async fn dubbo_java_consumer_calls_a_rust_provider_on_nacos() {
    let Some(registry) = PeerRegistry::nacos().await else {
        return;
    };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    peer_consumer_calls_rust_provider(&registry, &java, RUST_APP, None).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn a_dubbo_java_provider_killed_costs_a_rust_consumer_at_most_the_allowance_on_zookeeper() {
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    peer_provider_killed_while_rust_consumer_calls(&registry, &java, PROVIDER_APP).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn a_dubbo_java_consumer_loses_no_call_to_a_rust_provider_stopped_gracefully_on_zookeeper() {
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    rust_provider_stopped_while_peer_consumer_calls(&registry, &java, RUST_APP).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn a_dubbo_java_provider_stopped_by_sigterm_costs_a_rust_consumer_no_call_on_zookeeper() {
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    peer_provider_stopped_while_rust_consumer_calls(&registry, &java, PROVIDER_APP).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn what_a_dubbo_java_consumer_makes_of_a_killed_rust_provider_on_zookeeper() {
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    rust_provider_killed_while_peer_consumer_calls(&registry, &java, RUST_APP).await;
}
