//! xDS over a resolver of a real ZooKeeper: Greeter providers registered there as Dubbo
//! writes it reach an ADS client as endpoints, and leave it when they stop.

use std::time::Duration;

use crate::support::ads::{AdsClient, addresses};
use crate::support::greeter::start_greeter_on;
use crate::support::zookeeper::ZooKeeperServer;
use introspect::Resolver;
use introspect_xds::XdsServer;
use introspect_xds::types::CLUSTER_LOAD_ASSIGNMENT;
use tokio::sync::oneshot;

const GREETER: &str = "helloworld.Greeter";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_registered_in_zookeeper_are_served_and_pushed() {
    let Some(zookeeper) = ZooKeeperServer::start().await else {
        return;
    };
    let ttl = Duration::from_secs(2);
    let drain = Duration::from_millis(50);
    let a = start_greeter_on(zookeeper.backend().await, "greeter-a", ttl, drain).await;
    let server = XdsServer::builder(Resolver::new(zookeeper.backend().await)).build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let (_stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(server.serve(listener, async {
        let _ = stopped.await;
    }));
    let mut client = AdsClient::connect(address).await;
    client
        .send(CLUSTER_LOAD_ASSIGNMENT, &[GREETER], "", "")
        .await;
    let first = client.next().await;
    assert_eq!(addresses(&first), vec![a.address.to_string()]);
    client.ack(&first, &[GREETER]).await;
    let b = start_greeter_on(zookeeper.backend().await, "greeter-b", ttl, drain).await;
    let pushed = client.next().await;
    let mut both = vec![a.address.to_string(), b.address.to_string()];
    both.sort();
    assert_eq!(addresses(&pushed), both);
    client.ack(&pushed, &[GREETER]).await;
    b.shutdown().await;
    let after = client.next().await;
    assert_eq!(addresses(&after), vec![a.address.to_string()]);
    a.shutdown().await;
}
