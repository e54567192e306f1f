//! The demo: a hundred instances, two revisions, two metadata fetches.
//!
//! Starts providers of `shop-orders` in two configuration groups (so two revisions) and a
//! second app, `shop-payments`, each instance serving MetadataService on its own loopback
//! port; a consumer resolves their interfaces and the demo prints what it saw and how many
//! MetadataService calls it made. Then one group changes its exports and the consumer picks
//! up the third revision with one more fetch.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use introspect::Limits;
use introspect::backend::Backend;
use introspect::consumer::{Resolver, Subscription};
use introspect::error::Result;
use introspect::metrics::Metrics;
use introspect::model::ServiceInfo;
use introspect::provider::Provider;

/// The sizes of the demo fleet.
pub struct DemoOptions {
    /// Instances of `shop-orders` in the first configuration group.
    pub blue: usize,
    /// Instances of `shop-orders` in the second configuration group.
    pub green: usize,
    /// Instances of `shop-payments`.
    pub payments: usize,
    /// Host the providers register (they listen on loopback).
    pub host: String,
    /// When set, the providers stay registered until this future completes (e.g. Ctrl-C),
    /// so that other tools can look at them.
    pub hold: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
    /// When set, installs the Prometheus exporter at `http://{addr}/metrics` (port 0: any
    /// free port) and publishes the consumer's and the providers' metrics to it while the
    /// demo runs.
    pub metrics: Option<std::net::SocketAddr>,
}

impl std::fmt::Debug for DemoOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DemoOptions")
            .field("blue", &self.blue)
            .field("green", &self.green)
            .field("payments", &self.payments)
            .field("host", &self.host)
            .field("hold", &self.hold.is_some())
            .field("metrics", &self.metrics)
            .finish()
    }
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            blue: 60,
            green: 40,
            payments: 5,
            host: "127.0.0.1".into(),
            hold: None,
            metrics: None,
        }
    }
}

/// What the demo measured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DemoReport {
    /// Instances registered.
    pub instances: usize,
    /// Distinct (app, revision) pairs the consumer resolved before the export change.
    pub revisions: usize,
    /// Endpoints resolved before the export change.
    pub endpoints: usize,
    /// MetadataService calls the consumer made before the export change.
    pub fetches: u64,
    /// MetadataService calls the providers answered before the export change.
    pub served: u64,
    /// Distinct revisions after the export change.
    pub revisions_after_change: usize,
    /// MetadataService calls made in all, after the export change.
    pub fetches_after_change: u64,
}

fn blue_services() -> Vec<ServiceInfo> {
    vec![
        ServiceInfo::new("shop.OrderService")
            .with_version("1.0")
            .with_param("timeout", "3000"),
        ServiceInfo::new("shop.CartService").with_version("1.0"),
    ]
}

fn green_services() -> Vec<ServiceInfo> {
    vec![
        ServiceInfo::new("shop.OrderService")
            .with_version("1.0")
            .with_param("timeout", "1500"),
        ServiceInfo::new("shop.CartService").with_version("1.0"),
    ]
}

fn payment_services() -> Vec<ServiceInfo> {
    vec![ServiceInfo::new("shop.PaymentService").with_version("2.0")]
}

async fn start(
    backend: &Backend,
    app: &str,
    host: &str,
    services: Vec<ServiceInfo>,
) -> Result<Provider> {
    let mut builder = Provider::builder(app, backend.clone())
        .host(host)
        .serve_metadata_on(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .drain_period(Duration::from_millis(10));
    for s in services {
        builder = builder.export(s);
    }
    builder.start().await
}

/// Providers started (or changed) at once. On Nacos each provider's registration is a
/// connection of its own, and its start a handful of round trips (connect, the epoch, the
/// instance, the mappings) of about 50 ms each through the SDK: one after the other, the
/// default fleet took 45 s to start where ZooKeeper took 2 s.
const STARTING_AT_ONCE: usize = 16;

/// Starts `count` providers of `app` exporting `services()`, [`STARTING_AT_ONCE`] at a time.
async fn start_many(
    backend: &Backend,
    count: usize,
    app: &str,
    host: &str,
    services: fn() -> Vec<ServiceInfo>,
) -> Result<Vec<Provider>> {
    futures::stream::iter(0..count)
        .map(|_| start(backend, app, host, services()))
        .buffer_unordered(STARTING_AT_ONCE)
        .try_collect()
        .await
}

/// Runs the demo against `backend`, writing a human-readable account to `out`.
pub async fn run(
    backend: impl Into<Backend>,
    options: DemoOptions,
    out: &mut (dyn Write + Send),
) -> Result<DemoReport> {
    let backend: Backend = backend.into();
    let mut report = DemoReport::default();
    writeln!(
        out,
        "Starting providers on loopback ({} store)...",
        backend.name()
    )?;
    let host = options.host.as_str();
    let blue = start_many(&backend, options.blue, "shop-orders", host, blue_services).await?;
    let green = start_many(&backend, options.green, "shop-orders", host, green_services).await?;
    let payments = start_many(
        &backend,
        options.payments,
        "shop-payments",
        host,
        payment_services,
    )
    .await?;
    let providers: Vec<&Provider> = blue.iter().chain(&green).chain(&payments).collect();
    report.instances = providers.len();

    let registry = backend.instances();
    writeln!(out, "\nRegistered apps:")?;
    writeln!(out, "  {:<16} {:>9}  revisions", "APP", "INSTANCES")?;
    for (app, list) in registry.list_apps(&Limits::default()).await? {
        let instances = list.instances;
        let mut revisions: BTreeMap<&str, usize> = BTreeMap::new();
        for i in instances.values() {
            *revisions.entry(i.revision()).or_default() += 1;
        }
        let revisions: Vec<String> = revisions
            .iter()
            .map(|(r, n)| format!("{}…×{n}", short(r)))
            .collect();
        writeln!(
            out,
            "  {:<16} {:>9}  {}",
            app,
            instances.len(),
            revisions.join(", ")
        )?;
    }

    let resolver = Resolver::new(backend.clone());
    let mut metrics_task = None;
    if let Some(addr) = options.metrics {
        let bound = crate::exporter::install(addr)?;
        let mut metrics = Metrics::new().resolver(&resolver);
        for p in &providers {
            metrics = metrics.provider(p).await;
        }
        writeln!(out, "\nMetrics at http://{bound}/metrics")?;
        metrics_task = Some(metrics.spawn(crate::exporter::PUBLISH_INTERVAL));
    }
    let subscriptions = [
        Subscription::new("shop.OrderService"),
        Subscription::new("shop.PaymentService"),
    ];
    writeln!(
        out,
        "\nConsumer resolves {} interfaces:",
        subscriptions.len()
    )?;
    let mut revisions = std::collections::BTreeSet::new();
    for subscription in &subscriptions {
        let endpoints = resolver.resolve(subscription).await?;
        report.endpoints += endpoints.len();
        for e in &endpoints {
            revisions.insert((e.app.clone(), e.revision.clone()));
        }
        writeln!(
            out,
            "  {:<22} {:>4} endpoints, e.g.",
            subscription.interface,
            endpoints.len()
        )?;
        for e in endpoints.iter().take(2) {
            writeln!(
                out,
                "    {} {}://{} rev {}… params {:?}",
                e.app,
                e.protocol,
                e.address(),
                short(&e.revision),
                e.params()
            )?;
        }
    }
    let stats = resolver.stats().await;
    report.revisions = revisions.len();
    report.fetches = stats.metadata_fetches;
    report.served = providers.iter().map(|p| p.exported().served()).sum();
    writeln!(out, "\n  instances:              {}", report.instances)?;
    writeln!(out, "  distinct revisions:     {}", report.revisions)?;
    writeln!(
        out,
        "  MetadataService calls:  {} (one per revision, not per instance)",
        report.fetches
    )?;
    writeln!(out, "  calls providers served: {}", report.served)?;
    for (app, fleet) in [
        ("shop-orders", blue.iter().chain(&green).collect::<Vec<_>>()),
        ("shop-payments", payments.iter().collect()),
    ] {
        let app_revisions = revisions.iter().filter(|(a, _)| &**a == app).count();
        let served: u64 = fleet.iter().map(|p| p.exported().served()).sum();
        writeln!(
            out,
            "    {app:<14} {:>4} instances, {app_revisions} revision(s), {served} call(s) served",
            fleet.len()
        )?;
    }

    writeln!(
        out,
        "\nThe green group adds shop.RefundService (a new revision)..."
    )?;
    let mut changed = green_services();
    changed.push(ServiceInfo::new("shop.RefundService").with_version("1.0"));
    let changes = futures::stream::iter(&green)
        .map(|p| p.set_services(changed.clone()))
        .buffer_unordered(STARTING_AT_ONCE);
    changes.try_collect::<()>().await?;
    let endpoints = resolver.resolve(&subscriptions[0]).await?;
    let mut after: std::collections::BTreeSet<(Arc<str>, Arc<str>)> = endpoints
        .iter()
        .map(|e| (e.app.clone(), e.revision.clone()))
        .collect();
    after.extend(
        resolver
            .resolve(&subscriptions[1])
            .await?
            .into_iter()
            .map(|e| (e.app, e.revision)),
    );
    report.revisions_after_change = after.len();
    report.fetches_after_change = resolver.stats().await.metadata_fetches;
    writeln!(
        out,
        "  shop.OrderService:      {} endpoints",
        endpoints.len()
    )?;
    writeln!(
        out,
        "  live revisions now:     {}",
        report.revisions_after_change
    )?;
    writeln!(
        out,
        "  revisions fetched:      {}",
        resolver.stats().await.revisions_known
    )?;
    writeln!(
        out,
        "  MetadataService calls:  {} (+{} for the new revision)",
        report.fetches_after_change,
        report.fetches_after_change - report.fetches
    )?;

    if let Some(hold) = options.hold {
        writeln!(
            out,
            "\nProviders stay registered; inspect them from another terminal. Ctrl-C ends."
        )?;
        out.flush()?;
        hold.await;
    }
    drop(metrics_task);
    writeln!(
        out,
        "\nStopping providers gracefully (disabled, drained, deregistered)..."
    )?;
    let stops = blue
        .into_iter()
        .chain(green)
        .chain(payments)
        .map(Provider::shutdown);
    for stopped in futures::future::join_all(stops).await {
        stopped?;
    }
    Ok(report)
}

fn short(revision: &str) -> &str {
    revision.get(..12).unwrap_or(revision)
}
