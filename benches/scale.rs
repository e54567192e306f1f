//! The scale comparison: application-level discovery (Introspect) side by side with the
//! interface-level baseline it replaces and with the lower bound, measured in one run.
//!
//! Run with `cargo bench --bench scale --features zookeeper,nacos` (a few minutes on 2
//! cores; the bench needs the `etcd`, `zookeeper` and `nacos` features). It prints a table and
//! writes it, with the command and the machine's facts, between the generated-section
//! markers of `BENCHMARKS.md` (the rest of that file, such as profiling notes, is kept).
//! `cargo bench --bench scale --features zookeeper,nacos -- --quick` runs small sizes and
//! writes nothing; so does any run without `--bench` (for instance
//! `cargo test --benches --all-features`), as a smoke test.
//!
//! Scenarios (each function below says more):
//! 1. registry volume: keys and bytes in the store for 500 instances × 8 interfaces ×
//!    5 protocols, app-level against one ~1 KB URL per interface per protocol per instance;
//! 2. consumer memory: live heap bytes of the resolved address set, counted by the global
//!    allocator of this harness;
//! 3. push volume: watch events and metadata calls when one instance of a known revision
//!    joins;
//! 4. metadata calls for 100 to 10,000 instances in 1 to 10 revisions with 1,000 concurrent
//!    resolvers: must equal the revision count;
//! 5. cold resolve of 10,000 instances in 10 revisions against its floor (the registry's raw
//!    read of the same records plus one MetadataService call), on the memory store, etcd and
//!    ZooKeeper (`scale/rig.rs`, `scale/zookeeper.rs`), and on Nacos at 3,000 and 10,000
//!    (6b); on the memory store and etcd also against a validating client's floor (the same
//!    read, serde's parse of every record into a minimal struct, the same call;
//!    `scale/validating.rs`);
//! 6. propagation from a registration to a live subscription's update against the same
//!    registry's raw write → event (a put → watch event; on ZooKeeper a create → persistent
//!    watch event; on Nacos a registration → the SDK's subscribe callback), on the same four;
//!    6b. Nacos around and over the SDK's 4 MiB gRPC limit: cold resolve and propagation in
//!    fleets of 3,000 and 10,000 (`scale/nacos.rs`; `--only nacos`);
//! 7. failure: 60% of a fleet of 20 killed at once under consumers calling through balanced
//!    channels, with and without consumer-side health (`scale/failure.rs`);
//! 8. xDS push latency: registration → an ADS client's pushed load assignment, next to the
//!    subscription's own propagation (`scale/xds.rs`);
//! 9. the scale curve: cold resolve on etcd at 1,000, 10,000 and 100,000 instances against
//!    the floor at each size, heap per address and metadata calls (`scale/curve.rs`);
//! 10. many subscriptions: 1,000 subscriptions on one resolver against separate resolvers
//!     (`scale/many.rs`);
//! 11. the interface level: registry requests and watches of one subscription on ZooKeeper
//!     with and without reading the interface level, in a fleet of 1,000 instances that
//!     also registers 1,000 interface-level URLs (`scale/interface.rs`).
//!
//! The etcd scenarios start a throwaway etcd of their own (the test suite's harness) when the
//! `etcd` binary is on `PATH`, and say "skipped: etcd not installed" otherwise; likewise
//! ZooKeeper (`java` and Debian's `zookeeper.jar`) and rnacos
//! (`~/.cache/introspect/rnacos-VERSION/bin/rnacos`, installed by `scripts/setup.sh
//! --with-zookeeper --with-nacos`), each on free loopback ports with a temporary data dir,
//! killed at the end.

#[path = "baseline/mod.rs"]
mod baseline;
/// Test certificates, which the etcd harness below needs for its TLS mode.
#[allow(dead_code)]
#[path = "../tests/it/support/certs.rs"]
mod certs;
#[path = "common/mod.rs"]
mod common;
/// Scenario 9: the scale curve on etcd.
#[path = "scale/curve.rs"]
mod curve;
/// The test suite's throwaway etcd, shared rather than copied.
#[allow(dead_code)]
#[path = "../tests/it/support/etcd.rs"]
mod etcd;
/// Scenario 11: what reading the interface level costs a consumer.
#[path = "scale/interface.rs"]
mod interface;
/// Scenario 10: many subscriptions on one resolver against separate resolvers.
#[path = "scale/many.rs"]
mod many;
/// Scenarios 5 and 6 on Nacos.
#[path = "scale/nacos.rs"]
mod nacos;
/// The test suite's throwaway rnacos, shared rather than copied.
#[allow(dead_code)]
#[path = "../tests/it/support/nacos.rs"]
mod nacos_server;
/// The test servers' loopback ports, shared with the test suite.
#[allow(dead_code)]
#[path = "../tests/it/support/ports.rs"]
mod ports;
/// The registries of scenarios 5 and 6, and the memory store and etcd among them.
#[path = "scale/rig.rs"]
mod rig;
/// Scenario 7: failure.
#[path = "scale/failure.rs"]
mod scale_failure;
/// Scenario 8: xDS push latency next to the resolver's own propagation.
#[path = "scale/xds.rs"]
mod scale_xds;
/// Scenario 5's validating client's floor on the key-value stores.
#[path = "scale/validating.rs"]
mod validating;
/// Scenarios 5 and 6 on ZooKeeper.
#[path = "scale/zookeeper.rs"]
mod zookeeper;
/// The test suite's throwaway ZooKeeper, shared rather than copied.
#[allow(dead_code)]
#[path = "../tests/it/support/zookeeper.rs"]
mod zookeeper_server;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use introspect::backend::kv::mapping::Mapping;
use introspect::backend::kv::registry::{InstanceChange, Instances, Registry};
use introspect::backend::{Backend, InstanceRead};
use introspect::consumer::{CoalesceOptions, ProtectionOptions, Resolver};
use introspect::rpc::MetadataClient;
use introspect::store::{Store, Watch};
use introspect::{
    Endpoint, Error, Layout, Limits, MemoryStore, MetadataInfo, Provider, Result, ServiceInstance,
    SubscribeOptions, Subscription,
};
use tokio::sync::{Barrier, mpsc};

use baseline::BaselineConsumer;
use common::{
    APP, HOST, INTERFACES, port, services, start_metadata_server, start_metadata_server_on,
    synthetic,
};
use etcd::EtcdServer;
use nacos::NacosRig;
use rig::{Rig, StoreRig};
use zookeeper::ZooKeeperRig;

// ---------------------------------------------------------------------------------------
// Live heap bytes: a counting wrapper around the system allocator (this harness only).

#[path = "common/counting_alloc.rs"]
mod counting_alloc;
use counting_alloc::{CountingAlloc, live_bytes};

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

// ---------------------------------------------------------------------------------------
// Sizes and the report.

/// The sizes of one run.
#[derive(Clone)]
struct Sizes {
    volume_instances: usize,
    memory_instances: usize,
    call_instances: Vec<usize>,
    call_revisions: Vec<usize>,
    concurrent: usize,
    cold_instances: usize,
    cold_revisions: usize,
    cold_trials: usize,
    /// The fleets of Nacos's cold-resolve and propagation rows around and over the SDK's
    /// 4 MiB gRPC limit (see `scale/nacos.rs`).
    nacos_large: Vec<usize>,
    propagation_fleets: Vec<usize>,
    propagation_trials: usize,
    /// Trials on etcd and ZooKeeper.
    propagation_trials_etcd: usize,
    propagation_trials_nacos: usize,
    propagation_spaced_trials: usize,
    /// Fleet sizes of the scale curve (etcd, `cold_revisions` revisions each).
    curve_instances: Vec<usize>,
    many_apps: usize,
    many_interfaces: usize,
    many_instances_per_app: usize,
    many_separate: usize,
    many_trials: usize,
    /// Instances (and interface-level URLs) of the interface-level scenario.
    interface_urls: usize,
}

impl Sizes {
    /// The sizes of the issue (and of the published Dubbo 3 benchmark for the volume).
    fn full() -> Self {
        Sizes {
            volume_instances: 500,
            memory_instances: 500,
            call_instances: vec![100, 1_000, 10_000],
            call_revisions: vec![1, 2, 10],
            concurrent: 1_000,
            cold_instances: 10_000,
            cold_revisions: 10,
            cold_trials: 11,
            nacos_large: vec![3_000, 10_000],
            propagation_fleets: vec![1, 100],
            propagation_trials: 2_000,
            propagation_trials_etcd: 400,
            propagation_trials_nacos: 20,
            propagation_spaced_trials: 20,
            curve_instances: vec![1_000, 10_000, 100_000],
            many_apps: 10,
            many_interfaces: 1_000,
            many_instances_per_app: 10,
            many_separate: 100,
            many_trials: 20,
            interface_urls: 1_000,
        }
    }

    /// Small sizes: a smoke test of every scenario in seconds.
    fn smoke() -> Self {
        Sizes {
            volume_instances: 20,
            memory_instances: 20,
            call_instances: vec![10, 50],
            call_revisions: vec![1, 2],
            concurrent: 20,
            cold_instances: 200,
            cold_revisions: 2,
            cold_trials: 3,
            nacos_large: vec![200],
            propagation_fleets: vec![1, 10],
            propagation_trials: 30,
            propagation_trials_etcd: 10,
            propagation_trials_nacos: 2,
            propagation_spaced_trials: 3,
            curve_instances: vec![100, 300],
            many_apps: 3,
            many_interfaces: 20,
            many_instances_per_app: 3,
            many_separate: 5,
            many_trials: 4,
            interface_urls: 50,
        }
    }
}

/// One line of the table.
struct Row {
    scenario: String,
    introspect: String,
    comparison: String,
    result: String,
    target: String,
    met: Option<bool>,
}

impl Row {
    fn new(
        scenario: impl Into<String>,
        introspect: impl Into<String>,
        comparison: impl Into<String>,
        result: impl Into<String>,
        target: impl Into<String>,
        met: Option<bool>,
    ) -> Row {
        Row {
            scenario: scenario.into(),
            introspect: introspect.into(),
            comparison: comparison.into(),
            result: result.into(),
            target: target.into(),
            met,
        }
    }
}

fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| scenario | Introspect (app-level) | baseline or floor | result | target | met |\n\
         |---|---:|---:|---:|---|:---:|\n",
    );
    for r in rows {
        let met = match r.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "–",
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.scenario, r.introspect, r.comparison, r.result, r.target, met
        ));
    }
    out
}

/// The coalescing window of `CoalesceOptions::default`.
const DEFAULT_COALESCE_WINDOW: Duration = Duration::from_millis(100);

/// What an etcd row says when `etcd` is not on `PATH`.
const ETCD_SKIPPED: &str = "skipped: etcd not installed";

/// What a row says when the server it needs (`etcd`, `ZooKeeper`, `rnacos`) is not
/// installed.
fn skipped(what: &str) -> String {
    format!("skipped: {what} not installed")
}

fn less(app: f64, base: f64) -> f64 {
    100.0 * (1.0 - app / base)
}

fn kib(bytes: f64) -> String {
    if bytes >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", bytes / 1024.0 / 1024.0)
    } else {
        format!("{:.1} KiB", bytes / 1024.0)
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn registry(store: &Arc<dyn Store>) -> Registry {
    Registry::new(store.clone(), Layout::default(), Limits::default())
}

/// Lets connections and background tasks of the previous step wind down, so that live
/// heap bytes measure what is held, not what is in flight.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

// ---------------------------------------------------------------------------------------
// Fixture: metadata servers and synthetic fleets.

/// One real MetadataService server per revision (a real provider of configuration `v`,
/// its own record removed), and the instance record template of each revision.
struct Servers {
    providers: Vec<Provider>,
    templates: Vec<ServiceInstance>,
}

impl Servers {
    async fn start(revisions: usize) -> Result<Servers> {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let mut providers = Vec::new();
        let mut templates = Vec::new();
        for v in 0..revisions {
            let provider = start_metadata_server(&store, v).await;
            templates.push(provider.instance().await);
            providers.push(provider);
        }
        Ok(Servers {
            providers,
            templates,
        })
    }

    fn served(&self) -> u64 {
        self.providers.iter().map(|p| p.exported().served()).sum()
    }
}

/// Writes `n` synthetic instance records spread round-robin over the first `revisions`
/// revisions, and the mapping of every interface, into `store`.
async fn populate(
    store: &Arc<dyn Store>,
    servers: &Servers,
    n: usize,
    revisions: usize,
) -> Result<()> {
    write_fleet(
        store,
        (0..n).map(|i| synthetic(&servers.templates[i % revisions], i)),
    )
    .await
}

/// Writes `records`, and the mapping of every interface to the app, into `store`. Up to
/// 64 writes are in flight at once (etcd commits them in batches; the memory store does
/// not care).
async fn write_fleet(
    store: &Arc<dyn Store>,
    records: impl Iterator<Item = ServiceInstance>,
) -> Result<()> {
    let registry = registry(store);
    let mut writes = futures::stream::iter(records.map(|record| {
        let registry = registry.clone();
        async move { registry.register(&record, None).await }
    }))
    .buffer_unordered(64);
    while let Some(written) = writes.next().await {
        written?;
    }
    let mapping = Mapping::new(store.clone(), Layout::default(), Limits::default());
    for interface in INTERFACES {
        mapping.add(interface, APP).await?;
    }
    Ok(())
}

/// Keys and bytes (key plus value) of everything in a store.
async fn volume(store: &dyn Store) -> Result<(usize, usize)> {
    let range = store.get_prefix("").await?;
    let bytes = range
        .kvs
        .iter()
        .map(|kv| kv.key.len() + kv.value.len())
        .sum();
    Ok((range.kvs.len(), bytes))
}

// ---------------------------------------------------------------------------------------
// 1. Registry volume.

/// 500 real providers (the product's own registration path: instance record under a lease,
/// mappings) against 500 interface-level providers writing 8 × 5 URLs each, each in a
/// memory store of its own; counts every key and byte stored.
async fn registry_volume(
    sizes: &Sizes,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let n = sizes.volume_instances;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut providers = Vec::with_capacity(n);
    for i in 0..n {
        let mut builder = Provider::builder(APP, store.clone())
            .host(HOST)
            .port(port(i))
            .check_metadata_service(false)
            .lease_ttl(Duration::from_secs(600));
        for service in services(0) {
            builder = builder.export(service);
        }
        providers.push(builder.start().await?);
    }
    let (app_keys, app_bytes) = volume(&*store).await?;
    let instance_bytes = store
        .get_prefix(&Layout::default().app_prefix(APP))
        .await?
        .kvs
        .iter()
        .map(|kv| kv.value.len())
        .sum::<usize>()
        / n;
    drop(providers);
    let info = MetadataInfo::new(APP, services(0))?;
    let report_bytes =
        Layout::default().report_key(APP, &info.revision).len() + info.to_json().len();

    let base_store = MemoryStore::new();
    for i in 0..n {
        let lease = base_store.grant_lease(Duration::from_secs(600)).await?;
        baseline::register_instance(&base_store, HOST, port(i), 0, Some(lease)).await?;
    }
    let (base_keys, base_bytes) = volume(&base_store).await?;
    let url_bytes = base_store
        .get_prefix(&baseline::providers_prefix(INTERFACES[0]))
        .await?
        .kvs
        .iter()
        .map(|kv| kv.value.len())
        .sum::<usize>()
        / n
        / common::PROTOCOLS.len();

    let label = format!(
        "Registry keys, {n} instances × {} interfaces × {} protocols",
        INTERFACES.len(),
        common::PROTOCOLS.len()
    );
    rows.push(Row::new(
        label,
        app_keys.to_string(),
        base_keys.to_string(),
        format!("{:.2}% less", less(app_keys as f64, base_keys as f64)),
        "–",
        None,
    ));
    let bytes_less = less(app_bytes as f64, base_bytes as f64);
    rows.push(Row::new(
        "Registry bytes (keys + values), metadata served by instances",
        kib(app_bytes as f64),
        kib(base_bytes as f64),
        format!("{bytes_less:.2}% less"),
        "≥ 98% less (published Dubbo 3: ~90%)",
        Some(bytes_less >= 98.0),
    ));
    let remote_less = less((app_bytes + report_bytes) as f64, base_bytes as f64);
    rows.push(Row::new(
        "Registry bytes, with the metadata report in the store (`remote`)",
        kib((app_bytes + report_bytes) as f64),
        kib(base_bytes as f64),
        format!("{remote_less:.2}% less"),
        "≥ 98% less",
        Some(remote_less >= 98.0),
    ));
    notes.push(format!(
        "Registry volume: an instance record is {instance_bytes} bytes, a baseline provider URL \
         {url_bytes} bytes on average; the app-level store also holds {} mapping keys, and \
         the `remote` row adds one {report_bytes}-byte metadata report for the one revision.",
        INTERFACES.len()
    ));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 2. Consumer memory, and 3. push volume (same fleets).

/// What an app-level consumer of all 8 interfaces holds: the resolver (its metadata cache),
/// the app's instance list and the endpoints of every interface (all protocols).
struct AppConsumer {
    resolver: Resolver,
    instances: Instances,
    endpoints: Vec<Vec<Endpoint>>,
}

impl AppConsumer {
    async fn resolve_all(store: &Arc<dyn Store>) -> Result<(AppConsumer, i64)> {
        let resolver = Resolver::new(store.clone());
        let list = registry(store).list(APP).await?;
        let mut consumer = AppConsumer {
            resolver,
            instances: list.instances,
            endpoints: Vec::new(),
        };
        consumer.refresh().await?;
        Ok((consumer, list.revision))
    }

    /// Rebuilds the endpoints of every interface from the instance list.
    async fn refresh(&mut self) -> Result<()> {
        self.endpoints.clear();
        for interface in INTERFACES {
            let (endpoints, failure) = self
                .resolver
                .endpoints_of(APP, &self.instances, &Subscription::new(interface))
                .await;
            if let Some(e) = failure {
                return Err(e);
            }
            self.endpoints.push(endpoints);
        }
        Ok(())
    }

    fn apply(&mut self, changes: Vec<InstanceChange>) {
        for change in changes {
            match change {
                InstanceChange::Upsert(i) => {
                    self.instances.insert(i.key_address(), i);
                }
                InstanceChange::Removed(address) | InstanceChange::Skipped { address, .. } => {
                    self.instances.remove(&address);
                }
            }
        }
    }

    fn len(&self) -> usize {
        self.endpoints.iter().map(Vec::len).sum()
    }
}

/// Drains what `watch` delivers until `deadline`: (events, value bytes).
async fn drain(watch: &mut Watch, deadline: tokio::time::Instant) -> (usize, usize) {
    let (mut events, mut bytes) = (0, 0);
    while let Ok(Ok(batch)) = tokio::time::timeout_at(deadline, watch.next()).await {
        for event in &batch {
            events += 1;
            if let introspect::store::WatchEvent::Put(kv) = event {
                bytes += kv.key.len() + kv.value.len();
            } else {
                bytes += event.key().len();
            }
        }
    }
    (events, bytes)
}

/// Consumer memory: live heap bytes before and after a consumer of all 8 interfaces builds
/// its address set (500 instances × 40 services = 20,000 addresses), app-level against the
/// baseline's parsed URLs. Then push volume: one more instance of the same configuration
/// joins; count the watch events (and bytes) each consumer receives and the metadata calls
/// the app-level consumer makes while updating its address set.
async fn memory_and_push(
    sizes: &Sizes,
    servers: &Servers,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let n = sizes.memory_instances;
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    populate(&store, servers, n, 1).await?;
    let base_store = MemoryStore::new();
    for i in 0..n {
        baseline::register_instance(&base_store, HOST, port(i), 0, None).await?;
    }

    settle().await;
    let before = live_bytes();
    let (mut app, app_revision) = AppConsumer::resolve_all(&store).await?;
    settle().await;
    let app_heap = live_bytes() - before;

    settle().await;
    let before = live_bytes();
    let (mut base, base_revision) = BaselineConsumer::list(&base_store, &INTERFACES).await?;
    settle().await;
    let base_heap = live_bytes() - before;

    let heap_less = less(app_heap as f64, base_heap as f64);
    rows.push(Row::new(
        format!(
            "Consumer live heap for the address set ({} addresses)",
            app.len()
        ),
        kib(app_heap as f64),
        kib(base_heap as f64),
        format!("{heap_less:.2}% less"),
        "≥ 90% less (published Dubbo 3: ~75% RSS)",
        Some(heap_less >= 90.0),
    ));
    assert_eq!(
        base.len(),
        app.len(),
        "both consumers hold the same addresses"
    );
    notes.push(format!(
        "Consumer memory: {:.0} bytes per address app-level, {:.0} baseline (live heap bytes \
         requested from the allocator, allocator overhead not included).",
        app_heap as f64 / app.len() as f64,
        base_heap as f64 / base.len() as f64
    ));

    // Push volume: one instance of the known revision joins.
    let mut instance_watch = registry(&store).watch(APP, app_revision + 1).await?;
    let mut pushed = vec![
        store
            .watch_prefix(&Layout::default().app_prefix(APP), app_revision + 1)
            .await?,
    ];
    for interface in INTERFACES {
        pushed.push(
            store
                .watch_prefix(&Layout::default().mapping_key(interface), app_revision + 1)
                .await?,
        );
    }
    let fetches_before = app.resolver.stats().await.metadata_fetches;
    let served_before = servers.served();
    let addresses_before = app.len();
    let mut joiner = Provider::builder(APP, store.clone())
        .host(HOST)
        .port(port(n))
        .check_metadata_service(false)
        .lease_ttl(Duration::from_secs(600));
    for service in services(0) {
        joiner = joiner.export(service);
    }
    let joiner = joiner.start().await?;
    let changes = instance_watch.next().await?;
    app.apply(changes);
    app.refresh().await?;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    let (mut app_events, mut app_bytes) = (0, 0);
    for watch in &mut pushed {
        let (e, b) = drain(watch, deadline).await;
        app_events += e;
        app_bytes += b;
    }
    let app_calls = app.resolver.stats().await.metadata_fetches - fetches_before;
    let app_served = servers.served() - served_before;
    assert_eq!(
        app.len(),
        addresses_before + 40,
        "the joiner's 40 addresses"
    );
    drop(joiner);

    let mut watches = baseline::watch_all(&base_store, &INTERFACES, base_revision + 1).await?;
    let lease = base_store.grant_lease(Duration::from_secs(600)).await?;
    baseline::register_instance(&base_store, HOST, port(n), 0, Some(lease)).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    let (mut base_events, mut base_bytes) = (0, 0);
    for (interface, watch) in &mut watches {
        while let Ok(Ok(batch)) = tokio::time::timeout_at(deadline, watch.next()).await {
            for event in &batch {
                base.apply(interface, event);
                base_events += 1;
                if let introspect::store::WatchEvent::Put(kv) = event {
                    base_bytes += kv.key.len() + kv.value.len();
                }
            }
        }
    }
    assert_eq!(
        base.len(),
        app.len(),
        "both consumers hold the same addresses"
    );

    rows.push(Row::new(
        "Push on a join of a known revision: watch events",
        app_events.to_string(),
        base_events.to_string(),
        format!(
            "{:.1}× fewer",
            base_events as f64 / app_events.max(1) as f64
        ),
        "1 event",
        Some(app_events == 1),
    ));
    rows.push(Row::new(
        "Push on a join: bytes pushed",
        kib(app_bytes as f64),
        kib(base_bytes as f64),
        format!("{:.2}% less", less(app_bytes as f64, base_bytes as f64)),
        "–",
        None,
    ));
    rows.push(Row::new(
        "Push on a join: metadata calls (made / served)",
        format!("{app_calls} / {app_served}"),
        "n/a",
        "–",
        "0",
        Some(app_calls == 0 && app_served == 0),
    ));
    drop(app);
    drop(base);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 4. Metadata calls under 1,000 concurrent resolvers.

/// For each fleet size and revision count: a fresh store and resolver, one shared instance
/// list, and `concurrent` tasks released together by a barrier, each resolving the
/// endpoints of one interface (`Resolver::endpoints_of`, the fetch-and-build half of
/// `resolve`) against the cold cache. Counts MetadataService calls made by the resolver and
/// answered by the servers, and the calls that failed (a deadline that gave up on an answer
/// on its way, say) and background retries: the lower bound is one call per revision, with
/// neither failures nor retries. A full `resolve()` then checks the result and that a warm
/// cache makes no call.
async fn metadata_calls(sizes: &Sizes, servers: &Servers, rows: &mut Vec<Row>) -> Result<()> {
    let subscription = Subscription::new(INTERFACES[0]).protocol("tri");
    for &n in &sizes.call_instances {
        for &r in &sizes.call_revisions {
            let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
            populate(&store, servers, n, r).await?;
            let instances = Arc::new(registry(&store).list(APP).await?.instances);
            let resolver = Resolver::new(store.clone());
            let served_before = servers.served();
            let barrier = Arc::new(Barrier::new(sizes.concurrent));
            let started = Instant::now();
            let tasks: Vec<_> = (0..sizes.concurrent)
                .map(|_| {
                    let (resolver, instances, barrier, subscription) = (
                        resolver.clone(),
                        instances.clone(),
                        barrier.clone(),
                        subscription.clone(),
                    );
                    tokio::spawn(async move {
                        barrier.wait().await;
                        let (endpoints, failure) =
                            resolver.endpoints_of(APP, &instances, &subscription).await;
                        (endpoints.len(), failure.is_none())
                    })
                })
                .collect();
            for task in tasks {
                let (found, ok) = task.await.expect("task runs");
                assert!(ok && found == n, "{found} endpoints of {n}");
            }
            let elapsed = started.elapsed();
            let stats = resolver.stats().await;
            let calls = stats.metadata_fetches;
            let (failed, retries) = (stats.fetch_failures, stats.metadata_retries);
            let served = servers.served() - served_before;
            let full = resolver.resolve(&subscription).await?;
            assert_eq!(full.len(), n);
            assert_eq!(resolver.stats().await.metadata_fetches, calls, "warm cache");
            rows.push(Row::new(
                format!(
                    "Metadata calls, {n} instances, {r} revision(s), {} concurrent resolvers",
                    sizes.concurrent
                ),
                format!("{calls} / {served}; {failed} failed, {retries} retries"),
                r.to_string(),
                format!("{:.0} ms for all", elapsed.as_secs_f64() * 1e3),
                "calls = revisions, none failed or retried",
                Some(calls == r as u64 && served == r as u64 && failed == 0 && retries == 0),
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 5. Cold resolve against the floor, on any registry.

/// The result of [`cold_resolve`].
struct Cold {
    resolve: Duration,
    /// A fresh resolver's `subscribe()` until its first full set, and the floor measured
    /// beside it.
    subscribe: Duration,
    subscribe_floor: Duration,
    floor: Duration,
    endpoints: usize,
    /// Where the time goes: the instance list alone (the backend's list: read and
    /// parsing), and a resolve by the same resolver with its metadata cached (no call).
    list: Duration,
    warm: Duration,
    /// The floor's raw read alone.
    read: Duration,
    /// The validating client's floor beside them, where the registry's read holds the
    /// records' text (`scale/validating.rs`).
    validating: Option<ValidatingFloor>,
}

/// The medians of the validating client's floor (`scale/validating.rs`).
struct ValidatingFloor {
    /// Raw read, serde's parse of every record, one MetadataService call.
    floor: Duration,
    /// The parse of every record alone.
    parse: Duration,
}

/// One measurement of the cold-resolve floor: the raw read of the `n` instance records of
/// `rig` plus one MetadataService call to `server`. Returns how long the read took and how
/// long both took.
async fn floor_once<R: Rig>(
    rig: &R,
    client: &MetadataClient,
    server: &ServiceInstance,
    n: usize,
) -> Result<(Duration, Duration)> {
    let started = Instant::now();
    let read = rig.read_raw().await?;
    let read_took = started.elapsed();
    let info = client
        .fetch(
            &server.host,
            server.metadata_service_port(),
            server.revision(),
        )
        .await?;
    let floor = started.elapsed();
    assert_eq!(R::read_len(&read), n, "the floor read the whole fleet");
    drop((read, info));
    Ok((read_took, floor))
}

/// A cold `subscribe()`: a fresh resolver over `backend` subscribes to `subscription`, timed
/// until the subscription holds all `n` endpoints (the path a live consumer takes to its
/// first call). The subscription and its resolver are dropped afterwards.
async fn cold_subscribe(
    backend: impl Into<Backend>,
    subscription: &Subscription,
    n: usize,
) -> Result<Duration> {
    let resolver = Resolver::new(backend);
    let started = Instant::now();
    let mut handle = resolver.subscribe(subscription.clone()).await?;
    while handle.current().len() < n {
        tokio::time::timeout(Duration::from_secs(60), handle.changed())
            .await
            .map_err(|_| Error::Timeout {
                what: format!("first full set of {n} endpoints"),
                after: Duration::from_secs(60),
            })??;
    }
    let took = started.elapsed();
    assert_eq!(handle.current().len(), n, "the first full set");
    Ok(took)
}

/// The synthetic fleet of `n` instance records spread round-robin over the first
/// `revisions` revisions.
fn fleet(servers: &Servers, n: usize, revisions: usize) -> Vec<ServiceInstance> {
    (0..n)
        .map(|i| synthetic(&servers.templates[i % revisions], i))
        .collect()
}

/// Cold resolve on any registry: writes `n` instance records in `revisions` revisions
/// into `rig`, then, alternating, times (a) the floor: the registry's raw read of the same
/// records plus one MetadataService call, (a') where the read holds the records' text, the
/// validating client's floor: the same with serde's parse of every record
/// (`scale/validating.rs`), and (b) `resolve()` of one interface and protocol by a fresh
/// resolver (mapping read, instance list, one MetadataService call per revision in
/// parallel, endpoints). Medians over `trials`.
///
/// Runs on the memory store and on a fresh etcd, ZooKeeper and Nacos of its own (each
/// when installed).
async fn cold_resolve<R: Rig>(
    rig: &R,
    servers: &Servers,
    n: usize,
    revisions: usize,
    trials: usize,
) -> Result<Cold> {
    rig.write_fleet(fleet(servers, n, revisions)).await?;
    let backend = rig.backend();
    let subscription = Subscription::new(INTERFACES[0]).protocol("tri");
    let client = MetadataClient::new(Duration::from_secs(3), Limits::default());
    let server = &servers.templates[0];
    let (mut resolves, mut floors) = (Vec::new(), Vec::new());
    let (mut lists, mut warms, mut reads) = (Vec::new(), Vec::new(), Vec::new());
    let mut subscribes = Vec::new();
    let (mut validating_floors, mut parses) = (Vec::new(), Vec::new());
    // Whether the registry's read holds the records' text, for the validating floor: one
    // untimed read before the trials, so that registries without it read nothing more.
    let validates = R::record_values(&rig.read_raw().await?).is_some();
    let limits = Limits::default();
    let mut endpoints = 0;
    for _ in 0..trials {
        let (read, floor) = floor_once(rig, &client, server, n).await?;
        reads.push(read);
        floors.push(floor);
        if validates {
            let (parse, floor) = validating::floor_once(rig, &client, n).await?;
            parses.push(parse);
            validating_floors.push(floor);
        }

        let resolver = Resolver::new(backend.clone());
        let started = Instant::now();
        let found = resolver.resolve(&subscription).await?;
        resolves.push(started.elapsed());
        endpoints = found.len();
        drop(found);
        assert_eq!(
            resolver.stats().await.metadata_fetches,
            revisions as u64,
            "one call per revision"
        );

        let started = Instant::now();
        let warm = resolver.resolve(&subscription).await?;
        warms.push(started.elapsed());
        drop(warm);
        let started = Instant::now();
        let list = backend
            .instances()
            .list(APP, InstanceRead::new(&limits))
            .await?;
        lists.push(started.elapsed());
        drop(list);
    }
    // Subscriptions after every resolve, each next to a floor of its own: a subscription's
    // shared views outlive it for a grace period, and must not weigh on the resolves.
    let mut subscribe_floors = Vec::new();
    for _ in 0..trials {
        subscribe_floors.push(floor_once(rig, &client, server, n).await?.1);
        subscribes.push(cold_subscribe(backend.clone(), &subscription, n).await?);
    }
    Ok(Cold {
        resolve: median(resolves),
        subscribe: median(subscribes),
        subscribe_floor: median(subscribe_floors),
        floor: median(floors),
        endpoints,
        list: median(lists),
        warm: median(warms),
        read: median(reads),
        validating: (!parses.is_empty()).then(|| ValidatingFloor {
            floor: median(validating_floors),
            parse: median(parses),
        }),
    })
}

/// How a registry's floor reads an app's records, for the notes.
fn floor_read(label: &str) -> &'static str {
    match label {
        "ZooKeeper" => "children list and pipelined reads of every child",
        "Nacos" => "one getAllInstances",
        _ => "prefix read",
    }
}

/// The cold-resolve row of one registry, and the note saying where the time goes.
fn cold_row(
    sizes: &Sizes,
    label: &str,
    n: usize,
    cold: &Cold,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) {
    let r = sizes.cold_revisions;
    let ratio = cold.resolve.as_secs_f64() / cold.floor.as_secs_f64();
    rows.push(Row::new(
        format!("Cold resolve, {n} instances in {r} revisions, {label} (median)"),
        ms(cold.resolve),
        ms(cold.floor),
        format!("{ratio:.2}× the floor"),
        "≤ 1.5× the floor",
        Some(ratio <= 1.5),
    ));
    if let Some(validating) = &cold.validating {
        let ratio = cold.resolve.as_secs_f64() / validating.floor.as_secs_f64();
        rows.push(Row::new(
            format!(
                "Cold resolve, {n} instances in {r} revisions, {label}, against a validating \
                 client's floor (median)"
            ),
            ms(cold.resolve),
            ms(validating.floor),
            format!("{ratio:.2}× the validating floor"),
            "≤ 1.5× the floor",
            Some(ratio <= 1.5),
        ));
    }
    let ratio = cold.subscribe.as_secs_f64() / cold.subscribe_floor.as_secs_f64();
    rows.push(Row::new(
        format!("Cold subscribe until the first full set, {n} instances in {r} revisions, {label} (median)"),
        ms(cold.subscribe),
        ms(cold.subscribe_floor),
        format!("{ratio:.2}× the floor"),
        "≤ 1.5× the floor",
        Some(ratio <= 1.5),
    ));
    notes.push(format!(
        "Cold resolve, {label} ({} trials, medians): of the {} resolve, the instance list \
         alone (read and parsing of {n} records) takes {}, and a resolve with the metadata \
         cached takes {}; the rest is the {r} MetadataService calls (made in parallel). The \
         floor's {} alone takes {}.",
        sizes.cold_trials,
        ms(cold.resolve),
        ms(cold.list),
        ms(cold.warm),
        floor_read(label),
        ms(cold.read),
    ));
    if let Some(validating) = &cold.validating {
        notes.push(format!(
            "Cold resolve, {label}, the validating client's floor (medians of {}, interleaved \
             with the floor and the resolve): the same {}, then `serde_json::from_slice` of \
             each of the {n} records into a minimal struct (`serviceName`, `host`, `port` as \
             a `u16`, and the metadata entries `dubbo.metadata.revision` and \
             `dubbo.metadata-service.url-params`, the strings owned; serde skips every other \
             field and entry, checking its syntax), checks that each names the app, a host, a port and a \
             revision, then one MetadataService call at the first record's parsed url-params \
             port. The parse alone, on one thread, takes {}; the floor {}.",
            sizes.cold_trials,
            floor_read(label),
            ms(validating.parse),
            ms(validating.floor),
        ));
    }
}

/// The cold-resolve row of the registry `start` gives, or a skipped row when it is not
/// installed (`what` names what is missing).
async fn cold_on<R: Rig, F: Future<Output = Option<R>>>(
    sizes: &Sizes,
    servers: &Servers,
    (label, what, n): (&str, &str, usize),
    start: impl FnOnce() -> F,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let r = sizes.cold_revisions;
    let Some(rig) = start().await else {
        rows.push(Row::new(
            format!("Cold resolve, {n} instances in {r} revisions, {label}"),
            "–",
            "–",
            skipped(what),
            "≤ 1.5× the floor",
            None,
        ));
        return Ok(());
    };
    // A registry that cannot hold or answer the fleet fails its row, not the run.
    let cold = match cold_resolve(&rig, servers, n, r, sizes.cold_trials).await {
        Ok(cold) => cold,
        Err(e) => {
            let why: String = e.to_string().replace('|', "/").chars().take(240).collect();
            rows.push(Row::new(
                format!("Cold resolve, {n} instances in {r} revisions, {label}"),
                "–",
                "–",
                format!("failed: {why}"),
                "≤ 1.5× the floor",
                Some(false),
            ));
            return Ok(());
        }
    };
    assert_eq!(cold.endpoints, n);
    cold_row(sizes, rig.label(), n, &cold, rows, notes);
    Ok(())
}

async fn cold(
    sizes: &Sizes,
    servers: &Servers,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let n = sizes.cold_instances;
    let memory = ("memory store", "", n);
    cold_on(sizes, servers, memory, StoreRig::memory, rows, notes).await?;
    // One MetadataService call on a fresh connection, as the resolver makes it: the part of
    // the floor that is not the registry.
    let client = MetadataClient::new(Duration::from_secs(3), Limits::default());
    let server = &servers.templates[0];
    let mut calls = Vec::new();
    for _ in 0..sizes.cold_trials * 10 {
        let started = Instant::now();
        client
            .fetch(
                &server.host,
                server.metadata_service_port(),
                server.revision(),
            )
            .await?;
        calls.push(started.elapsed());
    }
    calls.sort();
    notes.push(format!(
        "One MetadataService call on a fresh loopback connection: p50 {}, p99 {}, max {} \
         ({} calls).",
        ms(percentile(&calls, 50)),
        ms(percentile(&calls, 99)),
        ms(calls[calls.len() - 1]),
        calls.len()
    ));
    // The same on a fresh server of each networked registry (empty, killed afterwards).
    let etcd = ("etcd", "etcd", n);
    cold_on(sizes, servers, etcd, StoreRig::etcd, rows, notes).await?;
    let zookeeper = ("ZooKeeper", "ZooKeeper", n);
    cold_on(sizes, servers, zookeeper, ZooKeeperRig::start, rows, notes).await?;
    // Nacos at 3,000 and 10,000 instances: `nacos_large`.
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 6. Propagation.

/// A consumer side of the propagation scenario: a feed of the instants at which the
/// consumer's endpoint set was updated.
type UpdateFeed = mpsc::UnboundedReceiver<Instant>;

/// The resolver of the propagation scenario, its options set explicitly:
///
/// * coalescing window `window`: zero for the timed trials, so every change is pushed at
///   once. That is the same path a change takes after a quiet period under the default
///   window (`Coalescer::changed` returns `now` in both cases); without it, a trial's
///   clean-up would open a 100 ms window and delay the next trial's registration. The
///   default window is checked separately with spaced trials.
/// * self-preservation off: each trial deletes the record it registered (a deletion of an
///   enabled record counts as an expiry), and in a fleet of 100 more than half of the
///   fleet is deleted within the 15 s protection window after ~50 trials, which would hold
///   the clean-ups. Registrations, the thing measured, are never held.
fn propagation_resolver(backend: impl Into<Backend>, window: Duration) -> Resolver {
    Resolver::builder(backend)
        .subscribe_options(
            SubscribeOptions::default().coalesce(CoalesceOptions::default().window(window)),
        )
        .protection(ProtectionOptions::disabled())
        .build()
}

/// The consumer side: a live subscription (`Resolver::subscribe`), each pushed
/// endpoint set reported by the instant `changed()` returned it. The subscription lives as
/// long as the feed.
async fn subscription_feed(
    backend: impl Into<Backend>,
    subscription: Subscription,
    window: Duration,
) -> Result<UpdateFeed> {
    let resolver = propagation_resolver(backend, window);
    let mut handle = resolver.subscribe(subscription).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(endpoints) = handle.changed().await {
            black_box(endpoints);
            if tx.send(Instant::now()).is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

/// Waits for the next update of a feed, failing the run after 10 s (a lost update).
async fn next_update(feed: &mut UpdateFeed, what: &str) -> Instant {
    tokio::time::timeout(Duration::from_secs(10), feed.recv())
        .await
        .unwrap_or_else(|_| panic!("{what}: no update within 10 s"))
        .unwrap_or_else(|| panic!("{what}: feed ended"))
}

/// Latencies of one propagation measurement: (app-level, raw floor), sorted.
struct Latencies {
    app: Vec<Duration>,
    raw: Vec<Duration>,
}

/// Propagation in a fleet of `n` instances of one revision on `rig`: `trials` times,
/// interleaved, (a) the registry's raw write of an instance record into a key space of its
/// own until the raw event arrives (a `put` until the watch event on the key-value stores;
/// see `zookeeper.rs` and `nacos.rs` for theirs), and (b) a provider's registration of a new
/// instance of a known revision until the subscription pushes an endpoint set including
/// it. Each trial removes its record again (and waits for that update) so the fleet stays
/// at its size. With `spacing`, each registration waits that long after the previous push
/// (to be a first change after a quiet period), and each raw write as long after the
/// previous event (so both sides wake an idle runtime).
async fn propagation_in_fleet<R: Rig>(
    rig: &R,
    n: usize,
    trials: usize,
    servers: &Servers,
    window: Duration,
    spacing: Option<Duration>,
) -> Result<Latencies> {
    let fleet = fleet(servers, n, 1);
    rig.write_fleet(fleet.clone()).await?;
    let subscription = Subscription::new(INTERFACES[0]).protocol("tri");
    let mut app_feed = subscription_feed(rig.backend(), subscription, window).await?;
    let mut raw = rig.raw_feed(&fleet).await?;
    let (mut app_times, mut raw_times) = (Vec::new(), Vec::new());
    for t in 0..trials {
        let instance = synthetic(&servers.templates[0], n + t);
        let raw_record = rig.raw(&instance);

        if let Some(spacing) = spacing {
            tokio::time::sleep(spacing).await;
        }
        let started = Instant::now();
        rig.raw_put(&raw_record).await?;
        let seen = next_update(&mut raw, "raw event").await;
        raw_times.push(seen - started);
        rig.raw_delete(&raw_record).await?;
        next_update(&mut raw, "raw event").await;

        if let Some(spacing) = spacing {
            tokio::time::sleep(spacing).await;
        }
        let started = Instant::now();
        rig.register(&instance).await?;
        let seen = next_update(&mut app_feed, "subscription").await;
        app_times.push(seen - started);
        rig.deregister(&instance).await?;
        next_update(&mut app_feed, "subscription").await;
    }
    app_times.sort();
    raw_times.sort();
    Ok(Latencies {
        app: app_times,
        raw: raw_times,
    })
}

/// A store on `etcd` with default options: the benchmark measures what users get.
async fn etcd_store(etcd: &EtcdServer) -> Arc<dyn Store> {
    let options = introspect::store::EtcdOptions::new([etcd.endpoint()]);
    Arc::new(
        introspect::store::EtcdStore::connect(options)
            .await
            .unwrap_or_else(|e| panic!("connect to the benchmark etcd: {e}")),
    )
}

/// The propagation rows of the registry `start` gives (a fresh one per measurement), or
/// skipped rows when it is not installed (`what` names what is missing). Returns the note
/// of its spaced trials under the default coalescing window.
async fn propagation_on<R: Rig, F: Future<Output = Option<R>>>(
    sizes: &Sizes,
    servers: &Servers,
    (label, what, trials): (&str, &str, usize),
    start: impl Fn() -> F,
    rows: &mut Vec<Row>,
) -> Result<Option<String>> {
    for &n in &sizes.propagation_fleets {
        let noun = if n == 1 { "instance" } else { "instances" };
        let Some(rig) = start().await else {
            rows.push(Row::new(
                format!(
                    "Propagation p50 and p99, registration → subscriber update ({n} {noun}), \
                     {label}"
                ),
                "–",
                "–",
                skipped(what),
                "≤ 1.5×",
                None,
            ));
            continue;
        };
        let times = propagation_in_fleet(&rig, n, trials, servers, Duration::ZERO, None).await?;
        for (p_label, p) in [("p50", 50), ("p99", 99)] {
            let (app, raw) = (percentile(&times.app, p), percentile(&times.raw, p));
            let ratio = app.as_secs_f64() / raw.as_secs_f64();
            rows.push(Row::new(
                format!(
                    "Propagation {p_label}, registration → subscriber update ({n} {noun}), \
                     {label}"
                ),
                us(app),
                us(raw),
                format!("{ratio:.2}× {}", raw_event(label)),
                "≤ 1.5×",
                Some(ratio <= 1.5),
            ));
        }
    }
    // The default coalescing window, trials spaced so each registration is the first
    // change after a quiet period: the same latency is expected.
    let n = *sizes.propagation_fleets.last().expect("a fleet size");
    let Some(rig) = start().await else {
        return Ok(None);
    };
    let window = DEFAULT_COALESCE_WINDOW;
    let times = propagation_in_fleet(
        &rig,
        n,
        sizes.propagation_spaced_trials,
        servers,
        window,
        Some(window + Duration::from_millis(20)),
    )
    .await?;
    Ok(Some(format!(
        "{label}: p50 {} (raw {}), p99 {} (raw {})",
        us(percentile(&times.app, 50)),
        us(percentile(&times.raw, 50)),
        us(percentile(&times.app, 99)),
        us(percentile(&times.raw, 99)),
    )))
}

/// What a registry's propagation floor is, in its rows.
fn raw_event(label: &str) -> &'static str {
    match label {
        "ZooKeeper" => "raw create → watch event → read",
        "Nacos" => "raw registration → SDK callback",
        _ => "raw put → watch event",
    }
}

async fn propagation(
    sizes: &Sizes,
    servers: &Servers,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let mut spaced = Vec::new();
    let memory = ("memory store", "", sizes.propagation_trials);
    spaced.extend(propagation_on(sizes, servers, memory, StoreRig::memory, rows).await?);
    let etcd = ("etcd", "etcd", sizes.propagation_trials_etcd);
    spaced.extend(propagation_on(sizes, servers, etcd, StoreRig::etcd, rows).await?);
    let zookeeper = ("ZooKeeper", "ZooKeeper", sizes.propagation_trials_etcd);
    spaced.extend(propagation_on(sizes, servers, zookeeper, ZooKeeperRig::start, rows).await?);
    let nacos = ("Nacos", "rnacos", sizes.propagation_trials_nacos);
    spaced.extend(propagation_on(sizes, servers, nacos, NacosRig::start, rows).await?);
    notes.push(format!(
        "Propagation: {} trials of each on the memory store, {} on etcd and ZooKeeper, {} on \
         Nacos, interleaved, each on a fresh store. The consumer side is a live subscription \
         (`Resolver::subscribe`) with the coalescing window set to zero, so every change is \
         pushed at once (the path of a first change after a quiet period), and \
         self-preservation off (each trial deletes its record again, which would otherwise \
         count towards a mass expiry).",
        sizes.propagation_trials, sizes.propagation_trials_etcd, sizes.propagation_trials_nacos,
    ));
    notes.push(format!(
        "Propagation with the default coalescing window ({} ms), {} trials spaced so each \
         registration is the first change after a quiet period, {} instances: {}.",
        DEFAULT_COALESCE_WINDOW.as_millis(),
        sizes.propagation_spaced_trials,
        sizes.propagation_fleets.last().expect("a fleet size"),
        if spaced.is_empty() {
            "–".to_owned()
        } else {
            spaced.join("; ")
        },
    ));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// 6b. Nacos around and over the SDK's gRPC limit.

/// Cold resolve and propagation on Nacos in fleets of `sizes.nacos_large`: 3,000 fit in
/// one gRPC answer of the SDK (4 MiB), 10,000 do not, so both sides read them over HTTP
/// and the app's follow polls (see `scale/nacos.rs` for the floors).
async fn nacos_large(
    sizes: &Sizes,
    servers: &Servers,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    for &n in &sizes.nacos_large {
        cold_on(
            sizes,
            servers,
            ("Nacos", "rnacos", n),
            NacosRig::start,
            rows,
            notes,
        )
        .await?;
    }
    let large = Sizes {
        propagation_fleets: sizes.nacos_large.clone(),
        ..sizes.clone()
    };
    let trials = sizes.propagation_trials_nacos;
    let spaced = propagation_on(
        &large,
        servers,
        ("Nacos", "rnacos", trials),
        NacosRig::start,
        rows,
    )
    .await?;
    notes.push(format!(
        "Nacos fleets of {:?}: {} trials of propagation each, interleaved with the floor, on a \
         fresh server per fleet; with the default coalescing window, {} spaced trials in the \
         largest fleet: {}. A list over the SDK's 4 MiB (about 4,500 of these records) is read \
         over HTTP by both sides, and the app's follow then polls it every {} s instead of \
         following pushes, which the SDK cannot receive; the floor's subscriber then holds a \
         service of its own without the fleet (the server's push delay alone).",
        sizes.nacos_large,
        trials,
        sizes.propagation_spaced_trials,
        spaced.unwrap_or_else(|| "–".to_owned()),
        2,
    ));
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The run.

/// Facts about the machine, one per line.
fn machine_facts() -> Vec<String> {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown".to_owned(), |(_, m)| m.trim().to_owned());
    let meminfo = read("/proc/meminfo");
    let memory = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or("unknown".to_owned(), |kb| {
            format!("{:.1} GiB", kb / 1024.0 / 1024.0)
        });
    let cpus = std::thread::available_parallelism().map_or(0, usize::from);
    let rustc = std::process::Command::new(std::env::var("RUSTC").unwrap_or("rustc".into()))
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    vec![
        format!("CPUs (nproc): {cpus}"),
        format!("CPU model: {model}"),
        format!("memory: {memory}"),
        format!("rustc: {rustc}"),
        format!("run at: {date}"),
        format!("OS: {} {}", std::env::consts::OS, std::env::consts::ARCH),
    ]
}

async fn run(sizes: &Sizes, only: Option<&str>) -> Result<(Vec<Row>, Vec<String>)> {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let wanted = |name: &str| only.is_none_or(|o| o == name);
    let servers = Servers::start(
        sizes
            .call_revisions
            .iter()
            .copied()
            .max()
            .unwrap_or(1)
            .max(sizes.cold_revisions),
    )
    .await?;
    let started = Instant::now();
    let done = |name: &str| {
        eprintln!(
            "[scale] {name} done at {:.1}s",
            started.elapsed().as_secs_f64()
        );
    };
    if wanted("volume") {
        registry_volume(sizes, &mut rows, &mut notes).await?;
        done("volume");
    }
    if wanted("memory") {
        memory_and_push(sizes, &servers, &mut rows, &mut notes).await?;
        done("memory (and push)");
    }
    if wanted("calls") {
        metadata_calls(sizes, &servers, &mut rows).await?;
        done("calls");
    }
    if wanted("cold") {
        cold(sizes, &servers, &mut rows, &mut notes).await?;
        done("cold");
    }
    if only == Some("cold-memory") {
        let memory = ("memory store", "", sizes.cold_instances);
        cold_on(
            sizes,
            &servers,
            memory,
            StoreRig::memory,
            &mut rows,
            &mut notes,
        )
        .await?;
        done("cold on the memory store");
    }
    if wanted("propagation") {
        propagation(sizes, &servers, &mut rows, &mut notes).await?;
        done("propagation");
    }
    if wanted("nacos") {
        nacos_large(sizes, &servers, &mut rows, &mut notes).await?;
        done("nacos");
    }
    if wanted("failure") {
        scale_failure::failure(&mut rows, &mut notes).await?;
        done("failure");
    }
    if wanted("xds") {
        scale_xds::xds_propagation(sizes, &mut rows, &mut notes).await?;
        done("xds");
    }
    if wanted("curve") {
        curve::curve(sizes, &servers, &mut rows, &mut notes).await?;
        done("curve");
    }
    if wanted("many") {
        many::many_subscriptions(sizes, &mut rows, &mut notes).await?;
        done("many");
    }
    if wanted("interface") {
        interface::interface_level(sizes, &servers, &mut rows, &mut notes).await?;
        done("interface");
    }
    Ok((rows, notes))
}

const BEGIN: &str =
    "<!-- scale:begin (generated by `cargo bench --bench scale`; edits here are overwritten) -->";
const END: &str = "<!-- scale:end -->";

/// The generated section of `BENCHMARKS.md`.
fn section(rows: &[Row], notes: &[String], facts: &[String], took: Duration) -> String {
    let mut out = String::new();
    out.push_str(BEGIN);
    out.push_str("\n\n## Scale comparison (latest run)\n\n");
    out.push_str("Command: `cargo bench --bench scale --features zookeeper,nacos`");
    out.push_str(&format!(
        " (took {:.0} s)\n\nMachine:\n\n",
        took.as_secs_f64()
    ));
    for f in facts {
        out.push_str(&format!("* {f}\n"));
    }
    out.push_str(
        "\nThe machine is shared with other builds and noisy: absolute times move from run to \
         run. Each comparison was measured side by side in the same run (baseline, floor and \
         Introspect interleaved where timed), so the ratios are what to read.\n\n",
    );
    out.push_str(&table(rows));
    out.push('\n');
    for n in notes {
        out.push_str(&format!("* {n}\n"));
    }
    out.push('\n');
    out.push_str(END);
    out.push('\n');
    out
}

fn write_benchmarks_md(section: &str) -> std::io::Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/BENCHMARKS.md");
    let current = std::fs::read_to_string(path)
        .unwrap_or_else(|_| format!("# Benchmarks\n\n{BEGIN}\n{END}\n"));
    let next = match (current.find(BEGIN), current.find(END)) {
        (Some(b), Some(e)) if b < e => {
            let rest = current[e + END.len()..].trim_start_matches('\n');
            let gap = if rest.is_empty() { "" } else { "\n" };
            format!("{}{section}{gap}{rest}", &current[..b])
        }
        _ => format!("{current}\n{section}"),
    };
    std::fs::write(path, next)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bench = args.iter().any(|a| a == "--bench");
    let quick = args.iter().any(|a| a == "--quick");
    // `--only NAME` (volume, memory, calls, cold, propagation, nacos, failure, xds, curve, many,
    // interface)
    // runs one scenario, for profiling; it writes nothing. `cold` and `propagation` run on
    // every registry (memory store, etcd, ZooKeeper, Nacos); `cold-memory` is `cold` on the
    // memory store alone, where the client's own work is all there is to profile.
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let full = bench && !quick && only.is_none();
    let sizes = if bench && !quick {
        Sizes::full()
    } else {
        Sizes::smoke()
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let started = Instant::now();
    let (rows, notes) = runtime
        .block_on(run(&sizes, only.as_deref()))
        .expect("scale run");
    let took = started.elapsed();
    let facts = machine_facts();
    let section = section(&rows, &notes, &facts, took);
    println!("{section}");
    if full {
        write_benchmarks_md(&section).expect("BENCHMARKS.md written");
        println!("written to BENCHMARKS.md");
    } else {
        println!("partial or smoke run: BENCHMARKS.md left as it is");
    }
}
