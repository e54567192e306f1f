//! The balanced tonic channel over a live subscription, against real Greeter servers on
//! loopback registered in the embedded store.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::greeter::{GreeterNode, serve_greeter, start_greeter};
use crate::support::wait::eventually;
use futures::StreamExt as _;
use introspect::consumer::Change;
use introspect::consumer::{
    BalancedChannel, ChannelHandle, CoalesceOptions, HealthOptions, SubscribeOptions,
    SubscriptionHandle,
};
use introspect::consumer::{ResolverBuilder, RouteQuery};
use introspect::model::Authority;
use introspect::{MemoryStore, Resolver, Store, Subscription};

const APP: &str = "greeter";

/// The authority of a server's socket address.
fn authority(address: std::net::SocketAddr) -> Authority {
    Authority::new(&address.ip().to_string(), address.port())
}
const INTERFACE: &str = "helloworld.Greeter";
/// The consumer's coalescing window.
const WINDOW: Duration = Duration::from_millis(250);
/// Longer than the coalescing window plus the store's propagation, so a stopping provider
/// leaves the balancer before its server stops.
const DRAIN: Duration = Duration::from_millis(800);
/// Callers running at once.
const CALLERS: usize = 4;

fn store() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

/// Callers calling `SayHello` through the channel until told to stop.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

impl Load {
    fn start(channel: BalancedChannel) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicU64::new(0));
        let failed = Arc::new(AtomicU64::new(0));
        let tasks = (0..CALLERS)
            .map(|i| {
                let mut client = GreeterClient::new(channel.clone());
                let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
                tokio::spawn(async move {
                    let mut errors = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let mut request = tonic::Request::new(HelloRequest {
                            name: format!("caller-{i}"),
                        });
                        request.set_timeout(Duration::from_secs(2));
                        let call = client.say_hello(request);
                        match tokio::time::timeout(Duration::from_secs(3), call).await {
                            Ok(Ok(_)) => {
                                ok.fetch_add(1, Ordering::Relaxed);
                            }
                            Ok(Err(status)) => {
                                failed.fetch_add(1, Ordering::Relaxed);
                                errors.push(status.to_string());
                            }
                            Err(_) => {
                                failed.fetch_add(1, Ordering::Relaxed);
                                errors.push("call timed out".into());
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    errors
                })
            })
            .collect();
        Load {
            stop,
            ok,
            failed,
            tasks,
        }
    }

    fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    async fn finish(self) -> (u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut errors = Vec::new();
        for task in self.tasks {
            errors.extend(task.await.expect("caller task"));
        }
        (self.ok.load(Ordering::Relaxed), errors)
    }
}

/// Subscribes with `options` and waits until the balanced channel knows `providers`
/// addresses.
async fn balanced(
    store: &Arc<dyn Store>,
    configure: impl FnOnce(ResolverBuilder) -> ResolverBuilder,
    providers: usize,
) -> (Resolver, SubscriptionHandle, BalancedChannel, ChannelHandle) {
    let resolver = configure(Resolver::builder(store.clone())).build();
    let subscription = resolver
        .subscribe(Subscription::new(INTERFACE))
        .await
        .unwrap();
    let (channel, mut handle) = resolver.balanced_channel(&subscription).unwrap();
    while handle.addresses().len() < providers {
        tokio::time::timeout(Duration::from_secs(5), handle.changed())
            .await
            .unwrap_or_else(|_| panic!("the channel learns {providers} providers"))
            .unwrap();
    }
    (resolver, subscription, channel, handle)
}

/// Waits until every node has answered at least `more` calls beyond `since`.
async fn all_receive(nodes: &[&GreeterNode], since: &[u64], more: u64, what: &str) {
    eventually(Duration::from_secs(10), what, || async {
        nodes
            .iter()
            .zip(since)
            .all(|(n, &before)| n.calls() >= before + more)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_spread_survive_a_graceful_stop_and_reach_a_newcomer() {
    let store = store();
    let a = start_greeter(&store, APP, DRAIN).await;
    let b = start_greeter(&store, APP, DRAIN).await;
    let c = start_greeter(&store, APP, DRAIN).await;

    let options = |builder: ResolverBuilder| {
        builder.subscribe_options(
            SubscribeOptions::default().coalesce(CoalesceOptions::default().window(WINDOW)),
        )
    };
    let (_resolver, _subscription, channel, handle) = balanced(&store, options, 3).await;
    let load = Load::start(channel);

    // Calls spread over all three.
    all_receive(
        &[&a, &b, &c],
        &[0, 0, 0],
        20,
        "calls on all three providers",
    )
    .await;
    assert_eq!(load.failed(), 0);

    // A newcomer joins. Its arrival is pushed at once, so the stop that follows right after
    // waits out a coalescing window: the drain has to cover it.
    let d = start_greeter(&store, APP, DRAIN).await;

    // A graceful stop: disabled, drained, deregistered; only then the server stops. The
    // provider leaves the balancer during its drain, no call reaches it after that while
    // its server still runs, and no call fails.
    let gone = authority(a.address);
    let mut a = a;
    a.stop();
    eventually(
        DRAIN,
        "the stopping provider to leave the balancer",
        || async { !handle.addresses().contains(&gone) },
    )
    .await;
    let last = a.calls();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        a.calls(),
        last,
        "no call reached the provider after it left the balancer"
    );
    a.stopped().await;
    assert_eq!(load.failed(), 0, "no call failed across the graceful stop");

    // The newcomer receives calls, beside the two that stayed.
    let since = [b.calls(), c.calls(), d.calls()];
    all_receive(
        &[&b, &c, &d],
        &since,
        20,
        "calls on the newcomer and the others",
    )
    .await;
    assert_eq!(
        *handle.addresses(),
        [b.address, c.address, d.address]
            .iter()
            .map(|a| authority(*a))
            .collect()
    );

    let (ok, errors) = load.finish().await;
    assert!(errors.is_empty(), "failed calls: {errors:?}");
    assert!(ok >= 120, "{ok} calls");
    for node in [b, c, d] {
        node.shutdown().await;
    }
}

#[tokio::test]
async fn set_aside_endpoints_take_no_call_and_come_back() {
    let store = store();
    let a = start_greeter(&store, APP, Duration::from_millis(50)).await;
    let b = start_greeter(&store, APP, Duration::from_millis(50)).await;
    let options = |builder: ResolverBuilder| {
        builder.health(
            HealthOptions::default()
                .failure_threshold(2)
                .probe_interval(Duration::from_secs(60)),
        )
    };
    let (resolver, subscription, channel, handle) = balanced(&store, options, 2).await;
    let bad = subscription
        .current()
        .iter()
        .find(|e| e.port == a.address.port())
        .cloned()
        .expect("an endpoint of the first provider");
    let mut client = GreeterClient::new(channel.clone());
    let mut call_times = async |n: usize| {
        for _ in 0..n {
            client
                .say_hello(HelloRequest { name: "x".into() })
                .await
                .expect("a call through the channel");
        }
    };
    subscription.report_failure(&bad);
    subscription.report_failure(&bad);
    assert!(subscription.is_set_aside(&bad));
    // Discovery still lists it; health leaves it out, and so does every call.
    assert_eq!(subscription.current().len(), 2);
    assert_eq!(handle.addresses().len(), 2);
    let healthy: Vec<u16> = subscription.healthy().iter().map(|e| e.port).collect();
    assert_eq!(healthy, [b.address.port()]);
    // The explanation shows the three stages: listed, routed, set aside.
    let report = resolver
        .explain_route(&subscription, &RouteQuery::default())
        .await
        .unwrap();
    let mut aside: Vec<(u16, bool, bool)> = report
        .providers
        .iter()
        .map(|p| {
            let port = p.address.rsplit(':').next().unwrap().parse().unwrap();
            (port, p.routed, p.set_aside)
        })
        .collect();
    aside.sort();
    let mut expected = vec![
        (a.address.port(), true, true),
        (b.address.port(), true, false),
    ];
    expected.sort();
    assert_eq!(aside, expected, "{report:?}");
    assert!(
        report
            .steps
            .iter()
            .any(|s| s.starts_with("health: 1 of 2 routed providers set aside")),
        "{:?}",
        report.steps
    );
    let (a_before, b_before) = (a.calls(), b.calls());
    call_times(20).await;
    assert_eq!(a.calls(), a_before, "no call to the set-aside endpoint");
    assert_eq!(b.calls(), b_before + 20);

    subscription.report_success(&bad);
    assert!(!subscription.is_set_aside(&bad));
    assert_eq!(subscription.healthy().len(), 2);
    call_times(40).await;
    assert!(a.calls() > a_before, "it takes calls again after a success");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn dropping_the_channel_stops_its_task_and_releases_the_subscription() {
    let store = store();
    let a = start_greeter(&store, APP, Duration::from_millis(50)).await;
    let resolver = Resolver::new(store.clone());
    let subscription = resolver
        .subscribe(Subscription::new(INTERFACE))
        .await
        .unwrap();
    let (channel, handle) = resolver.balanced_channel(&subscription).unwrap();
    let mut client = GreeterClient::new(channel.clone());
    let reply = client
        .say_hello(HelloRequest { name: "x".into() })
        .await
        .unwrap();
    assert!(reply.into_inner().message.contains(&a.address.to_string()));
    assert!(handle.is_running());
    drop(client);
    drop(channel);
    eventually(Duration::from_secs(5), "the task to stop", || async {
        !handle.is_running()
    })
    .await;
    drop(handle);

    // stop() ends the task too; dropping the channel, its handle and the subscription
    // ends the subscription.
    let (_channel, handle) = resolver.balanced_channel(&subscription).unwrap();
    assert!(handle.is_running());
    handle.stop();
    eventually(
        Duration::from_secs(5),
        "the stopped task to end",
        || async { !handle.is_running() },
    )
    .await;
    drop(handle);
    drop(subscription);
    eventually(
        Duration::from_secs(5),
        "the subscription to end",
        || async { resolver.stats().await.subscriptions == 0 },
    )
    .await;
    a.shutdown().await;
}

/// Takes the next change of a discovery stream, within 5 s.
async fn next_change(
    discovery: &mut introspect::consumer::Discovery,
) -> Change<Authority, introspect::Endpoint> {
    tokio::time::timeout(Duration::from_secs(5), discovery.next())
        .await
        .expect("a change in time")
        .expect("the stream goes on")
        .unwrap_or_else(|never| match never {})
}

#[tokio::test]
async fn discover_streams_insertions_and_removals_a_balancer_can_dial() {
    let store = store();
    let a = start_greeter(&store, APP, Duration::from_millis(50)).await;
    let b = start_greeter(&store, APP, Duration::from_millis(50)).await;
    let resolver = Resolver::new(store.clone());
    let subscription = resolver
        .subscribe(Subscription::new(INTERFACE))
        .await
        .unwrap();
    let mut discovery = subscription.discover();

    // The current set first: one insertion per address, each dialable as it is.
    let mut inserted = Vec::new();
    for _ in 0..2 {
        match next_change(&mut discovery).await {
            Change::Insert(address, endpoint) => {
                assert_eq!(address, endpoint.authority());
                inserted.push(address);
            }
            Change::Remove(address) => panic!("unexpected removal of {address}"),
        }
    }
    inserted.sort();
    let mut expected = vec![authority(a.address), authority(b.address)];
    expected.sort();
    assert_eq!(inserted, expected);
    for address in &inserted {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let reply = GreeterClient::new(channel)
            .say_hello(HelloRequest { name: "x".into() })
            .await
            .unwrap();
        assert!(reply.into_inner().message.contains(address.as_str()));
    }

    // A graceful stop is a removal of that address, and only of it.
    let gone = authority(a.address);
    a.shutdown().await;
    match next_change(&mut discovery).await {
        Change::Remove(address) => assert_eq!(address, gone),
        Change::Insert(address, _) => panic!("unexpected insertion of {address}"),
    }
    // A newcomer is an insertion.
    let c = start_greeter(&store, APP, Duration::from_millis(50)).await;
    match next_change(&mut discovery).await {
        Change::Insert(address, _) => assert_eq!(address, authority(c.address)),
        Change::Remove(address) => panic!("unexpected removal of {address}"),
    }
    b.shutdown().await;
    c.shutdown().await;
}

#[tokio::test]
async fn an_ipv6_provider_is_dialed_through_the_balanced_channel() {
    let listener = match tokio::net::TcpListener::bind("[::1]:0").await {
        Ok(listener) => listener,
        Err(e) => {
            println!("skipped: this machine has no IPv6 loopback ({e})");
            return;
        }
    };
    let store = store();
    let node = serve_greeter(listener, &store, APP, Duration::from_millis(50)).await;
    let resolver = Resolver::new(store.clone());
    let subscription = resolver
        .subscribe(Subscription::new(INTERFACE))
        .await
        .unwrap();
    let endpoints = subscription.current();
    assert_eq!(endpoints.len(), 1);
    assert_eq!(
        &*endpoints[0].host, "::1",
        "the store keeps the unbracketed host"
    );
    assert_eq!(endpoints[0].address(), node.address.to_string());
    let (channel, _handle) = resolver.balanced_channel(&subscription).unwrap();
    let mut request = tonic::Request::new(HelloRequest { name: "v6".into() });
    request.set_timeout(Duration::from_secs(2));
    let reply = tokio::time::timeout(
        Duration::from_secs(5),
        GreeterClient::new(channel).say_hello(request),
    )
    .await
    .expect("the call is answered in time")
    .expect("the IPv6 provider answers");
    assert!(reply.into_inner().message.contains("[::1]"));
    assert_eq!(node.calls(), 1);
    node.shutdown().await;
}

/// What a Greeter server saw of the Triple headers naming a call's service.
type SeenHeaders = Arc<std::sync::Mutex<Vec<(Option<String>, Option<String>)>>>;

#[tokio::test]
async fn calls_name_the_group_and_version_of_the_service_they_are_for() {
    use crate::support::greeter::CountingGreeter;
    use crate::support::greeter::pb::greeter_server::GreeterServer;
    use introspect::{Provider, ServiceInfo};

    let store = store();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let provider = Provider::builder("grouped-greeter", store.clone())
        .export(
            ServiceInfo::new(INTERFACE)
                .with_group("blue")
                .with_version("1.0.0"),
        )
        .build()
        .unwrap();
    let seen = SeenHeaders::default();
    let kept = seen.clone();
    let record = move |request: tonic::Request<()>| {
        let header = |name: &str| {
            let value = request.metadata().get(name)?;
            value.to_str().ok().map(str::to_owned)
        };
        let named = (header("tri-service-group"), header("tri-service-version"));
        kept.lock().unwrap().push(named);
        Ok(request)
    };
    let greeter = GreeterServer::with_interceptor(CountingGreeter::new(address), record);
    let router = tonic::transport::Server::builder().add_service(greeter);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(provider.serve(router, listener, async {
        let _ = stopped.await;
    }));

    let resolver = Resolver::new(store.clone());
    let named = [
        ("any group", Subscription::new(INTERFACE)),
        (
            "its group",
            Subscription::new(INTERFACE).group("blue").version("1.0.0"),
        ),
    ];
    for (what, subscription) in named {
        let handle = resolver.subscribe(subscription).await.unwrap();
        eventually(Duration::from_secs(10), "the provider resolved", || {
            let found = !handle.current().is_empty();
            async move { found }
        })
        .await;
        let (channel, _channel_handle) = resolver.balanced_channel(&handle).unwrap();
        let mut request = tonic::Request::new(HelloRequest { name: what.into() });
        request.set_timeout(Duration::from_secs(2));
        GreeterClient::new(channel)
            .say_hello(request)
            .await
            .unwrap_or_else(|e| panic!("{what}: the call is answered: {e}"));
    }
    let expected = (Some("blue".to_owned()), Some("1.0.0".to_owned()));
    assert_eq!(*seen.lock().unwrap(), [expected.clone(), expected]);
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
}
