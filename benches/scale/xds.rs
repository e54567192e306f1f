//! Scenario 7 of the scale harness: xDS push latency, from a registration until an ADS
//! client (as a gRPC client or Envoy would hold one) receives the ClusterLoadAssignment
//! with the new instance, side by side with the resolver's own propagation (the same
//! registration until a live subscription pushes it), on the memory store.
//!
//! The fleet exports one gRPC service (`tri`, protobuf) from a real provider's
//! MetadataService, with synthetic records of that revision; each trial registers one more
//! instance, waits for both observers, then removes it and waits again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use introspect::backend::kv::mapping::Mapping;
use introspect::{
    Layout, Limits, MemoryStore, Provider, Result, ServiceInfo, Store, Subscription,
};
use introspect_xds::XdsServer;
use introspect_xds::envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use introspect_xds::envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use introspect_xds::types::CLUSTER_LOAD_ASSIGNMENT;
use tokio::sync::mpsc;

use super::common::{APP, synthetic};
use super::{Row, Sizes, UpdateFeed, next_update, percentile, registry, subscription_feed, us};

/// The gRPC service the fleet exports.
const SERVICE: &str = "bench.xds.Greeter";

/// An ADS client subscribed to the service's load assignment: each push reported by its
/// arrival, then ACKed.
async fn xds_feed(address: String) -> Result<UpdateFeed> {
    let mut client = AggregatedDiscoveryServiceClient::connect(address)
        .await
        .map_err(|e| introspect::Error::server(format!("xDS connect: {e}")))?;
    let (requests, outgoing) = mpsc::unbounded_channel();
    let request = |version: &str, nonce: &str| DiscoveryRequest {
        type_url: CLUSTER_LOAD_ASSIGNMENT.to_owned(),
        resource_names: vec![SERVICE.to_owned()],
        version_info: version.to_owned(),
        response_nonce: nonce.to_owned(),
        ..Default::default()
    };
    let _ = requests.send(request("", ""));
    let mut responses = client
        .stream_aggregated_resources(tokio_stream::wrappers::UnboundedReceiverStream::new(
            outgoing,
        ))
        .await
        .map_err(|e| introspect::Error::server(format!("xDS stream: {e}")))?
        .into_inner();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(response)) = responses.message().await {
            if tx.send(Instant::now()).is_err() {
                return;
            }
            let _ = requests.send(request(&response.version_info, &response.nonce));
        }
    });
    Ok(rx)
}

/// Registration → xDS push, and registration → subscription push, in a fleet of `n`.
async fn xds_in_fleet(n: usize, trials: usize) -> Result<(Vec<Duration>, Vec<Duration>)> {
    // A real MetadataService of the fleet's one revision, in a store of its own.
    let own: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let provider = Provider::builder(APP, own)
        .serve_metadata_on("127.0.0.1:0".parse().expect("loopback address"))
        .lease_ttl(Duration::from_secs(600))
        .export(ServiceInfo::new(SERVICE))
        .start()
        .await?;
    let template = provider.instance().await;

    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let registry = registry(&store);
    for i in 0..n {
        registry.register(&synthetic(&template, i), None).await?;
    }
    Mapping::new(store.clone(), Layout::default(), Limits::default())
        .add(SERVICE, APP)
        .await?;

    let subscription = Subscription::new(SERVICE);
    let mut app_feed = subscription_feed(store.clone(), subscription, Duration::ZERO).await?;
    let resolver = super::propagation_resolver(store.clone(), Duration::ZERO);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = format!("http://{}", listener.local_addr()?);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(XdsServer::builder(resolver).build().serve(listener, async {
        let _ = stopped.await;
    }));
    let mut xds = xds_feed(address).await?;
    next_update(&mut xds, "xDS first answer").await;

    let (mut app_times, mut xds_times) = (Vec::new(), Vec::new());
    for t in 0..trials {
        let instance = synthetic(&template, n + t);
        let started = Instant::now();
        registry.register(&instance, None).await?;
        let app_seen = next_update(&mut app_feed, "subscription").await;
        let xds_seen = next_update(&mut xds, "xDS push").await;
        app_times.push(app_seen - started);
        xds_times.push(xds_seen - started);
        registry
            .deregister(APP, &instance.host, instance.port)
            .await?;
        next_update(&mut app_feed, "subscription").await;
        next_update(&mut xds, "xDS push").await;
    }
    let _ = stop.send(());
    let _ = serving.await;
    provider.shutdown().await?;
    app_times.sort();
    xds_times.sort();
    Ok((app_times, xds_times))
}

/// Adds the xDS rows and their note.
pub(super) async fn xds_propagation(
    sizes: &Sizes,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let trials = sizes.propagation_spaced_trials * 10;
    for &n in &sizes.propagation_fleets {
        let (app, xds) = xds_in_fleet(n, trials).await?;
        let noun = if n == 1 { "instance" } else { "instances" };
        for (label, p) in [("p50", 50), ("p99", 99)] {
            let (a, x) = (percentile(&app, p), percentile(&xds, p));
            rows.push(Row::new(
                format!(
                    "xDS push {label}, registration → ADS client's assignment ({n} {noun}), \
                     memory store"
                ),
                us(x),
                us(a),
                format!(
                    "+{} over the subscription's own push",
                    us(x.saturating_sub(a))
                ),
                "informational",
                None,
            ));
        }
    }
    notes.push(format!(
        "xDS push: {trials} trials per fleet size; the comparison column is the resolver's \
         own propagation of the same registration (a live subscription, window zero), the \
         first column the ADS client's receipt of the pushed ClusterLoadAssignment over \
         loopback gRPC from `introspect-xds`."
    ));
    Ok(())
}
