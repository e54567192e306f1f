//! Scenario 7, failure: a fleet of Greeters on the memory store, 60% of it killed at once
//! (no goodbye: listeners closed, connections shut, leases left to expire) under consumers
//! calling at a steady rate through balanced channels. Two consumers run side by side on
//! the same fleet, with the same shortened maximum hold: one with consumer-side health
//! (passive health and probes of held instances, the default) and one with health turned
//! off, which routes as the channel did before passive health (the yardstick).
//!
//! Reported per consumer: the calls that failed after the kill, and the time from the kill
//! until the error rate stays under 1% (1-second buckets of at least 20 calls).
//! Included by `scale.rs` (`--only failure` runs it alone).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use introspect::backend::kv::registry::Registry;
use introspect::backend::kv::report::MetadataReport;
use introspect::consumer::{ChannelOptions, HealthOptions, ProtectionOptions};
use introspect::model::keys;
use introspect::model::revision::REVISION_RULE_SHA256_V1;
use introspect::{
    Layout, Limits, MemoryStore, MetadataInfo, Resolver, Result, ServiceInfo, ServiceInstance,
    Store, Subscription,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::Row;

#[rustfmt::skip]
#[allow(clippy::all, dead_code)]
#[path = "../../proto/generated/helloworld.rs"]
mod pb;

use pb::greeter_client::GreeterClient;
use pb::greeter_server::{Greeter, GreeterServer};
use pb::{HelloReply, HelloRequest};

const INTERFACE: &str = "helloworld.Greeter";
/// Calls per second of each consumer.
const RATE: u64 = 100;
/// Each call's deadline.
const CALL_DEADLINE: Duration = Duration::from_secs(1);
/// Smallest bucket that counts for the error rate.
const MIN_BUCKET: usize = 20;

struct Shape {
    fleet: usize,
    killed: usize,
    ttl: Duration,
    max_hold: Duration,
    warmup: Duration,
    after_kill: Duration,
}

impl Shape {
    fn new(full: bool) -> Shape {
        if full {
            Shape {
                fleet: 20,
                killed: 12,
                ttl: Duration::from_secs(5),
                max_hold: Duration::from_secs(20),
                warmup: Duration::from_secs(3),
                after_kill: Duration::from_secs(30),
            }
        } else {
            Shape {
                fleet: 5,
                killed: 3,
                ttl: Duration::from_secs(1),
                max_hold: Duration::from_secs(2),
                warmup: Duration::from_secs(1),
                after_kill: Duration::from_secs(5),
            }
        }
    }
}

#[derive(Clone)]
struct Hello;

#[tonic::async_trait]
impl Greeter for Hello {
    async fn say_hello(
        &self,
        _request: tonic::Request<HelloRequest>,
    ) -> std::result::Result<tonic::Response<HelloReply>, tonic::Status> {
        Ok(tonic::Response::new(HelloReply {
            message: "hello".into(),
        }))
    }
}

/// One Greeter that can be killed as a crash kills it.
struct Node {
    connections: Arc<Mutex<Vec<std::net::TcpStream>>>,
    server: JoinHandle<()>,
    keep_alive: JoinHandle<()>,
}

impl Node {
    async fn start(store: &Arc<dyn Store>, info: &MetadataInfo, ttl: Duration) -> Result<Node> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address: SocketAddr = listener.local_addr()?;
        let connections: Arc<Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let kept = connections.clone();
        let incoming = futures::stream::unfold(listener, move |listener| {
            let kept = kept.clone();
            async move {
                let accepted = listener.accept().await.and_then(|(stream, _)| {
                    let std = stream.into_std()?;
                    kept.lock().unwrap().push(std.try_clone()?);
                    TcpStream::from_std(std)
                });
                Some((accepted, listener))
            }
        });
        let server = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(GreeterServer::new(Hello))
                .serve_with_incoming(incoming)
                .await;
        });
        let mut instance = ServiceInstance::new(info.app.clone(), "127.0.0.1", address.port());
        instance
            .metadata
            .insert(keys::REVISION.into(), info.revision.clone());
        instance
            .metadata
            .insert(keys::STORAGE_TYPE.into(), "remote".into());
        instance
            .metadata
            .insert(keys::REVISION_RULE.into(), REVISION_RULE_SHA256_V1.into());
        let lease = store.grant_lease(ttl).await?;
        Registry::new(store.clone(), Layout::default(), Limits::default())
            .register(&instance, Some(lease))
            .await?;
        let store = store.clone();
        let keep_alive = tokio::spawn(async move {
            loop {
                tokio::time::sleep(ttl / 4).await;
                let _ = store.keep_alive(lease).await;
            }
        });
        Ok(Node {
            connections,
            server,
            keep_alive,
        })
    }

    fn kill(&self) {
        self.keep_alive.abort();
        self.server.abort();
        for connection in self.connections.lock().unwrap().drain(..) {
            let _ = connection.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// What one consumer saw after the kill.
struct Outcome {
    calls: usize,
    failed: usize,
    /// From the kill until the error rate stays under 1%.
    recovery: Option<Duration>,
}

/// Calls at [`RATE`] through a balanced channel of `resolver` until `until`; each call's
/// result is sent with its start time.
async fn consume(
    resolver: Resolver,
    options: ChannelOptions,
    until: Instant,
    results: mpsc::UnboundedSender<(Instant, bool)>,
) -> Result<()> {
    let handle = resolver.subscribe(Subscription::new(INTERFACE)).await?;
    let (channel, _channel_handle) = resolver.balanced_channel_with(&handle, options)?;
    let mut ticks = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while Instant::now() < until {
        ticks.tick().await;
        let mut client = GreeterClient::new(channel.clone());
        let results = results.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let mut request = tonic::Request::new(HelloRequest { name: "x".into() });
            request.set_timeout(CALL_DEADLINE);
            let call = tokio::time::timeout(CALL_DEADLINE * 2, client.say_hello(request));
            let ok = matches!(call.await, Ok(Ok(_)));
            let _ = results.send((started, ok));
        });
    }
    drop(handle);
    Ok(())
}

fn outcome(results: &[(Instant, bool)], killed_at: Instant) -> Outcome {
    let after: Vec<(Duration, bool)> = results
        .iter()
        .filter(|(t, _)| *t >= killed_at)
        .map(|(t, ok)| (*t - killed_at, *ok))
        .collect();
    let seconds = after.iter().map(|(d, _)| d.as_secs()).max().unwrap_or(0) as usize + 1;
    let mut buckets = vec![(0usize, 0usize); seconds];
    for (d, ok) in &after {
        let b = &mut buckets[d.as_secs() as usize];
        b.0 += 1;
        b.1 += usize::from(!ok);
    }
    let bad = |(calls, failed): &(usize, usize)| {
        *calls >= MIN_BUCKET && (*failed as f64) >= 0.01 * (*calls as f64)
    };
    let recovery = match buckets.iter().rposition(bad) {
        None => Some(Duration::ZERO),
        // Still failing in the last full bucket: not recovered within the run.
        Some(last) if last + 2 >= buckets.len() => None,
        Some(last) => Some(Duration::from_secs(last as u64 + 1)),
    };
    Outcome {
        calls: after.len(),
        failed: after.iter().filter(|(_, ok)| !ok).count(),
        recovery,
    }
}

/// Runs the scenario; adds its rows and notes.
pub async fn failure(rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Result<()> {
    let full =
        std::env::args().any(|a| a == "--bench") && !std::env::args().any(|a| a == "--quick");
    let shape = Shape::new(full);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let info = MetadataInfo::new("greeter", vec![ServiceInfo::new(INTERFACE)])?;
    MetadataReport::new(store.clone(), Layout::default(), Limits::default())
        .publish(&info)
        .await?;
    introspect::backend::kv::mapping::Mapping::new(
        store.clone(),
        Layout::default(),
        Limits::default(),
    )
    .add(INTERFACE, &info.app)
    .await?;
    let mut nodes = Vec::new();
    for _ in 0..shape.fleet {
        nodes.push(Node::start(&store, &info, shape.ttl).await?);
    }
    let protection = ProtectionOptions::default().max_hold(shape.max_hold);
    let resolver = |health: HealthOptions| {
        Resolver::builder(store.clone())
            .protection(protection.clone())
            .health(health)
            .build()
    };
    let with_health = resolver(HealthOptions::default());
    let without = resolver(HealthOptions::disabled());
    let killed_at = Instant::now() + shape.warmup;
    let until = killed_at + shape.after_kill;
    let (tx_a, mut rx_a) = mpsc::unbounded_channel();
    let (tx_b, mut rx_b) = mpsc::unbounded_channel();
    let a = tokio::spawn(consume(with_health, ChannelOptions::default(), until, tx_a));
    let b = tokio::spawn(consume(
        without,
        ChannelOptions::default().passive_health(false),
        until,
        tx_b,
    ));
    tokio::time::sleep_until(killed_at.into()).await;
    let killed_at = Instant::now();
    for node in &nodes[..shape.killed] {
        node.kill();
    }
    a.await.expect("consumer task")?;
    b.await.expect("consumer task")?;
    // The last calls answer within their deadline.
    tokio::time::sleep(CALL_DEADLINE * 2).await;
    let mut results_a = Vec::new();
    while let Ok(r) = rx_a.try_recv() {
        results_a.push(r);
    }
    let mut results_b = Vec::new();
    while let Ok(r) = rx_b.try_recv() {
        results_b.push(r);
    }
    let (a, b) = (
        outcome(&results_a, killed_at),
        outcome(&results_b, killed_at),
    );
    let recovery = |o: &Outcome| match o.recovery {
        Some(d) => format!("{} s", d.as_secs()),
        None => format!("not within {} s", shape.after_kill.as_secs()),
    };
    let scenario = format!(
        "failure: {} of {} killed at once, {} calls/s, max hold {} s",
        shape.killed,
        shape.fleet,
        RATE,
        shape.max_hold.as_secs()
    );
    rows.push(Row::new(
        format!("{scenario}: failed calls after the kill"),
        format!("{} of {}", a.failed, a.calls),
        format!("{} of {} (no consumer-side health)", b.failed, b.calls),
        format!(
            "{:.1}% fewer",
            100.0 * (1.0 - a.failed as f64 / (b.failed.max(1)) as f64)
        ),
        "fewer than the yardstick",
        Some(a.failed < b.failed),
    ));
    rows.push(Row::new(
        format!("{scenario}: time until the error rate stays under 1%"),
        recovery(&a),
        recovery(&b),
        "1-s buckets of ≥ 20 calls",
        "shorter than the yardstick",
        Some(match (a.recovery, b.recovery) {
            (Some(x), Some(y)) => x < y,
            (Some(_), None) => true,
            _ => false,
        }),
    ));
    notes.push(format!(
        "Failure scenario: both consumers call the same fleet of {} Greeters on the memory \
         store (leases of {} s, so the killed instances expire and self-preservation holds \
         them for {} s); one with consumer-side health (passive health in the balanced \
         channel, held instances probed before they take calls), one with \
         `HealthOptions::disabled()` and `ChannelOptions::passive_health(false)`.",
        shape.fleet,
        shape.ttl.as_secs(),
        shape.max_hold.as_secs()
    ));
    for node in &nodes {
        node.kill();
    }
    Ok(())
}
