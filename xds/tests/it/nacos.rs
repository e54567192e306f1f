//! xDS over a resolver of a real Nacos (rnacos): Greeter providers registered there as
//! Dubbo writes it reach an ADS client as endpoints, and leave it when they stop; a
//! consumer calling through the same resolver's balanced channel loses no call meanwhile.

use std::time::Duration;

use crate::support::ads::{AdsClient, addresses};
use crate::support::calls::Caller;
use crate::support::greeter::start_greeter_on;
use crate::support::nacos::NacosServer;
use crate::support::wait::eventually;
use introspect::{Resolver, Subscription};
use introspect_xds::XdsServer;
use introspect_xds::envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse;
use introspect_xds::types::CLUSTER_LOAD_ASSIGNMENT;
use tokio::sync::oneshot;

const GREETER: &str = "helloworld.Greeter";
/// Providers' TTL: on Nacos the keep-alive rhythm (the connection is the lease).
const TTL: Duration = Duration::from_secs(3);
/// Generous: the stopping marker must reach the consumer through rnacos's push before the
/// server stops, on a loaded machine too.
const DRAIN: Duration = Duration::from_secs(2);
/// How long a push that must come may take.
const LIMIT: Duration = Duration::from_secs(40);

/// Reads (and ACKs) pushes until one holds exactly `expected`; panics after [`LIMIT`].
/// A graceful stop on Nacos first re-registers the record marked as stopping, so a push may
/// come between two expected states.
async fn until(client: &mut AdsClient, expected: &[String], what: &str) -> DiscoveryResponse {
    let mut expected = expected.to_vec();
    expected.sort();
    let deadline = tokio::time::Instant::now() + LIMIT;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some(response) = client.next_within(left).await else {
            panic!("no push of {expected:?} ({what}) within {LIMIT:?}; pushed: {seen:?}");
        };
        client.ack(&response, &[GREETER]).await;
        let got = addresses(&response);
        if got == expected {
            return response;
        }
        seen.push(got);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_registered_in_nacos_are_served_and_pushed() {
    let Some(nacos) = NacosServer::start().await else {
        return;
    };
    let a = start_greeter_on(nacos.backend().await, "greeter-a", TTL, DRAIN).await;
    let resolver = Resolver::new(nacos.backend().await);
    let server = XdsServer::builder(resolver.clone()).build();
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

    // A consumer of the same resolver calls through its balanced channel all along.
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    let (channel, _) = resolver.balanced_channel(&handle).unwrap();
    let caller = Caller::start(channel, Duration::from_millis(20));
    eventually(LIMIT, "calls flowing", || async { caller.ok() >= 20 }).await;

    let b = start_greeter_on(nacos.backend().await, "greeter-b", TTL, DRAIN).await;
    let both = [a.address.to_string(), b.address.to_string()];
    until(&mut client, &both, "the second provider registered").await;
    eventually(LIMIT, "the second provider called", || async {
        b.calls() >= 5
    })
    .await;
    b.shutdown().await;
    until(
        &mut client,
        &[a.address.to_string()],
        "the second one stopped",
    )
    .await;
    let ok = caller.ok();
    eventually(LIMIT, "calls after the stop", || async {
        caller.ok() >= ok + 30
    })
    .await;
    let (ok, failed, errors) = caller.finish().await;
    assert_eq!(failed, 0, "{ok} calls, failures: {errors:?}");
    assert!(a.calls() > 0);
    a.shutdown().await;
    until(&mut client, &[], "the last one stopped").await;
}
