//! Against a real dubbo-go 3.3 (`interop/go`) on etcd, ZooKeeper and Nacos: a Rust consumer
//! calls its provider, its consumer calls a Rust provider, and what it writes into the
//! registry matches the golden records in `tests/it/data/{etcd,zookeeper,nacos}/`.
//!
//! dubbo-go writes the mapping (its registry doubles as the metadata report), so both sides
//! find the provider through it.

use std::time::Duration;

use crate::support::peer_cases::{
    PeerRegistry, peer_consumer_calls_rust_provider,
    peer_provider_killed_while_rust_consumer_calls,
    peer_provider_stopped_while_rust_consumer_calls, rust_consumer_calls_peer_provider,
    rust_provider_killed_while_peer_consumer_calls,
    rust_provider_stopped_while_peer_consumer_calls,
};
use crate::support::peers::Peer;
use introspect::rpc::MetadataClient;
use introspect::{Error, Limits};

const PROVIDER_APP: &str = "dubbo-go-greeter";
const RUST_APP: &str = "rust-greeter";

async fn rust_consumer_calls_a_provider(registry: Option<PeerRegistry>) {
    let Some(registry) = registry else { return };
    let Some(go) = Peer::Go.find() else { return };
    let case = rust_consumer_calls_peer_provider(&registry, &go, PROVIDER_APP, true).await;
    // dubbo-go answers every ServiceInfoV2 with port 0: the port comes from the record's
    // `dubbo.endpoints`.
    assert_eq!(case.endpoints[0].service.port, 0, "{:?}", case.endpoints);

    // dubbo-go's MetadataServiceV2 is found by the Triple group and version headers only:
    // without them it answers UNIMPLEMENTED.
    let provider = &case.provider;
    let client = MetadataClient::new(Duration::from_secs(3), Limits::default());
    let revision = case.endpoints[0].revision.to_string();
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
}

#[tokio::test]
async fn rust_consumer_calls_a_dubbo_go_provider() {
    rust_consumer_calls_a_provider(PeerRegistry::etcd().await).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn rust_consumer_calls_a_dubbo_go_provider_on_zookeeper() {
    rust_consumer_calls_a_provider(PeerRegistry::zookeeper().await).await;
}

#[cfg(feature = "nacos")]
#[tokio::test]
async fn rust_consumer_calls_a_dubbo_go_provider_on_nacos() {
    rust_consumer_calls_a_provider(PeerRegistry::nacos().await).await;
}

async fn go_consumer_calls_a_rust_provider(registry: Option<PeerRegistry>) {
    let Some(registry) = registry else { return };
    let Some(go) = Peer::Go.find() else { return };
    peer_consumer_calls_rust_provider(&registry, &go, RUST_APP, None).await;
}

#[tokio::test]
async fn dubbo_go_consumer_calls_a_rust_provider() {
    go_consumer_calls_a_rust_provider(PeerRegistry::etcd().await).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn dubbo_go_consumer_calls_a_rust_provider_on_zookeeper() {
    go_consumer_calls_a_rust_provider(PeerRegistry::zookeeper().await).await;
}

#[cfg(feature = "nacos")]
#[tokio::test]
async fn dubbo_go_consumer_calls_a_rust_provider_on_nacos() {
    go_consumer_calls_a_rust_provider(PeerRegistry::nacos().await).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn a_dubbo_go_provider_killed_costs_a_rust_consumer_at_most_the_allowance_on_zookeeper() {
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(go) = Peer::Go.find() else { return };
    peer_provider_killed_while_rust_consumer_calls(&registry, &go, PROVIDER_APP).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn a_dubbo_go_consumer_loses_no_call_to_a_rust_provider_stopped_gracefully_on_zookeeper() {
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(go) = Peer::Go.find() else {
        return;
    };
    rust_provider_stopped_while_peer_consumer_calls(&registry, &go, RUST_APP).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn a_dubbo_go_provider_stopped_by_sigterm_costs_a_rust_consumer_no_call_on_zookeeper() {
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(go) = Peer::Go.find() else {
        return;
    };
    peer_provider_stopped_while_rust_consumer_calls(&registry, &go, PROVIDER_APP).await;
}

#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn what_a_dubbo_go_consumer_makes_of_a_killed_rust_provider_on_zookeeper() {
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(go) = Peer::Go.find() else {
        return;
    };
    rust_provider_killed_while_peer_consumer_calls(&registry, &go, RUST_APP).await;
}

/// A dubbo-go Greeter exported in a group and a version answers a call only when the call
/// names them in its Triple headers: the Rust consumer's balanced channel does, from the
/// endpoint's service, also for a subscription that names neither.
#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn a_dubbo_go_provider_in_a_group_and_version_is_called_by_them_on_zookeeper() {
    use crate::support::greeter::pb::HelloRequest;
    use crate::support::greeter::pb::greeter_client::GreeterClient;
    use crate::support::peer_cases::{CALLS, assert_all_answered, call_through, subscription};

    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(go) = Peer::Go.find() else { return };
    let provider = go
        .grouped_provider(&registry.url, PROVIDER_APP, "blue", "1.0.0")
        .await;
    registry
        .wait_for_instance(PROVIDER_APP, provider.port, "the peer's instance record")
        .await;
    registry.wait_for_mapping(PROVIDER_APP).await;

    // Without the headers, the grouped service is not found.
    let mut plain = GreeterClient::connect(format!("http://127.0.0.1:{}", provider.port))
        .await
        .expect("the peer's Triple port answers");
    let status = plain
        .say_hello(HelloRequest {
            name: "unqualified".into(),
        })
        .await
        .expect_err("an unqualified call to a grouped service");
    assert_eq!(status.code(), tonic::Code::Unimplemented, "{status:?}");

    let resolver = introspect::Resolver::builder(registry.backend.clone()).build();
    let live = resolver.subscribe(subscription(None)).await.unwrap();
    crate::support::peer_cases::wait_for_endpoints(&live, "the grouped endpoint").await;
    let endpoints = live.current();
    assert_eq!(
        (&*endpoints[0].service.group, &*endpoints[0].service.version),
        ("blue", "1.0.0"),
        "{endpoints:?}"
    );
    let calls = call_through(&resolver, &live, CALLS).await;
    assert_all_answered(&calls, go.peer().greeting_suffix(), &resolver.stats().await);
}
