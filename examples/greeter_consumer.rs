//! A Greeter consumer: subscribes to `helloworld.Greeter` in a registry and calls it through a
//! tonic channel that balances over the live providers, following them as they come and go.
//!
//! ```text
//! cargo run --example greeter_consumer -- --etcd http://127.0.0.1:2379
//! cargo run --example greeter_consumer -- --etcd http://127.0.0.1:2379 --calls 100 --interval-ms 50 --metrics 127.0.0.1:9100
//! cargo run --example greeter_consumer --features zookeeper -- --registry zookeeper://127.0.0.1:2181
//! ```
//!
//! Start providers with `cargo run --example greeter_provider -- --etcd ...`; stop and start
//! them while this runs. `RUST_LOG=introspect=debug` shows the channel's endpoint changes.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use common::BoxError;
use common::pb::HelloRequest;
use common::pb::greeter_client::GreeterClient;
use introspect::metrics::Metrics;
use introspect::{Resolver, Subscription};

/// Calls Greeter providers found in a registry (etcd, ZooKeeper).
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    registry: common::RegistryArgs,
    /// The name to greet.
    #[arg(long, default_value = "world")]
    name: String,
    /// Calls to make (0: until Ctrl-C).
    #[arg(long, default_value_t = 0)]
    calls: u64,
    /// Pause between calls, in milliseconds.
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
    /// Deadline of each call, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics.
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    common::init_tracing("info");
    let args = Args::parse();
    let store = common::open_backend(&args.registry).await?;
    let resolver = Resolver::new(store);
    let subscription = resolver
        .subscribe(Subscription::new(common::INTERFACE))
        .await?;
    println!(
        "{} endpoint(s) of {} at start",
        subscription.current().len(),
        common::INTERFACE
    );
    let (channel, _handle) = resolver.balanced_channel(&subscription)?;
    let metrics_task =
        common::maybe_serve_metrics(args.metrics, Metrics::new().resolver(&resolver)).await?;
    let mut client = GreeterClient::new(channel);
    let mut by_server: BTreeMap<String, u64> = BTreeMap::new();
    let mut failed = 0u64;
    let mut made = 0u64;
    let stop = introspect::shutdown_signal();
    tokio::pin!(stop);
    while args.calls == 0 || made < args.calls {
        // The store refused us for good (credentials, permissions): the channel still holds
        // the last endpoints, but following the store has stopped, so stop and say why.
        if let Some(error) = subscription.ended() {
            return Err(error.into());
        }
        let mut request = tonic::Request::new(HelloRequest {
            name: args.name.clone(),
        });
        request.set_timeout(Duration::from_millis(args.timeout_ms));
        let call = tokio::time::timeout(
            Duration::from_millis(args.timeout_ms),
            client.say_hello(request),
        );
        let outcome = tokio::select! {
            () = &mut stop => break,
            outcome = call => outcome,
        };
        made += 1;
        match outcome {
            Ok(Ok(reply)) => {
                let message = reply.into_inner().message;
                println!("{message}");
                *by_server
                    .entry(common::server_of(&message).to_owned())
                    .or_default() += 1;
            }
            Ok(Err(status)) => {
                failed += 1;
                println!("call failed: {}", status.message());
            }
            Err(_) => {
                failed += 1;
                println!("call timed out (no provider reachable?)");
            }
        }
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep(Duration::from_millis(args.interval_ms)) => {}
        }
    }
    println!("{made} call(s), {failed} failed; answered by:");
    for (server, n) in &by_server {
        println!("  {server}: {n}");
    }
    drop(metrics_task);
    Ok(())
}
