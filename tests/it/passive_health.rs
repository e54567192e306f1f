//! Passive health in the balanced channel, panic mode and call deadlines, against real
//! Greeter servers on loopback registered in the embedded store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::calls::Caller;
use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::killable::{GREETER, Killable, greeter_info};
use crate::support::records::{HOUR, Records};
use crate::support::wait::eventually;
use introspect::consumer::{ChannelOptions, SubscribeOptions};
use introspect::{MemoryStore, Resolver, Store, Subscription};

const LIMIT: Duration = Duration::from_secs(10);
/// Between calls of the caller.
const PAUSE: Duration = Duration::from_millis(10);

fn records() -> Records {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    Records::new(store)
}

/// `n` Greeters registered (for an hour) as instances of `greeter`.
async fn fleet(records: &Records, n: usize) -> Vec<Killable> {
    let info = greeter_info("greeter");
    records.publish(&info).await;
    let mut nodes = Vec::new();
    for _ in 0..n {
        nodes.push(Killable::register(records, &info, HOUR).await);
    }
    nodes
}

#[tokio::test]
async fn a_killed_endpoint_costs_at_most_two_calls_and_rejoins_when_it_answers() {
    let records = records();
    let mut nodes = fleet(&records, 3).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), 3);
    let (channel, _channel_handle) = resolver.balanced_channel(&handle).unwrap();
    let caller = Caller::start(channel, PAUSE);
    eventually(LIMIT, "calls flowing", || async { caller.ok() >= 30 }).await;
    assert_eq!(caller.failed(), 0);

    let port = nodes[0].port();
    nodes[0].kill();
    eventually(LIMIT, "the killed endpoint set aside", || async {
        resolver.stats().await.set_aside >= 1
    })
    .await;
    let failed_after_kill = caller.failed();
    let ok = caller.ok();
    eventually(LIMIT, "calls flowing without it", || async {
        caller.ok() >= ok + 100
    })
    .await;
    assert!(
        failed_after_kill <= 3,
        "{failed_after_kill} calls failed on the killed endpoint"
    );
    assert_eq!(caller.failed(), failed_after_kill, "no failure once aside");
    assert!(!handle.healthy().iter().any(|e| e.port == port));

    // It comes back on the same port: a probe finds it and it rejoins.
    let _back = Killable::serve(port).await;
    eventually(Duration::from_secs(15), "the endpoint back", || async {
        handle.healthy().iter().any(|e| e.port == port)
    })
    .await;
    let (ok, failed, errors) = caller.finish().await;
    assert!(ok > 130);
    assert_eq!(failed, failed_after_kill, "{errors:?}");
    let stats = resolver.stats().await;
    assert!(stats.call_failures >= 1 && stats.call_failures <= 3);
    assert!(stats.probes >= 1);
}

#[tokio::test]
async fn with_every_endpoint_aside_the_channel_routes_to_all() {
    let records = records();
    let mut nodes = fleet(&records, 1).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    let (channel, _channel_handle) = resolver.balanced_channel(&handle).unwrap();
    let mut client = GreeterClient::new(channel);
    let hello = || {
        let mut request = tonic::Request::new(HelloRequest { name: "x".into() });
        request.set_timeout(Duration::from_secs(1));
        request
    };
    client.say_hello(hello()).await.expect("served");
    nodes[0].kill();
    // The first failures (the broken connection, then a refused one) set the only
    // endpoint aside; later calls still reach it (and fail fast) instead of waiting for a
    // ready endpoint until their deadline.
    for _ in 0..4 {
        let started = Instant::now();
        client.say_hello(hello()).await.unwrap_err();
        assert!(
            started.elapsed() < Duration::from_millis(900),
            "routed, not waiting"
        );
    }
    let stats = resolver.stats().await;
    assert_eq!(stats.set_aside, 1);
    assert!(stats.panic_routes >= 1);
    assert_eq!(handle.current().len(), 1, "the set keeps its only endpoint");
}

#[tokio::test]
async fn a_call_with_a_deadline_and_no_endpoints_fails_unavailable_at_once_saying_why() {
    let records = records();
    let resolver = Resolver::builder(records.store.clone())
        .subscribe_options(SubscribeOptions::default().start_timeout(Duration::from_millis(100)))
        .build();
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    assert!(handle.current().is_empty());

    // With the call's own deadline (grpc-timeout), and with the channel's request timeout:
    // no need to wait for either, the subscription says there is nothing to call.
    let plain = resolver.balanced_channel(&handle).unwrap().0;
    let options = ChannelOptions::default().request_timeout(Duration::from_secs(1));
    let bounded = resolver.balanced_channel_with(&handle, options).unwrap().0;
    for (channel, own_deadline) in [(plain, true), (bounded, false)] {
        let mut request = tonic::Request::new(HelloRequest { name: "x".into() });
        if own_deadline {
            request.set_timeout(Duration::from_secs(1));
        }
        let started = Instant::now();
        let mut client = GreeterClient::new(channel);
        let status = tokio::time::timeout(Duration::from_secs(3), client.say_hello(request))
            .await
            .expect("the call ends")
            .unwrap_err();
        let took = started.elapsed();
        assert_eq!(status.code(), tonic::Code::Unavailable, "{status}");
        assert!(status.message().contains("no app is mapped"), "{status}");
        assert!(
            took < Duration::from_millis(900),
            "at once, not at the deadline: {took:?}"
        );
    }
}
