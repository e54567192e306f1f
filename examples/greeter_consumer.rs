//! A Greeter consumer: subscribes to `helloworld.Greeter` in a registry and calls it through a
//! tonic channel that balances over the live providers, following them as they come and go.
//!
//! ```text
//! cargo run --example greeter_consumer -- --etcd http://127.0.0.1:2379
//! cargo run --example greeter_consumer -- --etcd http://127.0.0.1:2379 --calls 100 --interval-ms 50 --metrics 127.0.0.1:9100
//! cargo run --example greeter_consumer --features zookeeper -- --registry zookeeper://127.0.0.1:2181
//! cargo run --example greeter_consumer -- --etcd http://127.0.0.1:2379 --app shop --tag gray --force-tag
//! cargo run --example greeter_consumer -- --etcd http://127.0.0.1:2379 --calls 1000 --interval-ms 0 --concurrency 8 --name-prefix r --log-calls
//! cargo run --example greeter_consumer -- --etcd http://127.0.0.1:2379 --retries 0 --loadbalance roundrobin
//! ```
//!
//! Start providers with `cargo run --example greeter_provider -- --etcd ...`; stop and start
//! them while this runs. `RUST_LOG=introspect=debug` shows the channel's endpoint changes.
//!
//! It prints each answer (or why a call failed) and, at its end, how many calls each provider
//! answered and one line `RESULT calls=N ok=K failed=F`. With `--log-calls` each call is one
//! line instead, as the tests' Java consumer prints it (`interop/README.md`):
//! `CALL at_ms=T latency_ms=L name=NAME message=...` or `CALL at_ms=T latency_ms=L name=NAME
//! failed=...` (T: the wall clock in epoch milliseconds when the call returned; L: how long it
//! took). `--concurrency C` makes the calls from C tasks at once (`--calls` counts them all,
//! each task pauses `--interval-ms` between its own), and `--name-prefix P` names each call
//! `P-K`, K counting from 1, so that a provider's `--log-requests` tells which call it
//! processed. An error is printed as `error: ...`; it exits non-zero on one, and when every
//! call it made failed.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use common::BoxError;
use common::pb::HelloRequest;
use common::pb::greeter_client::GreeterClient;
use introspect::consumer::{BalancedChannel, ChannelOptions, Cluster, LoadBalance};
use introspect::metrics::Metrics;
use introspect::{MigrationStep, Resolver, Subscription, SubscriptionHandle};
use tokio_util::sync::CancellationToken;

/// Calls Greeter providers found in a registry (ZooKeeper, Nacos, etcd).
#[derive(Parser)]
#[command(
    after_help = "Exit: 0 when a call succeeded (or none was made), 1 on an error \
    (printed as one line `error: ...`) and when every call made failed."
)]
struct Args {
    #[command(flatten)]
    registry: common::RegistryArgs,
    /// The name to greet (with --name-prefix, each call's own name instead).
    #[arg(long, default_value = "world")]
    name: String,
    /// Calls to make, by all tasks together (0: until Ctrl-C), e.g. `--calls 10`.
    #[arg(long, default_value_t = 0)]
    calls: u64,
    /// Pause between calls (of each task), in milliseconds.
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
    /// Deadline of each call, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// The consumer's application name (Dubbo's `dubbo.application.name`): the rules keyed by
    /// it (`{app}.configurators`, `{app}.condition-router`, `{app}.migration`) then apply.
    #[arg(long, value_name = "NAME")]
    app: Option<String>,
    /// Tag every call (`dubbo.tag`): it goes to providers of that tag, else to untagged ones.
    #[arg(long)]
    tag: Option<String>,
    /// Send tagged calls only to providers of their tag (`dubbo.force.tag`).
    #[arg(long, requires = "tag")]
    force_tag: bool,
    /// Which level of discovery to read, as Dubbo's `migration.step`: FORCE_APPLICATION,
    /// FORCE_INTERFACE or APPLICATION_FIRST (default, as Dubbo Java's: APPLICATION_FIRST
    /// where the registry has an interface level, FORCE_APPLICATION on memory://).
    #[arg(long, value_name = "STEP")]
    migration_step: Option<MigrationStep>,
    /// The Greeter method to call: only SayHello exists in proto/helloworld.proto.
    #[arg(long, default_value = "SayHello", value_parser = ["SayHello"])]
    method: String,
    /// How many tasks make the calls at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: u32,
    /// Name each call PREFIX-K, K counting the calls from 1 (instead of --name).
    #[arg(long, value_name = "PREFIX")]
    name_prefix: Option<String>,
    /// Print one `CALL at_ms=T latency_ms=L name=NAME message=...|failed=...` line per call
    /// (instead of the answer alone).
    #[arg(long)]
    log_calls: bool,
    /// What a failed attempt leads to (Dubbo's `cluster`): failover (the default), failfast
    /// or forking.
    #[arg(long, value_name = "NAME", value_parser = parse_cluster)]
    cluster: Option<Cluster>,
    /// Retries of a failed call on other providers (Dubbo's `retries`; default 2), unless a
    /// configurator sets them.
    #[arg(long, value_name = "N")]
    retries: Option<u32>,
    /// The load balancer by Dubbo's name (random, roundrobin, leastactive,
    /// shortestresponse, consistenthash) or p2c (the default), unless a configurator sets
    /// one.
    #[arg(long, value_name = "NAME")]
    loadbalance: Option<LoadBalance>,
    /// The calls may be processed twice: their timeouts and lost connections are retried too.
    #[arg(long)]
    idempotent: bool,
}

/// `--cluster`'s value, by Dubbo's name.
fn parse_cluster(name: &str) -> Result<Cluster, String> {
    Cluster::parse(name).ok_or_else(|| {
        format!("{name:?} is not a cluster applied here (failover, failfast or forking)")
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    common::init_tracing("info");
    common::exit_on_error(run(Args::parse()).await)
}

async fn run(args: Args) -> Result<ExitCode, BoxError> {
    let store = common::open_backend(&args.registry).await?;
    let mut resolver = Resolver::builder(store);
    if let Some(app) = &args.app {
        resolver = resolver.application(app);
    }
    let resolver = resolver.build();
    let mut wanted = Subscription::new(common::INTERFACE);
    if let Some(step) = args.migration_step {
        wanted = wanted.migration(step);
    }
    let subscription = resolver.subscribe(wanted).await?;
    println!(
        "{} endpoint(s) of {} at start",
        subscription.current().len(),
        common::INTERFACE
    );
    let mut options = ChannelOptions::default();
    if let Some(tag) = &args.tag {
        options = options.tag(tag).force_tag(args.force_tag);
    }
    if let Some(cluster) = args.cluster {
        options = options.cluster(cluster);
    }
    if let Some(retries) = args.retries {
        options = options.retries(retries);
    }
    if let Some(loadbalance) = args.loadbalance {
        options = options.loadbalance(loadbalance);
    }
    if args.idempotent {
        options = options.idempotent(&args.method);
    }
    let (channel, _handle) = resolver.balanced_channel_with(&subscription, options)?;
    let metrics_task =
        common::maybe_serve_metrics(args.metrics, Metrics::new().resolver(&resolver)).await?;

    // The tasks share the count; Ctrl-C (or the subscription's end) stops them all.
    let args = Arc::new(args);
    let tally = Arc::new(Tally::default());
    let stop = CancellationToken::new();
    let callers: Vec<_> = (0..args.concurrency)
        .map(|_| {
            tokio::spawn(caller(
                GreeterClient::new(channel.clone()),
                subscription.clone(),
                Arc::clone(&args),
                Arc::clone(&tally),
                stop.clone(),
            ))
        })
        .collect();
    let all_done = futures::future::join_all(callers);
    tokio::select! {
        () = introspect::shutdown_signal() => stop.cancel(),
        _ = all_done => {}
    }

    let (made, ok, failed) = (
        tally.made.load(Ordering::Relaxed),
        tally.ok.load(Ordering::Relaxed),
        tally.failed.load(Ordering::Relaxed),
    );
    println!("{made} call(s), {failed} failed; answered by:");
    for (server, n) in tally.by_server.lock().unwrap().iter() {
        println!("  {server}: {n}");
    }
    println!("RESULT calls={made} ok={ok} failed={failed}");
    drop(metrics_task);
    // The store refused us for good (credentials, permissions): the channel still held the
    // last endpoints, but following the store had stopped, so the calls stopped.
    if let Some(error) = tally.ended.lock().unwrap().take() {
        return Err(format!("the subscription ended: {error}").into());
    }
    Ok(if made > 0 && ok == 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// What the calling tasks count together.
#[derive(Default)]
struct Tally {
    /// Calls started or about to be (each takes one; none past `--calls`).
    tickets: AtomicU64,
    /// The last K of the calls named `PREFIX-K`.
    named: AtomicU64,
    made: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    /// How many calls each server answered.
    by_server: Mutex<BTreeMap<String, u64>>,
    /// Why the subscription ended, if it did.
    ended: Mutex<Option<introspect::Error>>,
}

/// One task's calls, until the calls asked for are made or `stop`.
async fn caller(
    mut client: GreeterClient<BalancedChannel>,
    subscription: SubscriptionHandle,
    args: Arc<Args>,
    tally: Arc<Tally>,
    stop: CancellationToken,
) {
    let timeout = Duration::from_millis(args.timeout_ms);
    let mut first = true;
    loop {
        if let Some(error) = subscription.ended() {
            *tally.ended.lock().unwrap() = Some(error);
            stop.cancel();
            return;
        }
        if args.calls > 0 && tally.tickets.fetch_add(1, Ordering::Relaxed) >= args.calls {
            return;
        }
        if !first {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(args.interval_ms)) => {}
            }
        }
        first = false;
        let name = match &args.name_prefix {
            Some(prefix) => format!(
                "{prefix}-{}",
                tally.named.fetch_add(1, Ordering::Relaxed) + 1
            ),
            None => args.name.clone(),
        };
        let mut request = tonic::Request::new(HelloRequest { name: name.clone() });
        request.set_timeout(timeout);
        let started = Instant::now();
        let call = tokio::time::timeout(timeout, client.say_hello(request));
        let outcome = tokio::select! {
            () = stop.cancelled() => return,
            outcome = call => outcome,
        };
        let latency_ms = started.elapsed().as_millis();
        tally.made.fetch_add(1, Ordering::Relaxed);
        // The answer, or why the call failed (None: no answer within the deadline).
        let outcome = match outcome {
            Ok(Ok(reply)) => Ok(reply.into_inner().message),
            Ok(Err(status)) => Err(Some(status)),
            Err(_) => Err(None),
        };
        match &outcome {
            Ok(message) => {
                tally.ok.fetch_add(1, Ordering::Relaxed);
                *tally
                    .by_server
                    .lock()
                    .unwrap()
                    .entry(common::server_of(message).to_owned())
                    .or_default() += 1;
            }
            Err(_) => {
                tally.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
        if args.log_calls {
            let at_ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis());
            let outcome = match &outcome {
                Ok(message) => format!("message={message}"),
                Err(Some(status)) => {
                    format!("failed={:?}: {}", status.code(), one_line(status.message()))
                }
                Err(None) => format!("failed=timed out after {} ms", args.timeout_ms),
            };
            common::say(format_args!(
                "CALL at_ms={at_ms} latency_ms={latency_ms} name={name} {outcome}"
            ));
        } else {
            match &outcome {
                Ok(message) => common::say(format_args!("{message}")),
                Err(Some(status)) => {
                    common::say(format_args!("call failed: {}", one_line(status.message())));
                }
                Err(None) => common::say(format_args!("call timed out (no provider reachable?)")),
            }
        }
    }
}

/// `text` on one line (a log line per call).
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}
