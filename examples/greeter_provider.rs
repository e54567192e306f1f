//! A Greeter provider: a tonic server with `helloworld.Greeter` and MetadataService,
//! registered in etcd through the provider module. Ctrl-C stops it gracefully (disabled,
//! drained, deregistered, then the server stops).
//!
//! ```text
//! cargo run --example greeter_provider -- --etcd http://127.0.0.1:2379
//! cargo run --example greeter_provider -- --etcd http://127.0.0.1:2379 --listen 127.0.0.1:50052 --metrics 127.0.0.1:9101
//! ```
//!
//! Then call them with `cargo run --example greeter_consumer -- --etcd http://127.0.0.1:2379`.
//! `RUST_LOG=introspect=debug` shows registration, lease renewals and the drain.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use common::{BoxError, GreeterNode};
use introspect::metrics::Metrics;

/// A Greeter provider registered in etcd.
#[derive(Parser)]
struct Args {
    /// etcd endpoints, comma-separated (e.g. http://127.0.0.1:2379).
    #[arg(long)]
    etcd: String,
    /// The app name to register under.
    #[arg(long, default_value = "greeter")]
    app: String,
    /// Where to listen (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The host consumers reach this instance at (default: the listening IP).
    #[arg(long)]
    host: Option<String>,
    /// Drain period of the graceful stop, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    drain_ms: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    common::init_tracing("info");
    let args = Args::parse();
    let store = common::open_store(Some(&args.etcd)).await?;
    let node = GreeterNode::start(
        store,
        &args.app,
        args.listen,
        args.host,
        Duration::from_millis(args.drain_ms),
    )
    .await?;
    println!(
        "{} serving {} at {} (revision {})",
        args.app,
        common::INTERFACE,
        node.address,
        node.provider.revision()
    );
    let metrics = Metrics::new().provider(&node.provider).await;
    let metrics_task = common::maybe_serve_metrics(args.metrics, metrics).await?;
    tokio::signal::ctrl_c().await?;
    println!("stopping: disabled, draining for {} ms", args.drain_ms);
    node.shutdown().await?;
    drop(metrics_task);
    println!("stopped");
    Ok(())
}
