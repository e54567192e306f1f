//! A Greeter provider: a tonic server with `helloworld.Greeter`, run by `Provider::serve`,
//! which adds MetadataService, registers in the registry once the server runs and, on
//! Ctrl-C or SIGTERM, stops gracefully (marked as stopping, drained, deregistered, then
//! the server stops).
//!
//! ```text
//! cargo run --example greeter_provider -- --etcd http://127.0.0.1:2379
//! cargo run --example greeter_provider -- --etcd http://127.0.0.1:2379 --listen 127.0.0.1:50052 --metrics 127.0.0.1:9101
//! cargo run --example greeter_provider --features zookeeper -- --registry zookeeper://127.0.0.1:2181
//! cargo run --example greeter_provider -- --etcd http://127.0.0.1:2379 --weight 300 --tag gray
//! cargo run --example greeter_provider -- --etcd http://127.0.0.1:2379 --slow-ms 250 --fail-percent 30 --log-requests
//! ```
//!
//! Fault modes, as the tests' real peers have them (`interop/README.md`): `--slow-ms MS`
//! answers every call MS late (after logging it as processed), `--fail-percent P` refuses
//! that share of calls, drawn at random, with `UNAVAILABLE` before processing them (printing
//! `REFUSED name=NAME`), and `--log-requests` prints `REQUEST name=NAME` for each call
//! processed.
//!
//! The provider applies its own rules from the config centre (its registry), as dubbo-admin
//! or `introspect rule put` writes them: a `side: provider` configurator naming its address
//! disables it, reweights it or tags it, republished as a new revision.
//!
//! Then call them with `cargo run --example greeter_consumer -- --etcd http://127.0.0.1:2379`.
//! `RUST_LOG=introspect=debug` shows registration, lease renewals and the drain.

mod common;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use common::pb::greeter_server::GreeterServer;
use common::{BoxError, FaultGreeter};
use introspect::Provider;
use introspect::metrics::Metrics;

/// A Greeter provider registered in a registry (ZooKeeper, Nacos, etcd). It serves until
/// Ctrl-C or SIGTERM, then deregisters gracefully.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    registry: common::RegistryArgs,
    /// The app name to register under.
    #[arg(long, default_value = "greeter")]
    app: String,
    /// Where to listen, e.g. `--listen 127.0.0.1:50052` (a rule that names a provider by
    /// address needs a known port; the default port 0 takes any free one, printed at start).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The host consumers reach this instance at (default: the listening IP; on all
    /// interfaces, the IP of the interface that routes outward).
    #[arg(long)]
    host: Option<String>,
    /// Drain period of the graceful stop, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    drain_ms: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// A static tag (`dubbo.tag`), e.g. `--tag gray`: calls tagged the same come here,
    /// untagged ones never.
    #[arg(long)]
    tag: Option<String>,
    /// The weight among the app's providers, e.g. `--weight 300` (default 100; negative is
    /// refused). Consumers ramp it up over --warmup-ms.
    #[arg(long, allow_negative_numbers = true)]
    weight: Option<i64>,
    /// The warm-up in milliseconds: consumers ramp the weight up over it (default 600000).
    #[arg(long, value_name = "MS")]
    warmup_ms: Option<u64>,
    #[command(flatten)]
    faults: common::FaultArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    common::init_tracing("info");
    common::exit_on_error(run(Args::parse()).await)
}

async fn run(args: Args) -> Result<ExitCode, BoxError> {
    let store = common::open_backend(&args.registry).await?;
    let listener = tokio::net::TcpListener::bind(args.listen).await?;

    // The provider: the app, what it exports, how it stops.
    let mut builder = Provider::builder(&args.app, store)
        .drain_period(Duration::from_millis(args.drain_ms))
        .export_service::<GreeterServer<FaultGreeter>>();
    if let Some(host) = args.host {
        builder = builder.host(host);
    }
    if let Some(tag) = args.tag {
        builder = builder.tag(tag);
    }
    if let Some(weight) = args.weight {
        builder = builder.weight(weight);
    }
    if let Some(warmup) = args.warmup_ms {
        builder = builder.warmup(Duration::from_millis(warmup));
    }
    let provider = builder.build()?;
    println!(
        "{} serving {} on {} (revision {})",
        args.app,
        common::INTERFACE,
        listener.local_addr()?,
        provider.revision()
    );
    let metrics = Metrics::new().provider(&provider).await;
    let metrics_task = common::maybe_serve_metrics(args.metrics, metrics).await?;

    // Serve the Greeter router with MetadataService added; register once serving; on
    // Ctrl-C or SIGTERM (what a deploy sends) deregister gracefully, then stop the server.
    let drain_ms = args.drain_ms;
    let stop = async move {
        introspect::shutdown_signal().await;
        println!("stopping: disabled, draining for {drain_ms} ms");
    };
    provider
        .serve(common::fault_greeter_router(args.faults), listener, stop)
        .await?;

    drop(metrics_task);
    println!("stopped");
    Ok(ExitCode::SUCCESS)
}
