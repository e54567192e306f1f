//! The ADS protocol as a scripted client sees it: a real xDS server on `127.0.0.1:0` over a
//! resolver of the memory store, real Greeter providers joining and leaving, and a client
//! that chooses every ACK, NACK, stale nonce and unsubscribe itself.

use std::sync::Arc;
use std::time::Duration;

use crate::support::ads::{AdsClient, addresses};
use crate::support::greeter::start_greeter;
use introspect::{MemoryStore, Resolver, Store};
use introspect_xds::XdsServer;
use introspect_xds::envoy_types::pb::envoy::config::cluster::v3::Cluster;
use introspect_xds::envoy_types::pb::envoy::config::listener::v3::Listener;
use introspect_xds::envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use introspect_xds::types::{CLUSTER, CLUSTER_LOAD_ASSIGNMENT, LISTENER, ROUTE_CONFIGURATION};
use prost::Message;
use tokio::sync::oneshot;

const GREETER: &str = "helloworld.Greeter";
/// How long the server is given to stay silent when it must not answer.
const QUIET: Duration = Duration::from_millis(700);

/// A running xDS server over a fresh memory store.
struct Fixture {
    store: Arc<dyn Store>,
    address: String,
    _stop: oneshot::Sender<()>,
}

async fn fixture() -> Fixture {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let server = XdsServer::builder(Resolver::new(store.clone())).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));
    Fixture {
        store,
        address,
        _stop: stop,
    }
}

fn names_of<M: Message + Default>(
    response: &DiscoveryResponse,
    name: impl Fn(&M) -> String,
) -> Vec<String> {
    response
        .resources
        .iter()
        .map(|any| name(&M::decode(any.value.as_slice()).unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_nack_stale_nonce_unsubscribe_and_pushes() {
    let f = fixture().await;
    let a = start_greeter(&f.store, "greeter-a", Duration::from_millis(50)).await;
    let mut client = AdsClient::connect(f.address.clone()).await;

    // LDS for a known and an unknown name: the unknown one is left out (does not exist).
    client.send(LISTENER, &[GREETER, "no.Such"], "", "").await;
    let lds = client.next().await;
    assert_eq!(lds.type_url, LISTENER);
    assert_eq!(
        names_of::<Listener>(&lds, |l| l.name.clone()),
        vec![GREETER]
    );
    client.ack(&lds, &[GREETER, "no.Such"]).await;
    assert!(
        client.next_within(QUIET).await.is_none(),
        "an ACK with the same names gets no response"
    );

    client.send(CLUSTER, &[GREETER], "", "").await;
    let cds = client.next().await;
    assert_eq!(names_of::<Cluster>(&cds, |c| c.name.clone()), vec![GREETER]);
    client.ack(&cds, &[GREETER]).await;

    client
        .send(CLUSTER_LOAD_ASSIGNMENT, &[GREETER], "", "")
        .await;
    let first = client.next().await;
    assert_eq!(addresses(&first), vec![a.address.to_string()]);
    client.ack(&first, &[GREETER]).await;

    // A provider joins: the assignment is pushed with a new version and nonce.
    let b = start_greeter(&f.store, "greeter-b", Duration::from_millis(50)).await;
    let pushed = client.next().await;
    let mut both = vec![a.address.to_string(), b.address.to_string()];
    both.sort();
    assert_eq!(addresses(&pushed), both);
    assert_ne!(pushed.version_info, first.version_info);
    assert_ne!(pushed.nonce, first.nonce);

    // A request answering the older nonce is stale: its new name is ignored, no answer.
    client
        .send(
            CLUSTER_LOAD_ASSIGNMENT,
            &[GREETER, "other.Service"],
            &first.version_info,
            &first.nonce,
        )
        .await;
    assert!(
        client.next_within(QUIET).await.is_none(),
        "a stale request is ignored"
    );

    // A NACK of the push: no answer, the client keeps what it had.
    client
        .nack(
            CLUSTER_LOAD_ASSIGNMENT,
            &[GREETER],
            &first.version_info,
            &pushed.nonce,
        )
        .await;
    assert!(
        client.next_within(QUIET).await.is_none(),
        "a NACK is not answered"
    );

    // Changes are still pushed after a NACK: b leaves gracefully.
    b.shutdown().await;
    let after = client.next().await;
    assert_eq!(addresses(&after), vec![a.address.to_string()]);
    client.ack(&after, &[GREETER]).await;

    // Unsubscribe: an empty list answered at once with no resources, then no more pushes.
    client
        .send(
            CLUSTER_LOAD_ASSIGNMENT,
            &[],
            &after.version_info,
            &after.nonce,
        )
        .await;
    let empty = client.next().await;
    assert_eq!(empty.type_url, CLUSTER_LOAD_ASSIGNMENT);
    assert!(empty.resources.is_empty());
    client.ack(&empty, &[]).await;
    let c = start_greeter(&f.store, "greeter-c", Duration::from_millis(50)).await;
    if let Some(r) = client.next_within(QUIET).await {
        assert_ne!(
            r.type_url, CLUSTER_LOAD_ASSIGNMENT,
            "no pushes after unsubscribing"
        );
    }
    c.shutdown().await;
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_names_are_answered_not_left_hanging() {
    let f = fixture().await;
    let mut client = AdsClient::connect(f.address.clone()).await;
    for type_url in [LISTENER, CLUSTER] {
        client.send(type_url, &["no.Such"], "", "").await;
        let r = client.next().await;
        assert_eq!(r.type_url, type_url);
        assert!(
            r.resources.is_empty(),
            "{type_url}: an unknown name does not exist"
        );
    }
    // A service appears later: a listener subscribed by name is pushed once it exists.
    client.send(LISTENER, &[GREETER], "", "").await;
    let none = client.next().await;
    assert!(none.resources.is_empty());
    client.ack(&none, &[GREETER]).await;
    let a = start_greeter(&f.store, "greeter-a", Duration::from_millis(50)).await;
    let appeared = client.next().await;
    assert_eq!(
        names_of::<Listener>(&appeared, |l| l.name.clone()),
        vec![GREETER]
    );
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_clusters_list_the_configured_services() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let a = start_greeter(&store, "greeter-a", Duration::from_millis(50)).await;
    let server = XdsServer::builder(Resolver::new(store.clone()))
        .service(GREETER)
        .service("no.Such")
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = oneshot::channel::<()>();
    let serving = tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));
    let mut client = AdsClient::connect(address).await;
    client.send(CLUSTER, &[], "", "").await;
    let cds = client.next().await;
    // The untagged calls' cluster, and the empty one calls with a forced tag no provider
    // has are routed to (they fail, as in Java); nothing of the service that is not one.
    assert_eq!(
        names_of::<Cluster>(&cds, |c| c.name.clone()),
        vec![GREETER.to_owned(), format!("{GREETER}/none")]
    );
    client.send(ROUTE_CONFIGURATION, &[GREETER], "", "").await;
    let rds = client.next().await;
    assert_eq!(rds.resources.len(), 1);
    // Stopping the server ends the open stream, so the stop does not wait for clients.
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), serving)
        .await
        .expect("the server stops with a stream open")
        .unwrap()
        .unwrap();
    a.shutdown().await;
}
