//! A newcomer never waits on a call that cannot succeed: a balanced channel whose
//! subscription resolves to nothing fails calls at once, saying why (no app mapped, no
//! instances, nothing exported that matches), and a call that no endpoint takes fails
//! after the channel's endpoint wait even without a deadline. `Resolver::explain` says the
//! same to an embedder.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::greeter::start_greeter;
use crate::support::hostile::serve_unreachable;
use crate::support::records::Records;
use introspect::consumer::{BalancedChannel, ChannelOptions};
use introspect::{Layout, MemoryStore, Resolver, Store, Subscription};

const GREETER: &str = "helloworld.Greeter";

/// One call without a deadline; its status, and how long it took.
async fn call(channel: BalancedChannel) -> (tonic::Status, Duration) {
    let started = Instant::now();
    let request = tonic::Request::new(HelloRequest { name: "x".into() });
    // The outer bound only keeps a broken channel from hanging the test.
    let answer = tokio::time::timeout(Duration::from_secs(30), async move {
        GreeterClient::new(channel).say_hello(request).await
    })
    .await
    .expect("the call ends by itself");
    (answer.expect_err("nothing can answer"), started.elapsed())
}

/// Subscribes to `subscription` and calls once through a balanced channel.
async fn call_through(store: &Arc<dyn Store>, subscription: Subscription) -> (String, Duration) {
    let resolver = Resolver::new(store.clone());
    let handle = resolver.subscribe(subscription.clone()).await.unwrap();
    let why = handle.why_empty().expect("the set is empty").to_string();
    let explained = resolver.explain(&subscription).await.unwrap().to_string();
    assert_eq!(
        why, explained,
        "the subscription and a fresh read say the same"
    );
    let (channel, _handle) = resolver.balanced_channel(&handle).unwrap();
    let (status, took) = call(channel).await;
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status}");
    assert!(status.message().contains(&why), "{status} says {why}");
    (why, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_for_an_interface_nobody_exports_fails_at_once_saying_so() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let (why, took) = call_through(&store, Subscription::new("nope.Svc")).await;
    assert!(why.starts_with("no app is mapped to nope.Svc"), "{why}");
    assert!(
        took < Duration::from_secs(2),
        "failed at once, not after {took:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_for_a_version_nobody_exports_names_what_is_exported() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    // `export_service` exports the Greeter without a version.
    let greeter = start_greeter(&store, "greeter", Duration::from_millis(50)).await;
    let (why, _) = call_through(&store, Subscription::new(GREETER).version("1.0")).await;
    assert!(
        why.starts_with(
            "none exports helloworld.Greeter version \"1.0\": greeter exports helloworld.Greeter:tri"
        ),
        "{why}"
    );
    assert!(why.contains("exported without a version"), "{why}");
    greeter.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_for_an_app_without_instances_says_so() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let key = Layout::default().mapping_key(GREETER);
    store.put(&key, b"greeter".to_vec(), None).await.unwrap();
    let (why, _) = call_through(&store, Subscription::new(GREETER)).await;
    assert_eq!(why, "greeter has no instances");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_to_an_endpoint_that_takes_no_connection_fails_after_the_connect_timeout() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let records = Records::new(store.clone());
    // An instance whose port takes no connection (a host gone, a firewall that drops).
    let (port, _fillers, _listener) = serve_unreachable().await;
    let info = Records::metadata("greeter", &[introspect::ServiceInfo::new(GREETER)]);
    records.publish(&info).await;
    records
        .register(&Records::instance(&info, port), None)
        .await;
    let resolver = Resolver::new(store.clone());
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), 1);
    assert!(handle.why_empty().is_none());
    let connect = Duration::from_millis(500);
    let options = ChannelOptions::default().connect_timeout(connect);
    let (channel, _handle) = resolver.balanced_channel_with(&handle, options).unwrap();
    let (status, took) = call(channel).await;
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status}");
    assert!(took >= connect, "waited the connect timeout, not {took:?}");
    assert!(
        took < Duration::from_secs(10),
        "the call did not hang: {took:?}"
    );
}
