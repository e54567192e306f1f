//! Greeter providers and a consumer in one process on the embedded store: calls spread
//! over the providers through the balanced channel, one provider stops gracefully without a
//! failed call, a newcomer joins and gets calls.
//!
//! ```text
//! cargo run --example greeter
//! cargo run --example greeter -- --providers 5 --phase-ms 2000 --metrics 127.0.0.1:9100 --hold
//! RUST_LOG=introspect=debug cargo run --example greeter   (default: warnings only)
//! ```
//!
//! For separate processes over a registry, see `greeter_provider` and `greeter_consumer`.
//! An error is printed as one line `error: ...`, and it exits non-zero; so it does when a
//! call failed.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;
use common::pb::HelloRequest;
use common::pb::greeter_client::GreeterClient;
use common::pb::greeter_server::GreeterServer;
use common::{BoxError, HelloGreeter};
use introspect::consumer::BalancedChannel;
use introspect::metrics::Metrics;
use introspect::{Provider, Resolver, Store, Subscription};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Greeter providers and a consumer in one process.
#[derive(Parser)]
struct Args {
    /// Providers at the start (at least 2).
    #[arg(long, default_value_t = 3)]
    providers: usize,
    /// Length of each phase, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    phase_ms: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Keep everything running after the last phase, until Ctrl-C.
    #[arg(long)]
    hold: bool,
}

const APP: &str = "greeter";
const DRAIN: Duration = Duration::from_millis(500);

type Tally = Arc<Mutex<BTreeMap<String, u64>>>;

/// Calls the Greeter through `channel` until `stop`, counting answers per server.
fn spawn_caller(
    channel: BalancedChannel,
    tally: Tally,
    failed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut client = GreeterClient::new(channel);
        while !stop.load(Ordering::Relaxed) {
            let mut request = tonic::Request::new(HelloRequest {
                name: "world".into(),
            });
            request.set_timeout(Duration::from_secs(2));
            match client.say_hello(request).await {
                Ok(reply) => {
                    let message = reply.into_inner().message;
                    let server = common::server_of(&message).to_owned();
                    *tally
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .entry(server)
                        .or_default() += 1;
                }
                Err(status) => {
                    failed.fetch_add(1, Ordering::Relaxed);
                    eprintln!("call failed: {status}");
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

/// Prints the calls each server answered since `before`, and returns the new totals.
fn report(phase: &str, tally: &Tally, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    let now = tally.lock().unwrap_or_else(|p| p.into_inner()).clone();
    println!("{phase}:");
    for (server, n) in &now {
        let delta = n - before.get(server).copied().unwrap_or(0);
        if delta > 0 {
            println!("  {server}: {delta} call(s)");
        }
    }
    now
}

/// A Greeter server run by `Provider::serve`.
struct Node {
    address: SocketAddr,
    stop: oneshot::Sender<()>,
    serving: JoinHandle<introspect::Result<()>>,
}

impl Node {
    /// Stops gracefully: the provider is disabled, drained and deregistered (consumers stop
    /// calling it), then the server stops, letting calls in flight finish.
    async fn shutdown(self) -> Result<(), BoxError> {
        let _ = self.stop.send(());
        self.serving.await??;
        Ok(())
    }
}

/// Starts a Greeter server on a free loopback port, registered as an instance of the app
/// (and exposed in `metrics`).
async fn start_node(store: &Arc<dyn Store>, metrics: &mut Metrics) -> Result<Node, BoxError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let provider = Provider::builder(APP, store.clone())
        .drain_period(DRAIN)
        .export_service::<GreeterServer<HelloGreeter>>()
        .build()?;
    *metrics = std::mem::take(metrics).provider(&provider).await;
    let (stop, stopped) = oneshot::channel::<()>();
    let signal = async {
        let _ = stopped.await;
    };
    let serving = tokio::spawn(provider.serve(common::greeter_router(), listener, signal));
    Ok(Node {
        address,
        stop,
        serving,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    common::init_tracing("warn");
    common::exit_on_error(run(Args::parse()).await)
}

async fn run(args: Args) -> Result<ExitCode, BoxError> {
    let phase = Duration::from_millis(args.phase_ms);
    let store = common::open_store(None).await?;
    let mut metrics = Metrics::new();
    let mut nodes = Vec::new();
    for _ in 0..args.providers.max(2) {
        nodes.push(start_node(&store, &mut metrics).await?);
    }
    println!("{} providers of {} started", nodes.len(), common::INTERFACE);

    let resolver = Resolver::new(store.clone());
    let subscription = resolver
        .subscribe(Subscription::new(common::INTERFACE))
        .await?;
    let (channel, mut handle) = resolver.balanced_channel(&subscription)?;
    while handle.addresses().len() < nodes.len() {
        tokio::time::timeout(Duration::from_secs(5), handle.changed()).await??;
    }
    println!("balancing over {:?}", handle.addresses());
    let metrics = metrics.resolver(&resolver);
    let metrics_task = common::maybe_serve_metrics(args.metrics, metrics).await?;

    let tally: Tally = Arc::default();
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..2)
        .map(|_| spawn_caller(channel.clone(), tally.clone(), failed.clone(), stop.clone()))
        .collect();

    tokio::time::sleep(phase).await;
    let seen = report("calls spread over the providers", &tally, &BTreeMap::new());

    let leaving = nodes.remove(0);
    let address = leaving.address;
    leaving.shutdown().await?;
    tokio::time::sleep(phase).await;
    let seen = report(
        &format!("after {address} stopped gracefully"),
        &tally,
        &seen,
    );

    let newcomer = start_node(&store, &mut Metrics::new()).await?;
    println!("{} joined", newcomer.address);
    nodes.push(newcomer);
    tokio::time::sleep(phase).await;
    report("with the newcomer", &tally, &seen);

    stop.store(true, Ordering::Relaxed);
    for caller in callers {
        caller.await?;
    }
    let total: u64 = tally
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .values()
        .sum();
    let failed = failed.load(Ordering::Relaxed);
    println!("{total} call(s) answered, {failed} failed");
    let stats = resolver.stats().await;
    println!(
        "metadata fetches: {}, endpoint sets pushed: {}",
        stats.metadata_fetches, stats.pushes
    );

    if args.hold {
        println!("holding; Ctrl-C (or SIGTERM) to stop");
        introspect::shutdown_signal().await;
    }
    for stopped in futures::future::join_all(nodes.into_iter().map(Node::shutdown)).await {
        stopped?;
    }
    drop(metrics_task);
    if failed > 0 {
        return Err(format!("{failed} call(s) failed").into());
    }
    Ok(ExitCode::SUCCESS)
}
