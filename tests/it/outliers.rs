//! Outlier ejection in the balanced channel, judged by the calls it routes: real tonic
//! Greeter servers on loopback, registered in the embedded store, one slow, one failing,
//! one hung (behind a proxy that takes bytes and forwards none, as a stopped process
//! does); the servers count what they answer.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use introspect::consumer::{EjectionReason, HealthOptions, RouteQuery};
use introspect::{MemoryStore, Resolver, Store, Subscription};
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};

use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::greeter::pb::greeter_server::{Greeter, GreeterServer};
use crate::support::greeter::pb::{HelloReply, HelloRequest};
use crate::support::killable::{GREETER, greeter_info};
use crate::support::proxy::{Fault, FaultProxy};
use crate::support::records::Records;
use crate::support::wait::eventually;

const LIMIT: Duration = Duration::from_secs(15);
const SLOW: Duration = Duration::from_millis(250);
const PATH: &str = "/helloworld.Greeter/SayHello";

/// A Greeter answering after `delay`, declining 3 calls in 10 with `UNAVAILABLE` when
/// `failing`, counting the calls it processed and declined.
#[derive(Clone)]
struct Faulty {
    delay: Duration,
    failing: bool,
    calls: Arc<AtomicU64>,
    declined: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl Greeter for Faulty {
    async fn say_hello(&self, _: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        if self.failing && n % 10 < 3 {
            self.declined.fetch_add(1, Ordering::Relaxed);
            return Err(Status::unavailable("declined by the test"));
        }
        tokio::time::sleep(self.delay).await;
        Ok(Response::new(HelloReply {
            message: "hello".into(),
        }))
    }
}

/// One provider of the fleet: its server, its counters, and the proxy it is reached
/// through (when the test hangs it).
struct Node {
    greeter: Faulty,
    address: SocketAddr,
    proxy: Option<FaultProxy>,
    _server: JoinHandle<()>,
}

impl Node {
    async fn serve(delay: Duration, failing: bool, proxied: bool) -> Node {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut address = listener.local_addr().unwrap();
        let greeter = Faulty {
            delay,
            failing,
            calls: Arc::default(),
            declined: Arc::default(),
        };
        let service = GreeterServer::new(greeter.clone());
        let server = tokio::spawn(async move {
            let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await;
        });
        let proxy = if proxied {
            let proxy = FaultProxy::start(address).await;
            address = proxy.endpoint().parse().unwrap();
            Some(proxy)
        } else {
            None
        };
        Node {
            greeter,
            address,
            proxy,
            _server: server,
        }
    }

    fn calls(&self) -> u64 {
        self.greeter.calls.load(Ordering::Relaxed)
    }
}

/// Registers `nodes` as instances of one app exporting the Greeter; a resolver over them
/// with `health`, its subscription and a balanced channel.
async fn consumer(
    nodes: &[&Node],
    health: HealthOptions,
) -> (
    Resolver,
    introspect::SubscriptionHandle,
    introspect::consumer::BalancedChannel,
) {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let records = Records::new(store.clone());
    let info = greeter_info("outliers");
    records.publish(&info).await;
    for node in nodes {
        records
            .register(&Records::instance(&info, node.address.port()), None)
            .await;
    }
    let resolver = Resolver::builder(store).health(health).build();
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), nodes.len());
    let (channel, _) = resolver.balanced_channel(&handle).unwrap();
    (resolver, handle, channel)
}

/// Calls counted by outcome, over `callers` concurrent loops through one channel.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
}

/// `callers` loops of `calls` calls each (deadline 3 s); the tally.
async fn call_many(
    channel: &introspect::consumer::BalancedChannel,
    callers: usize,
    calls: usize,
) -> Arc<Tally> {
    let tally = Arc::new(Tally::default());
    let mut loops = Vec::new();
    for _ in 0..callers {
        let (channel, tally) = (channel.clone(), tally.clone());
        loops.push(tokio::spawn(async move {
            let mut client = GreeterClient::new(channel);
            for _ in 0..calls {
                let mut request = tonic::Request::new(HelloRequest { name: "o".into() });
                request.set_timeout(Duration::from_secs(3));
                match client.say_hello(request).await {
                    Ok(_) => tally.ok.fetch_add(1, Ordering::Relaxed),
                    Err(_) => tally.failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    for l in loops {
        l.await.unwrap();
    }
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_and_a_failing_provider_leave_the_pick_each_for_its_reason() {
    let fast_a = Node::serve(Duration::ZERO, false, false).await;
    let fast_b = Node::serve(Duration::ZERO, false, false).await;
    let slow = Node::serve(SLOW, false, false).await;
    let failing = Node::serve(Duration::ZERO, true, false).await;
    let nodes = [&fast_a, &fast_b, &slow, &failing];
    let (resolver, handle, channel) = consumer(&nodes, HealthOptions::default()).await;

    // Settle: both are judged within a few hundred calls.
    let settle = call_many(&channel, 4, 100).await;
    assert_eq!(
        settle.failed.load(Ordering::Relaxed),
        0,
        "F's declines are retried"
    );
    let ejections = resolver.ejections();
    let reason_of = |node: &Node| {
        let address = node.address.to_string();
        ejections
            .iter()
            .find(|e| e.address == address)
            .map(|e| (e.method.clone(), e.reason.clone()))
    };
    assert!(
        matches!(reason_of(&slow), Some((Some(m), EjectionReason::Slow { .. })) if m == PATH),
        "{ejections:?}"
    );
    assert!(
        matches!(
            reason_of(&failing),
            Some((None, EjectionReason::FailureRate { .. }))
        ),
        "{ejections:?}"
    );
    assert!(reason_of(&fast_a).is_none() && reason_of(&fast_b).is_none());

    // Steady: the slow and the failing one take (almost) nothing.
    let before: Vec<u64> = nodes.iter().map(|n| n.calls()).collect();
    let steady = call_many(&channel, 4, 250).await;
    assert_eq!(steady.failed.load(Ordering::Relaxed), 0);
    let taken: Vec<u64> = nodes
        .iter()
        .zip(&before)
        .map(|(n, b)| n.calls() - b)
        .collect();
    let total: u64 = taken.iter().sum();
    println!("steady calls per provider (fast, fast, slow, failing): {taken:?}");
    assert!(
        taken[2] * 20 < total,
        "the slow one took {} of {total}",
        taken[2]
    );
    assert!(
        taken[3] * 20 < total,
        "the failing one took {} of {total}",
        taken[3]
    );

    // Explained: the route says which and why.
    let query = RouteQuery {
        method: Some("SayHello".into()),
        ..RouteQuery::default()
    };
    let report = resolver.explain_route(&handle, &query).await.unwrap();
    let slow_route = report
        .providers
        .iter()
        .find(|p| p.address == slow.address.to_string())
        .unwrap();
    assert!(slow_route.set_aside);
    let said = slow_route.ejection.as_ref().unwrap().to_string();
    assert!(said.contains("median"), "{said}");
    assert!(
        report
            .steps
            .iter()
            .any(|s| s.starts_with("health: 2 of 4 routed providers set aside")),
        "{:?}",
        report.steps
    );
    let stats = resolver.stats().await;
    assert!(
        stats.ejected_slow >= 1 && stats.ejected_failure_rate >= 1,
        "{stats:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outliers_are_capped_at_half_of_the_routed_providers() {
    let fast = Node::serve(Duration::ZERO, false, false).await;
    let f1 = Node::serve(Duration::ZERO, true, false).await;
    let f2 = Node::serve(Duration::ZERO, true, false).await;
    let f3 = Node::serve(Duration::ZERO, true, false).await;
    let nodes = [&fast, &f1, &f2, &f3];
    let (resolver, handle, channel) = consumer(&nodes, HealthOptions::default()).await;
    // A call declined by three failing providers in a row fails (its tries are spent).
    call_many(&channel, 4, 100).await;
    eventually(LIMIT, "three failing providers ejected", || async {
        resolver.ejections().len() == 3
    })
    .await;
    let before: Vec<u64> = nodes.iter().map(|n| n.calls()).collect();
    call_many(&channel, 4, 100).await;
    let taken: Vec<u64> = nodes
        .iter()
        .zip(&before)
        .map(|(n, b)| n.calls() - b)
        .collect();
    println!("calls per provider with three of four failing: {taken:?}");
    // At most half of the four are left out: the fast one and one failing one take calls.
    assert!(taken.iter().filter(|&&t| t > 0).count() >= 2, "{taken:?}");
    // The subscription's healthy view leaves out what a call leaves out: two of four.
    assert_eq!(handle.healthy().len(), 2);
    let report = resolver
        .explain_route(&handle, &RouteQuery::default())
        .await
        .unwrap();
    assert!(
        report
            .steps
            .iter()
            .any(|s| s.contains("health: 3 of 4") && s.contains("let back") && s.contains("50%")),
        "{:?}",
        report.steps
    );
    assert!(resolver.stats().await.capped_routes > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_provider_fails_only_the_calls_it_holds_and_rejoins_once_it_answers() {
    let a = Node::serve(Duration::ZERO, false, false).await;
    let b = Node::serve(Duration::ZERO, false, false).await;
    let hung = Node::serve(Duration::ZERO, false, true).await;
    let probe_interval = Duration::from_secs(1);
    let health = HealthOptions::default().probe_interval(probe_interval);
    let (resolver, _handle, channel) = consumer(&[&a, &b, &hung], health).await;
    let warm = call_many(&channel, 4, 30).await;
    assert_eq!(warm.failed.load(Ordering::Relaxed), 0);
    assert!(hung.calls() > 0);

    // It stops answering: TCP still accepts, nothing comes back.
    let proxy = hung.proxy.as_ref().unwrap();
    proxy.set(Fault::Blackhole);
    let stopped_at = hung.calls();
    let started = tokio::time::Instant::now();
    let during = call_many(&channel, 4, 150).await;
    let failed = during.failed.load(Ordering::Relaxed);
    println!(
        "while hung: {} ok, {failed} failed in {:?}",
        during.ok.load(Ordering::Relaxed),
        started.elapsed()
    );
    // Only the calls already waiting on it when it was found hung fail: one per caller
    // at most, none after.
    assert!(failed <= 4, "{failed} calls failed");
    assert!(
        resolver
            .ejections()
            .iter()
            .any(|e| e.address == hung.address.to_string() && e.reason == EjectionReason::Hung),
        "{:?}",
        resolver.ejections()
    );
    assert_eq!(resolver.stats().await.ejected_hung, 1);

    // It answers again: within a probe interval or two it takes calls.
    proxy.set(Fault::Pass);
    eventually(probe_interval * 4, "the hung provider back", || async {
        resolver.ejections().is_empty()
    })
    .await;
    call_many(&channel, 4, 30).await;
    assert!(hung.calls() > stopped_at, "it takes calls again");
}
